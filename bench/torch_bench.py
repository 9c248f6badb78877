"""The PyTorch bridge's costs and speed (a benchmark, not a test).

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_bench.py [--runs 10] [--models resnet50,mobilenet_v2]

1. Per-call overhead on a tiny model (a + b on two 1x8 tensors): the C API
   itself (tsr_model_run_alloc through ctypes, which adds ctypes' own cost),
   torch.ops.tessera.run, the Model.run method, the compiled nn.Module (whose
   eager forward calls Model.run) and its TorchScript version (which calls the op),
   next to eager PyTorch's own `a + b`.
2. torchvision resnet50 / mobilenet_v2 (random weights, 1x3x224x224) through
   tessera.torch.compile vs PyTorch eager and TorchScript-frozen
   (torch.jit.freeze(torch.jit.script(model))), at 1 and 2 threads
   (torch.set_num_threads and Tessera's threads option alike). Medians of
   --runs runs after 2 warm-up runs; every Tessera result is checked against eager.
"""

import argparse
import ctypes
import os
import statistics
import time

import torch
import torchvision

import tessera.torch as tt


def median_seconds(function, runs, warmup=2):
    with torch.no_grad():
        for _ in range(warmup):
            function()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_call_microseconds(function, calls=2000, repeats=5):
    """Best of `repeats` averages over `calls` calls (overheads are small: take the least disturbed)."""
    best = float("inf")
    with torch.no_grad():
        for _ in range(200):
            function()
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                function()
            best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


# --- the C API through ctypes ---------------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


def libtessera_path():
    """libtessera.so as this process mapped it (libtessera_torch.so links it), build or install tree alike."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libtessera.so"):
                return path
    raise RuntimeError("libtessera.so is not loaded")


def c_api_caller(onnx_bytes, a, b):
    """A function making one tsr_model_run_alloc call (and freeing its output), over ctypes."""
    lib = ctypes.CDLL(libtessera_path())
    lib.tsr_model_load_from_memory.restype = ctypes.c_void_p
    lib.tsr_model_load_from_memory.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p,
                                               ctypes.POINTER(ctypes.c_void_p)]
    lib.tsr_model_run_alloc.restype = ctypes.c_void_p
    lib.tsr_model_run_alloc.argtypes = [ctypes.c_void_p, ctypes.POINTER(DLTensor), ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.POINTER(DLManagedTensor)), ctypes.c_size_t]
    model = ctypes.c_void_p()
    status = lib.tsr_model_load_from_memory(onnx_bytes, len(onnx_bytes), b"tiny", None, ctypes.byref(model))
    assert status is None, "tsr_model_load_from_memory failed"
    shape = (ctypes.c_int64 * 2)(*a.shape)
    inputs = (DLTensor * 2)()
    for slot, tensor in zip(inputs, (a, b)):
        slot.data, slot.device, slot.ndim = tensor.data_ptr(), DLDevice(1, 0), 2
        slot.dtype, slot.shape = DLDataType(2, 32, 1), shape
    outputs = (ctypes.POINTER(DLManagedTensor) * 1)()
    run, count = lib.tsr_model_run_alloc, ctypes.c_size_t

    def call():
        assert run(model, inputs, 2, outputs, 1) is None
        outputs[0].contents.deleter(outputs[0])

    call.keepalive = (lib, model, shape, inputs, outputs, count)
    return call


def overhead_table():
    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    import io
    a, b = torch.randn(1, 8), torch.randn(1, 8)
    buffer = io.BytesIO()
    torch.onnx.export(Add(), (a, b), buffer, input_names=["a", "b"], output_names=["sum"], opset_version=14)
    compiled = tt.compile(Add(), (a, b))
    scripted = torch.jit.script(compiled)
    model = compiled.tessera_model()
    rows = [("eager torch a + b", lambda: a + b)]
    try:
        rows.append(("C API tsr_model_run_alloc (ctypes)", c_api_caller(buffer.getvalue(), a, b)))
    except Exception as error:  # noqa: BLE001  (the table says what is missing)
        print("C API row skipped:", error)
    rows += [("torch.ops.tessera.run", lambda: torch.ops.tessera.run(model, [a, b])),
             ("Model.run (TorchBind method)", lambda: model.run([a, b])),
             ("compiled nn.Module (calls Model.run)", lambda: compiled(a, b)),
             ("scripted module (calls the op)", lambda: scripted(a, b))]
    print("Per-call time, tiny model (a + b, 1x8 float32), best of 5 x 2000 calls:")
    results = {}
    for name, function in rows:
        results[name] = per_call_microseconds(function)
        print(f"  {name:<50} {results[name]:8.2f} us")
    base = results.get("C API tsr_model_run_alloc (ctypes)")
    if base:
        print("Over the C API (ctypes), from Python:")
        print(f"  {'torch.ops.tessera.run over the C API':<50} {results['torch.ops.tessera.run'] - base:+8.2f} us")
        for name in ("Model.run (TorchBind method)", "compiled nn.Module (calls Model.run)",
                     "scripted module (calls the op)"):
            print(f"  {name + ' over the C API':<50} {results[name] - base:+8.2f} us")


def model_table(names, runs):
    print(f"\nModels at 1x3x224x224, random weights, median of {runs} runs (ms); ratios are baseline / Tessera:")
    header = f"{'model':<14}{'threads':>8}{'eager':>10}{'frozen':>10}{'tessera':>10}{'eager/t':>9}{'frozen/t':>9}" \
             f"{'max rel err':>13}{'compile s':>11}"
    print(header)
    for name in names:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, 224, 224)
        with torch.no_grad():
            expected = model(x)
            frozen = torch.jit.freeze(torch.jit.script(model))
        for threads in (1, 2):
            torch.set_num_threads(threads)
            start = time.perf_counter()
            compiled = tt.compile(model, x, threads=threads)
            compile_seconds = time.perf_counter() - start
            with torch.no_grad():
                actual = compiled(x)
            error = ((actual - expected).abs().max() / expected.abs().max()).item()
            eager_s = median_seconds(lambda: model(x), runs)
            frozen_s = median_seconds(lambda: frozen(x), runs)
            tessera_s = median_seconds(lambda: compiled(x), runs)
            print(f"{name:<14}{threads:>8}{eager_s * 1e3:>10.2f}{frozen_s * 1e3:>10.2f}{tessera_s * 1e3:>10.2f}"
                  f"{eager_s / tessera_s:>9.2f}{frozen_s / tessera_s:>9.2f}{error:>13.1e}{compile_seconds:>11.1f}")
            del compiled


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", default="resnet50,mobilenet_v2")
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    tt.load_library()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} "
          f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    torch.set_num_threads(1)
    if not args.skip_overhead:
        overhead_table()
    model_table([n for n in args.models.split(",") if n], args.runs)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
