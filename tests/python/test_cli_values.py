"""Sequences, optionals and string tensors through `tessera run`: a sequence input is a folder of 0.npy, 1.npy,
...; an optional input a file, a folder or 'none'; strings numpy str arrays. Outputs: a sequence becomes
DIR/<name>/0.npy, ...; an empty optional writes nothing. numpy is the independent reference."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

CLI = os.environ.get("TESSERA_CLI")


def save_model(path, nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def seq_info(name, elem=TensorProto.FLOAT):
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None)))


def run(*args, ok=True):
    assert CLI, "TESSERA_CLI must name the tessera binary"
    result = subprocess.run([CLI, "run", *map(str, args)], capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def write_folder(folder, arrays):
    folder.mkdir()
    for k, a in enumerate(arrays):
        np.save(folder / f"{k}.npy", a)
    return folder


def test_sequence_in_and_out(tmp_path):
    # s2 = s with x inserted at position 1; c = concat(s2, axis 0); parts = split(x, 2).
    model = save_model(tmp_path / "m.onnx",
                       [helper.make_node("SequenceInsert", ["s", "x", "one"], ["s2"]),
                        helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0),
                        helper.make_node("SplitToSequence", ["x", "two"], ["parts"], axis=1),
                        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
                        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2]))],
                       [seq_info("s"), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                       [helper.make_tensor_value_info("c", TensorProto.FLOAT, None), seq_info("parts")])
    rng = np.random.default_rng(0)
    items = [rng.standard_normal((k + 1, 5)).astype(np.float32) for k in range(3)]
    x = rng.standard_normal((2, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    folder = write_folder(tmp_path / "s", items)
    out = tmp_path / "out"
    r = run(model, "--input", f"s={folder}", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out)
    assert "sequence of 3 tensors" in r.stdout
    np.testing.assert_array_equal(np.load(out / "c.npy"), np.concatenate([items[0], x, items[1], items[2]]))
    expected = np.array_split(x, [2, 4], axis=1)
    assert sorted(os.listdir(out / "parts")) == ["0.npy", "1.npy", "2.npy"]
    for k, part in enumerate(expected):
        np.testing.assert_array_equal(np.load(out / "parts" / f"{k}.npy"), part)
    # An empty sequence folder is an empty sequence: c is x alone. Stale files of the longer run are removed.
    empty = write_folder(tmp_path / "empty", [])
    x1 = x[:, :1].copy()
    np.save(tmp_path / "x1.npy", x1)
    model1 = save_model(tmp_path / "m1.onnx",
                        [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
                         helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0),
                         helper.make_node("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=0)],
                        [seq_info("s"), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1])],
                        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None), seq_info("parts")])
    run(model1, "--input", f"s={empty}", "--input", f"x={tmp_path / 'x1.npy'}", "--output-dir", out)
    np.testing.assert_array_equal(np.load(out / "c.npy"), x1)
    assert sorted(os.listdir(out / "parts")) == ["0.npy", "1.npy"]
    np.testing.assert_array_equal(np.load(out / "parts" / "1.npy"), x1[1])


def test_optional_and_strings(tmp_path):
    model = save_model(tmp_path / "m.onnx",
                       [helper.make_node("OptionalHasElement", ["o"], ["has"]),
                        helper.make_node("Cast", ["x"], ["text"], to=TensorProto.STRING),
                        helper.make_node("StringNormalizer", ["words"], ["normal"], case_change_action="LOWER",
                                         stopwords=["the", "ÉTÉ"])],
                       [helper.make_value_info("o", helper.make_optional_type_proto(
                           helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))),
                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                        helper.make_tensor_value_info("words", TensorProto.STRING, [6])],
                       [helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                        helper.make_tensor_value_info("text", TensorProto.STRING, [4]),
                        helper.make_tensor_value_info("normal", TensorProto.STRING, None)])
    x = np.array([0.1, -2.5, 1e-7, 3.4028235e38], np.float32)
    np.save(tmp_path / "x.npy", x)
    words = np.array(["The", "Quick", "THE", "été", "brown", "Énorme"])
    np.save(tmp_path / "w.npy", words)
    np.save(tmp_path / "o.npy", np.zeros(3, np.float32))
    out = tmp_path / "out"
    for spec, has in ((tmp_path / "o.npy", True), ("none", False)):
        run(model, "--input", f"o={spec}", "--input", f"x={tmp_path / 'x.npy'}", "--input", f"words={tmp_path / 'w.npy'}",
            "--output-dir", out)
        assert bool(np.load(out / "has.npy")) is has
    text = np.load(out / "text.npy")
    assert text.dtype.kind == "U"
    # Shortest text that reads back to the same float32.
    assert [np.float32(t) for t in text] == list(x)
    assert list(text[:2]) == ["0.1", "-2.5"]
    # Case folding is Unicode's (str.lower agrees here): the stop word 'ÉTÉ' removes 'été', 'Énorme' is lowered.
    assert list(np.load(out / "normal.npy")) == [w.lower() for w in ["Quick", "brown", "Énorme"]]


def test_bad_value_inputs(tmp_path):
    model = save_model(tmp_path / "m.onnx", [helper.make_node("SequenceLength", ["s"], ["n"])], [seq_info("s")],
                       [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    folder = write_folder(tmp_path / "s", [np.zeros(2, np.float32), np.ones(3, np.float32)])
    r = run(model, "--input", f"s={folder}", "--output-dir", tmp_path / "out")
    assert int(np.load(tmp_path / "out" / "n.npy")) == 2
    cases = []
    gap = write_folder(tmp_path / "gap", [np.zeros(2, np.float32)])
    os.rename(gap / "0.npy", gap / "1.npy")
    cases.append((f"s={gap}", "has no 0.npy"))
    stray = write_folder(tmp_path / "stray", [np.zeros(2, np.float32)])
    (stray / "notes.txt").write_text("x")
    cases.append((f"s={stray}", "holds 'notes.txt'"))
    mixed = write_folder(tmp_path / "mixed", [np.zeros(2, np.float32), np.zeros(2, np.int64)])
    cases.append((f"s={mixed}", "a sequence holds one dtype"))
    cases.append(("s=none", "cannot be 'none'"))
    for spec, message in cases:
        r = run(model, "--input", spec, ok=False)
        assert r.returncode != 0 and message in r.stderr, (spec, r.stderr)
    r = run(model, ok=False)
    assert r.returncode != 0 and "give it as --input s=DIR" in r.stderr
    assert "Traceback" not in r.stderr and "terminate" not in r.stderr
