#!/usr/bin/python3
"""int8: Tessera against ONNX Runtime 1.30 (CPU) on the same QDQ files, in one script.

For each model (exported from PyTorch with seeded random weights, as run_bench.py
does), `tessera quantize --per-channel` writes a QDQ ONNX file calibrated on
--calibration random inputs (seed 0; cached in --work as model.qdq.onnx). Then,
per thread count, one after the other on the same inputs:
  - Tessera on the QDQ file (`tessera bench`, oneDNN + native: its int8 primitives),
  - ONNX Runtime on the same QDQ file (its QLinear kernels),
  - ONNX Runtime on the float model (fp32),
and prints each median, Tessera's ratio to ONNX Runtime int8 (< 1: Tessera is
faster), its speed-up over ONNX Runtime fp32, and the fraction of the measured
int8 dot-product peak (vpdpbusd, tessera_peak's avx512_vnni) its median is.

Accuracy (--accuracy N inputs, default 200, seeds distinct from calibration's):
Tessera's int8 outputs against Tessera's float32 outputs of the float model (the
first output): top-1 agreement (argmax over the last axis, per row: per image for
the classifiers, per token for the encoder's hidden states, where it is only a
proxy) and the mean / lowest cosine.

Usage: /usr/bin/python3 bench/run_int8_bench.py [--tessera build/tessera] [--work build/bench]
           [--threads 1,2] [--iterations 20] [--warmup 5] [--models resnet50,mobilenet_v2,bert_base]
           [--calibration 32] [--accuracy 200] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))

import numpy as np  # noqa: E402

import run_bench  # noqa: E402  (model export, FLOP count, peaks, the timing helpers)
from run_bench import check_models  # noqa: E402


def int8_peaks(peak_program, thread_counts):
    if not os.path.exists(peak_program):
        return {}
    out = subprocess.run([peak_program, "--json", "--threads", ",".join(map(str, thread_counts))],
                         capture_output=True, text=True, check=True)
    return {r["threads"]: max(r["gflops_best"], r.get("gflops_best_cpu_time", 0))
            for r in json.loads(out.stdout)["results"] if r["isa"] == "avx512_vnni"}


def quantized_path(tessera, folder, path, calibration):
    out = os.path.join(folder, "model.qdq.onnx")
    if not os.path.exists(out):
        run = subprocess.run([tessera, "quantize", path, "-o", out, "--per-channel", "--random", str(calibration),
                              "--seed", "0"], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError("tessera quantize: " + run.stderr.strip())
        print(run.stdout.strip().replace("\n", "\n    "), file=sys.stderr)
    return out


def accuracy(name, path, qdq_path, count):
    """Top-1 agreement and cosines of int8 against float32 on `count` inputs (seeds 1000...)."""
    import tessera
    import torch
    fp32 = tessera.InferenceSession(path, threads=2)
    int8 = tessera.InferenceSession(qdq_path, threads=2)
    make_inputs, input_names = check_models.MODELS[name][1], check_models.MODELS[name][2]
    agree, cosines = 0, []
    for k in range(count):
        inputs = make_inputs(torch.Generator().manual_seed(1000 + k))
        feed = {n: t.numpy() for n, t in zip(input_names, inputs)}
        a = fp32.run(None, feed)[0].astype(np.float64)
        b = int8.run(None, feed)[0].astype(np.float64)
        agree += float(np.mean(a.reshape(-1, a.shape[-1]).argmax(-1) == b.reshape(-1, b.shape[-1]).argmax(-1)))
        cosines.append(float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b))))
    return agree / count, float(np.mean(cosines)), float(np.min(cosines))


def main():
    parser = argparse.ArgumentParser()
    run_bench.add_common_arguments(parser)
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    parser.add_argument("--calibration", type=int, default=32, help="random calibration inputs")
    parser.add_argument("--accuracy", type=int, default=200, help="inputs for the accuracy columns (0: none)")
    parser.add_argument("--peak", default=os.path.join(HERE, "..", "build", "bench", "tessera_peak"))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    run_bench.ensure_onnxruntime()
    tessera = os.path.abspath(args.tessera)
    thread_counts = [int(t) for t in args.threads.split(",")]
    peaks = int8_peaks(args.peak, thread_counts)
    if peaks:
        print("int8 dot-product peak (GOP/s): " + ", ".join("%d thread%s %.0f" % (t, "" if t == 1 else "s", peaks[t])
                                                           for t in thread_counts if t in peaks))
    print("%-14s %7s %6s %12s %12s %7s %12s %8s %6s %7s %9s" % (
        "model", "threads", "GOP", "tessera ms", "ort int8 ms", "ratio", "ort fp32 ms", "speedup", "%peak",
        "top-1", "cosine"))
    rows = []
    for name in args.models.split(","):
        folder, path, inputs = run_bench.model_files(args.work, name)
        qdq = quantized_path(tessera, folder, path, args.calibration)
        ops = run_bench.model_flops(path, inputs)
        top1, cos_mean, cos_min = accuracy(name, path, qdq, args.accuracy) if args.accuracy else (None, None, None)
        for threads in thread_counts:
            ours = run_bench.tessera_median(tessera, qdq, inputs, threads, args.warmup, args.iterations, "dnnl,native")
            ort_int8 = run_bench.ort_median(qdq, inputs, threads, args.warmup, args.iterations)
            ort_fp32 = run_bench.ort_median(path, inputs, threads, args.warmup, args.iterations)
            fraction = ops / (ours * 1e-3) * 1e-9 / peaks[threads] if threads in peaks else None
            row = {"model": name, "threads": threads, "gop": ops * 1e-9, "tessera_int8_ms": ours,
                   "onnxruntime_int8_ms": ort_int8, "onnxruntime_fp32_ms": ort_fp32, "ratio": ours / ort_int8,
                   "speedup_over_onnxruntime_fp32": ort_fp32 / ours, "fraction_of_int8_peak": fraction,
                   "top1_agreement": top1, "cosine_mean": cos_mean, "cosine_min": cos_min, "accuracy_inputs": args.accuracy}
            rows.append(row)
            print("%-14s %7d %6.2f %12.2f %12.2f %7.2f %12.2f %7.2fx %6s %7s %9s" % (
                name, threads, ops * 1e-9, ours, ort_int8, ours / ort_int8, ort_fp32, ort_fp32 / ours,
                "%.1f" % (100 * fraction) if fraction else "-", "%.3f" % top1 if top1 is not None else "-",
                "%.4f" % cos_mean if cos_mean is not None else "-"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
