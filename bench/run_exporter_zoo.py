#!/usr/bin/python3
"""The exporter zoo: small models, written with onnx.helper (seeded random weights, nothing downloaded),
each reproducing an idiom that other exporters write and that once sent Tessera to a slow kernel or was
refused, timed with Tessera (default backends) and ONNX Runtime 1.30 (CPU) side by side on the same file
and inputs. Prints each median, the ratio (below 1: Tessera is faster) and the geometric mean.

Each model is three blocks of [3x3 convolution, 32 channels, 56x56 -> the idiom]:

  se               squeeze-excite: Mul(x, Sigmoid(Conv(Relu(Conv(GlobalAveragePool(x)))))) (EfficientNet, RegNetY)
  paddle_hardswish Add(x, 3) -> Clip(0, 6) -> Div(6) -> Mul(x), scalar constants, opset 11 (paddle2onnx)
  paddle_hardsig   Mul(x, 0.2) -> Add(0.5) -> Clip(0, 1) -> Mul(x) (paddle2onnx's HardSigmoid gate)
  silu             Mul(x, Sigmoid(x)) (torch's SiLU export: EfficientNet, YOLO)
  row_broadcast    Mul(x, m[1, C, H, 1]) (no oneDNN JIT kernel in any layout: runs on native)
  tf_nhwc          Transpose(NHWC -> NCHW) -> blocks -> Transpose back, input named input:0 (tf2onnx)
  float16          the silu model with float16 weights, input and output (float16 converters)
  dynquant_mlp     what onnxruntime.quantization.quantize_dynamic writes for a transformer feed-forward block
                   (128 tokens, 768 -> 3072 -> 768): DynamicQuantizeLinear -> MatMulInteger (int8 weights,
                   symmetric, per tensor) -> Cast -> Mul(x_scale * w_scale) -> Add(bias), twice, Relu between
  dynquant_conv    the same for convolutions (ConvInteger -> Cast -> Mul -> Add(bias[1, C, 1, 1]) -> Relu)

Usage: /usr/bin/python3 bench/run_exporter_zoo.py [--threads 1,2] [--iterations 50] [--models se,silu]
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import add_common_arguments, ensure_onnxruntime, ort_median, tessera_median  # noqa: E402

C, H, W = 32, 56, 56


class Builder:
    def __init__(self, name, dtype=np.float32):
        self.name, self.dtype, self.nodes, self.inits, self.count = name, dtype, [], [], 0
        self.rng = np.random.default_rng(sum(map(ord, name)))

    def fresh(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, array):
        name = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array, self.dtype), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, cin=C, cout=C, k=3):
        w = self.const(self.rng.standard_normal((cout, cin, k, k)) * (1.0 / math.sqrt(cin * k * k)))
        return self.node("Conv", [x, w], pads=[k // 2] * 4)


def idiom(b, kind, x):
    if kind == "se":
        g = b.node("GlobalAveragePool", [x])
        s = b.node("Sigmoid", [b.conv(b.node("Relu", [b.conv(g, C, 8, 1)]), 8, C, 1)])
        return b.node("Mul", [x, s])
    if kind == "paddle_hardswish":
        six = b.const(6.0)
        c = b.node("Clip", [b.node("Add", [x, b.const(3.0)]), b.const(0.0), six])
        return b.node("Mul", [x, b.node("Div", [c, six])])
    if kind == "paddle_hardsig":
        gate = b.node("Clip", [b.node("Add", [b.node("Mul", [x, b.const(0.2)]), b.const(0.5)]), b.const(0.0), b.const(1.0)])
        return b.node("Mul", [x, gate])
    if kind in ("silu", "tf_nhwc", "float16"):
        return b.node("Mul", [x, b.node("Sigmoid", [x])])
    if kind == "row_broadcast":
        return b.node("Mul", [x, "m"])
    raise ValueError(kind)


def quantize_weight(w):
    """quantize_dynamic's weights: int8, symmetric, per tensor (scale = 2 * max|w| / 255, zero point 0)."""
    scale = np.float32(2.0 * np.abs(w).max() / 255.0)
    return np.clip(np.rint(w / scale), -128, 127).astype(np.int8), scale


def dynamic_quantized(b, x, w, bias_shape, product, **attrs):
    """x -> DynamicQuantizeLinear -> product (MatMulInteger or ConvInteger) -> Cast -> Mul(scales) -> Add(bias)."""
    w_q, w_scale = quantize_weight(w)
    q = b.fresh("dql")
    b.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [q, q + "_scale", q + "_zero_point"], name=q))
    names = [b.fresh("w_q"), b.fresh("w_scale"), b.fresh("w_zero_point")]
    b.inits += [numpy_helper.from_array(w_q, names[0]), numpy_helper.from_array(np.array(w_scale), names[1]),
                numpy_helper.from_array(np.array(0, np.int8), names[2])]
    acc = b.node(product, [q, names[0], q + "_zero_point", names[2]], **attrs)
    scale = b.node("Mul", [q + "_scale", names[1]])
    y = b.node("Mul", [b.node("Cast", [acc], to=TensorProto.FLOAT), scale])
    return b.node("Add", [y, b.const(b.rng.standard_normal(bias_shape) * 0.1)])


def build_dynquant(kind, folder):
    b = Builder(kind)
    if kind == "dynquant_mlp":
        shape, dims = [128, 768], [768, 3072, 768]
        x = "x"
        for i in range(2):
            w = b.rng.standard_normal((dims[i], dims[i + 1])).astype(np.float32) / math.sqrt(dims[i])
            x = dynamic_quantized(b, x, w, [dims[i + 1]], "MatMulInteger")
            if i == 0:
                x = b.node("Relu", [x])
    else:
        shape = [1, C, H, W]
        x = "x"
        for _ in range(3):
            w = b.rng.standard_normal((C, C, 3, 3)).astype(np.float32) / math.sqrt(C * 9)
            x = b.node("Relu", [dynamic_quantized(b, x, w, [1, C, 1, 1], "ConvInteger", pads=[1] * 4)])
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(b.nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], b.inits)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    f = os.path.join(folder, "x.npy")
    np.save(f, np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    return path, [("x", f)]


def build(kind, folder):
    if kind.startswith("dynquant"):
        return build_dynquant(kind, folder)
    dtype = np.float16 if kind == "float16" else np.float32
    elem = TensorProto.FLOAT16 if kind == "float16" else TensorProto.FLOAT
    b = Builder(kind, dtype)
    inputs = [("x", [1, C, H, W])]
    x = "x"
    if kind == "tf_nhwc":
        inputs = [("input:0", [1, H, W, C])]
        x = b.node("Transpose", ["input:0"], perm=[0, 3, 1, 2])
    if kind == "row_broadcast":
        inputs.append(("m", [1, C, H, 1]))
    for _ in range(3):
        x = idiom(b, kind, b.conv(x))
    if kind == "tf_nhwc":
        x = b.node("Transpose", [x], perm=[0, 2, 3, 1])
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(b.nodes, kind, [helper.make_tensor_value_info(n, elem, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", elem, None)], b.inits)
    opset = 11 if kind.startswith("paddle") else 13
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    files = []
    rng = np.random.default_rng(1)
    for n, s in inputs:
        f = os.path.join(folder, n.replace(":", "_") + ".npy")
        np.save(f, rng.standard_normal(s).astype(dtype))
        files.append((n, f))
    return path, files


MODELS = ["se", "paddle_hardswish", "paddle_hardsig", "silu", "row_broadcast", "tf_nhwc", "float16", "dynquant_mlp", "dynquant_conv"]


def main():
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.set_defaults(iterations=50)
    args = parser.parse_args()
    ensure_onnxruntime()
    ratios = {}
    print("%-17s %7s %12s %15s %7s" % ("model", "threads", "tessera ms", "onnxruntime ms", "ratio"))
    for kind in args.models.split(","):
        path, inputs = build(kind, os.path.join(args.work, "zoo", kind))
        for threads in [int(t) for t in args.threads.split(",")]:
            theirs = ort_median(path, inputs, threads, args.warmup, args.iterations)
            ours = tessera_median(os.path.abspath(args.tessera), path, inputs, threads, args.warmup, args.iterations, None)
            ratios.setdefault(threads, []).append(ours / theirs)
            print("%-17s %7d %12.3f %15.3f %7.2f" % (kind, threads, ours, theirs, ours / theirs), flush=True)
    for threads, values in ratios.items():
        print("geometric mean, %d thread%s: %.2f" % (threads, "" if threads == 1 else "s",
                                                     math.exp(sum(map(math.log, values)) / len(values))))


if __name__ == "__main__":
    main()
