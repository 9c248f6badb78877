"""Dynamically quantized models (issue 23, section 3), in the form onnxruntime.quantization.quantize_dynamic
writes them: DynamicQuantizeLinear on the activation, MatMulInteger / ConvInteger against int8 weights
(symmetric, per tensor or per channel), Cast to float, Mul by x_scale * w_scale, Add the bias. Each model
also exposes its int32 products, which must equal a numpy int64 reference exactly (the integer tensors
before rescaling), and its float output, which must equal numpy's float32 rescaling within float32
rounding. The reference quantizes with ONNX's DynamicQuantizeLinear formulas written out in numpy
(np.rint rounds half to even). On the machine this was written on, ONNX Runtime 1.30's outputs on the
same files were bit-identical to Tessera's (bench/run_exporter_zoo.py --models dynquant_mlp,dynquant_conv
with ORT_OUTPUTS set)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

RNG = np.random.default_rng(23)


def quantize_weight(w, axis=None):
    """quantize_dynamic's int8 weights: symmetric, scale = 2 * max|w| / 255, zero point 0."""
    absmax = np.abs(w).max() if axis is None else np.abs(w).reshape(w.shape[0], -1).max(axis=1)
    scale = (2.0 * absmax / 255.0).astype(np.float32)
    s = scale if axis is None else scale.reshape((-1,) + (1,) * (w.ndim - 1))
    return np.clip(np.rint(w / s), -128, 127).astype(np.int8), scale


def dynamic_quantize(x):
    """DynamicQuantizeLinear in numpy, in float32 as the spec's function body computes it."""
    lo, hi = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
    scale = np.float32((hi - lo) / np.float32(255)) if hi != lo else np.float32(1)
    zero_point = np.float32(np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)))
    q = np.clip(np.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)
    return q, scale, np.uint8(zero_point)


def conv_int64(x, w, pad):
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.int64))


def build(path, kind, per_channel=False):
    """Two quantized layers with Relu between; outputs y (float), p0 and p1 (the int32 products)."""
    nodes, inits, weights = [], [], []
    x = "x"
    for i in range(2):
        if kind == "matmul":
            w = (RNG.standard_normal((48, 40) if i == 0 else (40, 24)) / 6).astype(np.float32)
            bias = (RNG.standard_normal(w.shape[1]) * 0.1).astype(np.float32)
        else:
            w = (RNG.standard_normal((8, 3, 3, 3) if i == 0 else (6, 8, 3, 3)) / 4).astype(np.float32)
            bias = (RNG.standard_normal((1, w.shape[0], 1, 1)) * 0.1).astype(np.float32)
        w_q, w_scale = quantize_weight(w, axis=0 if per_channel else None)
        w_zp = np.zeros(w_scale.shape, np.int8)
        inits += [numpy_helper.from_array(w_q, "w%d" % i), numpy_helper.from_array(np.asarray(w_scale), "ws%d" % i),
                  numpy_helper.from_array(w_zp, "wz%d" % i), numpy_helper.from_array(bias, "b%d" % i)]
        scale_name = "ws%d" % i
        if per_channel:  # the product's channel axis: [1, C, 1, 1]
            inits.append(numpy_helper.from_array(np.array([1, -1, 1, 1], np.int64), "shape%d" % i))
            nodes.append(helper.make_node("Reshape", ["ws%d" % i, "shape%d" % i], ["wsr%d" % i]))
            scale_name = "wsr%d" % i
        product = "MatMulInteger" if kind == "matmul" else "ConvInteger"
        attrs = {} if kind == "matmul" else {"pads": [1, 1, 1, 1]}
        nodes += [helper.make_node("DynamicQuantizeLinear", [x], ["q%d" % i, "qs%d" % i, "qz%d" % i]),
                  helper.make_node(product, ["q%d" % i, "w%d" % i, "qz%d" % i, "wz%d" % i], ["p%d" % i], **attrs),
                  helper.make_node("Mul", ["qs%d" % i, scale_name], ["s%d" % i]),
                  helper.make_node("Cast", ["p%d" % i], ["f%d" % i], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["f%d" % i, "s%d" % i], ["m%d" % i]),
                  helper.make_node("Add", ["m%d" % i, "b%d" % i], ["a%d" % i])]
        x = "a%d" % i
        if i == 0:
            nodes.append(helper.make_node("Relu", [x], ["r0"]))
            x = "r0"
        weights.append((w_q, w_scale, bias))
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    shape = [5, 48] if kind == "matmul" else [2, 3, 10, 10]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(n, t, None) for n, t in
                               (("y", TensorProto.FLOAT), ("p0", TensorProto.INT32), ("p1", TensorProto.INT32))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return shape, weights


def reference(x, kind, weights):
    products = []
    for i, (w_q, w_scale, bias) in enumerate(weights):
        q, scale, zp = dynamic_quantize(x)
        a = q.astype(np.int64) - np.int64(zp)
        p = a @ w_q.astype(np.int64) if kind == "matmul" else conv_int64(a, w_q, 1)
        products.append(p.astype(np.int32))
        s = scale * w_scale
        if np.ndim(w_scale) == 1:
            s = (scale * w_scale).astype(np.float32).reshape(1, -1, 1, 1)
        x = (p.astype(np.float32) * np.float32(s) if np.ndim(s) == 0 else p.astype(np.float32) * s) + bias
        if i == 0:
            x = np.maximum(x, 0)
    return x.astype(np.float32), products


@pytest.mark.parametrize("kind,per_channel,threads", [("matmul", False, 1), ("matmul", False, 2), ("conv", False, 1),
                                                      ("conv", True, 2)])
def test_dynamically_quantized_model_matches_integer_reference(tmp_path, kind, per_channel, threads):
    path = str(tmp_path / "model.onnx")
    shape, weights = build(path, kind, per_channel)
    session = tessera.InferenceSession(path, threads=threads)
    for seed in range(4):
        # Inputs with negative and positive ranges of different widths, one all positive, and one of
        # halves over [0, 255] (scale exactly 1: every odd half is a tie, rounded to even).
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * (1 + seed)
        if seed == 2:
            x = np.abs(x)
        if seed == 3:
            x = (np.random.default_rng(seed).integers(0, 511, shape) / 2).astype(np.float32)
            x.flat[0], x.flat[1] = 0, 255
        y, p0, p1 = session.run(["y", "p0", "p1"], {"x": x})
        expected_y, (e0, e1) = reference(x, kind, weights)
        assert p0.dtype == np.int32 and np.array_equal(p0, e0), np.abs(p0.astype(np.int64) - e0).max()
        assert np.array_equal(p1, e1), np.abs(p1.astype(np.int64) - e1).max()
        # The rescaling is two float32 operations (possibly fused into one FMA): float32 rounding of y.
        bound = 4 * np.finfo(np.float32).eps * np.abs(expected_y).max()
        error = np.abs(y - expected_y).max()
        assert not np.isnan(y).any() and error <= bound, (error, bound)


@pytest.mark.parametrize("threads", [1, 2])
def test_products_that_saturate_pmaddubsw_stay_exact(tmp_path, threads):
    """u8 255 x s8 127 in every position: each pair of products is 64770, beyond the int16 that AVX2's
    vpmaddubsw sums pairs into. ONNX Runtime 1.30 on an AVX2 CPU without VNNI answers 1048544 (32 saturated
    pairs) where the spec's answer is 2072640; Tessera must give the exact sum on every CPU, both for the
    bare MatMulInteger and for the rescaled form a backend's int8 matmul pattern could claim."""
    w = np.full((64, 16), 127, np.int8)
    nodes = [helper.make_node("MatMulInteger", ["a", "w", "az", "wz"], ["p"]),
             helper.make_node("Cast", ["p"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "scale"], ["y"])]
    graph = helper.make_graph(
        nodes, "saturation", [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 64])],
        [helper.make_tensor_value_info("p", TensorProto.INT32, None), helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, np.uint8), "az"),
         numpy_helper.from_array(np.array(0, np.int8), "wz"), numpy_helper.from_array(np.array(0.5, np.float32), "scale")])
    path = str(tmp_path / "saturation.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    a = np.full((4, 64), 255, np.uint8)
    a[1, ::2] = 0  # a row whose pairs do not saturate
    p, y = tessera.InferenceSession(path, threads=threads).run(None, {"a": a})
    expected = a.astype(np.int64) @ w.astype(np.int64)
    assert np.array_equal(p, expected), p[:, 0]
    assert np.array_equal(y, (expected * 0.5).astype(np.float32)), y[:, 0]
