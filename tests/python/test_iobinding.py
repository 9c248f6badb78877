"""InferenceSession.io_binding(): inputs read in place (strided views included), outputs written into the
caller's buffers or allocated by the run, and the errors a caller meets, each naming what is wrong. The
numbers are checked against numpy computing the same model."""
import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import tessera


def concat_model(path):
    """present = Concat(past, k) on axis 1, y = present * 2: past [2, p, 3] with p open."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["past", "k"], ["present"], axis=1),
         helper.make_node("Add", ["present", "present"], ["y"])],
        "g",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [2, "p", 3]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 1, 3])],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, [2, "t", 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "t", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return tessera.InferenceSession(str(path))


def test_bound_and_allocated_outputs_hold_what_numpy_computes(tmp_path):
    session = concat_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    cache = np.full((2, 8, 3), np.nan, np.float32)
    cache[:, :2] = rng.standard_normal((2, 2, 3), dtype=np.float32)
    before = cache[:, :2].copy()
    k = rng.standard_normal((2, 1, 3), dtype=np.float32)
    binding = session.io_binding()
    binding.bind_input("past", cache[:, :2])  # strided: a view of the cache buffer
    binding.bind_cpu_input("k", k)
    binding.bind_output("present", cache[:, :3])
    session.run_with_iobinding(binding)
    present, y = binding.get_outputs()
    want = np.concatenate([before, k], axis=1)
    np.testing.assert_array_equal(cache[:, :3], want)
    assert np.isnan(cache[:, 3:]).all()
    assert present.base is cache  # the caller's view itself
    np.testing.assert_array_equal(y, want * 2)  # allocated by the run
    copies = binding.copy_outputs_to_cpu()
    np.testing.assert_array_equal(copies[1], want * 2)
    # The Add reads present contiguous only: the run makes present in its own memory and copies it in.
    assert session.stats()["binding_copies"] >= 1


def test_errors_name_the_input_or_output(tmp_path):
    session = concat_model(tmp_path / "m.onnx")
    binding = session.io_binding()
    with pytest.raises(tessera.InvalidArgument, match="unknown input 'nope'"):
        binding.bind_input("nope", np.zeros(1))
    with pytest.raises(tessera.InvalidArgument, match="unknown output 'nope'"):
        binding.bind_output("nope", np.zeros(1))
    with pytest.raises(tessera.InvalidArgument, match="nothing has run"):
        binding.get_outputs()
    binding.bind_input("past", np.zeros((2, 2, 3), np.float32))
    with pytest.raises(tessera.InvalidArgument, match="not bound: k"):
        session.run_with_iobinding(binding)
    binding.bind_input("k", np.zeros((2, 1, 3), np.float32))
    binding.bind_output("present", np.zeros((2, 4, 3), np.float32))  # one position too many
    with pytest.raises(tessera.InvalidArgument, match="present"):
        session.run_with_iobinding(binding)
    read_only = np.zeros((2, 3, 3), np.float32)
    read_only.flags.writeable = False
    binding.bind_output("present", read_only)
    with pytest.raises(tessera.InvalidArgument, match="output 'present'.*read-only"):
        session.run_with_iobinding(binding)
    binding.bind_output("present", np.zeros((2, 3, 3), np.float64))
    with pytest.raises(tessera.InvalidArgument, match="present"):
        session.run_with_iobinding(binding)
    # An output overlapping an input other than as its cache's growth.
    buffer = np.zeros((2, 8, 3), np.float32)
    binding.bind_input("past", buffer[:, 1:3])
    binding.bind_output("present", buffer[:, :3])
    with pytest.raises(tessera.InvalidArgument, match="overlaps input 'past'"):
        session.run_with_iobinding(binding)
    other = tessera.InferenceSession(str(tmp_path / "m.onnx"))
    with pytest.raises(tessera.InvalidArgument, match="io_binding"):
        other.run_with_iobinding(binding)
    # The session still runs after the errors.
    binding.clear_binding_outputs()
    binding.bind_input("past", np.ones((2, 2, 3), np.float32))
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(binding.get_outputs()[0][:, :2], np.ones((2, 2, 3)))


def test_dim_bounds_option_is_checked_and_applies_to_an_artifact(tmp_path):
    session = concat_model(tmp_path / "m.onnx")
    artifact = tmp_path / "m.tsr"
    session.save(str(artifact))
    for bad, part in (({"p": (4, 2)}, "0 <= MIN <= MAX"), ({"p": 3}, "maps to"), ("p=1-2", "NAME=MIN..MAX"),
                      ({"p": (-1, 2)}, "0 <= MIN"), (7, "dim_bounds")):
        with pytest.raises(tessera.InvalidArgument, match=part):
            tessera.InferenceSession(str(tmp_path / "m.onnx"), dim_bounds=bad)
    with pytest.raises(tessera.InvalidArgument, match="no dimension named 'q'"):
        tessera.InferenceSession(str(artifact), dim_bounds={"q": (0, 4)})
    bounded = tessera.InferenceSession(str(artifact), dim_bounds="p=0..3")
    k = np.ones((2, 1, 3), np.float32)
    present, _ = bounded.run(None, {"past": np.zeros((2, 3, 3), np.float32), "k": k})
    assert present.shape == (2, 4, 3) and present[:, 3:].min() == 1 and present[:, :3].max() == 0
    with pytest.raises(tessera.InvalidArgument, match=r"input 'past' dimension 1 \('p'\) is 4, outside its bounds 0..3"):
        bounded.run(None, {"past": np.zeros((2, 4, 3), np.float32), "k": k})
