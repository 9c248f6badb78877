"""bfloat16 through the CLI's .npy files (numpy has no bfloat16): a bfloat16 input reads float32 (rounded
to nearest even) or uint16 (bit patterns); `tessera run` writes bfloat16 outputs as float32 (exact) or, with
--bfloat16-bits, as uint16 bit patterns. PyTorch's bfloat16 is the independent reference for the rounding."""
import os
import subprocess

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

CLI = os.environ.get("TESSERA_CLI")


def bits_of(values):
    """torch's float32 -> bfloat16 rounding, as uint16 bit patterns."""
    return torch.from_numpy(np.asarray(values, np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


@pytest.fixture
def model(tmp_path):
    # y = bfloat16(x); z = float(y); c = float(b) for a bfloat16 input b.
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16),
                           helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT),
                           helper.make_node("Cast", ["b"], ["c"], to=TensorProto.FLOAT)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [9]),
                           helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [9])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [9]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [9]),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, [9])])
    path = str(tmp_path / "bf16.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


# Ties (1 + 2^-8 rounds down to even, 1 + 3 * 2^-8 up), a denormal, huge values that round to infinity,
# infinities, a negative zero and a NaN.
VALUES = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.14159, -2.5e-3, 1e-40, 3.4e38, -np.inf, -0.0, np.nan],
                  np.float32)


def run(*args):
    out = subprocess.run([CLI, "run", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_float32_in_rounds_and_float32_out_is_exact(model, tmp_path):
    np.save(tmp_path / "x.npy", VALUES)
    np.save(tmp_path / "b.npy", VALUES)
    stdout = run(model, "--input", "x=%s" % (tmp_path / "x.npy"), "--input", "b=%s" % (tmp_path / "b.npy"),
                 "--output-dir", str(tmp_path / "out"))
    assert "float32 rounded to bfloat16 (nearest even)" in stdout and "(as float32, exactly)" in stdout
    expected = torch.from_numpy(VALUES).to(torch.bfloat16).float().numpy()
    for name in ("y", "z", "c"):
        got = np.load(tmp_path / "out" / (name + ".npy"))
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected, err_msg=name)
        assert np.signbit(got[7])  # -0.0 stays negative


def test_bits_in_and_out(model, tmp_path):
    bits = bits_of(VALUES)
    np.save(tmp_path / "x.npy", VALUES)
    np.save(tmp_path / "b.npy", bits)
    stdout = run(model, "--input", "x=%s" % (tmp_path / "x.npy"), "--input", "b=%s" % (tmp_path / "b.npy"),
                 "--output-dir", str(tmp_path / "out"), "--bfloat16-bits")
    assert "uint16 bit patterns read as bfloat16" in stdout and "(as uint16 bit patterns)" in stdout
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.dtype == np.uint16
    nan = np.isnan(VALUES)
    np.testing.assert_array_equal(y[~nan], bits[~nan])
    assert (y[nan] & 0x7F80) == 0x7F80 and (y[nan] & 0x7F) != 0  # still a NaN
    # The uint16 input was taken bit for bit.
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "c.npy"),
                                  torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy())


def test_random_bfloat16_inputs_and_wrong_dtypes(model, tmp_path):
    stdout = run(model, "--random-inputs", "--output-dir", str(tmp_path / "out"))
    assert "input b: bfloat16[9] random, uniform in [-1, 1)" in stdout
    c = np.load(tmp_path / "out" / "c.npy")
    assert np.all(np.abs(c) <= 1) and np.unique(c).size > 1
    np.testing.assert_array_equal(c, torch.from_numpy(c).to(torch.bfloat16).float().numpy())  # bfloat16 values
    np.save(tmp_path / "i.npy", np.arange(9, dtype=np.int32))
    out = subprocess.run([CLI, "run", model, "--input", "x=%s" % (tmp_path / "i.npy"), "--random-inputs"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "expects float32" in out.stderr
    out = subprocess.run([CLI, "run", model, "--input", "b=%s" % (tmp_path / "i.npy"), "--random-inputs"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "bfloat16 input reads float32" in out.stderr and "int32" in out.stderr
