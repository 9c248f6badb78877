#!/usr/bin/python3
"""What the plug-in ABI costs: the test backend built in ("test") against the same sources built as a
plug-in ("test_plugin", build/plugins/libtessera_test_backend_plugin.so, through
include/tessera/backend_plugin.h), on the same model and inputs, timed alternately (A, B, A, B, ...) with
`tessera bench` so that drift on a shared machine falls on both. Prints each configuration's median of
the per-round medians and the ratio plug-in / built-in, for ResNet-50 (the test backend takes its Add,
Relu, Flatten and Gemm nodes: 35 regions, each crossing the ABI once per run) and for a one-Relu model
(the per-run cost of one region call through the ABI, where it is largest relative to the work).

Usage: /usr/bin/python3 bench/plugin_overhead.py [--tessera build/tessera]
           [--plugin build/plugins/libtessera_test_backend_plugin.so] [--work build/bench] [--rounds 7]
           [--threads 1] [--iterations 50]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))

import check_models  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402


def one_relu(folder):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    np.save(os.path.join(folder, "x.npy"), np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16))
    return path, [("x", os.path.join(folder, "x.npy"))]


def median_ms(args, path, inputs, backends, plugin):
    cmd = [args.tessera, "bench", path, "--threads", str(args.threads), "--warmup", "5", "--iterations",
           str(args.iterations), "--json", "--backends", backends]
    cmd += sum((["--input", "%s=%s" % kv] for kv in inputs), [])
    if plugin:
        cmd += ["--backend-plugin", args.plugin]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)["median_ms"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "tessera"))
    parser.add_argument("--plugin", default=os.path.join(HERE, "..", "build", "plugins", "libtessera_test_backend_plugin.so"))
    parser.add_argument("--work", default=os.path.join(HERE, "..", "build", "bench"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    folder = os.path.join(args.work, "resnet50")
    if not os.path.exists(os.path.join(folder, "model.onnx")):
        check_models.export("resnet50", args.work)
    models = [("resnet50", os.path.join(folder, "model.onnx"), [("input", os.path.join(folder, "input.npy"))]),
              ("one_relu",) + one_relu(os.path.join(args.work, "one_relu"))]
    print("%-10s %14s %14s %8s" % ("model", "built-in ms", "plug-in ms", "ratio"))
    for name, path, inputs in models:
        built_in, plugin = [], []
        for _ in range(args.rounds):
            built_in.append(median_ms(args, path, inputs, "test,native", False))
            plugin.append(median_ms(args, path, inputs, "test_plugin,native", True))
        a, b = statistics.median(built_in), statistics.median(plugin)
        print("%-10s %14.4f %14.4f %8.4f" % (name, a, b, b / a), flush=True)


if __name__ == "__main__":
    main()
