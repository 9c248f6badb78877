"""Never a slow kernel by accident (issue 23, section 1): the idioms that sent oneDNN to its reference
kernels (impl "ref:any", 100-400x slower than its JIT ones) on blocked layouts, each checked three ways:
oneDNN's own verbose log of what it executed (ONEDNN_VERBOSE=1, read from the CLI's stderr: no kernel
runs as "ref:" on a large tensor), where the node ran and why, and the numbers against numpy.

- squeeze-excite: Mul(x[1,C,H,W], s[1,C,1,1]) with x blocked (EfficientNet, RegNetY, MobileNetV3);
- HardSwish written with scalar constants, as paddle2onnx writes it: Add(x, 3) -> Clip(0, 6) -> Div(6)
  -> Mul(x);
- a broadcast oneDNN 2.6 has no JIT kernel for in any layout (x[1,C,H,W] * m[1,C,H,1]): the guard finds
  only "ref:any" when compiling, the node goes to native with that reason, and --place can still force
  it onto dnnl (with a warning);
- scalar arithmetic on either side (c - x, c * x, x / c, x / 0), computed as oneDNN eltwise_linear;
- a float32 MatMul that oneDNN answers with gemm:jit below AVX-512 (up to 2x slower than native): the node
  goes to native with that reason, the bias and GELU after it still fuse on oneDNN.
"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import cpu_isa  # noqa: E402

CLI = os.environ.get("TESSERA_CLI")
C, H, W = 32, 28, 28
RNG = np.random.default_rng(23)
W0 = (RNG.standard_normal((C, C, 3, 3)) * 0.1).astype(np.float32)


def conv3x3(x, w):
    """An independent reference: a 3x3 convolution with padding 1, in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def save(tmp_path, name, nodes, inputs, inits):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / (name + ".onnx"))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    return path


def scalar(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def executed(path, *args):
    """What oneDNN executed in the CLI's run (ONEDNN_VERBOSE=1): dicts of primitive, impl, layouts (the
    format tag of each memory descriptor, in order) and problem; and the run's stderr."""
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    run = subprocess.run([CLI, "run", path, "--random-inputs", *args], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    steps = []
    for line in (run.stdout + run.stderr).splitlines():
        fields = line.split(",")
        # onednn_verbose,exec,cpu,PRIMITIVE,IMPLEMENTATION,PROP,MEMORY DESCRIPTORS,ATTRIBUTES,AUX,PROBLEM,TIME
        if len(fields) < 10 or fields[1] != "exec":
            continue
        layouts = [d.split(":")[3] for d in fields[6].split() if d.count(":") >= 4]
        steps.append({"primitive": fields[3], "impl": fields[4], "layouts": layouts, "aux": fields[-3],
                      "attributes": fields[7], "problem": fields[-2]})
    return steps, run.stderr


def reference_kernels(path, *args):
    """The large oneDNN primitives the CLI's run executed on a reference kernel: (primitive, problem)."""
    steps, stderr = executed(path, *args)
    slow = []
    for step in steps:
        if step["impl"].startswith("ref"):
            dims = [int(d) for d in re.findall(r"\d+", step["problem"].split(":")[0])]
            if np.prod(dims) >= 1024:
                slow.append((step["primitive"], step["problem"]))
    return slow, stderr


def placement_of(session):
    return {p["node"]: (p["backend"], p["reason"], p["note"]) for p in session.placement()}


def test_squeeze_excite_multiply_runs_on_a_jit_kernel(tmp_path):
    w1 = (RNG.standard_normal((8, C, 1, 1)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((C, 8, 1, 1)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("GlobalAveragePool", ["a"], ["g"], name="pool"),
             helper.make_node("Conv", ["g", "w1"], ["g1"], name="squeeze"),
             helper.make_node("Relu", ["g1"], ["g2"], name="relu"),
             helper.make_node("Conv", ["g2", "w2"], ["g3"], name="excite"),
             helper.make_node("Sigmoid", ["g3"], ["s"], name="gate"),
             helper.make_node("Mul", ["a", "s"], ["y"], name="scale")]
    path = save(tmp_path, "se", nodes, [("x", [1, C, H, W])],
                [numpy_helper.from_array(W0, "w0"), numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    slow, _ = reference_kernels(path)
    assert slow == [], slow
    # The multiply reads the convolution's output in the layout the convolution wrote (blocked where
    # oneDNN chose so), with the per-channel scale laid out alike: no reorder to plain and back around it.
    steps, _ = executed(path)
    # (The run's own primitives are the last ones logged: compiling times candidate convolutions first.)
    conv = [s for s in steps if s["primitive"] == "convolution" and s["problem"].startswith("mb1_ic32oc32")][-1]
    muls = [s for s in steps if s["primitive"] == "binary"]
    # Below AVX2 (the SSE4.1-capped run) oneDNN has no JIT binary for a blocked broadcast: the guard's
    # plain layouts are right there (measured: jit:uni on abcd, the convolution's output reordered).
    if cpu_isa.dnnl_avx2():
        # The scale is [1, C, 1, 1]: with H = W = 1, plain (abcd) and channels-last (acdb) are the same bytes,
        # so either matches a channels-last convolution (which one oneDNN prints depends on the convolution
        # that compile-time measurement picked: a blocked one on a quiet machine, brgconv's acdb under load).
        def alike(scale_tag, tag):
            return scale_tag == tag or {scale_tag, tag} == {"abcd", "acdb"}
        assert muls and muls[-1]["layouts"][0] == conv["layouts"][-1], (muls, conv)
        assert alike(muls[-1]["layouts"][1], conv["layouts"][-1]), (muls, conv)
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    y = session.run(None, {"x": x})[0]
    a = conv3x3(x, W0)
    g = a.mean(axis=(2, 3), keepdims=True)
    g2 = np.maximum(np.einsum("nchw,oc->nohw", g, w1[:, :, 0, 0]), 0)
    s = 1 / (1 + np.exp(-np.einsum("nchw,oc->nohw", g2, w2[:, :, 0, 0])))
    np.testing.assert_allclose(y, a * s, rtol=1e-4, atol=1e-4 * np.abs(a).max())
    if cpu_isa.dnnl_avx2():  # below AVX2, which kernels oneDNN has is its own business; the guard covers it
        assert placement_of(session)["scale"][0] == "dnnl", placement_of(session)["scale"]


def test_hardswish_written_with_scalar_constants_runs_on_jit_kernels(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Add", ["a", "three"], ["b"], name="add3"),
             helper.make_node("Clip", ["b", "zero", "six"], ["c"], name="relu6"),
             helper.make_node("Div", ["c", "six"], ["d"], name="div6"),
             helper.make_node("Mul", ["a", "d"], ["y"], name="mul")]
    path = save(tmp_path, "hardswish", nodes, [("x", [1, C, H, W])],
                [numpy_helper.from_array(W0, "w0"), scalar("three", 3.0), scalar("zero", 0.0), scalar("six", 6.0)])
    slow, _ = reference_kernels(path)
    assert slow == [], slow
    session = tessera.InferenceSession(path)
    x = (RNG.standard_normal((1, C, H, W)) * 8).astype(np.float32)  # across the -3 and 3 knees
    y = session.run(None, {"x": x})[0]
    a = conv3x3(x, W0)
    np.testing.assert_allclose(y, a * np.clip(a + 3, 0, 6) / 6, rtol=1e-4, atol=1e-4 * np.abs(a).max())
    if cpu_isa.dnnl_avx2():
        where = placement_of(session)
        assert {where[n][0] for n in ("add3", "relu6", "div6", "mul")} == {"dnnl"}, where


def row_broadcast_model(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Mul", ["a", "m"], ["y"], name="rows")]
    return save(tmp_path, "rows", nodes, [("x", [1, C, H, W]), ("m", [1, C, H, 1])], [numpy_helper.from_array(W0, "w0")])


def test_a_node_with_only_a_reference_kernel_goes_to_native_with_the_reason(tmp_path):
    path = row_broadcast_model(tmp_path)
    slow, _ = reference_kernels(path)
    assert slow == [], slow
    session = tessera.InferenceSession(path)
    backend, reason, _ = placement_of(session)["rows"]
    assert backend == "native", (backend, reason)
    assert "dnnl refused it when compiling it: oneDNN has only its reference kernel (ref:" in reason, reason
    assert placement_of(session)["conv"][0] == "dnnl"
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    m = RNG.standard_normal((1, C, H, 1)).astype(np.float32)
    y = session.run(None, {"x": x, "m": m})[0]
    a = conv3x3(x, W0)
    np.testing.assert_allclose(y, a * m, rtol=1e-4, atol=1e-4 * np.abs(a * m).max())


def test_a_placement_that_forces_the_slow_kernel_is_kept_and_warned_about(tmp_path):
    path = row_broadcast_model(tmp_path)
    slow, stderr = reference_kernels(path, "--place", "rows=dnnl")
    assert slow and slow[0][0] == "binary", slow  # what the user asked for
    assert "node 'rows' (Mul) runs on dnnl, which refused it: oneDNN has only its reference kernel" in stderr, stderr
    with pytest.warns(RuntimeWarning, match="runs on dnnl, which refused it"):
        session = tessera.InferenceSession(path, place={"rows": "dnnl"})
    backend, _, note = placement_of(session)["rows"]
    assert backend == "dnnl" and "oneDNN has only its reference kernel" in note, (backend, note)


@pytest.mark.parametrize("op, scalar_first, c", [
    ("Sub", True, 1.5), ("Sub", False, 1.5), ("Add", True, -2.0), ("Mul", True, 3.0), ("Div", False, 6.0),
    ("Div", False, 0.0), ("Div", False, -0.0), ("Div", True, 2.0), ("Mul", False, 0.0)])
def test_scalar_arithmetic_on_either_side(tmp_path, op, scalar_first, c):
    """The convolution's output `a` (blocked inside the region) is an output too: the op is checked against
    numpy on exactly the `a` it read, and `a` against the float64 convolution."""
    operands = ["c", "a"] if scalar_first else ["a", "c"]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node(op, operands, ["y"], name="op")]
    graph = helper.make_graph(nodes, "scalar", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("a", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(W0, "w0"), scalar("c", c)])
    path = str(tmp_path / "scalar.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]  # through the conv: NaN and Inf spread over a corner
    y, a = session.run(None, {"x": x})
    reference = conv3x3(x, W0)
    both = np.isfinite(reference)
    assert np.array_equal(np.isfinite(a), both)
    np.testing.assert_allclose(a[both], reference[both], rtol=1e-4, atol=1e-4 * np.abs(reference[both]).max())
    with np.errstate(all="ignore"):
        lhs, rhs = (np.float32(c), a) if scalar_first else (a, np.float32(c))
        expected = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op](lhs, rhs)
    assert expected.dtype == np.float32 and y.dtype == np.float32
    assert np.array_equal(np.isnan(y), np.isnan(expected)), (op, c, np.isnan(y).sum(), np.isnan(expected).sum())
    assert np.array_equal(np.isposinf(y), np.isposinf(expected)) and np.array_equal(np.isneginf(y), np.isneginf(expected))
    finite = np.isfinite(expected)
    # x / c is computed as x * (1 / c): within two float32 roundings of the quotient.
    np.testing.assert_allclose(y[finite], expected[finite], rtol=3e-7, atol=0)
    if cpu_isa.dnnl_avx2() and not (op == "Div" and scalar_first):  # c / x is no eltwise: a blocked binary
        assert placement_of(session)["op"][0] == "dnnl", placement_of(session)["op"]


@pytest.mark.parametrize("order", ["x_first", "sigmoid_first"])
def test_silu_written_as_x_times_sigmoid_is_one_swish(tmp_path, order):
    """SiLU as exporters write it (EfficientNet, RegNetY, YOLO): Conv -> Sigmoid -> Mul(conv, sigmoid), and
    the same after an Add of two inputs. Each fuses into one oneDNN swish (a post-op of the convolution,
    an eltwise step after the Add): no Sigmoid or binary multiply runs on its own. NaN and -Inf inputs give
    numpy's answers (-Inf * sigmoid(-Inf) is NaN)."""
    def silu(name):
        operands = ["%s_in" % name, "%s_sig" % name]
        return [helper.make_node("Sigmoid", ["%s_in" % name], ["%s_sig" % name], name=name + "_sigmoid"),
                helper.make_node("Mul", operands if order == "x_first" else operands[::-1], ["%s_out" % name],
                                 name=name + "_mul")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a_in"], pads=[1, 1, 1, 1], name="conv")] + silu("a")
    nodes += [helper.make_node("Add", ["a_out", "x"], ["b_in"], name="add")] + silu("b")
    nodes += [helper.make_node("Identity", ["b_out"], ["y"], name="out")]
    path = save(tmp_path, "silu", nodes, [("x", [1, C, H, W])], [numpy_helper.from_array(W0, "w0")])
    steps, _ = executed(path)
    assert not [s for s in steps if "binary_mul" in s["aux"]], steps  # the multiplies are fused
    assert not [s for s in steps if "logistic" in s["aux"] + s["attributes"]], steps
    assert len([s for s in steps if "swish" in s["aux"] + s["attributes"]]) >= 2, steps
    session = tessera.InferenceSession(path)
    if cpu_isa.dnnl_avx2():
        where = placement_of(session)
        assert where["a_mul"][0] == "dnnl" and "fused into 'conv'" in where["a_mul"][2], where["a_mul"]
        assert where["b_mul"][0] == "dnnl" and "pattern" in where["b_sigmoid"][2] + where["b_mul"][2], where
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32) * 3
    a = conv3x3(x, W0)
    a = a / (1 + np.exp(-a))
    b = a + x
    np.testing.assert_allclose(session.run(None, {"x": x})[0], b / (1 + np.exp(-b)), rtol=1e-4, atol=1e-5)
    x[0, 3, 4, 5] = np.nan
    x[0, 7, 0, 0] = -np.inf
    y = session.run(None, {"x": x})[0]
    with np.errstate(all="ignore"):
        a = conv3x3(x, W0)
        a = a * (1 / (1 + np.exp(-a)))
        b = a + x
        expected = b * (1 / (1 + np.exp(-b)))
    assert np.array_equal(np.isnan(y), np.isnan(expected)), (np.isnan(y).sum(), np.isnan(expected).sum())
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("order", ["x_first", "gate_first"])
def test_hardswish_written_as_x_times_hardsigmoid_is_one_hardswish(tmp_path, order):
    """torch exports nn.Hardswish below opset 14 as x * HardSigmoid(x, alpha=1/6, beta=1/2) (torchvision's
    MobileNetV3: 19 of them). After a Conv or an Add it is one hardswish post-op, on a graph input one
    eltwise_hardswish step: no linear, clip or binary multiply of its own. A HardSigmoid with other constants (a gate,
    0.2 x + 0.4) multiplied by its input is not a HardSwish and stays a linear + clip and a multiply."""
    def product(name, alpha, beta):
        operands = ["%s_in" % name, "%s_gate" % name]
        return [helper.make_node("HardSigmoid", ["%s_in" % name], ["%s_gate" % name], alpha=alpha, beta=beta,
                                 name=name + "_hardsigmoid"),
                helper.make_node("Mul", operands if order == "x_first" else operands[::-1], ["%s_out" % name],
                                 name=name + "_mul")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a_in"], pads=[1, 1, 1, 1], name="conv")]
    nodes += product("a", float(np.float32(1 / 6)), 0.5)
    nodes += [helper.make_node("Add", ["a_out", "x"], ["b_in"], name="add")] + product("b", float(np.float32(1 / 6)), 0.5)
    nodes += [helper.make_node("Add", ["b_out", "x"], ["c_in"], name="add2")] + product("c", 0.2, 0.4)
    nodes += [helper.make_node("Identity", ["x"], ["d_in"], name="d_input")] + product("d", float(np.float32(1 / 6)), 0.5)
    nodes += [helper.make_node("Add", ["c_out", "d_out"], ["y"], name="out")]
    path = save(tmp_path, "hardswish_product", nodes, [("x", [1, C, H, W])], [numpy_helper.from_array(W0, "w0")])
    steps, _ = executed(path)
    if cpu_isa.dnnl_avx2():
        # One hardswish on the convolution, one on the Add (a post-op of its binary), one on the input;
        # the only linear eltwise and multiply are the 0.2 / 0.4 gate's.
        carriers = {s["primitive"] for s in steps if "hardswish" in s["aux"] + s["attributes"]}
        assert carriers == {"convolution", "binary", "eltwise"}, steps
        assert all("alpha:0.2 " in s["aux"] + " " for s in steps if "eltwise_linear" in s["aux"]), steps
        assert len({s["problem"] for s in steps if "binary_mul" in s["aux"]}) == 1, steps
        where = placement_of(tessera.InferenceSession(path))
        assert where["a_mul"][0] == "dnnl" and "fused into 'conv'" in where["a_mul"][2], where["a_mul"]
        assert where["b_mul"][0] == "dnnl" and "fused into 'add'" in where["b_mul"][2], where["b_mul"]
        assert "pattern HardSwishProduct" in where["d_mul"][1] + where["d_hardsigmoid"][1], where
        assert "HardSwishProduct" not in where["c_mul"][2] + where["c_hardsigmoid"][2], where
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32) * 4
    x[0, 1, 2, 3] = -3.0  # the kinks of relu6(x + 3)
    x[0, 1, 2, 4] = 3.0
    a = conv3x3(x, W0)
    a = a * np.clip(a + 3, 0, 6) / 6
    b = a + x
    b = b * np.clip(b + 3, 0, 6) / 6
    c = b + x
    expected = c * np.clip(0.2 * c + 0.4, 0, 1) + x * np.clip(x + 3, 0, 6) / 6
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels,batch", [((16, 8, 24), 2), ((16, 3, 8), 1), ((8, 16), 3)])
def test_channel_concat_of_convolutions_matches_numpy(tmp_path, channels, batch):
    """The fire / dense / inception blocks: convolutions concatenated on the channel axis inside one oneDNN
    region (blocked layouts). oneDNN 2.6's blocked-layout concat ran at about 2 GB/s (SqueezeNet's Concats:
    21% of the model); where each input is one contiguous run of the output per image, the concatenation
    is memcpys now. Channel counts that are multiples of the block (8 on AVX2, 16 on AVX-512) and ones
    that are not (3: oneDNN's own concat), batches 1-3, and a second concat on the spatial axis; against
    numpy. The Concat must be on oneDNN (in one region with its convolutions) where oneDNN has JIT kernels."""
    ws = [(RNG.standard_normal((c, C, 3, 3)) * 0.1).astype(np.float32) for c in channels]
    nodes = [helper.make_node("Conv", ["x", "w%d" % i], ["c%d" % i], pads=[1, 1, 1, 1], name="conv%d" % i)
             for i in range(len(channels))]
    nodes += [helper.make_node("Relu", ["c%d" % i], ["r%d" % i], name="relu%d" % i) for i in range(len(channels))]
    nodes += [helper.make_node("Concat", ["r%d" % i for i in range(len(channels))], ["cat"], axis=1, name="concat"),
              helper.make_node("Concat", ["cat", "cat"], ["y"], axis=2, name="concat_h")]
    path = save(tmp_path, "concat", nodes, [("x", [batch, C, H, W])],
                [numpy_helper.from_array(w, "w%d" % i) for i, w in enumerate(ws)])
    session = tessera.InferenceSession(path)
    if cpu_isa.dnnl_avx2():
        where = placement_of(session)
        assert where["concat"][0] == "dnnl", where["concat"]
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((batch, C, H, W)).astype(np.float32)
        cat = np.concatenate([np.maximum(conv3x3(x, w), 0) for w in ws], axis=1)
        expected = np.concatenate([cat, cat], axis=2)
        y = session.run(None, {"x": x})[0]
        assert y.shape == expected.shape, y.shape
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def dilated_conv(x, w, dilation, pad):
    """A 2-D convolution with dilation and symmetric padding, tap by tap in float64 (independent reference)."""
    n, c, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out_h, out_w = h + 2 * pad - dilation * (k - 1), wd + 2 * pad - dilation * (k - 1)
    y = np.zeros((n, w.shape[0], out_h, out_w))
    with np.errstate(invalid="ignore"):
        for i in range(k):
            for j in range(k):
                patch = xp[:, :, i * dilation:i * dilation + out_h, j * dilation:j * dilation + out_w]
                y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return y


@pytest.mark.parametrize("dilation,trimmed", [(12, True), (36, True), (6, False), (1, False)])
def test_dilated_convolution_taps_that_read_only_padding_are_dropped(tmp_path, dilation, trimmed):
    """DeepLabV3's ASPP: 3x3 convolutions with dilation 12, 24, 36 and as much padding, on an 8x8 map.
    Every tap but the centre reads padding for every output position: the convolution is the 1x1 of its
    centre weights (2.25x ONNX Runtime on DeepLabV3-MobileNetV3 before; the ASPP took 10.5 of its 21 ms).
    Dilation 6 reaches the map from every tap (nothing to drop). Against a float64 tap-by-tap reference;
    a NaN weight on a dropped tap still makes every output NaN (0 * NaN), so that tap stays."""
    w = (RNG.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[dilation] * 4, dilations=[dilation] * 2, name="aspp"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    path = save(tmp_path, "aspp", nodes, [("x", [2, 16, 8, 8])], [numpy_helper.from_array(w, "w")])
    x = RNG.standard_normal((2, 16, 8, 8)).astype(np.float32)
    expected = np.maximum(dilated_conv(x, w, dilation, dilation), 0)
    y = tessera.InferenceSession(path).run(None, {"x": x})[0]
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    if cpu_isa.dnnl_avx2():
        steps, _ = executed(path)
        kernels = {re.search(r"kh(\d+)", s["problem"]).group(1) for s in steps if s["primitive"] == "convolution"}
        assert kernels == ({"1"} if trimmed else {"3"}), (kernels, steps)
    w[0, 0, 0, 0] = np.nan  # a tap that reads only padding when dilation >= 8
    path = save(tmp_path, "aspp_nan", nodes, [("x", [2, 16, 8, 8])], [numpy_helper.from_array(w, "w")])
    y = tessera.InferenceSession(path).run(None, {"x": x})[0]
    with np.errstate(invalid="ignore"):
        expected = np.maximum(dilated_conv(x, w, dilation, dilation), 0)
    assert np.array_equal(np.isnan(y), np.isnan(expected)), (np.isnan(y).sum(), np.isnan(expected).sum())
    np.testing.assert_allclose(y[~np.isnan(y)], expected[~np.isnan(expected)], rtol=1e-5, atol=1e-5)


def test_zero_pad_before_pooling_and_convolution_is_their_padding(tmp_path):
    """torchvision's Inception-v3 exports avg_pool2d(3, 1, padding=1) as Pad -> AveragePool: the Pad ran on
    native, split the oneDNN region, and the pool got a plain layout oneDNN averages on its slow simple_nchw
    kernel (a quarter of the model). A zero Pad whose readers are AveragePools (no padding of their own) and
    Convs becomes their padding (count_include_pad=1 for the pool). A Pad with a non-zero value, and one
    also read by a Relu, stay. Against numpy."""
    w = (RNG.standard_normal((C, C, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1], name="conv0"),
             helper.make_node("Pad", ["a", "pads"], ["p"], mode="constant", name="pad"),
             helper.make_node("AveragePool", ["p"], ["pool"], kernel_shape=[3, 3], name="pool"),
             helper.make_node("Conv", ["p", "w"], ["c"], pads=[1, 1, 1, 1], name="conv1"),  # total padding 2
             helper.make_node("Pad", ["a", "pads", "one"], ["q"], mode="constant", name="pad_one"),
             helper.make_node("AveragePool", ["q"], ["pool_one"], kernel_shape=[3, 3], name="pool_one"),
             helper.make_node("Pad", ["a", "pads"], ["r"], mode="constant", name="pad_shared"),
             helper.make_node("AveragePool", ["r"], ["pool_shared"], kernel_shape=[3, 3], name="pool_shared"),
             helper.make_node("Relu", ["r"], ["relu"], name="relu"),
             helper.make_node("Concat", ["pool", "pool_one", "pool_shared"], ["cat"], axis=1, name="concat"),
             helper.make_node("ReduceSum", ["relu"], ["relu_sum"], keepdims=1, axes=[1, 2, 3], name="sum"),
             helper.make_node("Add", ["cat", "relu_sum"], ["y0"], name="add"),
             helper.make_node("ReduceSum", ["c"], ["c_sum"], keepdims=1, axes=[1, 2, 3], name="csum"),
             helper.make_node("Add", ["y0", "c_sum"], ["y"], name="out")]
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    path = save(tmp_path, "pads", nodes, [("x", [1, C, H, W])], [numpy_helper.from_array(w, "w"), pads, one])
    session = tessera.InferenceSession(path)
    where = placement_of(session)
    assert where["pad"][0] == "folded", where["pad"]
    assert where["pad_one"][0] != "folded" and where["pad_shared"][0] != "folded", where
    x = RNG.standard_normal((1, C, H, W)).astype(np.float32)
    a = conv3x3(x, w)

    def avg3(v, value):
        vp = np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=value)
        return np.lib.stride_tricks.sliding_window_view(vp, (3, 3), axis=(2, 3)).mean(axis=(4, 5))
    c = conv3x3(np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1))), w)
    cat = np.concatenate([avg3(a, 0), avg3(a, 1), avg3(a, 0)], axis=1)
    relu_sum = np.maximum(np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1))), 0).sum(axis=(1, 2, 3), keepdims=True)
    expected = cat + relu_sum + c.sum(axis=(1, 2, 3), keepdims=True)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-3)
    if cpu_isa.dnnl_avx2():
        assert where["pool"][0] == where["conv1"][0] == "dnnl", where
        steps, _ = executed(path)
        pools = [s for s in steps if s["primitive"].startswith("pooling") and "include_padding" in s["aux"]]
        assert pools and all(s["impl"].startswith("jit") for s in pools), pools


def test_no_op_nodes_cost_nothing(tmp_path):
    """Dropout in inference (ratio 0 or not), Dropout of ratio 0 in training mode (its mask unread), Identity
    and a Cast to the type its input has are removed before partitioning: they used to run as copies on
    native and split the oneDNN region around them in three (a copy each way). A Dropout whose mask is read
    stays."""
    w1 = (RNG.standard_normal((64, 64)) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((64, 64)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("Dropout", ["a", "ratio"], ["b"], name="dropout"),
             helper.make_node("Identity", ["b"], ["c"], name="identity"),
             helper.make_node("Cast", ["c"], ["d"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("MatMul", ["d", "w2"], ["e"], name="mm2"),
             helper.make_node("Identity", ["e"], ["y"], name="out"),
             helper.make_node("Dropout", ["x"], ["z", "mask"], name="masked"),
             # torchvision's Swin: training_mode true with ratio 0, its mask named but read by no node.
             helper.make_node("Dropout", ["x", "zero", "true"], ["t", "unread_mask"], name="ratio0"),
             helper.make_node("Add", ["t", "x"], ["v"], name="after_ratio0")]
    graph = helper.make_graph(nodes, "noops", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64]),
                               helper.make_tensor_value_info("mask", TensorProto.BOOL, [8, 64]),
                               helper.make_tensor_value_info("v", TensorProto.FLOAT, [8, 64])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                               numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
                               numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
                               numpy_helper.from_array(np.array(True), "true")])
    path = str(tmp_path / "noops.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    y, mask, v = session.run(None, {"x": x})
    np.testing.assert_allclose(y, (x.astype(np.float64) @ w1) @ w2, rtol=1e-5, atol=1e-5)
    assert mask.dtype == np.bool_ and mask.all()  # inference: nothing dropped
    np.testing.assert_array_equal(v, x + x)
    where = placement_of(session)
    for name, what in (("dropout", "a Dropout in inference"), ("identity", "an Identity"),
                       ("cast", "a Cast to the type its input has"), ("out", "an Identity"),
                       ("ratio0", "a Dropout of ratio 0")):
        assert where[name][0] == "folded" and where[name][2] == "removed: %s computes nothing" % what, where[name]
    assert where["masked"][0] != "folded", where["masked"]  # its mask is read
    if cpu_isa.dnnl_avx2():
        assert where["mm1"][0] == where["mm2"][0] == "dnnl"
        assert len([r for r in session.regions() if r["backend"] == "dnnl"]) == 1, session.regions()


@pytest.mark.parametrize("backends", [None, ["native"]])
def test_a_transpose_that_moves_only_dims_of_size_1_is_a_view(tmp_path, backends):
    """PyTorch's batch-first transformer layers transpose [1, seq, d] to [seq, 1, d] and back: the elements
    stay in order, so it runs as a Reshape (a view), open dims included (seq may be 1 at run time too).
    A Transpose that reorders dims of other sizes, or that would need two open dims inferred, stays one."""
    w = (RNG.standard_normal((16, 16)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0, 2], name="to_batch_first"),
             helper.make_node("MatMul", ["t1", "w"], ["m"], name="mm"),
             helper.make_node("Transpose", ["m"], ["y"], perm=[1, 0, 2], name="to_seq_first"),
             helper.make_node("Transpose", ["x"], ["r"], perm=[2, 0, 1], name="real"),
             helper.make_node("Transpose", ["q"], ["q1"], perm=[1, 0, 2, 3], name="one_open_moves"),
             helper.make_node("Transpose", ["q"], ["q2"], perm=[1, 2, 0, 3], name="two_open_move")]
    graph = helper.make_graph(
        nodes, "views",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 1, 16]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, ["a", 1, "b", 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "r", "q1", "q2")],
        [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "views.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    session = tessera.InferenceSession(path, backends=backends)
    for seq, a, b in ((5, 3, 4), (1, 1, 1), (33, 2, 7), (5, 3, 4)):
        x = RNG.standard_normal((seq, 1, 16)).astype(np.float32)
        q = RNG.standard_normal((a, 1, b, 8)).astype(np.float32)
        y, r, q1, q2 = session.run(None, {"x": x, "q": q})
        expected = np.transpose(np.transpose(x, (1, 0, 2)).astype(np.float64) @ w, (1, 0, 2))
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(r, np.transpose(x, (2, 0, 1)))
        np.testing.assert_array_equal(q1, np.transpose(q, (1, 0, 2, 3)))
        np.testing.assert_array_equal(q2, np.transpose(q, (1, 2, 0, 3)))
    where = {p["node"]: p for p in session.placement()}
    view_note = "a Transpose that moves only dims of size 1: runs as a Reshape (a view, no copy)"
    for name in ("to_batch_first", "to_seq_first", "one_open_moves"):
        assert where[name]["op_type"] == "Reshape" and where[name]["note"] == view_note, where[name]
    for name in ("real", "two_open_move"):
        assert where[name]["op_type"] == "Transpose" and where[name]["note"] != view_note, where[name]


def test_hardsigmoid_runs_on_onednn_without_splitting_its_region(tmp_path):
    """torchvision's MobileNetV3 exports HardSwish as x * HardSigmoid(x) and its squeeze-excite gates as
    HardSigmoid, which oneDNN 2.6 has no eltwise for: it is an eltwise_linear and a clip there now. On
    native, its 29 HardSigmoid nodes cut the model into 59 regions."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("HardSigmoid", ["a"], ["h"], alpha=1 / 6, beta=0.5, name="hardsigmoid"),
             helper.make_node("Mul", ["a", "h"], ["b"], name="hardswish"),
             helper.make_node("HardSigmoid", ["b"], ["g"], alpha=0.2, beta=0.4, name="gate"),
             helper.make_node("Conv", ["g", "w0"], ["y"], pads=[1, 1, 1, 1], name="conv2")]
    path = save(tmp_path, "hardsigmoid", nodes, [("x", [1, C, H, W])], [numpy_helper.from_array(W0, "w0")])
    slow, _ = reference_kernels(path)
    assert slow == [], slow
    session = tessera.InferenceSession(path)
    if cpu_isa.dnnl_avx2():
        where = placement_of(session)
        assert where["hardsigmoid"][0] == where["gate"][0] == "dnnl", where
        assert len(session.regions()) == 1, session.regions()
    x = (RNG.standard_normal((1, C, H, W)) * 4).astype(np.float32)
    x[0, 2, 3, 4] = np.nan
    for feed in (x, np.nan_to_num(x)):
        with np.errstate(invalid="ignore"):
            a = conv3x3(feed, W0)
            b = a * np.clip(a / 6 + 0.5, 0, 1)
            expected = conv3x3(np.clip(0.2 * b + 0.4, 0, 1), W0)
        y = session.run(None, {"x": feed})[0]
        assert np.array_equal(np.isnan(y), np.isnan(expected)), (np.isnan(y).sum(), np.isnan(expected).sum())
        finite = np.isfinite(expected)
        np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-4, atol=1e-4 * np.abs(expected[finite]).max())


@pytest.mark.parametrize("shape", [[1, 4, 2, 2], [2, 3], [7]])
def test_scalar_arithmetic_with_a_fused_clip_on_small_tensors(tmp_path, shape):
    """Add(x, 3) -> Clip(0, 6) -> Div(6) -> Mul(x) and HardSigmoid on tensors too small for the slow-kernel
    guard: oneDNN 2.6 ran an eltwise with a clip post-op on its reference kernel, which wrote zeros (HardSigmoid
    of [-1, 0, 1] came out [0, 0, 0]); eltwise steps now never keep post-ops."""
    nodes = [helper.make_node("Add", ["x", "three"], ["b"], name="add3"),
             helper.make_node("Clip", ["b", "zero", "six"], ["c"], name="relu6"),
             helper.make_node("Div", ["c", "six"], ["d"], name="div6"),
             helper.make_node("Mul", ["x", "d"], ["e"], name="mul"),
             helper.make_node("HardSigmoid", ["e"], ["y"], alpha=0.5, beta=0.6, name="hardsigmoid")]
    path = save(tmp_path, "small", nodes, [("x", shape)], [scalar("three", 3.0), scalar("zero", 0.0), scalar("six", 6.0)])
    session = tessera.InferenceSession(path)
    x = np.linspace(-5, 5, int(np.prod(shape))).astype(np.float32).reshape(shape)
    e = x * np.clip(x + 3, 0, 6) / 6
    np.testing.assert_allclose(session.run(None, {"x": x})[0], np.clip(0.5 * e + 0.6, 0, 1), rtol=1e-6, atol=1e-6)


def linear_gelu_model(tmp_path, rows, name):
    """MatMul(x[1, rows, 256], w[256, 512]) + bias -> GELU written with Erf, as torch exports nn.Linear + nn.GELU."""
    w = (RNG.standard_normal((256, 512)) * 0.06).astype(np.float32)
    b = (RNG.standard_normal(512) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
             helper.make_node("Div", ["a", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["f"], name="add1"),
             helper.make_node("Mul", ["a", "f"], ["g"], name="mul"),
             helper.make_node("Mul", ["g", "half"], ["y"], name="half")]
    path = save(tmp_path, name, nodes, [("x", [1, rows, 256])],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), scalar("sqrt2", np.sqrt(2.0)),
                 scalar("one", 1.0), scalar("half", 0.5)])
    x = RNG.standard_normal((1, rows, 256)).astype(np.float32)
    a = x.astype(np.float64) @ w.astype(np.float64) + b
    erf = np.vectorize(math.erf)
    return path, x, a * 0.5 * (1 + erf(a / np.sqrt(2.0)))


def test_matmul_on_gemm_jit_below_avx512_runs_on_native(tmp_path):
    """Below AVX-512 oneDNN 2.6 answers a float32 matmul with gemm:jit, up to 2x slower than the native packed
    GEMM: the region compile refuses the MatMul (the fused chain's first member) and the core places it on
    native, while the bias and GELU still fuse on oneDNN. With AVX-512 oneDNN keeps the whole chain."""
    path, x, expected = linear_gelu_model(tmp_path, 64, "linear_gelu")
    session = tessera.InferenceSession(path)
    where = placement_of(session)
    steps, _ = executed(path)
    matmuls = [s for s in steps if s["primitive"] == "matmul"]
    if cpu_isa.dnnl_avx512():
        assert where["matmul"][0] == "dnnl" and where["erf"][0] == "dnnl", where
        assert matmuls and not matmuls[0]["impl"].startswith("gemm"), matmuls
    else:
        backend, reason, _ = where["matmul"]
        assert backend == "native", where
        assert "dnnl refused it when compiling it: oneDNN runs this float32 matmul with gemm:jit" in reason, reason
        assert matmuls == [], matmuls
        assert where["bias"][0] == where["erf"][0] == where["half"][0] == "dnnl", where
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_a_small_matmul_stays_on_onednn_and_a_placement_keeps_the_large_one(tmp_path):
    """A product of few rows is as fast on gemm:jit: not refused. --place keeps a refused one where it was put,
    with a warning."""
    path, x, expected = linear_gelu_model(tmp_path, 4, "small_linear")
    session = tessera.InferenceSession(path)
    assert placement_of(session)["matmul"][0] == "dnnl", placement_of(session)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    path, x, expected = linear_gelu_model(tmp_path, 64, "forced_linear")
    if cpu_isa.dnnl_avx512():
        session = tessera.InferenceSession(path, place={"matmul": "dnnl"})
    else:
        with pytest.warns(RuntimeWarning, match="runs on dnnl, which refused it: oneDNN runs this float32 matmul"):
            session = tessera.InferenceSession(path, place={"matmul": "dnnl"})
    assert placement_of(session)["matmul"][0] == "dnnl", placement_of(session)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def max_pool_reference(a, kernel, strides, pads, dilations, ceil_mode):
    """numpy max pooling (NaN-propagating) of a [N, C, H, W] map; pads = [top, left, bottom, right]."""
    out = []
    for d in range(2):
        span = dilations[d] * (kernel[d] - 1) + 1
        total = a.shape[2 + d] + pads[d] + pads[2 + d] - span
        n = (-(-total // strides[d]) if ceil_mode else total // strides[d]) + 1
        if ceil_mode and (n - 1) * strides[d] >= a.shape[2 + d] + pads[d]:
            n -= 1  # the last window must start inside the map or its begin padding
        out.append(n)
    y = np.full(a.shape[:2] + tuple(out), -np.inf, np.float32)
    for i in range(out[0]):
        for j in range(out[1]):
            rows = [i * strides[0] - pads[0] + k * dilations[0] for k in range(kernel[0])]
            cols = [j * strides[1] - pads[1] + k * dilations[1] for k in range(kernel[1])]
            rows = [r for r in rows if 0 <= r < a.shape[2]]
            cols = [c for c in cols if 0 <= c < a.shape[3]]
            window = a[:, :, rows][:, :, :, cols].reshape(a.shape[0], a.shape[1], -1)
            y[:, :, i, j] = np.where(np.isnan(window).any(axis=2), np.nan, window.max(axis=2))
    return y


@pytest.mark.parametrize("channels,attrs", [
    (32, dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),  # GoogLeNet's branch pools
    (20, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),  # padded channel block, ceil_mode
    (16, dict(kernel_shape=[2, 2], strides=[2, 2])),
    (24, dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1], dilations=[2, 1])),
    (8, dict(kernel_shape=[H, W])),
])
def test_max_pooling_of_blocked_layouts_matches_numpy(tmp_path, channels, attrs):
    """oneDNN 2.6's jit:avx2 max pooling ran GoogLeNet's 3x3 branch pools at about 2.4 GB/s (13 pools, 4.9 of
    39 ms); on the blocked layouts convolutions write (nChw8c, nChw16c) the pooling is a direct vector loop
    now, and no oneDNN pooling primitive runs on them. Strides, ceil_mode, dilations, asymmetric pads and channel
    counts that are not a multiple of the block, against numpy on the convolution output the pool read."""
    w = (RNG.standard_normal((channels, C, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("MaxPool", ["a"], ["y"], name="pool", **attrs)]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("a", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "pool.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]), path)
    session = tessera.InferenceSession(path)
    if cpu_isa.dnnl_avx2():
        assert placement_of(session)["pool"][0] == "dnnl", placement_of(session)
        # The convolution's layout is measured (a direct nhwc kernel may win on AVX-512): no oneDNN pooling
        # runs on the blocked layout a convolution wrote; on nhwc oneDNN's pooling is its own vector kernel.
        steps, _ = executed(path)
        blocked = [s for s in steps if s["primitive"].startswith("pooling") and any(re.fullmatch(r"aBcd\d+b", l) for l in s["layouts"])]
        assert not blocked, steps
    x = RNG.standard_normal((2, C, H, W)).astype(np.float32)
    y, a = session.run(None, {"x": x})
    np.testing.assert_allclose(a, conv3x3(x, w), rtol=1e-4, atol=1e-4)
    expected = max_pool_reference(a, attrs["kernel_shape"], attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4),
                                  attrs.get("dilations", [1, 1]), attrs.get("ceil_mode", 0))
    assert y.shape == expected.shape, (y.shape, expected.shape)
    np.testing.assert_array_equal(y, expected)


def test_a_concat_of_inputs_in_different_layouts_keeps_a_blocked_layout_for_its_readers(tmp_path):
    """DenseNet's blocks: a Concat whose inputs arrive in different layouts (here the region's plain input
    beside a convolution's blocked output; in DenseNet-121 on AVX-512 a direct convolution's nhwc beside a
    Winograd one's nChw16c) was answered by oneDNN 2.6 with the plain layout, and the batch norm reading it
    ran on oneDNN's non-JIT ncsp_bnorm (0.5-1.4 ms a layer, 26% of DenseNet-121). The concat now takes its
    largest input's blocked layout, so the batch norm runs on a JIT kernel; against numpy."""
    c = 32
    w = (RNG.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32)
    w1 = (RNG.standard_normal((16, 2 * c, 1, 1)) * 0.1).astype(np.float32)
    scale, bias, mean = (RNG.random(2 * c) + 0.5, RNG.standard_normal(2 * c), RNG.standard_normal(2 * c))
    var = RNG.random(2 * c) + 0.5
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Concat", ["x", "r"], ["cat"], axis=1, name="concat"),
             helper.make_node("BatchNormalization", ["cat", "s", "b", "m", "v"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["nr"], name="bn_relu"),
             helper.make_node("Conv", ["nr", "w1"], ["y"], name="conv1x1")]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w1, "w1")] + [
        numpy_helper.from_array(v.astype(np.float32), n) for n, v in (("s", scale), ("b", bias), ("m", mean), ("v", var))]
    path = save(tmp_path, "dense_block", nodes, [("x", [1, c, H, W])], inits)
    steps, _ = executed(path)
    norms = [s for s in steps if s["primitive"] == "batch_normalization"]
    assert norms, steps
    if cpu_isa.dnnl_avx2():  # below AVX2 oneDNN's own kernels decide; the values are checked on every CPU
        assert not norms[-1]["impl"].startswith("ncsp"), norms
        assert norms[-1]["layouts"][0] != "abcd", norms
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((1, c, H, W)).astype(np.float32)
    cat = np.concatenate([x.astype(np.float64), np.maximum(conv3x3(x, w), 0)], axis=1)
    shape = (1, 2 * c, 1, 1)
    n = (cat - mean.reshape(shape)) / np.sqrt(var.reshape(shape).astype(np.float32) + 1e-5) * scale.reshape(shape) + \
        bias.reshape(shape)
    expected = np.einsum("nchw,oc->nohw", np.maximum(n, 0), w1[:, :, 0, 0].astype(np.float64))
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("force", [True, False])
def test_silu_after_a_convolution_and_on_its_own_runs_as_tesseras_loop(tmp_path, monkeypatch, force):
    """oneDNN 2.6's swish (SiLU), as a post-op or an eltwise step, costs about 0.6 ns an element on a Zen 4
    core, twice what Tessera's loop over the result costs. A convolution's trailing SiLU becomes that loop
    where it measured faster than the post-op (forced here with TESSERA_DNNL_TUNE=swish, so that the split
    form is checked on every machine; measured otherwise), and a SiLU step of its own always runs it: no
    swish runs in oneDNN's log then, the placement notes say so, and the values (NaN and -Inf included:
    -Inf * sigmoid(-Inf) is NaN) are numpy's."""
    if force:
        monkeypatch.setenv("TESSERA_DNNL_TUNE", "swish")
    c, h, w = 16, 64, 64  # 65536 outputs: past the size below which a post-op stays unmeasured
    w0 = (RNG.standard_normal((c, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Sigmoid", ["a"], ["a_sig"], name="a_sigmoid"),
             helper.make_node("Mul", ["a", "a_sig"], ["y"], name="a_mul"),
             helper.make_node("Sigmoid", ["x"], ["x_sig"], name="x_sigmoid"),
             helper.make_node("Mul", ["x_sig", "x"], ["z"], name="x_mul")]
    graph = helper.make_graph(nodes, "silu_loop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, h, w])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")],
                              [numpy_helper.from_array(w0, "w0")])
    path = str(tmp_path / "silu_loop.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    # One process's log and placement (the choice is measured, so another process may choose otherwise).
    run = subprocess.run([CLI, "run", path, "--random-inputs", "--placement"], capture_output=True, text=True,
                         env=dict(os.environ, ONEDNN_VERBOSE="1"))
    assert run.returncode == 0, run.stderr
    log = (run.stdout + run.stderr).splitlines()
    # (Compiling times candidate convolutions first: the run's own convolution is the last one logged.)
    conv_swish = "swish" in [line for line in log if line.startswith("onednn_verbose,exec,cpu,convolution")][-1]
    assert not [line for line in log if line.startswith("onednn_verbose,exec,cpu,eltwise") and "swish" in line], log
    conv_note = [line for line in log if line.strip().startswith("conv (Conv)")]
    assert len(conv_note) == 1, log
    # Measured unless forced: a post-op of the convolution (in oneDNN's log) or the loop (in the note), never both.
    assert conv_swish != ("SiLU as Tessera's loop after the convolution" in conv_note[0]), (conv_swish, conv_note)
    if force:
        assert not conv_swish
    session = tessera.InferenceSession(path)
    where = placement_of(session)
    assert where["x_mul"][0] == "dnnl", where
    assert "SiLU as Tessera's loop" in where["x_sigmoid"][2] + where["x_mul"][2], where
    if force:
        assert "SiLU as Tessera's loop after the convolution" in where["conv"][2], where["conv"]
    x = RNG.standard_normal((1, 3, h, w)).astype(np.float32) * 4
    x[0, 1, 5, 7] = np.nan
    x[0, 2, 9, 9] = -np.inf
    x[0, 0, 20, 20] = np.inf
    x[0, 0, 30, 30] = -95.0
    y, z = session.run(None, {"x": x})
    with np.errstate(all="ignore"):
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        a = np.einsum("nchwij,ocij->nohw", windows, w0.astype(np.float64))
        want_y = a * (1 / (1 + np.exp(-a)))
        want_z = x.astype(np.float64) * (1 / (1 + np.exp(-x.astype(np.float64))))
    for got, want in ((y, want_y), (z, want_z)):
        assert np.array_equal(np.isnan(got), np.isnan(want)), (np.isnan(got).sum(), np.isnan(want).sum())
        finite = ~np.isnan(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,k,n,where", [(1, 2048, 1024, "native"), (2, 2048, 1024, "native"),
                                            (1, 512, 1000, "native"), (3, 256, 256, "native"), (1, 128, 256, "dnnl")])
def test_a_product_of_one_or_two_rows_streams_its_weights_on_native(tmp_path, rows, k, n, where):
    """A classifier's Gemm at batch 1 or a decoder's token: oneDNN 2.6 streams the weights of a product of one
    to three rows at half to two thirds the rate of native's one-row kernel (brgemm on AVX-512, gemm:jit below
    it; AlexNet's three Gemms at 1 thread, Zen 4: 25 -> 17 ms), and inside a model, where the rest of a run
    evicts a classifier's weights from the caches, at 1.6-2.6x native's time (the Gemms of 13 zoo classifiers
    of 512 x 1000 to 2048 x 1000). Such a MatMul against at least 2^16 weights (256 KiB) is refused when its
    region compiles, with the reason, and runs on native; the bias after it still fuses where it was; against
    numpy. Smaller weights stay on oneDNN."""
    w = (RNG.standard_normal((k, n)) * 0.05).astype(np.float32)
    b = (RNG.standard_normal(n) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    path = save(tmp_path, "few_rows", nodes, [("x", [rows, k])], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    session = tessera.InferenceSession(path)
    backend, reason, _ = placement_of(session)["matmul"]
    assert backend == where, (backend, reason)
    # Below AVX2 oneDNN may answer with a reference kernel instead, which the older guard refuses.
    if cpu_isa.dnnl_avx2() and where == "native":
        assert "streams the weights at about half the rate of the native one-row kernel" in reason, reason
    x = RNG.standard_normal((rows, k)).astype(np.float32)
    expected = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
