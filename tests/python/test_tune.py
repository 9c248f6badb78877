"""`tessera tune`: measured placement, its record, and applying it (CLI and C API through the CLI).

The test backend claims MatMul, Gemm, Softmax and Reshape and, in these tests, is made slow on purpose
(TESSERA_TEST_BACKEND_DELAY_US: each of its instructions waits 3 ms): with `--backends test,native` the
priority order puts the MLP on it, and measurement must overturn that."""
import json
import re
import os
import subprocess
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

CLI = os.environ.get("TESSERA_CLI")
SLOW = dict(os.environ, TESSERA_TEST_BACKEND_DELAY_US="3000")


def mlp(path, width=32, name="mlp"):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def cli(*args, env=None):
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=env or SLOW)


def placement(*args):
    """The partition command's stderr and its JSON report's node -> backend."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        run = cli("partition", *args, "--json", report)
        assert run.returncode == 0, run.stderr
        nodes = {n["name"]: n["backend"] for n in json.load(open(report))["nodes"]}
    return run.stderr, nodes


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tune")
    model = mlp(str(folder / "mlp.onnx"))
    record = str(folder / "tuning.json")
    run = cli("tune", model, "--backends", "test,native", "-o", record, "--budget", "30")
    assert run.returncode == 0, run.stderr
    return model, record, run.stdout, folder


def test_measurement_overturns_priority(tuned):
    model, record_path, summary, _ = tuned
    record = json.load(open(record_path))
    assert record["format"] == "tessera-tuning" and record["version"] == 1
    times = {c["name"]: c["milliseconds"] for c in record["candidates"]}
    # The single-backend placements are always measured; the slow backend's are much slower.
    assert {"default", "only test", "only native"} <= set(times), times
    assert times["default"] > 5 * times["only native"], times
    # The test backend alone places every node as the default order does: listed, not measured again.
    only_test = next(c for c in record["candidates"] if c["name"] == "only test")
    assert "the same placement as 'default'" in only_test["description"]
    assert only_test["milliseconds"] == times["default"] and not only_test["accepted"]
    assert record["chosen"] != "default"
    assert all(p["backend"] == "native" for p in record["placement"]), record["placement"]
    # The record's summary times are the candidates' own: the chosen one's, and the fastest single backend's.
    assert record["milliseconds"]["tuned"] == times[record["chosen"]], (record["milliseconds"], times)
    singles = {name: ms for name, ms in times.items() if name.startswith("only ") and ms >= 0}
    assert record["milliseconds"]["best_single"] == min(singles.values()), (record["milliseconds"], singles)
    assert record["milliseconds"]["best_single_name"] == min(singles, key=singles.get) == "only native"
    assert record["machine"]["threads"] == 1 and record["precision"] == "fp32"
    assert "chosen:" in summary and "only native" in summary


def test_applying_the_record(tuned, tmp_path):
    model, record, _, _ = tuned
    _, default = placement(model, "--backends", "test,native")
    assert default["mm1"] == "test" and default["softmax"] == "test"
    stderr, applied = placement(model, "--backends", "test,native", "--tuning", record)
    assert set(applied.values()) == {"native"}
    assert "warning" not in stderr
    # The reports show what was measured: every candidate, its time, which one won.
    candidates = json.load(open(record))["candidates"]
    report, html = str(tmp_path / "report.json"), str(tmp_path / "report.html")
    run = cli("partition", model, "--backends", "test,native", "--tuning", record, "--json", report, "--html", html)
    assert run.returncode == 0, run.stderr
    assert "Tuned placement '" in run.stdout and "only native" in run.stdout
    tuning = json.load(open(report))["tuning"]
    assert [c["name"] for c in tuning["candidates"]] == [c["name"] for c in candidates]
    assert tuning["chosen"] == json.load(open(record))["chosen"]
    page = open(html).read()
    assert "<h2>Tuning</h2>" in page and all(c["name"].replace(">", "&gt;") in page for c in candidates)
    run = cli("partition", model, "--backends", "test,native", "--json", report)
    assert "tuning" not in json.load(open(report))
    # Runs, and the artifact says it was tuned.
    artifact = str(tmp_path / "mlp.tsr")
    run = cli("compile", model, "--tuning", record, "-o", artifact)
    assert run.returncode == 0, run.stderr
    info = cli("info", artifact)
    assert info.returncode == 0 and "tessera.tuning" in info.stdout and "tuned placement" in info.stdout, info.stdout
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    run = cli("run", artifact, "--input", "x=" + str(tmp_path / "x.npy"), "--output-dir", str(out))
    assert run.returncode == 0, run.stderr
    w = {i.name: numpy_helper.to_array(i) for i in onnx.load(model).graph.initializer}
    z = np.maximum(x @ w["w1"], 0) @ w["w2"]
    expected = np.exp(z - z.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.load(out / "y.npy"), expected, rtol=1e-4, atol=1e-6)


def test_mismatches_are_warnings(tuned, tmp_path):
    model, record, _, _ = tuned
    other = mlp(str(tmp_path / "wider.onnx"), width=48)
    stderr, nodes = placement(other, "--backends", "test,native", "--tuning", record)
    assert "made for another model" in stderr and "not applied" in stderr, stderr
    assert nodes["mm1"] == "test"  # the default placement
    stderr, nodes = placement(model, "--backends", "test,native", "--tuning", record, "--threads", "2")
    assert "1 threads, here 2" in stderr, stderr
    assert set(nodes.values()) == {"native"}  # applied all the same


def tune_record(model, folder, *args, env=None, budget="30"):
    record = str(folder / "tuning.json")
    run = cli("tune", model, *args, "-o", record, "--budget", budget, env=env)
    assert run.returncode == 0, run.stderr
    return record, json.load(open(record)), run.stdout


SINGLE_RULES = {"default", "only test", "only native", "only test_plugin"}


def test_the_search_finds_a_mixed_placement(tmp_path):
    """A model whose best placement needs both backends, which no single rule gives: the Softmax may not
    run on native (--deny), so it stays on the slow test backend, while the MatMuls and the Relu are
    fastest on native. The default order puts all four on test, 'only test' does the same, and 'only
    native' cannot place the Softmax: only the search's moves reach the mixed placement."""
    model = mlp(str(tmp_path / "mlp.onnx"))
    options = ("--backends", "test,native", "--deny", "native:softmax")
    record_path, record, summary = tune_record(model, tmp_path, *options)
    candidates = {c["name"]: c for c in record["candidates"]}
    assert "denied by --deny native:softmax" in candidates["only native"]["error"]
    assert candidates["only native"]["milliseconds"] < 0 and not candidates["only native"]["accepted"]
    # The chosen candidate is a move, made from an earlier best, and accepted when measured.
    chosen = record["chosen"]
    assert chosen not in SINGLE_RULES and " -> native" in chosen, chosen
    assert candidates[chosen]["accepted"] and candidates[chosen]["description"].startswith("from '"), candidates[chosen]
    mixed = {p["node"]: p["backend"] for p in record["placement"]}
    assert mixed == {"mm1": "native", "relu": "native", "mm2": "native", "softmax": "test"}, mixed
    # Measured much faster than every single rule (one 3 ms test instruction left instead of four).
    ms = record["milliseconds"]
    assert ms["best_single_name"] == "only test" and ms["best_single"] == ms["default"], ms
    assert ms["tuned"] == candidates[chosen]["milliseconds"] < 0.5 * ms["best_single"], ms
    assert "chosen: '%s'" % chosen in summary
    # Applied, the record gives the mixed placement.
    stderr, nodes = placement(model, *options, "--tuning", record_path)
    assert nodes == mixed and "warning" not in stderr, (nodes, stderr)


PLUGIN = os.environ.get("TESSERA_TEST_PLUGIN") or os.path.join(os.path.dirname(CLI or ""), "plugins",
                                                                "libtessera_test_backend_plugin.so")


def test_the_search_finds_a_placement_mixed_by_speed(tmp_path):
    """Two backends, each fastest for some ops: the built-in test backend slow on MatMul, the same
    backend built as a plug-in (test_plugin) slow on Relu and Softmax, no native (--strict). The
    default order (all on test) and each backend alone take 6 ms; the MatMuls on test_plugin and the
    rest on test take almost nothing, and only the search's moves find that."""
    assert os.path.exists(PLUGIN), PLUGIN
    model = mlp(str(tmp_path / "mlp.onnx"))
    env = dict(os.environ,
               TESSERA_TEST_BACKEND_DELAY_US="test:MatMul=3000,test_plugin:Relu=3000,test_plugin:Softmax=3000")
    options = ("--backend-plugin", PLUGIN, "--backends", "test,test_plugin", "--strict")
    record_path, record, _ = tune_record(model, tmp_path, *options, env=env)
    candidates = {c["name"]: c for c in record["candidates"]}
    for single in ("default", "only test", "only test_plugin"):
        assert candidates[single]["milliseconds"] > 5.0, candidates[single]  # two 3 ms instructions each
    chosen = record["chosen"]
    assert chosen not in SINGLE_RULES and candidates[chosen]["accepted"], chosen
    assert candidates[chosen]["description"].startswith("from '"), candidates[chosen]
    mixed = {p["node"]: p["backend"] for p in record["placement"]}
    assert mixed == {"mm1": "test_plugin", "relu": "test", "mm2": "test_plugin", "softmax": "test"}, mixed
    assert record["milliseconds"]["tuned"] < 0.25 * record["milliseconds"]["best_single"], record["milliseconds"]
    stderr, nodes = placement(model, *options, "--tuning", record_path)
    assert nodes == mixed, (nodes, stderr)


@pytest.mark.parametrize("mutation, message", [
    (lambda t: t[: len(t) // 2], "is not valid JSON"),
    (lambda t: t.replace('"version": 1', '"version": 7'), "has version 7; this build reads version 1"),
    (lambda t: t.replace('"placement"', '"placements"'), "has no field 'placement'"),
    (lambda t: t.replace('"threads": 1', '"threads": "one"'), "machine.threads must be a number"),
    (lambda t: "[" * 100000, "nesting deeper than"),
    (lambda t: t.replace('"backend": "native"', '"backend": "nope"', 1),
     "is placed on 'nope', which is not among the record's backends (test, native)"),
    (lambda t: re.sub(r'"placement": \[.*?\]', '"placement": []', t, flags=re.S), "its placement is empty"),
    (lambda t: t.replace('"precision": "fp32"', '"precision": "fp4"'), "unknown precision 'fp4'"),
])
def test_bad_records_are_clear_errors(tuned, tmp_path, mutation, message):
    model, record, _, _ = tuned
    bad = tmp_path / "bad.json"
    bad.write_text(mutation(open(record).read()))
    run = cli("partition", model, "--backends", "test,native", "--tuning", str(bad))
    assert run.returncode != 0 and message in run.stderr, run.stderr
    assert "tuning record '%s'" % bad in run.stderr, run.stderr  # every error names the record
    assert "terminate called" not in run.stderr and "Aborted" not in run.stderr


def test_tune_errors(tuned, tmp_path):
    model, _, _, _ = tuned
    run = cli("tune", model)
    assert run.returncode != 0 and "tune needs -o" in run.stderr
    artifact = str(tmp_path / "m.tsr")
    assert cli("compile", model, "-o", artifact).returncode == 0
    run = cli("tune", artifact, "-o", str(tmp_path / "t.json"))
    assert run.returncode != 0 and "tune the ONNX model it came from" in run.stderr
    run = cli("compile", artifact, "--tuning", str(tuned[1]), "-o", str(tmp_path / "again.tsr"))
    assert run.returncode != 0


def test_python_api(tuned, tmp_path, monkeypatch):
    import tessera
    monkeypatch.setenv("TESSERA_TEST_BACKEND_DELAY_US", "3000")
    model, _, _, _ = tuned
    record = str(tmp_path / "py.json")
    seen = []
    summary = tessera.tune(model, record, backends="test,native", budget=20,
                           progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert "chosen:" in summary and seen and seen[-1][1] == seen[-1][2]
    assert json.load(open(record))["chosen"] != "default"
    session = tessera.InferenceSession(model, backends="test,native", tuning=record)
    assert {p["backend"] for p in session.placement() if p["backend"] != "folded"} == {"native"}
    default = tessera.InferenceSession(model, backends="test,native")
    assert "test" in {p["backend"] for p in default.placement()}
    x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], default.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)

    def bad_progress(phase, done, total):
        raise ValueError("stop")
    with pytest.raises(RuntimeError, match="progress callback raised"):
        tessera.tune(model, str(tmp_path / "x.json"), backends="test,native", budget=5, progress=bad_progress)
    assert not (tmp_path / "x.json").exists()  # the raise stopped the search: no record
    with pytest.raises(tessera.InvalidArgument, match="not valid JSON"):
        (tmp_path / "broken.json").write_text("{")
        tessera.InferenceSession(model, tuning=str(tmp_path / "broken.json"))


def open_mlp(path, width=32):
    """mlp with an open batch and a shape computation (Shape -> Gather -> Concat -> Reshape) that folds
    away when the batch is bound and runs when it is open."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
             helper.make_node("Shape", ["x"], ["shape"], name="shape_of_x"),
             helper.make_node("Gather", ["shape", "zero"], ["rows"], name="rows_of_x", axis=0),
             helper.make_node("Concat", ["rows", "minus_one"], ["new_shape"], name="new_shape", axis=0),
             helper.make_node("Reshape", ["z", "new_shape"], ["zr"], name="reshape"),
             helper.make_node("Softmax", ["zr"], ["y"], name="softmax", axis=-1)]
    graph = helper.make_graph(nodes, "open_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_an_open_dims_model_is_tuned_as_one_plan_at_the_shapes_named(tmp_path):
    model = open_mlp(str(tmp_path / "open.onnx"))
    run = cli("tune", model, "-o", str(tmp_path / "x.json"), "--budget", "5")
    assert run.returncode != 0 and "--input-shape" in run.stderr and "'x'" in run.stderr, run.stderr
    record_path, record, summary = tune_record(model, tmp_path, "--backends", "dnnl,native", "--input-shape", "batch=6",
                                               budget="10")
    assert record["model"]["measured_at"] == "x=6x32", record["model"]
    assert "open-dims plan" in summary and "x=6x32" in summary
    placed = {p["node"]: p["backend"] for p in record["placement"]}
    assert "rows_of_x" in placed and "softmax" in placed, placed  # the open plan's nodes, shape ones included
    # A placement the default would not make (every node on native; the measurement may choose either),
    # so that applying it shows; the shape nodes it names exist only in the open plan.
    _, default = placement(model, "--backends", "dnnl,native")
    assert default["mm1"] == "dnnl", default
    for entry in record["placement"]:
        entry["backend"] = "native"
    json.dump(record, open(record_path, "w"))
    # The open plan takes it as it is; a compile binding the measured shapes takes it too (skipping the
    # shape nodes folded there), and one binding other shapes with a warning saying so.
    stderr, nodes = placement(model, "--backends", "dnnl,native", "--tuning", record_path)
    assert "warning" not in stderr and nodes["mm1"] == nodes["mm2"] == "native", (stderr, nodes)
    stderr, nodes = placement(model, "--backends", "dnnl,native", "--tuning", record_path, "--input-shape", "batch=6")
    assert "warning" not in stderr and nodes["mm1"] == "native", (stderr, nodes)
    assert nodes.get("rows_of_x", "folded") == "folded", nodes
    stderr, nodes = placement(model, "--backends", "dnnl,native", "--tuning", record_path, "--input-shape", "batch=3")
    assert "input shapes x=6x32, here x=3x32" in stderr and nodes["mm1"] == "native", (stderr, nodes)
    # One tuned artifact runs every batch.
    artifact = str(tmp_path / "open.tsr")
    run = cli("compile", model, "--backends", "dnnl,native", "--tuning", record_path, "-o", artifact)
    assert run.returncode == 0 and "warning" not in run.stderr, run.stderr
    w = {i.name: numpy_helper.to_array(i) for i in onnx.load(model).graph.initializer}
    for batch in (3, 9):
        x = np.random.default_rng(batch).standard_normal((batch, 32)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        out = tmp_path / ("out%d" % batch)
        run = cli("run", artifact, "--input", "x=" + str(tmp_path / "x.npy"), "--output-dir", str(out))
        assert run.returncode == 0, run.stderr
        z = np.maximum(x @ w["w1"], 0) @ w["w2"]
        expected = np.exp(z - z.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(np.load(out / "y.npy"), expected, rtol=1e-4, atol=1e-6)
