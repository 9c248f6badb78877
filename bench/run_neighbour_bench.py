#!/usr/bin/python3
"""Tessera against ONNX Runtime 1.30 with a busy neighbour process: each model
is timed at --threads (default 2) alone, then while one other process spins
on a CPU (a Python busy loop, as another job on the machine would), Tessera
and ONNX Runtime one after the other on the same file and inputs. Prints the
medians, Tessera/ORT in each condition, and how much each runtime slowed down
beside the neighbour (loaded / alone). The neighbour is started before and
killed after each model's loaded pair, so both runtimes meet the same load.

Models come from bench/run_bench.py's list (exported once into --work).

Usage: /usr/bin/python3 bench/run_neighbour_bench.py [--models resnet50,shufflenet_v2_x1_0]
           [--threads 2] [--iterations 20] [--warmup 5] [--neighbours 1] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import add_common_arguments, ensure_onnxruntime, model_files, ort_median, tessera_median  # noqa: E402

BUSY_LOOP = "while True:\n    pass\n"


def start_neighbours(count):
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    time.sleep(0.2)  # let them reach the loop
    return procs


def stop(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def main():
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    parser.set_defaults(threads="2")
    parser.add_argument("--models", default="resnet50,mobilenet_v2,shufflenet_v2_x1_0,attention_encoder,recurrent_tagger")
    parser.add_argument("--neighbours", type=int, default=1, help="busy processes beside the runs")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    ensure_onnxruntime()
    threads = int(args.threads.split(",")[0])
    tessera = os.path.abspath(args.tessera)
    rows = []
    print("%-26s %7s | %9s %9s %6s | %9s %9s %6s | %13s %9s" %
          ("model", "threads", "alone ms", "ORT ms", "ratio", "loaded ms", "ORT ms", "ratio", "Tessera slows", "ORT slows"))
    for name in args.models.split(","):
        _, path, inputs = model_files(args.work, name)
        ours = tessera_median(tessera, path, inputs, threads, args.warmup, args.iterations, None)
        theirs = ort_median(path, inputs, threads, args.warmup, args.iterations)
        procs = start_neighbours(args.neighbours)
        try:
            ours_loaded = tessera_median(tessera, path, inputs, threads, args.warmup, args.iterations, None)
            theirs_loaded = ort_median(path, inputs, threads, args.warmup, args.iterations)
        finally:
            stop(procs)
        row = {"model": name, "threads": threads, "neighbours": args.neighbours, "tessera_ms": ours,
               "onnxruntime_ms": theirs, "tessera_loaded_ms": ours_loaded, "onnxruntime_loaded_ms": theirs_loaded}
        rows.append(row)
        print("%-26s %7d | %9.2f %9.2f %6.2f | %9.2f %9.2f %6.2f | %12.2fx %8.2fx" %
              (name, threads, ours, theirs, ours / theirs, ours_loaded, theirs_loaded, ours_loaded / theirs_loaded,
               ours_loaded / ours, theirs_loaded / theirs), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
