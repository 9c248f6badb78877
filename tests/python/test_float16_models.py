"""Models stored in float16 (issue 23, section 3), as float16 converters and GPU-oriented exporters write
them: float16 weights, inputs, outputs and Casts in between. They were refused ("dtype float16 is not
supported here"); they run now, computed in float32 on the usual backends, with float16 inputs and outputs
for the caller. Checked against numpy in float64 on the float16 weights, within float16 rounding."""
import os
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
RNG = np.random.default_rng(16)
C, H, W, K = 8, 12, 12, 10
W0 = (RNG.standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float16)
B0 = (RNG.standard_normal(C) * 0.1).astype(np.float16)
W1 = (RNG.standard_normal((C, K)) * 0.3).astype(np.float16)
SHIFT = (RNG.standard_normal(K) * 0.1).astype(np.float16)


def model(path):
    """x (float16) -> Conv -> Relu -> GlobalAveragePool -> Flatten -> MatMul -> Add -> Cast(float32)
    -> Softmax -> Cast(float16) -> y; and z = Cast(x, float32) * 2 as a float32 output."""
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "w1"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "shift"], ["a"], name="add"),
             helper.make_node("Cast", ["a"], ["a32"], to=TensorProto.FLOAT, name="widen"),
             helper.make_node("Softmax", ["a32"], ["s"], axis=-1, name="softmax"),
             helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT16, name="narrow"),
             helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT, name="x_to_float"),
             helper.make_node("Mul", ["x32", "two"], ["z"], name="double")]
    graph = helper.make_graph(
        nodes, "f16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["n", 3, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["n", K]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 3, H, W])],
        [numpy_helper.from_array(W0, "w0"), numpy_helper.from_array(B0, "b0"), numpy_helper.from_array(W1, "w1"),
         numpy_helper.from_array(SHIFT, "shift"), numpy_helper.from_array(np.array(2, np.float32), "two")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def reference(x):
    """float64 numpy on the float16 input and weights (the model's own values, widened exactly)."""
    x = x.astype(np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    c = np.einsum("nchwij,ocij->nohw", windows, W0.astype(np.float64)) + B0.astype(np.float64)[None, :, None, None]
    g = np.maximum(c, 0).mean(axis=(2, 3))
    a = g @ W1.astype(np.float64) + SHIFT.astype(np.float64)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), x * 2


def test_a_float16_model_runs_and_matches_float64(tmp_path):
    path = model(str(tmp_path / "f16.onnx"))
    session = tessera.InferenceSession(path)
    assert [(i.name, i.type) for i in session.get_inputs()] == [("x", "tensor(float16)")]
    assert [(o.name, o.type) for o in session.get_outputs()] == [("y", "tensor(float16)"), ("z", "tensor(float)")]
    for n in (1, 3):
        x = RNG.standard_normal((n, 3, H, W)).astype(np.float16)
        y, z = session.run(None, {"x": x})
        assert y.dtype == np.float16 and y.shape == (n, K) and z.dtype == np.float32
        want_y, want_z = reference(x)
        # y went through one float16 rounding at the end: half an ulp of float16 (2^-11 relative).
        np.testing.assert_allclose(y.astype(np.float64), want_y, rtol=2 ** -11, atol=2 ** -24)
        np.testing.assert_array_equal(z, want_z.astype(np.float32))  # exact: x * 2 of a widened float16
    if cpu_isa.dnnl_avx2():  # computed in float32, the convolution and matmul run on oneDNN
        where = {p["node"]: p["backend"] for p in session.placement()}
        assert where["conv"] == "dnnl" and where["matmul"] == "dnnl", where


def test_nan_and_inf_in_float16_inputs_propagate(tmp_path):
    path = model(str(tmp_path / "f16.onnx"))
    session = tessera.InferenceSession(path)
    x = RNG.standard_normal((2, 3, H, W)).astype(np.float16)
    x[0, 0, 0, 0] = np.nan
    x[1, 1, 5, 5] = np.inf
    y, z = session.run(None, {"x": x})
    assert np.isnan(y[0]).all() and np.isnan(z[0, 0, 0, 0]) and np.isposinf(z[1, 1, 5, 5])


def test_the_cli_reads_and_writes_float16(tmp_path):
    path = model(str(tmp_path / "f16.onnx"))
    x = RNG.standard_normal((2, 3, H, W)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    run = subprocess.run([CLI, "run", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    y = np.load(out / "y.npy")
    assert y.dtype == np.float16 and y.shape == (2, K)
    np.testing.assert_allclose(y.astype(np.float64), reference(x)[0], rtol=2 ** -11, atol=2 ** -24)


def test_a_float16_artifact_keeps_its_types(tmp_path):
    path = model(str(tmp_path / "f16.onnx"))
    artifact = str(tmp_path / "f16.tsr")
    tessera.compile(path, artifact, input_shapes={"x": [2, 3, H, W]})
    session = tessera.InferenceSession(artifact)
    assert [i.type for i in session.get_inputs()] == ["tensor(float16)"]
    x = RNG.standard_normal((2, 3, H, W)).astype(np.float16)
    y, _ = session.run(None, {"x": x})
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), reference(x)[0], rtol=2 ** -11, atol=2 ** -24)


def test_a_float16_sequence_input_is_refused_clearly(tmp_path):
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT16, [2])
    graph = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["n"])], "g", [seq],
                              [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                              [numpy_helper.from_array(np.ones(2, np.float16), "unused")])
    path = str(tmp_path / "seq.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(tessera.Unsupported, match="input 's' is a .*float16 sequences and optionals are not supported"):
        tessera.InferenceSession(path).run(None, {"s": [np.ones(2, np.float16)]})


def test_float16_conversions_are_exact_both_ways(tmp_path):
    """Every float16 widens to its float32 exactly, and float32 rounds to the nearest float16 (ties to even,
    overflow to Inf, subnormals kept) as numpy rounds it: all 65,536 bit patterns, and float32 values at and
    between float16 neighbours. (Native converts with F16C where the CPU has AVX2; the capped runs check the
    portable conversion.)"""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["h"], ["wide"], to=TensorProto.FLOAT, name="widen"),
         helper.make_node("Cast", ["f"], ["narrow"], to=TensorProto.FLOAT16, name="narrow")], "casts",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["n"]),
         helper.make_tensor_value_info("f", TensorProto.FLOAT, ["m"])],
        [helper.make_tensor_value_info("wide", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("narrow", TensorProto.FLOAT16, ["m"])])
    path = str(tmp_path / "casts.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    session = tessera.InferenceSession(path)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    lo = halves[np.isfinite(halves)].astype(np.float32)
    # float32s between and at float16 neighbours: exact ties, just off ties, beyond the largest float16.
    mids = ((np.sort(lo)[:-1].astype(np.float64) + np.sort(lo)[1:]) / 2).astype(np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
                           lo, np.float32([65504, 65519.99, 65520, 1e6, -1e6, 1e-8, -1e-8, np.inf, -np.inf])])
    wide, narrow = session.run(None, {"h": halves, "f": near})
    expected_wide = halves.astype(np.float32)
    same = np.isnan(expected_wide) == np.isnan(wide)
    assert same.all() and np.array_equal(wide[~np.isnan(wide)].view(np.uint32),
                                          expected_wide[~np.isnan(expected_wide)].view(np.uint32))
    expected_narrow = near.astype(np.float16)
    assert np.array_equal(narrow.view(np.uint16), expected_narrow.view(np.uint16)), \
        np.flatnonzero(narrow.view(np.uint16) != expected_narrow.view(np.uint16))[:5]
