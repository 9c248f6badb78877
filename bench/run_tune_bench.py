#!/usr/bin/python3
"""Measured placement (`tessera tune`) against the default priority order, each backend alone and
ONNX Runtime 1.30 (CPU), side by side in one script.

For each model (exported from PyTorch with seeded random weights, as run_bench.py does) and thread
count: `tessera tune` writes a tuning record (its wall time is the "tune s" column), then, one after
the other on the same inputs, `tessera bench` times the default placement, each backend of the
record's list alone (`--backends X`: native takes what X refuses) and the tuned placement
(`--tuning`), and ONNX Runtime times the same file. Prints each median, the tuned placement's ratio to
the default, to the best single backend (the guarantee: never slower than it, up to timing noise; a
ratio above 1.03 is timed again, the two alternating three times, and flagged if it stays above) and to ONNX Runtime (< 1: Tessera is faster), and the candidate the
tuner chose.

--backend-plugin loads plug-ins (e.g. build/plugins/libtessera_xnnpack.so): they come first in the
default priority order, which is where a priority order is easily wrong.

Usage: /usr/bin/python3 bench/run_tune_bench.py [--tessera build/tessera] [--work build/bench]
           [--threads 1,2] [--iterations 20] [--warmup 5] [--budget 60]
           [--models resnet50,mobilenet_v2,bert_base,torch_transformer_encoder,recurrent_tagger]
           [--backend-plugin PATH.so ...] [--no-onnxruntime] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import run_bench  # noqa: E402  (model export, the timing helpers)


def bench(tessera, path, inputs, threads, args, extra):
    """`tessera bench` with the default backend list and the plug-ins, plus `extra` options."""
    return run_bench.tessera_median(tessera, path, inputs, threads, args.warmup, args.iterations, None, args.plugins,
                                    extra=extra)


def main():
    parser = argparse.ArgumentParser()
    run_bench.add_common_arguments(parser)
    parser.add_argument("--budget", type=float, default=60)
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,torch_transformer_encoder,recurrent_tagger")
    parser.add_argument("--backend-plugin", action="append", default=[], dest="plugins")
    parser.add_argument("--no-onnxruntime", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    args.plugins = [os.path.abspath(p) for p in args.plugins]
    tessera = os.path.abspath(args.tessera)
    with_ort = not args.no_onnxruntime
    if with_ort:
        run_bench.ensure_onnxruntime()
    rows = []
    suffix = "" if not args.plugins else "_" + "_".join(os.path.basename(p).split(".")[0] for p in args.plugins)
    for name in args.models.split(","):
        folder, path, inputs = run_bench.model_files(args.work, name)
        for threads in [int(t) for t in args.threads.split(",")]:
            record_path = os.path.join(folder, "tuning_%dt%s.json" % (threads, suffix))
            cmd = [tessera, "tune", path, "--threads", str(threads), "--budget", str(args.budget), "-o", record_path]
            cmd += sum((["--input-shape", "%s=%s" % (n, "x".join(map(str, np.load(f).shape)))] for n, f in inputs), [])
            cmd += sum((["--backend-plugin", p] for p in args.plugins), [])
            start = time.time()
            tune = subprocess.run(cmd, capture_output=True, text=True)
            tune_seconds = time.time() - start
            if tune.returncode != 0:
                raise RuntimeError("tessera tune: " + tune.stderr.strip())
            record = json.load(open(record_path))
            row = {"model": name, "threads": threads, "tune_seconds": tune_seconds, "chosen": record["chosen"],
                   "candidates": len(record["candidates"])}
            row["default_ms"] = bench(tessera, path, inputs, threads, args, [])
            singles = {}
            for backend in record["backends"]:
                singles[backend] = bench(tessera, path, inputs, threads, args, ["--backends", backend])
            row["single_ms"] = singles
            row["tuned_ms"] = bench(tessera, path, inputs, threads, args, ["--tuning", record_path])
            row["onnxruntime_ms"] = run_bench.ort_median(path, inputs, threads, args.warmup, args.iterations) if with_ort else None
            best_name = min(singles, key=singles.get)
            best_single = singles[best_name]
            if row["tuned_ms"] > 1.03 * best_single:
                # Over the noise allowed: time the two again, alternating, and keep each one's fastest median.
                tuned_times, single_times = [row["tuned_ms"]], [best_single]
                for _ in range(3):
                    tuned_times.append(bench(tessera, path, inputs, threads, args, ["--tuning", record_path]))
                    single_times.append(bench(tessera, path, inputs, threads, args, ["--backends", best_name]))
                row["tuned_ms"], best_single = min(tuned_times), min(single_times)
                row["rechecked"] = True
            row["tuned_vs_default"] = row["tuned_ms"] / row["default_ms"]
            row["tuned_vs_best_single"] = row["tuned_ms"] / best_single
            rows.append(row)
            single_text = " ".join("%s %.2f" % kv for kv in singles.items())
            flag = "  <-- slower than the best single backend" if row["tuned_vs_best_single"] > 1.03 else ""
            ort_text = ("  ORT %.2f  tuned/ORT %.2f" % (row["onnxruntime_ms"], row["tuned_ms"] / row["onnxruntime_ms"])
                        if with_ort else "")
            print("%-26s %dT  tune %5.1f s (%2d candidates)  default %.2f  alone: %s  tuned %.2f  tuned/default %.2f  "
                  "tuned/best single %.2f%s  chose '%s'%s" % (
                      name, threads, tune_seconds, len(record["candidates"]), row["default_ms"], single_text,
                      row["tuned_ms"], row["tuned_vs_default"], row["tuned_vs_best_single"], ort_text,
                      record["chosen"], flag), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
