"""A model with open dims through the CLI: `tessera compile` needs no --input-shape and writes one artifact
with the dims open; `tessera run` runs it at every input file's shape (numpy is the reference), random
inputs take their open dims from --input-shape (the input's shape or the dim's name) or name what is
missing, and a file whose fixed dim differs is an error naming the input."""
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLI = os.environ.get("TESSERA_CLI")


def cli(*args, ok=True):
    assert CLI, "TESSERA_CLI must name the tessera binary"
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if ok:
        assert result.returncode == 0, result.stderr
    return result


def conv_model(path, w):
    # Conv 3x3 (pads 1) -> Relu on x[batch, 4, h, w]: oneDNN's region, lowered per input shape.
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6, "h", "w"])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def reference(x, w):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.maximum(np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64)), 0)


def test_one_artifact_runs_every_shape(tmp_path):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    conv_model(tmp_path / "m.onnx", w)
    artifact = tmp_path / "m.tsr"
    cli("compile", tmp_path / "m.onnx", "-o", artifact)
    info = cli("info", artifact).stdout
    assert "float32[?x4x?x?]" in info, info
    for k, shape in enumerate([(1, 4, 8, 8), (3, 4, 5, 11), (1, 4, 8, 8), (2, 4, 1, 1)]):
        x = rng.standard_normal(shape).astype(np.float32)
        np.save(tmp_path / f"x{k}.npy", x)
        out = tmp_path / f"out{k}"
        cli("run", artifact, "--input", f"x={tmp_path / f'x{k}.npy'}", "--output-dir", out)
        y = np.load(out / "y.npy")
        assert y.shape == (shape[0], 6, shape[2], shape[3])
        np.testing.assert_allclose(y, reference(x, w), rtol=1e-4, atol=1e-4)
    # A fixed dim that differs: an error naming the input.
    np.save(tmp_path / "bad.npy", np.zeros((1, 5, 4, 4), np.float32))
    bad = cli("run", artifact, "--input", f"x={tmp_path / 'bad.npy'}", ok=False)
    assert bad.returncode != 0 and "input 'x'" in bad.stderr, bad.stderr


def test_random_inputs_take_open_dims_from_input_shape(tmp_path):
    w = np.ones((6, 4, 3, 3), np.float32)
    conv_model(tmp_path / "m.onnx", w)
    artifact = tmp_path / "m.tsr"
    cli("compile", tmp_path / "m.onnx", "-o", artifact)
    missing = cli("run", artifact, "--random-inputs", ok=False)
    assert missing.returncode != 0 and "('batch') is open" in missing.stderr and "batch=N" in missing.stderr, missing.stderr
    by_name = cli("run", artifact, "--random-inputs", "--input-shape", "batch=2", "--input-shape", "h=3",
                  "--input-shape", "w=5")
    assert "float32[2x4x3x5] random" in by_name.stdout and "y: float32[2x6x3x5]" in by_name.stdout, by_name.stdout
    whole = cli("run", artifact, "--random-inputs", "--input-shape", "x=1x4x7x2")
    assert "y: float32[1x6x7x2]" in whole.stdout, whole.stdout
    # A name that is no open dim of the artifact: its shapes were fixed when it was compiled.
    unknown = cli("run", artifact, "--random-inputs", "--input-shape", "depth=3", ok=False)
    assert unknown.returncode != 0 and "names no open dim" in unknown.stderr, unknown.stderr


def test_dim_bounds_check_every_run_of_an_onnx_model_and_an_artifact(tmp_path):
    """--dim NAME=MIN..MAX: inputs inside the bounds run (numpy's answer), one outside is an error naming the
    input, the dim and the bounds, for the ONNX file and for an artifact loaded with the same bounds; a name
    the model has no open dim of, and a malformed range, are errors naming them."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    conv_model(tmp_path / "m.onnx", w)
    artifact = tmp_path / "m.tsr"
    cli("compile", tmp_path / "m.onnx", "-o", artifact)
    x = rng.standard_normal((2, 4, 6, 9)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    # (The ONNX file is compiled at the input file's shape, so its dims are checked when it compiles.)
    for model, wording in ((tmp_path / "m.onnx", "was fixed at 9 when the model was compiled"), (artifact, "is 9")):
        out = tmp_path / f"out_{model.suffix[1:]}"
        cli("run", model, "--dim", "batch=1..4", "--dim-bounds", "w=1..16", "--input", f"x={tmp_path / 'x.npy'}",
            "--output-dir", out)
        np.testing.assert_allclose(np.load(out / "y.npy"), reference(x, w), rtol=1e-4, atol=1e-4)
        over = cli("run", model, "--dim", "w=1..8", "--input", f"x={tmp_path / 'x.npy'}", ok=False)
        message = f"input 'x' dimension 3 ('w') {wording}, outside its bounds 1..8"
        assert over.returncode != 0 and message in over.stderr, over.stderr
    unknown = cli("run", artifact, "--dim", "depth=1..3", "--input", f"x={tmp_path / 'x.npy'}", ok=False)
    assert unknown.returncode != 0 and "no dimension named 'depth'" in unknown.stderr, unknown.stderr
    for bad in ("w=8..1", "w=1-8", "=1..2", "w=..4"):
        result = cli("run", artifact, "--dim", bad, "--input", f"x={tmp_path / 'x.npy'}", ok=False)
        assert result.returncode != 0 and "dim_bounds" in result.stderr, (bad, result.stderr)
