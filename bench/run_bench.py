#!/usr/bin/python3
"""Tessera against ONNX Runtime 1.30 (CPU), side by side in one script.

Exports each model from PyTorch with seeded random weights (once, cached in
--work), then for each thread count times the same ONNX file on the same
inputs with `tessera bench` (once per backend configuration: native only,
and oneDNN + native) and with ONNX Runtime (bench/ort_bench.js), one after
the other, and prints each median latency and its ratio to ONNX Runtime's
(< 1 means Tessera is faster).

Usage: /usr/bin/python3 bench/run_bench.py [--tessera build/tessera] [--work build/bench]
           [--threads 1,2] [--iterations 20] [--warmup 5] [--models resnet50,mobilenet_v2,bert_base]
           [--configs native,dnnl+native] [--json FILE]
ONNX Runtime comes from npm: `npm install --ignore-scripts` in bench/ (the flag
skips a GPU download that fails here; the CPU library ships in the package).
The script runs that install itself when bench/node_modules is missing.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))

import check_models  # noqa: E402  (model definitions and the exporter)
import torch  # noqa: E402

# BERT-base shape: 12 layers, hidden 768, 12 heads, feed-forward 3072, sequence 128.
check_models.MODELS["bert_base"] = (
    lambda: check_models.AttentionEncoder(vocab=30522, dim=768, heads=12, layers=12, ff=3072, max_len=512),
    lambda g: (torch.randint(0, 30522, (1, 128), generator=g), torch.ones(1, 128, dtype=torch.int64)),
    ["ids", "mask"], 17)


def ensure_onnxruntime():
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=HERE, check=True)


def tessera_median(tessera, path, inputs, threads, warmup, iterations, backends):
    cmd = [tessera, "bench", path, "--threads", str(threads), "--warmup", str(warmup), "--iterations",
           str(iterations), "--json", "--backends", backends] + sum((["--input", "%s=%s" % kv] for kv in inputs), [])
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
    parser.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "tessera"))
    parser.add_argument("--work", default=os.path.join(HERE, "..", "build", "bench"))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    parser.add_argument("--configs", default="native,dnnl+native",
                        help="Tessera backend lists to time, comma-separated, '+' between backends")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    ensure_onnxruntime()
    torch.set_num_threads(1)
    configs = args.configs.split(",")
    rows = []
    header = "%-14s %7s" % ("model", "threads")
    for config in configs:
        header += " %16s %7s" % (config + " ms", "ratio")
    print(header + " %15s" % "onnxruntime ms")
    for name in args.models.split(","):
        folder = os.path.join(args.work, name)
        path = os.path.join(folder, "model.onnx")
        input_names = check_models.MODELS[name][2]
        if not os.path.exists(path):
            check_models.export(name, args.work)
        inputs = [(n, os.path.join(folder, n + ".npy")) for n in input_names]
        for threads in [int(t) for t in args.threads.split(",")]:
            theirs = ort_median(path, inputs, threads, args.warmup, args.iterations)
            row = {"model": name, "threads": threads, "onnxruntime_ms": theirs}
            line = "%-14s %7d" % (name, threads)
            for config in configs:
                backends = config.replace("+", ",")
                ours = tessera_median(os.path.abspath(args.tessera), path, inputs, threads, args.warmup,
                                      args.iterations, backends)
                row[config + "_ms"] = ours
                row[config + "_ratio"] = ours / theirs
                line += " %16.2f %7.2f" % (ours, ours / theirs)
            rows.append(row)
            print(line + " %15.2f" % theirs, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
