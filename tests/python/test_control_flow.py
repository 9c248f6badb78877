"""If with a condition known at compile time (passes/inline_constant_if): the branch it takes runs as nodes
of the main graph (placed on any backend, fused), not in the subgraph interpreter; the If stays an If
where the condition is only known at run time. Results are compared with numpy written from the model's
definition, placements with what the model's code implies."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

CLI = os.environ.get("TESSERA_CLI")
RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 8)).astype(np.float32)
C = np.arange(4, dtype=np.float32)


def if_model(batch, nested=False):
    """out = Sigmoid(If(x.shape[0] > 1, then: Relu(x @ W) [and x], else: Tile(-x, [1, 2]) [and C]))."""
    then_nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                  helper.make_node("Relu", ["h"], ["r"], name="relu")]
    then_inits = []
    if nested:
        # A second If inside the branch, on a constant flag: inlined in turn (its else branch: Abs).
        inner_then = helper.make_graph([helper.make_node("Neg", ["r"], ["q"], name="inner_neg")], "inner_then", [],
                                       [helper.make_tensor_value_info("q", TensorProto.FLOAT, None)])
        inner_else = helper.make_graph([helper.make_node("Abs", ["r"], ["q"], name="inner_abs")], "inner_else", [],
                                       [helper.make_tensor_value_info("q", TensorProto.FLOAT, None)])
        then_nodes.append(helper.make_node("If", ["flag"], ["r2"], name="inner", then_branch=inner_then,
                                           else_branch=inner_else))
        then_inits.append(numpy_helper.from_array(np.array(False), "flag"))
    then = helper.make_graph(then_nodes, "then", [],
                             [helper.make_tensor_value_info("r2" if nested else "r", TensorProto.FLOAT, None),
                              helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], then_inits)
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"], name="neg"), helper.make_node("Tile", ["n", "two"], ["t"], name="tile")],
        "else", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None),
                     helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 2], np.int64), "two"), numpy_helper.from_array(C, "c")])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["b"], name="batch", axis=0),
             helper.make_node("Greater", ["b", "one"], ["cond"], name="more_than_one"),
             helper.make_node("If", ["cond"], ["y", "z"], name="branch", then_branch=then, else_branch=other),
             helper.make_node("Sigmoid", ["y"], ["out"], name="sig")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.array(0, np.int64), "zero"),
                               numpy_helper.from_array(np.array(1, np.int64), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def expected(x, nested=False):
    if x.shape[0] > 1:
        r = np.maximum(x @ W, 0)
        return 1 / (1 + np.exp(-(np.abs(r) if nested else r))), x
    return 1 / (1 + np.exp(np.tile(x, (1, 2)))), C


def check(session, x, nested=False):
    out, z = session.run(None, {"x": x})
    want_out, want_z = expected(x, nested)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(z, want_z)


def rows(session):
    return {p["node"]: p for p in session.placement()}


@pytest.mark.parametrize("batch,branch", [(3, "then"), (1, "else")])
def test_a_constant_condition_runs_its_branch_as_main_graph_nodes(batch, branch):
    session = tessera.InferenceSession(if_model(batch).SerializeToString())
    placed = rows(session)
    assert placed["branch"]["backend"] == "folded" and branch + " branch" in placed["branch"]["note"], placed["branch"]
    inlined = ["branch/mm", "branch/relu"] if branch == "then" else ["branch/neg", "branch/tile"]
    for name in inlined:
        assert placed[name]["backend"] not in ("folded", "") and placed[name]["region"] >= 0, placed[name]
    if branch == "then":
        # MatMul, Relu and the Sigmoid after the If share a region: nothing splits them now.
        assert placed["branch/mm"]["region"] == placed["branch/relu"]["region"] == placed["sig"]["region"], placed
    check(session, RNG.standard_normal((batch, 4)).astype(np.float32))


def test_nested_constant_conditions_are_inlined_in_turn():
    session = tessera.InferenceSession(if_model(2, nested=True).SerializeToString())
    placed = rows(session)
    assert "then branch" in placed["branch"]["note"] and "else branch" in placed["branch/inner"]["note"], placed
    assert placed["branch/inner/inner_abs"]["region"] >= 0, placed
    check(session, RNG.standard_normal((2, 4)).astype(np.float32), nested=True)


def test_a_condition_known_only_at_run_time_stays_an_if():
    session = tessera.InferenceSession(if_model("batch").SerializeToString())
    placed = rows(session)
    assert placed["branch"]["op_type"] == "If" and placed["branch"]["region"] >= 0, placed["branch"]
    assert not any(name.startswith("branch/") for name in placed), placed
    for batch in (1, 3):  # both branches, one compile
        check(session, RNG.standard_normal((batch, 4)).astype(np.float32))


def test_an_artifact_keeps_the_inlined_branch(tmp_path):
    model = tmp_path / "if.onnx"
    onnx.save(if_model(3), model)
    artifact = tmp_path / "if.tsr"
    run = subprocess.run([CLI, "compile", str(model), "-o", str(artifact)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    session = tessera.InferenceSession(str(artifact))
    assert rows(session)["branch/mm"]["region"] >= 0
    check(session, RNG.standard_normal((3, 4)).astype(np.float32))


# -- inputs fixed at compile time (input_values): an If on a sample-rate input --------------------------

W2 = RNG.standard_normal((4, 8)).astype(np.float32)


def rate_model():
    """out = If(sr == 16000, then: Relu(x @ W), else: Tanh(x @ W2)): a model that serves two sample rates."""
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                              helper.make_node("Relu", ["h"], ["y"], name="relu")], "then", [],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "w2"], ["h"], name="mm"),
                               helper.make_node("Tanh", ["h"], ["y"], name="tanh")], "else", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Equal", ["sr", "rate"], ["is_16k"], name="is_16k"),
             helper.make_node("If", ["is_16k"], ["out"], name="by_rate", then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "rates", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                               helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(W, "w"), numpy_helper.from_array(W2, "w2"),
                               numpy_helper.from_array(np.array(16000, np.int64), "rate")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def rate_expected(x, sr):
    return np.maximum(x @ W, 0) if sr == 16000 else np.tanh(x @ W2)


@pytest.mark.parametrize("rate,branch", [(16000, "then"), (8000, "else")])
def test_an_input_fixed_at_compile_time_decides_the_branch_and_is_checked_each_run(rate, branch):
    session = tessera.InferenceSession(rate_model().SerializeToString(), input_values={"sr": rate})
    placed = rows(session)
    assert branch + " branch" in placed["by_rate"]["note"], placed["by_rate"]
    inlined = [p for name, p in placed.items() if name.startswith("by_rate/") and p["op_type"] == "MatMul"]
    assert len(inlined) == 1 and inlined[0]["region"] >= 0, placed  # the branch's MatMul, placed like any
    assert [i.name for i in session.get_inputs()] == ["x", "sr"]  # still fed, as before
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    out, = session.run(None, {"x": x, "sr": np.array(rate, np.int64)})
    np.testing.assert_allclose(out, rate_expected(x, rate), rtol=1e-5, atol=1e-6)
    other = 8000 if rate == 16000 else 16000
    with pytest.raises(tessera.InvalidArgument, match=r"input 'sr' is %d, but the model was compiled with it fixed at %d"
                       % (other, rate)):
        session.run(None, {"x": x, "sr": np.array(other, np.int64)})
    out, = session.run(None, {"x": x, "sr": np.array(rate, np.int64)})  # the session goes on
    np.testing.assert_allclose(out, rate_expected(x, rate), rtol=1e-5, atol=1e-6)


def test_without_a_fixed_value_the_if_serves_both_rates():
    session = tessera.InferenceSession(rate_model().SerializeToString())
    assert rows(session)["by_rate"]["op_type"] == "If" and rows(session)["by_rate"]["region"] >= 0
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    for rate in (16000, 8000):
        out, = session.run(None, {"x": x, "sr": np.array(rate, np.int64)})
        np.testing.assert_allclose(out, rate_expected(x, rate), rtol=1e-5, atol=1e-6)


def test_an_artifact_keeps_the_fixed_value_and_its_check(tmp_path):
    model = tmp_path / "rates.onnx"
    onnx.save(rate_model(), model)
    artifact = tmp_path / "rates.tsr"
    run = subprocess.run([CLI, "compile", str(model), "--input-values", "sr=16000", "-o", str(artifact)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for rate in (16000, 8000):
        np.save(tmp_path / ("sr%d.npy" % rate), np.array(rate, np.int64))
    out = tmp_path / "out"
    run = subprocess.run([CLI, "run", str(artifact), "--input", "x=%s" % (tmp_path / "x.npy"),
                          "--input", "sr=%s" % (tmp_path / "sr16000.npy"), "--output-dir", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(out / "out.npy"), rate_expected(x, 16000), rtol=1e-5, atol=1e-6)
    run = subprocess.run([CLI, "run", str(artifact), "--input", "x=%s" % (tmp_path / "x.npy"),
                          "--input", "sr=%s" % (tmp_path / "sr8000.npy")], capture_output=True, text=True)
    assert run.returncode != 0 and "input 'sr' is 8000, but the model was compiled with it fixed at 16000" in run.stderr
    session = tessera.InferenceSession(str(artifact))
    assert "then branch" in rows(session)["by_rate"]["note"]
    with pytest.raises(tessera.InvalidArgument, match="option .input_values. cannot apply to .*compiled .tsr artifact"):
        tessera.InferenceSession(str(artifact), input_values={"sr": 8000})


@pytest.mark.parametrize("source", ["onnx", "artifact"])
def test_inputs_the_cli_makes_take_the_fixed_value(tmp_path, source):
    # run/bench/check/tune fill the inputs not given (random, or all of them); a fixed input takes its value,
    # which then passes the per-run check (it was zeros, and every such command failed).
    model = tmp_path / "rates.onnx"
    onnx.save(rate_model(), model)
    fixed = ["--input-values", "sr=16000"]
    if source == "artifact":
        target = tmp_path / "rates.tsr"
        run = subprocess.run([CLI, "compile", str(model), *fixed, "-o", str(target)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        fixed = []
    else:
        target = model
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    run = subprocess.run([CLI, "run", str(target), *fixed, "--input", "x=%s" % (tmp_path / "x.npy"), "--random-inputs",
                          "--output-dir", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "input sr: int64[scalar] the value it was compiled with (input_values)" in run.stdout, run.stdout
    np.testing.assert_allclose(np.load(out / "out.npy"), rate_expected(x, 16000), rtol=1e-5, atol=1e-6)
    for command in (["run"], ["bench", "--iterations", "2"], ["check"]):
        run = subprocess.run([CLI, *command[:1], str(target), *fixed, *command[1:]], capture_output=True, text=True)
        assert run.returncode == 0, (command, run.stderr)
    if source == "onnx":
        run = subprocess.run([CLI, "tune", str(model), *fixed, "-o", str(tmp_path / "t.json"), "--budget", "1"],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("values,message", [
    ({"rate_hz": 16000}, r"the model has no input 'rate_hz' \(its inputs: x, sr\)"),
    ({"x": 1.0}, r"input 'x' is float32\[2x4\]: only an input of one element"),
    ("sr=abc", r"input 'sr' \(int64\): 'abc' is not a whole number"),
    ({"sr": 1e30}, r"input 'sr' \(int64\): '1e\+30' is not a whole number"),
    ("sr=", r"is not NAME=VALUE|must be"),
    ({"sr": "16000"}, r"must be a dict"),
])
def test_bad_fixed_values_are_clear_errors(values, message):
    with pytest.raises(tessera.InvalidArgument, match=message):
        tessera.InferenceSession(rate_model().SerializeToString(), input_values=values)


# -- Loops of a constant trip count (passes/unroll_constant_loop) ------------------------------------------

W3 = (RNG.standard_normal((4, 4)) * 0.5).astype(np.float32)


def loop_model(trips, early_exit=False, opset=17, nested=False, trip_from_shape=False, open_batch=False):
    """acc_{t+1} = tanh(acc_t @ W3 + t) for t < trips (early_exit: while the sum of acc stays below 1.5);
    scan output s_t = acc_t * 2 (nested: plus the sum over an inner 3-trip loop of acc_t * (j + 1)).
    Outputs: the final acc and the stacked scans."""
    body_nodes = [helper.make_node("Cast", ["t"], ["tf"], to=TensorProto.FLOAT, name="cast"),
                  helper.make_node("MatMul", ["acc", "w3"], ["m"], name="mm"),
                  helper.make_node("Add", ["m", "tf"], ["a"], name="add"),
                  helper.make_node("Tanh", ["a"], ["acc_out"], name="tanh"),
                  helper.make_node("Mul", ["acc", "two"], ["s"], name="scan")]
    body_inits = [numpy_helper.from_array(np.array(2, np.float32), "two")]
    scan = "s"
    if early_exit:
        body_nodes += [helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0, name="total"),
                       helper.make_node("Less", ["total", "limit"], ["cond_out"], name="keep_going")]
        body_inits.append(numpy_helper.from_array(np.array(1.5, np.float32), "limit"))
    else:
        body_nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"], name="cond_id"))
    if nested:
        inner = helper.make_graph(
            [helper.make_node("Identity", ["c"], ["c_out"], name="inner_cond"),
             helper.make_node("Cast", ["j"], ["jf"], to=TensorProto.FLOAT, name="inner_cast"),
             helper.make_node("Add", ["jf", "one_f"], ["j1"], name="inner_add"),
             helper.make_node("Mul", ["acc", "j1"], ["p"], name="inner_mul"),
             helper.make_node("Add", ["sum", "p"], ["sum_out"], name="inner_sum")],
            "inner", [helper.make_tensor_value_info("j", TensorProto.INT64, []),
                      helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                      helper.make_tensor_value_info("sum", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.array(1, np.float32), "one_f")])
        body_nodes += [helper.make_node("Loop", ["three", "", "zeros"], ["inner_sum"], body=inner, name="inner_loop"),
                       helper.make_node("Add", ["s", "inner_sum"], ["s2"], name="scan2")]
        body_inits += [numpy_helper.from_array(np.array(3, np.int64), "three"),
                       numpy_helper.from_array(np.zeros((2, 4), np.float32), "zeros")]
        scan = "s2"
    body = helper.make_graph(body_nodes, "body",
                             [helper.make_tensor_value_info("t", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None),
                              helper.make_tensor_value_info(scan, TensorProto.FLOAT, None)], body_inits)
    nodes, inits = [], [numpy_helper.from_array(W3, "w3")]
    if trip_from_shape:  # M = steps.shape[0]: known once the shapes are
        nodes += [helper.make_node("Shape", ["steps"], ["shape"], name="shape"),
                  helper.make_node("Gather", ["shape", "zero"], ["trips"], axis=0, name="trips")]
        inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))
    else:
        inits.append(numpy_helper.from_array(np.array(trips, np.int64), "trips"))
    nodes.append(helper.make_node("Loop", ["trips", "yes", "x"], ["final", "scans"], body=body, name="loop"))
    inits.append(numpy_helper.from_array(np.array(True), "yes"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    if trip_from_shape:
        inputs.append(helper.make_tensor_value_info("steps", TensorProto.FLOAT, ["n" if open_batch else trips]))
    graph = helper.make_graph(nodes, "loops", inputs,
                              [helper.make_tensor_value_info("final", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("scans", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def loop_expected(x, trips, early_exit=False, nested=False):
    acc, scans = x.astype(np.float64), []
    for t in range(trips):
        s = acc * 2
        if nested:
            s = s + sum(acc * (j + 1) for j in range(3))
        scans.append(s)
        acc = np.tanh(acc @ W3 + t)
        if early_exit and not acc.sum() < 1.5:
            break
    return acc, np.stack(scans)


def loop_rows(session):
    placed = rows(session)
    trips = {name.split("/")[1] for name in placed if name.startswith("loop/")}
    return placed, sorted((t for t in trips if t.isdigit()), key=int)


def check_loop(session, x, trips, early_exit=False, nested=False, feeds=None):
    final, scans = session.run(None, dict({"x": x}, **(feeds or {})))
    want_final, want_scans = loop_expected(x, trips, early_exit, nested)
    np.testing.assert_allclose(final, want_final, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scans, want_scans, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [11, 17])
def test_a_loop_of_a_constant_trip_count_runs_its_body_unrolled(opset):
    session = tessera.InferenceSession(loop_model(5, opset=opset).SerializeToString())
    placed, trips = loop_rows(session)
    assert placed["loop"]["backend"] == "folded" and "run 5 times" in placed["loop"]["note"], placed["loop"]
    assert trips == ["0", "1", "2", "3", "4"], trips
    assert all(placed["loop/%d/mm" % t]["region"] >= 0 for t in range(5)), placed
    check_loop(session, RNG.standard_normal((2, 4)).astype(np.float32), 5)


def test_a_loop_that_can_end_early_stays_a_loop():
    session = tessera.InferenceSession(loop_model(6, early_exit=True).SerializeToString())
    placed, trips = loop_rows(session)
    assert placed["loop"]["op_type"] == "Loop" and placed["loop"]["region"] >= 0 and not trips, placed["loop"]
    for scale in (0.1, 3.0):  # runs all six trips / stops after the first
        x = (RNG.standard_normal((2, 4)) * scale).astype(np.float32)
        check_loop(session, x, 6, early_exit=True)


def test_nested_constant_loops_are_unrolled_in_turn():
    session = tessera.InferenceSession(loop_model(4, nested=True).SerializeToString())
    placed, trips = loop_rows(session)
    assert trips == ["0", "1", "2", "3"] and "run 3 times" in placed["loop/0/inner_loop"]["note"], placed
    assert not [p for p in placed.values() if p["op_type"] == "Loop" and p["region"] >= 0], placed
    check_loop(session, RNG.standard_normal((2, 4)).astype(np.float32), 4, nested=True)


def test_a_trip_count_from_a_shape_unrolls_at_fixed_shapes_only():
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    fixed = tessera.InferenceSession(loop_model(3, trip_from_shape=True).SerializeToString())
    assert loop_rows(fixed)[1] == ["0", "1", "2"]
    check_loop(fixed, x, 3, feeds={"steps": np.zeros(3, np.float32)})
    open_dims = tessera.InferenceSession(loop_model(3, trip_from_shape=True, open_batch=True).SerializeToString())
    assert rows(open_dims)["loop"]["region"] >= 0 and not loop_rows(open_dims)[1]  # one plan for every n
    for n in (1, 4):
        check_loop(open_dims, x, n, feeds={"steps": np.zeros(n, np.float32)})


def test_a_loop_past_the_unroll_limit_stays_a_loop():
    session = tessera.InferenceSession(loop_model(1500).SerializeToString())  # over 1024 trips
    assert rows(session)["loop"]["region"] >= 0 and not loop_rows(session)[1]
    check_loop(session, RNG.standard_normal((2, 4)).astype(np.float32), 1500)


def test_an_artifact_keeps_the_unrolled_loop(tmp_path):
    model = tmp_path / "loop.onnx"
    onnx.save(loop_model(3), model)
    artifact = tmp_path / "loop.tsr"
    run = subprocess.run([CLI, "compile", str(model), "-o", str(artifact)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    session = tessera.InferenceSession(str(artifact))
    assert loop_rows(session)[1] == ["0", "1", "2"]
    check_loop(session, RNG.standard_normal((2, 4)).astype(np.float32), 3)


def test_a_loop_that_builds_a_list_stays_a_loop():
    # seq.append(x * t) for t < 4, then concatenated: the Loop appends in place; unrolled, each insert copied
    # the list so far.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"], name="cond_id"),
         helper.make_node("Cast", ["t"], ["tf"], to=TensorProto.FLOAT, name="cast"),
         helper.make_node("Mul", ["x", "tf"], ["row"], name="row"),
         helper.make_node("SequenceInsert", ["seq", "row"], ["seq_out"], name="append")],
        "body", [helper.make_tensor_value_info("t", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT, name="empty"),
             helper.make_node("Loop", ["four", "", "empty"], ["rows"], body=body, name="loop"),
             helper.make_node("ConcatFromSequence", ["rows"], ["y"], axis=0, name="cat")]
    graph = helper.make_graph(nodes, "list", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(4, np.int64), "four")])
    session = tessera.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                                       .SerializeToString())
    assert rows(session)["loop"]["op_type"] == "Loop" and rows(session)["loop"]["region"] >= 0
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    y, = session.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.concatenate([x * t for t in range(4)]))
