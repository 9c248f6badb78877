"""tessera.InferenceSession and tessera.compile: results against numpy and PyTorch,
zero-copy inputs and outputs (asserted by pointer and by the copy counter), models
with open dims compiled per shape, threads, and every bad input as an exception."""

import io
import json
import os
import sys
import threading

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpu_isa  # noqa: E402  (what this CPU implies: bf16 or not)


def make_model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


W = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0 - 0.5
B = np.array([0.1, -0.2, 0.3], dtype=np.float32)


def dense_model(batch="batch"):
    """y = relu(x @ W + B), x[batch, 4]."""
    return make_model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])


def dense_reference(x):
    return np.maximum(x.astype(np.float64) @ W.astype(np.float64) + B, 0).astype(np.float32)


def add_model(shape=(2, 3)):
    """z = x + y."""
    return make_model([helper.make_node("Add", ["x", "y"], ["z"])],
                      [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in ("x", "y")],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, list(shape))])


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------------------------------- results --

def test_dense_model_matches_numpy_from_path_bytes_and_proto(tmp_path):
    model = dense_model(batch=5)
    path = tmp_path / "dense.onnx"
    onnx.save(model, str(path))
    x = rand(5, 4)
    for source in (str(path), path, model.SerializeToString(), model):
        session = tessera.InferenceSession(source)
        (y,) = session.run(None, {"x": x})
        assert y.dtype == np.float32 and y.shape == (5, 3)
        np.testing.assert_allclose(y, dense_reference(x), rtol=1e-5, atol=1e-6)


def test_torchvision_resnet18_matches_pytorch():
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    buffer = io.BytesIO()
    torch.onnx.export(net, (x,), buffer, input_names=["x"], output_names=["y"], opset_version=13)
    with torch.no_grad():
        expected = net(x).numpy()
    for backends in (None, "native"):
        session = tessera.InferenceSession(buffer.getvalue(), backends=backends, threads=2)
        (y,) = session.run(None, {"x": x})
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_sessions_of_a_densenet_one_after_another_in_one_process(tmp_path):
    """Sessions of DenseNet-121 created and dropped one after another in one process (a server reloading a
    model, a notebook re-running a cell): with oneDNN 2.6's primitive cache on (128 entries, as Tessera set
    it), its evictions corrupted the heap and the second session's compile crashed (Zen 4, AVX-512:
    SIGSEGV in dnnl_primitive_create or "malloc_consolidate(): invalid chunk size"). Tessera now turns
    the cache off. Run in a child process, so that a crash fails this test with its output; each session's
    output against PyTorch's."""
    import subprocess
    import torchvision
    torch.manual_seed(0)
    net = torchvision.models.densenet121(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    path = tmp_path / "densenet.onnx"
    torch.onnx.export(net, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=13)
    with torch.no_grad():
        np.save(tmp_path / "expected.npy", net(x).numpy())
    np.save(tmp_path / "x.npy", x.numpy())
    child = f"""
import gc, numpy as np, tessera
x, expected = np.load({str(tmp_path / "x.npy")!r}), np.load({str(tmp_path / "expected.npy")!r})
for i in range(3):
    session = tessera.InferenceSession({str(path)!r}, threads=1)
    (y,) = session.run(None, {{"x": x}})
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    del session
    gc.collect()
    print("session", i, "ok", flush=True)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")}
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=240)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-3000:])
    assert run.stdout.split("\n")[:3] == ["session 0 ok", "session 1 ok", "session 2 ok"], run.stdout


def test_output_names_select_and_order():
    model = make_model([helper.make_node("Add", ["x", "x"], ["double"]), helper.make_node("Neg", ["x"], ["neg"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                       [helper.make_tensor_value_info("double", TensorProto.FLOAT, [3]),
                        helper.make_tensor_value_info("neg", TensorProto.FLOAT, [3])])
    session = tessera.InferenceSession(model)
    x = np.array([1, -2, 3], dtype=np.float32)
    neg, double = session.run(["neg", "double"], {"x": x})
    np.testing.assert_array_equal(neg, -x)
    np.testing.assert_array_equal(double, 2 * x)
    assert [o.name for o in session.get_outputs()] == ["double", "neg"]


def test_bool_inputs_and_outputs():
    model = make_model([helper.make_node("Not", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.BOOL, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.BOOL, [4])])
    session = tessera.InferenceSession(model)
    x = np.array([True, False, False, True])
    (y,) = session.run(None, {"x": x})
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, ~x)
    (y,) = session.run(None, {"x": torch.from_numpy(x)})
    np.testing.assert_array_equal(y, ~x)
    (t,) = session.run(None, {"x": x}, as_dlpack=True)
    assert t.dtype == "bool"
    as_torch = torch.from_dlpack(t)  # DLPack 0.6 has no bool: exported as uint8 0/1
    assert as_torch.dtype == torch.uint8
    np.testing.assert_array_equal(as_torch.numpy().astype(bool), ~x)
    np.testing.assert_array_equal(t.numpy(), ~x)


# ---------------------------------------------------------------------------------- zero copy ----

def test_outputs_are_shared_without_copies():
    session = tessera.InferenceSession(add_model())
    x, y = rand(2, 3, seed=1), rand(2, 3, seed=2)
    (t,) = session.run(None, {"x": x, "y": y}, as_dlpack=True)
    assert t.shape == [2, 3] and t.dtype == "float32" and t.nbytes == 24
    as_torch = torch.from_dlpack(t)
    as_numpy = np.from_dlpack(t)
    view = t.numpy()
    assert as_torch.data_ptr() == t.data_ptr
    assert as_numpy.ctypes.data == t.data_ptr
    assert view.ctypes.data == t.data_ptr
    del t  # the consumers keep the memory alive
    np.testing.assert_array_equal(as_torch.numpy(), x + y)
    np.testing.assert_array_equal(as_numpy, x + y)
    np.testing.assert_array_equal(view, x + y)
    (z,) = session.run(None, {"x": x, "y": y})
    assert not z.flags.owndata  # a view of Tessera's allocation, not a copy
    np.testing.assert_array_equal(z, x + y)


def test_contiguous_inputs_are_read_in_place_and_others_copied_and_counted():
    session = tessera.InferenceSession(add_model((4, 6)))
    base = rand(4, 6, seed=3)
    other = rand(4, 6, seed=4)

    def run(x, values=None):
        before = tessera.copy_count()
        (z,) = session.run(None, {"x": x, "y": other})
        expected = (np.asarray(x, dtype=np.float32) if values is None else values) + other
        np.testing.assert_allclose(z, expected, rtol=1e-6)
        return tessera.copy_count() - before

    read_only = base.copy()
    read_only.flags.writeable = False
    requires_grad = torch.from_numpy(base.copy()).requires_grad_(True)
    assert run(base) == 0
    assert run(read_only) == 0  # numpy refuses DLPack for these; the buffer is read in place
    assert run(torch.from_numpy(base)) == 0
    assert run(requires_grad, base) == 0  # read detached, no copy
    assert requires_grad.grad is None
    assert run(np.asfortranarray(base)) == 1
    wide = rand(4, 12, seed=5)
    assert run(wide[:, ::2]) == 1
    assert run(torch.from_numpy(wide)[:, ::2], wide[:, ::2]) == 1  # strided DLPack input
    misaligned = np.frombuffer(b"\0" + base.tobytes(), dtype=np.float32, offset=1, count=24).reshape(4, 6)
    assert misaligned.ctypes.data % 4 != 0
    assert run(misaligned) == 1
    assert run(base.astype(">f4")) == 1
    assert run(base.tolist()) == 1


def test_dlpack_only_objects_are_consumed_in_place():
    class DLPackOnly:
        def __init__(self, array):
            self.array = array
            self.shape = array.shape

        def __dlpack__(self, stream=None):
            return torch.from_numpy(self.array).__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    session = tessera.InferenceSession(add_model())
    x, y = rand(2, 3, seed=6), rand(2, 3, seed=7)
    before = tessera.copy_count()
    (z,) = session.run(None, {"x": DLPackOnly(x), "y": y})
    assert tessera.copy_count() == before
    np.testing.assert_array_equal(z, x + y)


# ------------------------------------------------------------------------------ dynamic shapes ----

def test_open_dims_are_named_and_compiled_once_for_every_shape():
    session = tessera.InferenceSession(dense_model(), max_variants=2)  # max_variants: accepted, unused
    (arg,) = session.get_inputs()
    assert arg.name == "x" and arg.shape == ["batch", 4] and arg.type == "tensor(float)"
    assert session.get_outputs()[0].shape == ["batch", 3]
    assert session.placement()  # compiled already, before any run
    for batch in (1, 3, 5, 1, 3, 7, 0):
        x = rand(batch, 4, seed=batch)
        (y,) = session.run(None, {"x": x})
        np.testing.assert_allclose(y, dense_reference(x), rtol=1e-5, atol=1e-6)
    # A shape bound up front compiles once, now; another batch is then an error naming the input.
    fixed = tessera.InferenceSession(dense_model(), input_shapes={"batch": 2})
    assert fixed.get_inputs()[0].shape == [2, 4]
    with pytest.raises(tessera.InvalidArgument, match="'x'"):
        fixed.run(None, {"x": rand(3, 4)})


# ------------------------------------------------------------------------------------- threads ----

def test_threads_share_one_session():
    session = tessera.InferenceSession(dense_model(), threads=2)
    errors = []

    def work(seed):
        try:
            for i in range(30):
                batch = 1 + (seed + i) % 4
                x = rand(batch, 4, seed=seed * 100 + i)
                (y,) = session.run(None, {"x": x})
                np.testing.assert_allclose(y, dense_reference(x), rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def run_in_flight_seen_from_another_thread(session, feed):
    """Runs session in a new thread while this one waits for the GIL, with forced GIL switches off
    (sys.setswitchinterval: the GIL then changes hands only when its holder releases it). This thread
    gets to run Python again only once the run's thread releases the GIL: if the run releases it while
    it computes, this thread looks while the run is still in flight; if the run held it, only after the
    run's thread has finished (it never blocks before). Returns (in_flight, where): whether the run had
    not finished when this thread ran again, and the file of the run thread's innermost Python frame then."""
    state = {"finished": False, "error": None}

    def worker():
        try:
            session.run(None, feed)
        except BaseException as e:  # noqa: BLE001 (reported below)
            state["error"] = e
        state["finished"] = True

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()  # waits (GIL released) for the thread to start; back here once it releases the GIL
        in_flight = not state["finished"]
        frame = sys._current_frames().get(thread.ident)
        where = frame.f_code.co_filename if frame is not None else None
        thread.join()  # releases the GIL: the run's thread takes it back and finishes
    finally:
        sys.setswitchinterval(old)
    assert state["error"] is None, state["error"]
    return in_flight, where


def test_the_gil_is_released_while_a_model_runs():
    n = 1024
    nodes, value = [], "a"
    for i in range(6):
        nodes.append(helper.make_node("MatMul", [value, "b"], ["m%d" % i]))
        value = "m%d" % i
    model = make_model(nodes, [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in ("a", "b")],
                       [helper.make_tensor_value_info(value, TensorProto.FLOAT, [n, n])])
    session = tessera.InferenceSession(model, backends="native", threads=1)
    feed = {"a": rand(n, n, seed=8) / n, "b": rand(n, n, seed=9) / n}
    # No timing: this thread runs Python while the run is in flight only if the run released the GIL.
    # Several tries, since the OS may keep this thread off both cores for the whole run (~0.3 s): a
    # GIL held through the run fails every try (the run's thread always finishes first).
    tries = []
    for _ in range(3):
        in_flight, where = run_in_flight_seen_from_another_thread(session, feed)
        tries.append((in_flight, where))
        if in_flight:
            break
    assert tries[-1][0], "another Python thread never ran while the model ran: %s" % tries
    # ... and the run's thread was inside tessera's call then (its innermost Python frame is tessera's).
    assert os.path.dirname(tries[-1][1]) == os.path.dirname(tessera.__file__), tries


def test_closing_a_session_while_another_thread_runs_it():
    session = tessera.InferenceSession(dense_model(batch=64))
    x = rand(64, 4)
    results = []

    def work():
        for _ in range(200):
            try:
                results.append(session.run(None, {"x": x})[0])
            except tessera.InvalidArgument as e:
                assert "closed" in str(e)
                return

    thread = threading.Thread(target=work)
    thread.start()
    session.close()
    thread.join()
    for y in results:
        np.testing.assert_allclose(y, dense_reference(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(tessera.InvalidArgument, match="closed"):
        session.run(None, {"x": x})


# ---------------------------------------------------------------------------------- bad input ----

@pytest.mark.parametrize("feed, message", [
    ({"x": None}, "None"),
    ({"x": np.zeros((2, 4), dtype=np.float64)}, "float64"),
    ({"x": np.zeros((2, 5), dtype=np.float32)}, "2x5"),
    ({"x": np.zeros((2, 4), dtype=np.float32), "extra": np.zeros(1)}, "unknown input"),
    ({}, "missing input"),
    ({"x": object()}, "input 'x'"),
    ({"x": np.array([["a", "b", "c", "d"]] * 2)}, "input 'x'"),
    ({"x": [[1, 2], [3]]}, "input 'x'"),
])
def test_bad_inputs_raise(feed, message):
    session = tessera.InferenceSession(dense_model(batch=2))
    with pytest.raises(tessera.InvalidArgument, match=message):
        session.run(None, feed)


def test_bad_calls_raise():
    session = tessera.InferenceSession(dense_model(batch=2))
    x = rand(2, 4)
    with pytest.raises(tessera.InvalidArgument, match="dict"):
        session.run(None, [x])
    with pytest.raises(tessera.InvalidArgument, match="unknown output"):
        session.run(["nope"], {"x": x})
    with pytest.raises(tessera.InvalidArgument, match="list of names"):
        session.run("y", {"x": x})
    with pytest.raises(tessera.InvalidArgument, match="run_options"):
        session.run(None, {"x": x}, run_options=object())
    with pytest.raises(tessera.InvalidArgument, match="at least 1"):
        session.profile({"x": x}, runs=0)
    session.close()
    session.close()
    for call in (lambda: session.run(None, {"x": x}), session.placement, session.report):
        with pytest.raises(tessera.InvalidArgument, match="closed"):
            call()


def test_bad_models_and_options_raise(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model")
    with pytest.raises(tessera.InvalidArgument):
        tessera.InferenceSession(str(garbage))
    with pytest.raises(tessera.InvalidArgument):
        tessera.InferenceSession(str(tmp_path / "absent.onnx"))
    with pytest.raises(tessera.InvalidArgument, match="directory"):
        tessera.InferenceSession(str(tmp_path))
    with pytest.raises(tessera.InvalidArgument):
        tessera.InferenceSession(b"")
    with pytest.raises(tessera.InvalidArgument, match="not int"):
        tessera.InferenceSession(42)
    unknown_op = make_model([helper.make_node("NoSuchOp", ["x"], ["y"])],
                            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(tessera.Error, match="NoSuchOp"):
        tessera.InferenceSession(unknown_op)
    with pytest.raises(tessera.InvalidArgument, match="unknown backend"):
        tessera.InferenceSession(dense_model(batch=1), backends="nope")
    with pytest.raises(tessera.InvalidArgument, match="threads"):
        tessera.InferenceSession(dense_model(batch=1), threads=0)
    with pytest.raises(tessera.InvalidArgument, match="unknown session option"):
        tessera.InferenceSession(dense_model(batch=1), options={"thread": 2})
    with pytest.raises(tessera.InvalidArgument, match="unknown argument"):
        tessera.InferenceSession(dense_model(batch=1), frobnicate=True)
    with pytest.raises(tessera.InvalidArgument, match="SELECTOR=BACKEND"):
        tessera.InferenceSession(dense_model(batch=1), place=["Relu"])
    assert issubclass(tessera.InvalidArgument, tessera.Error) and issubclass(tessera.InvalidArgument, ValueError)
    assert issubclass(tessera.Unsupported, tessera.Error) and issubclass(tessera.InternalError, tessera.Error)


# --------------------------------------------------------------- placement, reports, artifacts ----

def test_placement_options_reports_and_profile():
    session = tessera.InferenceSession(dense_model(batch=2), backends=["dnnl"], place={"op:Relu": "native"},
                                       min_region_size=1)
    assert session.get_backends() == ["dnnl", "native"]
    where = {p["node"] or p["op_type"]: p for p in session.placement()}
    relu = [p for p in session.placement() if p["op_type"] == "Relu"][0]
    assert relu["backend"] == "native" and where
    report = json.loads(session.report("json"))
    assert report  # JSON parses
    assert "<svg" in session.report("html")
    with pytest.raises(tessera.InvalidArgument):
        session.report("yaml")
    x = rand(2, 4)
    profile = session.profile({"x": x}, runs=3)
    assert profile["total_ms"] > 0 and len(profile["nodes"]) == len(session.placement())
    assert all(r["fallbacks"] == 0 for r in profile["regions"])
    np.testing.assert_allclose(profile["outputs"][0], dense_reference(x), rtol=1e-5, atol=1e-6)
    native = tessera.InferenceSession(dense_model(batch=2), backends="native")
    assert {p["backend"] for p in native.placement()} <= {"native", "folded"}
    summary = native.summary()
    assert summary["parameter_count"] == W.size + B.size


def test_compile_writes_an_artifact_that_loads_from_path_and_bytes(tmp_path):
    x = rand(3, 4)
    target = tmp_path / "dense.tsr"
    assert tessera.compile(dense_model(), target, input_shapes={"batch": 3}) == target
    for source in (target, str(target), target.read_bytes()):
        session = tessera.InferenceSession(source)
        assert session.get_inputs()[0].shape == [3, 4]
        (y,) = session.run(None, {"x": x})
        np.testing.assert_allclose(y, dense_reference(x), rtol=1e-5, atol=1e-6)
    assert tessera.InferenceSession(target).to_bytes() == target.read_bytes()
    # Unbound, the batch stays open in the artifact, which runs every batch size.
    assert tessera.compile(dense_model(), tmp_path / "open.tsr") == tmp_path / "open.tsr"
    session = tessera.InferenceSession(tmp_path / "open.tsr")
    assert session.get_inputs()[0].shape == ["batch", 4]
    for batch in (5, 1, 0, 2):
        xb = rand(batch, 4)
        (y,) = session.run(None, {"x": xb})
        np.testing.assert_allclose(y, dense_reference(xb), rtol=1e-5, atol=1e-6)
    with pytest.raises(tessera.InvalidArgument, match="already a compiled artifact"):
        tessera.compile(target, tmp_path / "again.tsr")
    corrupt = bytearray(target.read_bytes())
    corrupt[-3] ^= 0xFF
    with pytest.raises(tessera.InvalidArgument, match="checksum"):
        tessera.InferenceSession(bytes(corrupt))


def test_backends_lists_the_built_in_backends():
    names = [b["name"] for b in tessera.backends()]
    assert "native" in names and "dnnl" in names
    assert all(b["description"] for b in tessera.backends())


# ------------------------------------------------------------------------------------- precision --

def two_matmul_model(rows=6):
    """y = relu(x @ W1) @ W2: the first MatMul may run in bf16, the second is the final layer."""
    w1 = (np.random.default_rng(3).standard_normal((32, 48)) / 6).astype(np.float32)
    w2 = (np.random.default_rng(4).standard_normal((48, 8)) / 7).astype(np.float32)
    model = make_model(
        [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "W2"], ["y"], name="mm2")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 8])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
    return model, w1, w2


def bf16(a):
    """Rounds float32 to bfloat16 (nearest, ties to even), kept as float32: the reference's own rounding."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def test_precision_bf16_runs_the_first_matmul_in_bf16_and_reports_it(tmp_path):
    model, w1, w2 = two_matmul_model()
    x = rand(6, 32, seed=5)
    if not cpu_isa.dnnl_bf16():
        # No AVX512_BF16 on this CPU (or oneDNN capped below it): float32 on oneDNN, one warning, the reason.
        with pytest.warns(RuntimeWarning, match="without AVX512_BF16"):
            session = tessera.InferenceSession(model.SerializeToString(), backends="dnnl,native", precision="bf16")
        rows = {row["node"]: row for row in session.placement()}
        assert rows["mm1"]["backend"] == "dnnl" and rows["mm1"]["precision"] == ""
        assert "this CPU runs oneDNN at %s, without AVX512_BF16" % cpu_isa.dnnl_isa_name() in rows["mm1"]["precision_note"]
        expected = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)
        return
    session = tessera.InferenceSession(model.SerializeToString(), backends="dnnl,native", precision="bf16")
    rows = {row["node"]: row for row in session.placement()}
    assert rows["mm1"]["precision"] == "bf16"
    assert rows["mm2"]["precision"] == ""
    assert "final layer" in rows["mm2"]["precision_note"]
    (y,) = session.run(None, {"x": x})
    # Independent reference: the first product on bf16-rounded operands, in float64.
    h = np.maximum(bf16(x).astype(np.float64) @ bf16(w1).astype(np.float64), 0)
    expected = h @ w2.astype(np.float64)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    exact = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    assert np.max(np.abs(y - exact)) > 1e-5, "identical to float32: the operands were not rounded"
    # bf16-all reduces the final layer too.
    session_all = tessera.InferenceSession(model.SerializeToString(), backends="dnnl,native", precision="bf16-all")
    assert [r["precision"] for r in session_all.placement() if r["op_type"] == "MatMul"] == ["bf16", "bf16"]
    # The artifact keeps it.
    path = tmp_path / "bf16.tsr"
    tessera.compile(model.SerializeToString(), path, backends="dnnl,native", precision="bf16")
    loaded = tessera.InferenceSession(str(path))
    assert {r["node"]: r["precision"] for r in loaded.placement()}["mm1"] == "bf16"
    np.testing.assert_array_equal(loaded.run(None, {"x": x})[0], y)


def test_precision_bf16_without_a_bf16_backend_warns_and_runs_float32():
    model, w1, w2 = two_matmul_model()
    x = rand(6, 32, seed=6)
    with pytest.warns(RuntimeWarning, match="no node runs in bfloat16"):
        session = tessera.InferenceSession(model.SerializeToString(), backends="native", precision="bf16")
    note = {r["node"]: r["precision_note"] for r in session.placement()}["mm1"]
    assert "computes in float32 only" in note
    expected = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)


def test_precision_bad_value_is_an_invalid_argument():
    model, _, _ = two_matmul_model()
    with pytest.raises(tessera.InvalidArgument, match="unknown precision 'fp8'"):
        tessera.InferenceSession(model.SerializeToString(), precision="fp8")


# ----------------------------------------------------------------------------------------- check --

def test_check_passes_a_correct_session_and_finds_a_planted_error(monkeypatch):
    model, w1, w2 = two_matmul_model()
    x = rand(6, 32, seed=7)
    session = tessera.InferenceSession(model.SerializeToString(), backends="test,native")
    report = session.check({"x": x})
    compared = [r for r in report["regions"] if r["compared"]]
    assert compared and report["regions_over_tolerance"] == 0
    assert all(o["relative_error"] <= 1e-6 and o["max_reference"] > 0 for r in compared for o in r["outputs"])
    assert "all within tolerance" in session.check({"x": x}, format="table")
    page = session.check({"x": x}, format="html")
    assert page.startswith("<!DOCTYPE html>") and "all within tolerance" in page
    # The test backend with a 1% error planted in its MatMul (read when a region is loaded).
    monkeypatch.setenv("TESSERA_TEST_BACKEND_PLANTED_ERROR", "MatMul")
    planted = tessera.InferenceSession(model.SerializeToString(), backends="test,native")
    report = planted.check({"x": x})
    flagged = [r for r in report["regions"] if not r["within_tolerance"]]
    assert report["regions_over_tolerance"] == len(flagged) >= 1
    assert all(r["backend"] == "test" for r in flagged)
    # Both MatMuls of the one test region are off by 1%: about 2% at its output.
    assert any(0.005 < o["relative_error"] < 0.03 for r in flagged for o in r["outputs"])
    assert planted.check({"x": x}, tolerance=0.05)["regions_over_tolerance"] == 0
    with pytest.raises(tessera.InvalidArgument):
        planted.check({"x": x}, min_cosine=2.0)
    wide = planted.check({"x": x}, reference="fp64")
    assert wide["reference"] == "native (float64)" and wide["regions_over_tolerance"] >= 1
    with pytest.raises(tessera.InvalidArgument):
        planted.check({"x": x}, reference="fp16")


def test_open_dims_that_break_a_broadcast_name_the_node_and_the_session_goes_on():
    # x[a, 4] + y[b, 4]: two open dims of different names, which the model broadcasts; at shapes that
    # do not broadcast, the error names the node and both shapes, and later calls still run.
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"], name="the_add"), helper.make_node("Relu", ["z"], ["r"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    session = tessera.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x, y = rand(2, 4, seed=1), rand(1, 4, seed=2)
    np.testing.assert_allclose(session.run(None, {"x": x, "y": y})[0], np.maximum(x + y, 0), rtol=1e-6)
    with pytest.raises(tessera.InvalidArgument, match=r"the_add.*2x4.*3x4"):
        session.run(None, {"x": x, "y": rand(3, 4, seed=3)})
    x5, y5 = rand(5, 4, seed=4), rand(5, 4, seed=5)
    np.testing.assert_allclose(session.run(None, {"x": x5, "y": y5})[0], np.maximum(x5 + y5, 0), rtol=1e-6)
    # Dims of one name must agree: batch in both inputs.
    graph.input[1].type.tensor_type.shape.dim[0].dim_param = "a"
    same = tessera.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(tessera.InvalidArgument, match=r"input 'y' dimension 0 \('a'\) is 1, but input 'x' dimension 0"):
        same.run(None, {"x": x, "y": y})


def test_an_open_dim_that_breaks_a_broadcast_against_a_constant_names_the_node():
    # x[2, len] * c[6]: the model's shapes make the product [2, 6] (len can only be 1 or 6), so the plan
    # fixes it; at len 7 the run must say so, naming the node and the shapes (it was an internal error
    # from the kernel), and later calls at fitting shapes still run.
    c = np.arange(6, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "c"], ["y"], name="the_mul"), helper.make_node("Tanh", ["y"], ["t"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "len"])],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 6])],
        [numpy_helper.from_array(c, "c")])
    session = tessera.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    for length in (6, 1):
        x = rand(2, length, seed=length)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], np.tanh(x * c), rtol=1e-6, atol=1e-7)
    with pytest.raises(tessera.InvalidArgument, match=r"the_mul.*2x7.*\b6\b"):
        session.run(None, {"x": rand(2, 7, seed=7)})
    x = rand(2, 6, seed=8)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], np.tanh(x * c), rtol=1e-6, atol=1e-7)
