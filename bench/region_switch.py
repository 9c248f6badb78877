#!/usr/bin/python3
"""What a hand-over between backends costs: a chain of K blocks, each a 3x3 convolution (32 channels,
28x28) followed by an element-wise op, timed with `tessera bench` in three placements at each thread count:

  alternating  Conv on the plug-in or oneDNN, Sin on native: 2K regions, 2K-1 hand-overs
  one region   the same backend runs the whole chain (Sin replaced by Relu, which it claims)
  native       native runs the whole chain with Sin (what the alternating run's native part costs)

The hand-over cost is estimated as (alternating - one region - (native with Sin - native with Relu))
/ hand-overs: what is left once the same convolutions and the native Sin's own time are taken out,
i.e. thread pools waking and sleeping, and for XNNPACK the NCHW<->NHWC transposes at each region edge.

Usage: /usr/bin/python3 bench/region_switch.py [--tessera build/tessera]
           [--xnnpack build/plugins/libtessera_xnnpack.so] [--blocks 16] [--threads 1,2] [--iterations 50]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def chain(path, blocks, activation):
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for b in range(blocks):
        w = numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) * 0.05).astype(np.float32), "w%d" % b)
        inits.append(w)
        nodes.append(helper.make_node("Conv", [x, w.name], ["c%d" % b], name="conv%d" % b, pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node(activation, ["c%d" % b], ["a%d" % b], name="act%d" % b))
        x = "a%d" % b
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 28, 28])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 32, 28, 28])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def median(args, path, backends, threads, plugin=None):
    cmd = [args.tessera, "bench", path, "--threads", str(threads), "--warmup", "10", "--iterations",
           str(args.iterations), "--json", "--backends", backends]
    if plugin:
        cmd += ["--backend-plugin", plugin]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["median_ms"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "tessera"))
    parser.add_argument("--xnnpack", default=os.path.join(HERE, "..", "build", "plugins", "libtessera_xnnpack.so"))
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    tanh, relu = os.path.join(work, "tanh.onnx"), os.path.join(work, "relu.onnx")
    chain(tanh, args.blocks, "Sin")
    chain(relu, args.blocks, "Relu")
    handovers = 2 * args.blocks - 1
    print("%-8s %7s %14s %12s %14s %18s" % ("backend", "threads", "alternating ms", "one region", "native sin-relu",
                                            "per hand-over us"))
    for threads in [int(t) for t in args.threads.split(",")]:
        native_extra = median(args, tanh, "native", threads) - median(args, relu, "native", threads)
        for name, plugin in (("xnnpack", os.path.abspath(args.xnnpack)), ("dnnl", None)):
            alternating = median(args, tanh, name + ",native", threads, plugin)
            whole = median(args, relu, name + ",native", threads, plugin)
            per = (alternating - whole - native_extra) / handovers * 1000
            print("%-8s %7d %14.3f %12.3f %14.3f %18.1f" % (name, threads, alternating, whole, native_extra, per),
                  flush=True)


if __name__ == "__main__":
    main()
