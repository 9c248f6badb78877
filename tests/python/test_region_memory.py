"""How oneDNN regions hold their values (dnnl_workspace.cc), against float64 numpy references.

A DenseNet-style block:

Each layer concatenates the block's input and every feature made before it, then BatchNormalization -> Relu
-> 1x1 Conv -> Relu -> 3x3 Conv makes its feature. On oneDNN the BatchNormalization -> Relu pairs run as one
step (pattern BatchNormRelu, oneDNN's fuse_norm_relu), a feature read by several concats is reordered once,
and where the concats run as copies of whole runs (batch 1, a blocked layout) the features are written in
place into one buffer for the block (dnnl_workspace.cc): every one of those must leave the values intact.
A second reader of two features takes them into its own buffer, so the block's concats copy those and take
the rest in place. Batch 2 takes the copying path. A NaN in the input must reach the outputs it reaches in numpy.

A ShuffleNetV2-style unit: a channel split (two Slices), one half through convolutions, a concat, the channel
shuffle (Reshape -> Transpose -> Reshape) and a Flatten: at batch 1 the reshapes and the channel slices of a
plain layout are views of their inputs' bytes, nothing copied; at batch 2 the slices are copies."""
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx
import tessera

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpu_isa  # noqa: E402

X0, GROWTH, BOTTLENECK, LAYERS, SIDE = 32, 16, 32, 4, 14
EPS = 1e-5


def conv(x, w):
    """Convolution with 'same' padding (1x1 or 3x3), stride 1, in float64: an independent reference."""
    k = w.shape[2]
    pad = k // 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def batch_norm(x, p):
    scale, bias, mean, var = (a.astype(np.float64)[None, :, None, None] for a in p)
    return (x - mean) / np.sqrt(var + EPS) * scale + bias


def relu(x):
    return np.where(np.isnan(x), x, np.maximum(x, 0))


def make_block(tmp_path, batch):
    rng = np.random.default_rng(1205)
    inits, nodes, params = [], [], []
    features = ["x"]
    channels = X0

    def bn_params(name, c):
        p = (rng.uniform(0.5, 1.5, c), rng.uniform(-0.5, 0.5, c), rng.uniform(-0.5, 0.5, c), rng.uniform(0.5, 2.0, c))
        p = tuple(a.astype(np.float32) for a in p)
        inits.extend(numpy_helper.from_array(a, "%s_%s" % (name, part)) for a, part in zip(p, "sbmv"))
        return p, ["%s_%s" % (name, part) for part in "sbmv"]

    for layer in range(LAYERS):
        name = "l%d" % layer
        cat = features[0] if len(features) == 1 else name + "_cat"
        if len(features) > 1:
            nodes.append(helper.make_node("Concat", list(features), [cat], axis=1, name=name + "_concat"))
        bn, bn_names = bn_params(name + "_bn", channels)
        w1 = (rng.standard_normal((BOTTLENECK, channels, 1, 1)) / np.sqrt(channels)).astype(np.float32)
        w3 = (rng.standard_normal((GROWTH, BOTTLENECK, 3, 3)) / np.sqrt(9 * BOTTLENECK)).astype(np.float32)
        inits += [numpy_helper.from_array(w1, name + "_w1"), numpy_helper.from_array(w3, name + "_w3")]
        nodes += [helper.make_node("BatchNormalization", [cat] + bn_names, [name + "_n"], epsilon=EPS, name=name + "_bn"),
                  helper.make_node("Relu", [name + "_n"], [name + "_r"], name=name + "_relu"),
                  helper.make_node("Conv", [name + "_r", name + "_w1"], [name + "_b"], name=name + "_conv1"),
                  helper.make_node("Relu", [name + "_b"], [name + "_br"], name=name + "_relu2"),
                  helper.make_node("Conv", [name + "_br", name + "_w3"], [name + "_f"], pads=[1, 1, 1, 1],
                                   name=name + "_conv2")]
        params.append((bn, w1, w3))
        features.append(name + "_f")
        channels += GROWTH
    nodes.append(helper.make_node("Concat", features, ["out_cat"], axis=1, name="out_concat"))
    out_bn, bn_names = bn_params("out_bn", channels)
    nodes += [helper.make_node("BatchNormalization", ["out_cat"] + bn_names, ["out_n"], epsilon=EPS, name="out_bn"),
              helper.make_node("Relu", ["out_n"], ["y"], name="out_relu")]
    # A second reader of two features, in another order: it takes them into its own buffer, so the
    # block's concats copy those two and take the rest in place.
    side_bn, side_names = bn_params("side_bn", 2 * GROWTH)
    nodes += [helper.make_node("Concat", [features[-1], features[1]], ["side_cat"], axis=1, name="side_concat"),
              helper.make_node("BatchNormalization", ["side_cat"] + side_names, ["side_n"], epsilon=EPS,
                               name="side_bn"),
              helper.make_node("Relu", ["side_n"], ["y2"], name="side_relu")]
    graph = helper.make_graph(nodes, "dense_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, X0, SIDE, SIDE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "dense_block.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

    def reference(x):
        features = [x.astype(np.float64)]
        for bn, w1, w3 in params:
            h = relu(batch_norm(np.concatenate(features, axis=1), bn))
            features.append(conv(relu(conv(h, w1)), w3))
        return (relu(batch_norm(np.concatenate(features, axis=1), out_bn)),
                relu(batch_norm(np.concatenate([features[-1], features[1]], axis=1), side_bn)))

    return path, reference


@pytest.mark.parametrize("batch", [1, 2])
def test_dense_block_matches_numpy(tmp_path, batch):
    path, reference = make_block(tmp_path, batch)
    session = tessera.InferenceSession(path)
    placement = {p["node"]: p for p in session.placement()}
    if cpu_isa.dnnl_avx2():
        # Every BatchNormalization -> Relu pair is one oneDNN step.
        for name in ["l%d" % i for i in range(LAYERS)] + ["out", "side"]:
            relu_node = placement[name + "_relu"]
            assert relu_node["backend"] == "dnnl", relu_node
            assert "fused into '%s_bn'" % name in relu_node["note"] and "BatchNormRelu" in relu_node["note"], relu_node
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((batch, X0, SIDE, SIDE)).astype(np.float32)
        if seed == 2:
            x[0, 3, 5, 6] = np.nan  # through the 3x3 convolutions it reaches a neighbourhood of every feature
        outputs = session.run(None, {"x": x})
        for y, expected in zip(outputs, reference(x)):
            assert y.shape == expected.shape, y.shape
            if seed == 2:
                assert np.isnan(expected).any() and not np.isnan(expected).all()
            np.testing.assert_allclose(y, expected, rtol=1e-4, atol=2e-4)
    # A second session over the saved artifact runs the same plan.
    artifact = str(tmp_path / "dense_block.tsr")
    session.save(artifact)
    x = np.random.default_rng(7).standard_normal((batch, X0, SIDE, SIDE)).astype(np.float32)
    for y, expected in zip(tessera.InferenceSession(artifact).run(None, {"x": x}), reference(x)):
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=2e-4)


def shuffle_unit(tmp_path, batch, channels=64, side=12):
    rng = np.random.default_rng(77)
    half = channels // 2
    w1 = (rng.standard_normal((half, half, 1, 1)) / np.sqrt(half)).astype(np.float32)
    w3 = (rng.standard_normal((half, 1, 3, 3)) / 3).astype(np.float32)
    w2 = (rng.standard_normal((half, half, 1, 1)) / np.sqrt(half)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w3, "w3"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([half], np.int64), "half"),
             numpy_helper.from_array(np.array([channels], np.int64), "all"),
             numpy_helper.from_array(np.array([1], np.int64), "axis"),
             numpy_helper.from_array(np.array([batch, 2, half, side, side], np.int64), "split_shape"),
             numpy_helper.from_array(np.array([batch, channels, side, side], np.int64), "merged_shape")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], name="stem"),
             helper.make_node("Relu", ["a"], ["r"], name="stem_relu"),
             helper.make_node("Slice", ["r", "zero", "half", "axis"], ["left"], name="split_left"),
             helper.make_node("Slice", ["r", "half", "all", "axis"], ["right"], name="split_right"),
             helper.make_node("Conv", ["right", "w1"], ["b1"], name="pw1"),
             helper.make_node("Relu", ["b1"], ["b1r"], name="pw1_relu"),
             helper.make_node("Conv", ["b1r", "w3"], ["b2"], pads=[1, 1, 1, 1], group=half, name="dw"),
             helper.make_node("Conv", ["b2", "w2"], ["b3"], name="pw2"),
             helper.make_node("Relu", ["b3"], ["b3r"], name="pw2_relu"),
             helper.make_node("Concat", ["left", "b3r"], ["cat"], axis=1, name="concat"),
             helper.make_node("Reshape", ["cat", "split_shape"], ["s5"], name="shuffle_split"),
             helper.make_node("Transpose", ["s5"], ["t5"], perm=[0, 2, 1, 3, 4], name="shuffle"),
             helper.make_node("Reshape", ["t5", "merged_shape"], ["shuffled"], name="shuffle_merge"),
             helper.make_node("Conv", ["shuffled", "w4"], ["c"], name="head"),
             helper.make_node("Flatten", ["c"], ["y"], axis=1, name="flatten")]
    w0 = (rng.standard_normal((channels, 16, 1, 1)) / 4).astype(np.float32)
    w4 = (rng.standard_normal((channels, channels, 1, 1)) / 8).astype(np.float32)
    inits += [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w4, "w4")]
    graph = helper.make_graph(nodes, "shuffle_unit",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16, side, side])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "shuffle_unit.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

    def depthwise(x, w):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
        return np.einsum("nchwij,cij->nchw", windows, w[:, 0].astype(np.float64))

    def reference(x):
        r = relu(conv(x, w0))
        left, right = r[:, :half], r[:, half:]
        b = relu(conv(depthwise(relu(conv(right, w1)), w3), w2))
        cat = np.concatenate([left, b], axis=1)
        shuffled = cat.reshape(batch, 2, half, side, side).transpose(0, 2, 1, 3, 4).reshape(batch, channels, side, side)
        return conv(shuffled, w4).reshape(batch, -1)

    return path, reference


@pytest.mark.parametrize("batch", [1, 2])
def test_channel_split_and_shuffle_match_numpy(tmp_path, batch):
    path, reference = shuffle_unit(tmp_path, batch)
    session = tessera.InferenceSession(path)
    placement = {p["node"]: p for p in session.placement()}
    if cpu_isa.dnnl_avx2() and batch == 1:
        # The unit is one oneDNN region; its reshapes are views where their input is plain.
        assert all(p["backend"] == "dnnl" for p in placement.values() if p["backend"] != "folded"), placement
        views = [name for name, p in placement.items() if "view of its input" in p["note"]]
        assert "shuffle_merge" in views or "flatten" in views, placement
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((batch, 16, 12, 12)).astype(np.float32)
        if seed == 2:
            x[-1, 5, 3, 4] = np.nan
        expected = reference(x)
        y = session.run(None, {"x": x})[0]
        assert y.shape == expected.shape, y.shape
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
