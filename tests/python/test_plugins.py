"""Backend plug-ins from Python: tessera.load_backend_plugin, tessera.backends(), a session placed on a
plug-in's backend (the ABI probe of tests/plugins/abi: float32 Relu on the host), refused plug-ins as
tessera.InvalidArgument, and a plug-in's injected failure as an exception that leaves the session usable.
TESSERA_TEST_PROBE_DIR (set by CTest) holds the probe plug-ins."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tessera

PROBE_DIR = os.environ["TESSERA_TEST_PROBE_DIR"]  # a KeyError, not a skip, when CTest did not set it


def probe(variant=""):
    return os.path.join(PROBE_DIR, "libabi_probe%s.so" % variant)


def relu_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Sigmoid", ["b"], ["y"], name="s")]
    graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_a_plugin_loads_lists_and_runs():
    assert tessera.load_backend_plugin(probe()) == "abi_probe"
    assert tessera.load_backend_plugin(probe()) == "abi_probe"  # again: nothing new
    entries = [b for b in tessera.backends() if b["name"] == "abi_probe"]
    assert len(entries) == 1
    assert entries[0]["plugin_path"] == probe() and entries[0]["plugin_abi"] == "1.0" and entries[0]["version"] == "1"
    assert [b for b in tessera.backends() if b["fallback"]][0]["name"] == "native"

    session = tessera.InferenceSession(relu_model(), backends="abi_probe,native")
    placed = {row["node"]: row["backend"] for row in session.placement()}
    assert placed == {"r1": "abi_probe", "r2": "abi_probe", "s": "native"}, placed
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    (y,) = session.run(None, {"x": x})
    want = 1.0 / (1.0 + np.exp(-np.maximum(x.astype(np.float64), 0.0)))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)

    # Round trip through an artifact: it names the plug-in's backend, which is loaded here.
    again = tessera.InferenceSession(session.to_bytes())
    np.testing.assert_allclose(again.run(None, {"x": x})[0], want, rtol=1e-6, atol=1e-7)


def test_a_failing_plugin_raises_and_the_session_stays_usable(monkeypatch):
    tessera.load_backend_plugin(probe())
    session = tessera.InferenceSession(relu_model(), backends="abi_probe,native")
    x = np.ones((3, 4), np.float32)
    monkeypatch.setenv("PROBE_FAIL", "run")
    with pytest.raises(tessera.InternalError, match="backend plug-in 'abi_probe': run: injected failure in run"):
        session.run(None, {"x": x})
    monkeypatch.delenv("PROBE_FAIL")
    np.testing.assert_allclose(session.run(None, {"x": x})[0], np.full((3, 4), 1.0 / (1.0 + np.exp(-1.0))), rtol=1e-6)


def test_refused_plugins_raise_invalid_argument():
    with pytest.raises(tessera.InvalidArgument, match=r"was built for plug-in ABI 2\.0; this Tessera implements ABI 1\.0"):
        tessera.load_backend_plugin(probe("_major2"))
    with pytest.raises(tessera.InvalidArgument, match="cannot be loaded"):
        tessera.load_backend_plugin(os.path.join(PROBE_DIR, "missing.so"))
    assert all(b["name"] != "native" or b["plugin_path"] is None for b in tessera.backends())
