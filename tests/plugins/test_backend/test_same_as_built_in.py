"""The test backend through the plug-in ABI ("test_plugin", built from the same sources) against the
built-in "test" backend: for models that exercise its ops, its fused patterns (a DAG with a value read
twice, commutative operands, scalar constants, an op claimed only inside a pattern), its refusals and its
scrambled memory space, both must place every node alike, fuse the same patterns, make the same copies
and compute the same outputs, bit for bit (the kernels are the same code). TESSERA_TEST_PLUGIN (set by
CTest) is the plug-in's path."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

PLUGIN = os.environ["TESSERA_TEST_PLUGIN"]  # a KeyError, not a skip, when CTest did not set it
rng = np.random.default_rng(7)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def mlp_gelu():
    """MatMul + bias + GELU (erf form: x read twice, scalar constants), then Add + Relu, Softmax, Transpose."""
    w = rng.standard_normal((8, 16)).astype(np.float32)
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w"], ["mm"], name="mm"), n("Add", ["b", "mm"], ["h"], name="bias"),
             n("Div", ["h", "sqrt2"], ["d"], name="div"), n("Erf", ["d"], ["e"], name="erf"),
             n("Add", ["e", "one"], ["e1"], name="plus1"), n("Mul", ["h", "e1"], ["m1"], name="mul1"),
             n("Mul", ["m1", "half"], ["g"], name="mul_half"),
             n("Add", ["g", "skip"], ["s"], name="skip_add"), n("Relu", ["s"], ["r"], name="relu"),
             n("Softmax", ["r"], ["p"], name="softmax", axis=-1), n("Transpose", ["p"], ["t"], name="transpose", perm=[1, 0]),
             n("Conv", ["img", "k"], ["c"], name="conv"),  # refused: native runs it
             n("Reshape", ["c", "shape"], ["y2"], name="reshape")]
    inits = [const("w", w), const("b", rng.standard_normal(16)), const("sqrt2", np.sqrt(2.0)), const("one", 1.0),
             const("half", 0.5), const("k", rng.standard_normal((2, 1, 3, 3))),
             numpy_helper.from_array(np.array([2, 16], np.int64), "shape")]
    return model(nodes, [("x", [4, 8]), ("skip", [4, 16]), ("img", [1, 1, 6, 6])], [("t", [16, 4]), ("y2", [2, 16])],
                 inits)


def chain_with_graph_output():
    """A region output that is also a graph output, and a graph input read by the test space and by native."""
    n = helper.make_node
    nodes = [n("Mul", ["x", "x"], ["sq"], name="square"), n("Exp", ["sq"], ["ex"], name="exp"),
             n("Floor", ["x"], ["fl"], name="floor"),  # refused: native reads x too
             n("Sub", ["ex", "fl"], ["y"], name="sub")]
    return model(nodes, [("x", [3, 5])], [("sq", [3, 5]), ("y", [3, 5])])


def inputs_for(session):
    return {i.name: rng.standard_normal([d for d in i.shape]).astype(np.float32) for i in session.get_inputs()}


@pytest.mark.parametrize("make", [mlp_gelu, chain_with_graph_output])
@pytest.mark.parametrize("threads", [1, 2])
def test_plugin_matches_built_in(make, threads):
    assert tessera.load_backend_plugin(PLUGIN) == "test_plugin"
    data = make()
    built_in = tessera.InferenceSession(data, backends="test,native", threads=threads)
    plugin = tessera.InferenceSession(data, backends="test_plugin,native", threads=threads)

    def placement(session, rename):
        return [(row["node"], row["backend"].replace(rename, "test"), row["note"].replace(rename, "test"))
                for row in session.placement()]

    assert placement(plugin, "test_plugin") == placement(built_in, "test")
    assert any(row["backend"] == "test_plugin" for row in plugin.placement())
    regions = lambda s: [(r["backend"].replace("test_plugin", "test"), r["memory_space"], r["nodes"]) for r in s.regions()]
    assert regions(plugin) == regions(built_in)
    feed = inputs_for(built_in)
    want = built_in.run(None, feed)
    got = plugin.run(None, feed)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_array_equal(g, w)
    # The plug-in's artifact reloads and gives the same again.
    again = tessera.InferenceSession(plugin.to_bytes(), threads=threads)
    for w, g in zip(want, again.run(None, feed)):
        np.testing.assert_array_equal(g, w)


def test_patterns_are_those_of_the_built_in_backend():
    tessera.load_backend_plugin(PLUGIN)
    notes = [row["note"] for row in tessera.InferenceSession(mlp_gelu(), backends="test_plugin,native").placement()]
    assert any("MatMulBiasGelu" in note for note in notes), notes
    assert any("AddRelu" in note for note in notes), notes
