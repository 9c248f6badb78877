#!/usr/bin/python3
"""Tessera against ONNX Runtime 1.30 (CPU), side by side in one script.

Exports each model from PyTorch with seeded random weights (once, cached in
--work), then for each thread count times the same ONNX file on the same
inputs with `tessera bench` (once per backend configuration: native only,
and oneDNN + native) and with ONNX Runtime (bench/ort_bench.js), one after
the other, and prints each median latency and its ratio to ONNX Runtime's
(< 1 means Tessera is faster).

Each median is also given as a fraction of the machine's measured FMA peak:
the model's FLOPs (2 x the multiply-adds of its Conv, ConvTranspose, MatMul
and Gemm nodes, counted from the ONNX graph after shape inference) over the
median, divided by the peak at that thread count from build/bench/tessera_peak
(register-only AVX-512 FMA loops, the larger of its wall-clock and CPU-time
rates; --peak-gflops gives the peaks instead).

A configuration may end in @PRECISION (e.g. dnnl+native@bf16): it is run with
`tessera bench --precision PRECISION`, and its fraction of peak is taken
against tessera_peak's bf16 dot-product peak (vdpbf16ps) instead.

Usage: /usr/bin/python3 bench/run_bench.py [--tessera build/tessera] [--work build/bench]
           [--threads 1,2] [--iterations 20] [--warmup 5] [--models resnet50,mobilenet_v2,bert_base]
           [--configs native,dnnl+native] [--backend-plugin PATH.so ...] [--peak build/bench/tessera_peak | --peak-gflops 224,443]
           [--no-onnxruntime] [--json FILE]
ONNX Runtime comes from npm: `npm install --ignore-scripts` in bench/ (the flag
skips a GPU download that fails here; the CPU library ships in the package).
The script runs that install itself when bench/node_modules is missing.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))

import check_models  # noqa: E402  (model definitions and the exporter)
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402

# BERT-base shape: 12 layers, hidden 768, 12 heads, feed-forward 3072, sequence 128.
check_models.MODELS["bert_base"] = (
    lambda: check_models.AttentionEncoder(vocab=30522, dim=768, heads=12, layers=12, ff=3072, max_len=512),
    lambda g: (torch.randint(0, 30522, (1, 128), generator=g), torch.ones(1, 128, dtype=torch.int64)),
    ["ids", "mask"], 17)


def model_flops(path, inputs):
    """2 x multiply-adds of the Conv, ConvTranspose, MatMul and Gemm nodes, with
    the graph's input shapes fixed from the example inputs. A dimension that
    shape inference leaves symbolic (in these exports only the batch, behind an
    Expand or a broadcast; the runs fix it at 1) counts as 1."""
    model = onnx.load(path)
    shapes = {name: np.load(file, mmap_mode="r").shape for name, file in inputs}
    for value in model.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name]):
                dim.ClearField("dim_param")
                dim.dim_value = size
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    known = {}
    symbolic = set()
    for value in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        known[value.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in dims]
        symbolic.update(d.dim_param for d in dims if not d.HasField("dim_value"))
    for init in model.graph.initializer:
        known[init.name] = list(init.dims)
    macs = 0
    unknown = []
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            continue
        a, b, y = known.get(node.input[0]), known.get(node.input[1]), known.get(node.output[0])
        if a is None or b is None or y is None:
            unknown.append(node.name)
            continue
        if node.op_type == "Conv":  # each output: Cin/group x kernel MACs; W is [Cout, Cin/group, k...]
            macs += int(np.prod(y)) * int(np.prod(b[1:]))
        elif node.op_type == "ConvTranspose":  # each input: Cout/group x kernel MACs; W is [Cin, Cout/group, k...]
            macs += int(np.prod(a)) * int(np.prod(b[1:]))
        elif node.op_type == "MatMul":
            macs += int(np.prod(y)) * (a[-1] if len(a) > 1 else a[0])
        else:
            trans_a = any(attr.name == "transA" and attr.i for attr in node.attribute)
            macs += int(np.prod(y)) * (a[0] if trans_a else a[1])
    if unknown:
        print("note: %s: %d Conv/MatMul/Gemm nodes without known shapes are not counted" % (path, len(unknown)),
              file=sys.stderr)
    if symbolic:
        print("note: %s: symbolic dims %s counted as 1" % (path, ", ".join(sorted(symbolic))), file=sys.stderr)
    return 2 * macs


def measured_peaks(args, thread_counts):
    """GFLOP/s at the FMA peak per thread count: --peak-gflops, else tessera_peak's best AVX-512 (or AVX2)
    figure, the larger of its wall-clock and CPU-time rates (on a machine shared with other work the wall
    clock understates the peak, which would overstate every fraction)."""
    if args.peak_gflops:
        values = [float(v) for v in args.peak_gflops.split(",")]
        return {t: values[min(i, len(values) - 1)] for i, t in enumerate(thread_counts)}
    if not os.path.exists(args.peak):
        print("note: %s not built: no fraction of peak" % args.peak, file=sys.stderr)
        return {}
    out = subprocess.run([args.peak, "--json", "--threads", ",".join(map(str, thread_counts))],
                         capture_output=True, text=True, check=True)
    results = json.loads(out.stdout)["results"]
    peaks = {}
    for isa in ("avx512", "avx2"):
        for r in results:
            if r["isa"] == isa and r["threads"] not in peaks:
                peaks[r["threads"]] = max(r["gflops_best"], r.get("gflops_best_cpu_time", 0))
    for r in results:
        if r["isa"] == "avx512_bf16":
            peaks[("bf16", r["threads"])] = max(r["gflops_best"], r.get("gflops_best_cpu_time", 0))
    return peaks


def ensure_onnxruntime():
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=HERE, check=True)


def add_common_arguments(parser):
    """The options every bench script takes: the CLI, the work folder, thread counts and iterations."""
    parser.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "tessera"))
    parser.add_argument("--work", default=os.path.join(HERE, "..", "build", "bench"))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)


def model_files(work, name):
    """The model's folder under `work`, its ONNX file and its inputs as (name, .npy path) pairs,
    exporting it from check_models first when it is not there yet."""
    folder = os.path.join(work, name)
    path = os.path.join(folder, "model.onnx")
    if not os.path.exists(path):
        check_models.export(name, work)
    return folder, path, [(n, os.path.join(folder, n + ".npy")) for n in check_models.MODELS[name][2]]


def tessera_median(tessera, path, inputs, threads, warmup, iterations, backends, plugins=(), precision=None, extra=()):
    """`tessera bench`'s median in ms; backends None: the default list; extra: more CLI options."""
    cmd = [tessera, "bench", path, "--threads", str(threads), "--warmup", str(warmup), "--iterations",
           str(iterations), "--json"] + sum((["--input", "%s=%s" % kv] for kv in inputs), [])
    if backends is not None:
        cmd += ["--backends", backends]
    if precision:
        cmd += ["--precision", precision]
    cmd += list(extra)
    cmd += sum((["--backend-plugin", p] for p in plugins), [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("tessera: " + out.stderr.strip())
    return json.loads(out.stdout)["median_ms"]


def ort_median(path, inputs, threads, warmup, iterations):
    cmd = ["node", os.path.join(HERE, "ort_bench.js"), path, str(threads), str(warmup), str(iterations)]
    cmd += ["%s=%s" % kv for kv in inputs]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("onnxruntime: " + out.stderr.strip())
    return json.loads(out.stdout)["median_ms"]


def main():
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    parser.add_argument("--configs", default="native,dnnl+native",
                        help="Tessera backend lists to time, comma-separated, '+' between backends, "
                             "optionally @PRECISION (dnnl+native@bf16)")
    parser.add_argument("--backend-plugin", action="append", default=[], dest="plugins",
                        help="a backend plug-in to load (repeatable), e.g. build/plugins/libtessera_xnnpack.so "
                             "for --configs xnnpack+native,dnnl+xnnpack+native")
    parser.add_argument("--peak", default=os.path.join(HERE, "..", "build", "bench", "tessera_peak"),
                        help="the peak-FMA program (bench/peak.cc)")
    parser.add_argument("--peak-gflops", help="peak GFLOP/s per thread count instead of measuring, e.g. 224,443")
    parser.add_argument("--no-onnxruntime", action="store_true",
                        help="time Tessera only (no ONNX Runtime column, no npm install)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time each model this many times, ONNX Runtime and each configuration taking turns, "
                             "and report the median of each side's medians (on a machine whose neighbours come "
                             "and go, one round can land on a slow minute for one side only)")
    args = parser.parse_args()
    with_ort = not args.no_onnxruntime
    if with_ort:
        ensure_onnxruntime()
    torch.set_num_threads(1)
    configs = args.configs.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]
    peaks = measured_peaks(args, thread_counts)
    if peaks:
        print("FMA peak (GFLOP/s): " + ", ".join("%d thread%s %.0f" % (t, "" if t == 1 else "s", peaks[t])
                                                for t in thread_counts if t in peaks))
        if any(("bf16", t) in peaks for t in thread_counts):
            print("bf16 dot-product peak (GFLOP/s): " + ", ".join(
                "%d thread%s %.0f" % (t, "" if t == 1 else "s", peaks[("bf16", t)])
                for t in thread_counts if ("bf16", t) in peaks))
    rows = []
    header = "%-14s %7s %7s" % ("model", "threads", "GFLOP")
    for config in configs:
        header += " %16s %7s %6s" % (config + " ms", "ratio", "%peak")
    print(header + (" %15s %6s" % ("onnxruntime ms", "%peak") if with_ort else ""))
    for name in args.models.split(","):
        _, path, inputs = model_files(args.work, name)
        flops = model_flops(path, inputs)

        def fraction(ms, threads, precision=None):
            """The fraction of the FMA peak (bf16: the bf16 dot-product peak) that `flops` in `ms`
            milliseconds is (None without a peak)."""
            key = ("bf16", threads) if precision and precision.startswith("bf16") else threads
            return flops / (ms * 1e-3) * 1e-9 / peaks[key] if key in peaks else None

        def percent(value):
            return "%6.1f" % (100 * value) if value is not None else "%6s" % "-"

        for threads in thread_counts:
            # Rounds alternate the runtimes; each side's figure is the median of its rounds' medians.
            times = {}
            for _ in range(max(1, args.rounds)):
                if with_ort:
                    times.setdefault(None, []).append(ort_median(path, inputs, threads, args.warmup, args.iterations))
                for config in configs:
                    backend_list, _, precision = config.partition("@")
                    times.setdefault(config, []).append(tessera_median(
                        os.path.abspath(args.tessera), path, inputs, threads, args.warmup, args.iterations,
                        backend_list.replace("+", ","), [os.path.abspath(p) for p in args.plugins],
                        precision or None))
            theirs = statistics.median(times[None]) if with_ort else None
            row = {"model": name, "threads": threads, "gflop": flops * 1e-9, "peak_gflops": peaks.get(threads)}
            if with_ort:
                row.update({"onnxruntime_ms": theirs, "onnxruntime_fraction_of_peak": fraction(theirs, threads)})
            line = "%-14s %7d %7.2f" % (name, threads, flops * 1e-9)
            for config in configs:
                precision = config.partition("@")[2]
                ours = statistics.median(times[config])
                row[config + "_ms"] = ours
                row[config + "_fraction_of_peak"] = fraction(ours, threads, precision)
                if with_ort:
                    row[config + "_ratio"] = ours / theirs
                line += " %16.2f %7s %s" % (ours, "%.2f" % (ours / theirs) if with_ort else "-",
                                            percent(fraction(ours, threads, precision)))
            rows.append(row)
            print(line + (" %15.2f %s" % (theirs, percent(fraction(theirs, threads))) if with_ort else ""),
                  flush=True)
    if with_ort and len(rows) > len(thread_counts):
        for config in configs:
            for threads in thread_counts:
                ratios = [r[config + "_ratio"] for r in rows if r["threads"] == threads]
                print("geometric mean of %s / onnxruntime at %d thread%s: %.3f over %d models" % (
                    config, threads, "" if threads == 1 else "s",
                    math.exp(sum(math.log(x) for x in ratios) / len(ratios)), len(ratios)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
