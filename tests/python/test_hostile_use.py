"""Use that a careless or hostile user tries (issue 22, section 3), each as a
regression test: paths with NUL bytes, writing the quantized model over the
float one, calibration data that is not finite, more threads than CPUs,
error messages quoting bytes that are not UTF-8, and a native node placed
below a backend that refused it saying why."""

import os
import subprocess
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

CLI = os.environ.get("TESSERA_CLI")


def conv_model(rows=8):
    """y = relu(conv(x, w)): a model tessera.quantize can quantize."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, rows, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, rows, rows])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def sample(seed=1):
    return {"x": np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)}


# ------------------------------------------------------------------------------------ NUL bytes --

def test_a_path_with_a_nul_byte_is_refused_and_writes_nothing(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    model = conv_model().SerializeToString()
    with pytest.raises(tessera.InvalidArgument, match=r"notes\.txt\\0\.tsr' contains a NUL byte"):
        tessera.compile(model, str(notes) + "\0.tsr")
    assert notes.read_text() == "keep me"
    session = tessera.InferenceSession(model)
    with pytest.raises(tessera.InvalidArgument, match="NUL byte"):
        session.save(str(notes) + "\0.tsr")
    assert notes.read_text() == "keep me"
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    with pytest.raises(tessera.InvalidArgument, match="NUL byte"):
        tessera.InferenceSession(str(path) + "\0ignored")
    with pytest.raises(tessera.InvalidArgument, match="NUL byte"):
        tessera.quantize(str(path), str(notes) + "\0.onnx", calibration=[sample()])
    assert notes.read_text() == "keep me"
    with pytest.raises(tessera.InvalidArgument, match="NUL byte"):
        tessera.InferenceSession(model, input_shapes={"x\0y": [1, 3, 8, 8]})


# ------------------------------------------------------------------------------------- quantize --

def test_quantize_refuses_to_write_over_the_float_model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    before = path.read_bytes()
    with pytest.raises(tessera.InvalidArgument, match="is the float model .* itself"):
        tessera.quantize(str(path), str(path), calibration=[sample()])
    # Another spelling of the same file (a hard link) is the same file.
    link = tmp_path / "link.onnx"
    os.link(str(path), str(link))
    with pytest.raises(tessera.InvalidArgument, match="is the float model"):
        tessera.quantize(str(path), str(link), calibration=[sample()])
    assert path.read_bytes() == before
    run = subprocess.run([CLI, "quantize", str(path), "-o", str(path), "--random", "2"], capture_output=True, text=True)
    assert run.returncode != 0 and "is the float model" in run.stderr, run.stderr
    assert path.read_bytes() == before


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_quantize_refuses_non_finite_calibration_samples(tmp_path, bad):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    good, poisoned = sample(1), sample(2)
    poisoned["x"][0, 1, 2, 3] = bad
    out = tmp_path / "q.onnx"
    with pytest.raises(tessera.InvalidArgument, match=r"calibration sample 2: input 'x' has a non-finite value .* element 83"):
        tessera.quantize(str(path), str(out), calibration=[good, poisoned])
    assert not out.exists()
    every = {"x": np.full((1, 3, 8, 8), bad, np.float32)}
    with pytest.raises(tessera.InvalidArgument, match="non-finite"):
        tessera.quantize(str(path), str(out), calibration=[every])
    assert not out.exists()


def test_quantize_names_a_tensor_with_no_finite_value(tmp_path):
    """x * inf is infinite for every finite non-zero sample: no range to quantize the Conv's input to."""
    w = np.ones((2, 1, 1, 1), np.float32)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "big"], ["m"], name="mul"),
         helper.make_node("Conv", ["m", "w"], ["y"], name="conv")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])],
        [numpy_helper.from_array(np.array(np.inf, np.float32), "big"), numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "inf.onnx"
    onnx.save(model, str(path))
    with pytest.raises(tessera.InvalidArgument, match="tensor 'm' has no finite value in any of the 1 samples"):
        tessera.quantize(str(path), str(tmp_path / "q.onnx"), calibration=[{"x": np.ones((1, 1, 2, 2), np.float32)}])


# -------------------------------------------------------------------------------------- threads --

def test_more_threads_than_cpus_warns():
    cpus = len(os.sched_getaffinity(0))
    with pytest.warns(RuntimeWarning, match="--threads %d is more than the %d CPUs" % (cpus + 1, cpus)):
        tessera.InferenceSession(conv_model().SerializeToString(), threads=cpus + 1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # at most the CPU count: no warning
        tessera.InferenceSession(conv_model().SerializeToString(), threads=cpus)


# ------------------------------------------------------------------------------------- messages --

def test_a_message_quoting_bytes_that_are_not_utf8_reaches_python_escaped(tmp_path):
    """A file name of bytes that are not UTF-8: the message names it (escaped), it is not empty."""
    name = os.fsencode(str(tmp_path)) + b"/bad\xff\xfe.onnx"
    with open(name, "wb") as f:
        f.write(b"not a model")
    with pytest.raises(tessera.InvalidArgument) as caught:
        tessera.InferenceSession(os.fsdecode(name))
    message = str(caught.value)
    assert "bad" in message and ".onnx" in message, message
    assert "\\xff\\xfe" in message, message


# ------------------------------------------------------------------------------------ placement --

def test_a_node_below_its_first_choice_says_why_the_others_refused():
    """Erf is not oneDNN's: native runs it, and its placement reason quotes oneDNN's refusal."""
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="erf")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    session = tessera.InferenceSession(model.SerializeToString(), backends="dnnl,native")
    row = {p["node"]: p for p in session.placement()}["erf"]
    assert row["backend"] == "native"
    assert row["reason"].startswith("claimed (priority 2 of 2; dnnl refused: "), row["reason"]


# -------------------------------------------------------------------------------------- races --

def relu_model():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


RACE_RUNS = 300  # per thread


def yield_after(session, method, seconds):
    """Makes session.METHOD sleep (releasing the GIL) after it returns: a thread switch at that point."""
    inner = getattr(session, method)

    def then_yield(*args):
        result = inner(*args)
        time.sleep(seconds)
        return result

    setattr(session, method, then_yield)


def test_the_variant_cache_never_closes_a_variant_another_thread_is_about_to_run():
    """Open dims, max_variants=1, 4 threads on shapes that keep evicting each other: every run succeeds
    (the cache once closed a variant another thread held, which then failed with 'the session is closed')."""
    import threading
    session = tessera.InferenceSession(relu_model(), max_variants=1)
    errors, done = [], [0]
    # Widen the window between taking a variant and running it, as a thread switch there would.
    yield_after(session, "_variant", 0.0002)

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(RACE_RUNS):
            x = rng.standard_normal(int(rng.integers(1, 6))).astype(np.float32)
            try:
                y = session.run(None, {"x": x})[0]
                np.testing.assert_array_equal(y, np.maximum(x, 0))
                done[0] += 1
            except Exception as e:  # noqa: BLE001 -- any failure is the finding
                errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert done[0] == 4 * RACE_RUNS


def test_close_during_runs_and_compiles_raises_only_the_closed_error():
    """close() while other threads compile new shapes and run: each either finishes or raises
    tessera.InvalidArgument('the session is closed'), never an AttributeError from a half-closed session."""
    import threading
    for attempt in range(5):
        session = tessera.InferenceSession(relu_model(), max_variants=2)
        unexpected = []
        # Widen the window between run()'s open check and its use of the session, as a thread switch would.
        yield_after(session, "_ordered_inputs", 0.0005)

        def work(seed):
            rng = np.random.default_rng(seed)
            for _ in range(200):
                x = rng.standard_normal(int(rng.integers(1, 50))).astype(np.float32)
                try:
                    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))
                except tessera.InvalidArgument as e:
                    if "closed" not in str(e):
                        unexpected.append(repr(e))
                    return
                except Exception as e:  # noqa: BLE001
                    unexpected.append(repr(e))
                    return

        threads = [threading.Thread(target=work, args=(attempt * 10 + s,)) for s in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.002 * attempt)
        session.close()
        for t in threads:
            t.join()
        assert not unexpected, unexpected[:3]


# ----------------------------------------------------------------------------------- CLI outputs --

def cli_run(*args):
    result = subprocess.run([CLI, "run", *map(str, args)], capture_output=True)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout.decode("utf-8", "surrogateescape")


def test_a_string_output_that_is_not_utf8_is_written_exactly(tmp_path):
    """A model's string output may hold any bytes: run --output-dir writes it (each invalid byte as
    U+DC80 + byte, Python's surrogateescape) with the other outputs, and says so (it wrote nothing)."""
    words = [b"ok", b"bad\xff\xfe", b"\xc3\xa9t\xc3\xa9", b"\xed\xa0\x80"]  # valid, invalid, UTF-8, a surrogate
    graph = helper.make_graph(
        [helper.make_node("Identity", ["words"], ["s"], name="c"),
         helper.make_node("Identity", ["x"], ["y"], name="i")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s", TensorProto.STRING, [4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor("words", TensorProto.STRING, [4], words)])
    path = tmp_path / "strings.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.save(tmp_path / "x.npy", np.array([1.5, -2], np.float32))
    out = cli_run(path, "--input", "x=%s" % (tmp_path / "x.npy"), "--output-dir", tmp_path / "out")
    assert "2 strings are not valid UTF-8" in out and "surrogateescape" in out, out
    s = np.load(tmp_path / "out" / "s.npy")
    assert [e.encode("utf-8", "surrogateescape") for e in s.tolist()] == words
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), [1.5, -2])


def test_a_sequence_folder_and_a_tensor_file_of_one_name_do_not_collide(tmp_path):
    """A sequence output 'y.npy' (the folder y.npy/) and a tensor output 'y' (the file y.npy)."""
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["y.npy"], name="seq"),
         helper.make_node("Neg", ["x"], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_value_info("y.npy", helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, None))),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "clash.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.array([1, 2, -3], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = cli_run(path, "--input", "x=%s" % (tmp_path / "x.npy"), "--output-dir", tmp_path / "out")
    assert "'y.npy' and 'y' would both be written to y.npy" in out, out
    for k in (0, 1):
        np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy" / ("%d.npy" % k)), x)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y~2.npy"), -x)


def test_the_summary_of_an_output_with_nan_says_so(tmp_path):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="i")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "id.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    np.save(tmp_path / "x.npy", np.array([np.nan, 0, 0, 3], np.float32))
    out = cli_run(path, "--input", "x=%s" % (tmp_path / "x.npy"))
    assert "min 0 max 3 mean 1 (of the 3 values that are not NaN; 1 NaN)" in out, out
    assert "-nan" not in out
    np.save(tmp_path / "x.npy", np.full(4, np.nan, np.float32))
    assert "all 4 NaN" in cli_run(path, "--input", "x=%s" % (tmp_path / "x.npy"))


# --------------------------------------------------------------------------- progress callbacks --

def test_a_raising_progress_callback_stops_quantize_and_nothing_is_written(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    out = tmp_path / "q.onnx"
    calls = []

    def progress(phase, done, total):
        calls.append(done)
        if done == 2:
            raise KeyError("enough")

    with pytest.raises(RuntimeError, match="quantize: the progress callback raised: .*enough"):
        tessera.quantize(str(path), str(out), calibration=[sample(k) for k in range(6)], progress=progress)
    assert calls == [1, 2], calls  # stopped at the raise, not run to the end
    assert not out.exists()
    # An existing file is left as it was.
    out.write_bytes(b"keep")
    with pytest.raises(RuntimeError, match="progress callback raised"):
        tessera.quantize(str(path), str(out), calibration=[sample(k) for k in range(6)], progress=progress)
    assert out.read_bytes() == b"keep"


# ---------------------------------------------------------------------- options of an artifact --

def artifact(backends="dnnl,native"):
    """conv_model compiled to .tsr bytes (conv on dnnl; with "test,dnnl,native" relu on test)."""
    return tessera.InferenceSession(conv_model().SerializeToString(), backends=backends).to_bytes()


@pytest.mark.parametrize("option, value", [
    ("backends", "native"), ("backends", ["native"]), ("place", {"conv": "native"}), ("place", "conv=native"),
    ("deny", "dnnl:conv"), ("min_region_size", 2), ("strict", True), ("input_shapes", {"x": [1, 3, 8, 8]}),
    ("freeze_weights", False), ("precision", "bf16"), ("tuning", "record.json"),
])
def test_a_session_of_an_artifact_refuses_options_its_compile_fixed(option, value):
    """They were once ignored without a word: the artifact ran as it was compiled (conv on dnnl after
    backends="native"). Given as a keyword argument, in SessionOptions or in an options dict."""
    data = artifact()
    for kwargs in ({option: value}, {"options": tessera.SessionOptions(**{option: value})},
                   {"options": {option: value}}):
        with pytest.raises(tessera.InvalidArgument, match=r"option '%s' cannot apply to <bytes>: it is a compiled "
                           r"\.tsr artifact, whose placement, precision and input shapes were fixed when it was "
                           r"compiled" % option):
            tessera.InferenceSession(data, **kwargs)


def test_a_session_of_an_artifact_takes_threads_and_options_left_at_their_defaults(tmp_path):
    data = artifact()
    path = tmp_path / "m.tsr"
    path.write_bytes(data)
    expected = tessera.InferenceSession(data).run(None, sample())[0]
    for source in (data, str(path)):
        session = tessera.InferenceSession(source, threads=2, strict=False, freeze_weights=True, min_region_size=1,
                                           precision="fp32", place=[], deny={}, input_shapes={}, max_variants=3,
                                           providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(session.run(None, sample())[0], expected)
    # Several at once are named together; providers that name backends are backends.
    with pytest.raises(tessera.InvalidArgument, match=r"options 'backends', 'strict' cannot apply to .*m\.tsr"):
        tessera.InferenceSession(str(path), backends="native", strict=True)
    with pytest.raises(tessera.InvalidArgument, match=r"option 'backends' \(given as providers\) cannot apply"):
        tessera.InferenceSession(data, providers=["native", "CPUExecutionProvider"])
    # precision="fp32" is refused only by an artifact that computes in bf16 (where a backend runs bf16 here).
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no backend runs bf16", on CPUs without AVX512_BF16
        bf16 = tessera.InferenceSession(conv_model().SerializeToString(), backends="dnnl,native", precision="bf16")
    if any(p["precision"] == "bf16" for p in bf16.placement()):
        with pytest.raises(tessera.InvalidArgument, match=r"option 'precision' cannot apply .*\(it computes in bf16\)"):
            tessera.InferenceSession(bf16.to_bytes(), precision="fp32")
    else:
        tessera.InferenceSession(bf16.to_bytes(), precision="fp32")


@pytest.mark.parametrize("backends, used", [("dnnl,native", ["dnnl"]), ("native", ["native"]),
                                            ("test,dnnl,native", ["test", "dnnl"])])
def test_get_backends_of_an_artifact_names_the_backends_its_placement_uses(backends, used):
    """Once ['native'] (the default list of a session given no backends) while every node ran on dnnl.
    Highest priority first: test (priority 1) runs relu, after dnnl's conv, and still comes first."""
    session = tessera.InferenceSession(artifact(backends))
    assert session.get_backends() == used
    assert session.get_providers() == used
    assert {p["backend"] for p in session.placement()} == set(used)


# --------------------------------------------------------------------------------- option types --

BAD_OPTIONS = [  # (option, value of a wrong type, the message after "option 'NAME' must be ": expected and given)
    ("threads", "2", "an int, not str"), ("threads", 2.0, "an int, not float"), ("threads", True, "an int, not bool"),
    ("backends", 3, "a str or a list of str, not int"), ("backends", b"dnnl", "a str or a list of str, not bytes"),
    ("backends", ["dnnl", 3], "a str or a list of str; its item 1 is int"),
    ("place", 3, "a str, a list of str or a dict {selector: backend}, not int"),
    ("place", {"conv": 1}, "a str, a list of str or a dict {selector: backend}; it maps str .* to int"),
    ("deny", [None], "a str, a list of str or a dict {backend: selector}; its item 0 is NoneType"),
    ("min_region_size", 1.5, "an int, not float"), ("min_region_size", "2", "an int, not str"),
    ("strict", "yes", "a bool .*, not str"), ("strict", 1, "a bool .*, not int"),
    ("freeze_weights", "no", "a bool .*, not str"),
    ("input_shapes", [1, 3, 8, 8], "a dict .*, not list"),
    ("input_shapes", {"x": "1,3,8,8"}, "a dict .*'x' maps to str"),
    ("input_shapes", {"x": [1, 3, 8.0, 8]}, "a dict .*dimension 2 of 'x' is float"),
    ("input_shapes", {3: [1, 3, 8, 8]}, "a dict .*a key is int"),
    ("max_variants", "3", "an int, not str"), ("precision", 16, "a str, not int"),
    ("tuning", 3, r"a path \(str, bytes or os.PathLike\), not int"),
]


@pytest.mark.parametrize("option, value, expected", BAD_OPTIONS, ids=["%s=%r" % (o, v) for o, v, _ in BAD_OPTIONS])
def test_an_option_of_the_wrong_type_is_named_in_the_error(option, value, expected, tmp_path):
    """Once pybind11's "Unable to cast Python instance to C++ type" (or a bare TypeError, or 8.7 taken as 8)."""
    model = conv_model().SerializeToString()
    pattern = r"option '%s' must be %s" % (option, expected)
    attempts = [
        lambda: tessera.InferenceSession(model, **{option: value}),
        lambda: tessera.InferenceSession(model, options={option: value}),
        lambda: tessera.SessionOptions(**{option: value}),
        lambda: setattr(tessera.SessionOptions(), option, value),
    ]
    if option != "max_variants":  # compile takes every other option
        attempts.append(lambda: tessera.compile(model, str(tmp_path / "m.tsr"), **{option: value}))
    for attempt in attempts:
        with pytest.raises(tessera.InvalidArgument, match=pattern) as caught:
            attempt()
        assert "Unable to cast" not in str(caught.value)
    assert not (tmp_path / "m.tsr").exists()


def test_options_of_the_right_types_in_their_other_spellings_are_taken(tmp_path):
    model = conv_model().SerializeToString()
    options = tessera.SessionOptions(threads=np.int64(1), backends=("dnnl", "native"), strict=np.bool_(False),
                                     input_shapes={"x": np.array([1, 3, 8, 8])}, min_region_size=np.int32(1),
                                     place=("conv=dnnl",), deny={"native": "relu"}, precision="fp32",
                                     max_variants=np.int16(2))
    options.intra_op_num_threads = 2
    session = tessera.InferenceSession(model, options=options)
    assert session.run(None, sample())[0].shape == (1, 4, 8, 8)
    assert [p["backend"] for p in session.placement()] == ["dnnl", "dnnl"]
    assert tessera.compile(model, tmp_path / "m.tsr", input_shapes={"x": (1, 3, 8, 8)}) == tmp_path / "m.tsr"
    # Out of a C int's range: the library's own range check, not a failed cast.
    with pytest.raises(tessera.InvalidArgument, match="option 'threads': '1099511627776' is not an integer from 1 to 1024"):
        tessera.InferenceSession(model, threads=2 ** 40)
    with pytest.raises(tessera.InvalidArgument, match="option 'input_shapes': dimension 2 of 'x' .* is out of range"):
        tessera.InferenceSession(model, input_shapes={"x": [1, 3, 2 ** 70, 8]})
    with pytest.raises(tessera.InvalidArgument, match="option 'providers' must be a list of str; its item 0 is int"):
        tessera.InferenceSession(model, providers=[3])
    with pytest.raises(tessera.InvalidArgument, match=r"the output path must be a path \(str, bytes or os.PathLike\)"):
        tessera.compile(model, 3)


# ------------------------------------------------------------------------------ bool and DLPack --

def not_model():
    graph = helper.make_graph([helper.make_node("Not", ["x"], ["y"], name="not")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.BOOL, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def test_a_bool_output_as_dlpack_feeds_a_bool_input():
    """The Tensor's __dlpack__ hands bools over as uint8 (DLPack 0.6 has no bool), which a bool input once
    refused ("expected bool[2x3], got uint8[2x3]"): it is read as bool, in place."""
    session = tessera.InferenceSession(not_model())
    x = np.array([[True, False, True], [False, False, True]])
    (y,) = session.run(None, {"x": x}, as_dlpack=True)
    assert isinstance(y, tessera.Tensor) and y.dtype == "bool"
    copies = tessera.copy_count()
    (z,) = session.run(None, {"x": y})
    np.testing.assert_array_equal(z, x)
    assert tessera.copy_count() == copies  # no copy
    (w,) = session.run(None, {"x": y}, as_dlpack=True)  # Tensor to Tensor, twice
    (v,) = session.run(None, {"x": w})
    np.testing.assert_array_equal(w.numpy(), x)
    np.testing.assert_array_equal(v, ~x)
    # A consumer's uint8 view of it is refused, saying why and what to do.
    with pytest.raises(tessera.InvalidArgument, match=r"got uint8\[2x3\] \(a bool output of run\(\.\.\., "
                                                      r"as_dlpack=True\) reaches .* as uint8"):
        session.run(None, {"x": np.from_dlpack(y)})


def resident_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_thousands_of_shapes_keep_memory_bounded(tmp_path, monkeypatch):
    # A convolution with open height and width, fed 1,400 distinct shapes through one session compiled
    # once: oneDNN's process-wide primitive cache (1024 entries by default) held every shape's JIT code,
    # 45 -> 141 MB; Tessera turns it off (ONEDNN_PRIMITIVE_CACHE_CAPACITY still wins), and bounds what its
    # oneDNN regions keep per shape by bytes (TESSERA_SHAPE_CACHE_MB, read when the region loads; here
    # 8 MB, about 55 shapes of this model: the default, 128, would be reached after the loop).
    assert "ONEDNN_PRIMITIVE_CACHE_CAPACITY" not in os.environ and "DNNL_PRIMITIVE_CACHE_CAPACITY" not in os.environ
    monkeypatch.setenv("TESSERA_SHAPE_CACHE_MB", "8")
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = str(tmp_path / "conv.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    session = tessera.InferenceSession(path)
    shapes = [(4 + a, 4 + b) for a in range(35) for b in range(40)]
    after_warmup = None
    for k, (h, w_) in enumerate(shapes):
        x = rng.standard_normal((1, 16, h, w_)).astype(np.float32)
        y = session.run(None, {"x": x})[0]
        if k % 200 == 0:  # still the right answer, at a few of the shapes
            xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
            windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
            ref = np.maximum(np.einsum("nchwij,ocij->nohw", windows, numpy_helper.to_array(w)), 0)
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
        if k == 0:
            assert {p["backend"] for p in session.placement()} == {"dnnl"}
        if k == 200:
            after_warmup = resident_mb()
    grown = resident_mb() - after_warmup
    assert grown < 30, f"resident memory grew {grown:.0f} MB over {len(shapes) - 200} more shapes"


def test_an_output_of_unknown_rank_is_not_described_as_a_scalar(tmp_path):
    # z comes from an If whose branches give a rank-3 and a rank-2 tensor: not even its rank is known
    # before running. It was described as a scalar (shape [], "float32[scalar]").
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Identity", ["y"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "a"], ["y"]),
         helper.make_node("If", ["c"], ["z"], then_branch=then_branch, else_branch=else_branch)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4]),
         helper.make_tensor_value_info("a", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    path = str(tmp_path / "if.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    artifact_path = str(tmp_path / "if.tsr")
    tessera.compile(path, artifact_path)
    for source in (path, artifact_path):
        session = tessera.InferenceSession(source)
        shapes = {o.name: o.shape for o in session.get_outputs()}
        assert shapes == {"y": [None, None], "z": None}, (source, shapes)
        assert session.get_inputs()[2].shape == []  # a real scalar stays one
        x = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
        for c, rank in ((True, 3), (False, 2)):
            z = session.run(["z"], {"x": x, "a": np.array([1]), "c": np.array(c)})[0]
            assert z.ndim == rank and np.array_equal(z.reshape(-1), x.reshape(-1))
        info = subprocess.run([CLI, "info", source], capture_output=True, text=True)
        assert info.returncode == 0, info.stderr
        assert "output z: float32[any rank]" in info.stdout and "input  c: bool[scalar]" in info.stdout, info.stdout
