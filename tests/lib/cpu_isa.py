"""What this CPU implies for the tests, found independently of Tessera: the
flags in /proc/cpuinfo, lowered by the caps a run may set (oneDNN's
ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA, Tessera's TESSERA_ISA), so that a test
asserts the behaviour this CPU (as capped) must show instead of failing where
a feature is missing.

    import cpu_isa            # tests/lib on sys.path (conftest or sys.path.insert)
    cpu_isa.dnnl_int8_exact() # oneDNN's int8 kernels accumulate in int32 (VNNI)
    cpu_isa.dnnl_bf16()       # oneDNN runs bf16 natively (AVX512_BF16)
"""
import os

# oneDNN's ISA values (dnnl_types.h): nested bit sets, so a cap allows an ISA
# when cap & isa == isa.
_DNNL_ISA = {
    "SSE41": 0x1, "AVX": 0x3, "AVX2": 0x7, "AVX2_VNNI": 0x407, "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67, "AVX512_CORE_BF16": 0xE7, "AVX512_CORE_AMX": 0x3E7, "ALL": 0xFFFFFFFF,
}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _dnnl_cap():
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        value = os.environ.get(name)
        if value:
            return _DNNL_ISA.get(value.upper(), _DNNL_ISA["ALL"])
    return _DNNL_ISA["ALL"]


def _dnnl_allows(isa):
    bits = _DNNL_ISA[isa]
    return _dnnl_cap() & bits == bits


def dnnl_avx512():
    f = cpu_flags()
    return _dnnl_allows("AVX512_CORE") and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f


def dnnl_int8_exact():
    """True when oneDNN's int8 kernels have VNNI (8-bit products accumulated in int32)."""
    f = cpu_flags()
    return (dnnl_avx512() and "avx512_vnni" in f and _dnnl_allows("AVX512_CORE_VNNI")) or \
        ("avx_vnni" in f and _dnnl_allows("AVX2_VNNI"))


def dnnl_bf16():
    """True when oneDNN computes bf16 natively (AVX512_BF16)."""
    return dnnl_avx512() and "avx512_bf16" in cpu_flags() and _dnnl_allows("AVX512_CORE_BF16")


def dnnl_avx2():
    """oneDNN may use AVX2 (the CPU has it and no cap forbids it)."""
    return "avx2" in cpu_flags() and _dnnl_allows("AVX2")


def dnnl_isa_name():
    """The name Tessera's messages use for oneDNN's effective ISA."""
    f = cpu_flags()
    if dnnl_bf16():
        return "avx512_core_bf16"
    if dnnl_avx512() and "avx512_vnni" in f and _dnnl_allows("AVX512_CORE_VNNI"):
        return "avx512_core_vnni"
    if dnnl_avx512():
        return "avx512_core"
    if "avx_vnni" in f and _dnnl_allows("AVX2_VNNI"):
        return "avx2_vnni"
    if "avx2" in f and _dnnl_allows("AVX2"):
        return "avx2"
    return "avx" if "avx" in f and _dnnl_allows("AVX") else "sse41"


def native_isa():
    """Tessera's own kernels' level: avx512, avx2 or baseline (TESSERA_ISA caps it)."""
    f = cpu_flags()
    level = "avx512" if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma"} <= f else \
        "avx2" if {"avx2", "fma"} <= f else "baseline"
    cap = os.environ.get("TESSERA_ISA")
    order = ["baseline", "avx2", "avx512"]
    if cap in order and order.index(cap) < order.index(level):
        level = cap
    return level


def lower_caps():
    """The ISA caps below this CPU's that scripts/test.sh runs the isa-labelled tests under, as
    NAME:TESSERA_ISA:ONEDNN_MAX_CPU_ISA (an empty TESSERA_ISA leaves native's level alone)."""
    f = cpu_flags()
    caps = []
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f
    if avx512 and ({"avx512_vnni", "avx512_bf16"} & f):
        caps.append("avx512_core:avx512:AVX512_CORE")  # AVX-512 without VNNI or BF16 (Skylake-class)
    if avx512 or "avx_vnni" in f:
        caps.append("avx2:avx2:AVX2")  # AVX2 + FMA, no VNNI (Zen 3-class)
    caps.append("baseline:baseline:SSE41")  # portable kernels, oneDNN at SSE4.1
    return " ".join(caps)


if __name__ == "__main__":
    # For shell tests: `cpu_isa.py dnnl_bf16` prints 1 or 0, `cpu_isa.py dnnl_isa_name` the name.
    import sys
    if len(sys.argv) > 1:
        value = globals()[sys.argv[1]]()
        print(int(value) if isinstance(value, bool) else value)
    else:
        print("dnnl", dnnl_isa_name(), "int8_exact", dnnl_int8_exact(), "bf16", dnnl_bf16(), "native", native_isa())
