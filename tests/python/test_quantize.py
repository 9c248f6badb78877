"""tessera quantize and the int8 path, against independent references:
- the quantization parameters it writes, against ranges PyTorch's forward hooks
  measure on the same calibration samples and against the float model's weights;
- the QDQ file's meaning, evaluated node by node with PyTorch ops (a small
  reference interpreter here), against what Tessera computes from the file on
  native (the folded QLinearConv / QLinearMatMul kernels) and on oneDNN (int8
  primitives with VNNI);
- where the int8 ops run, as this CPU implies (tests/lib/cpu_isa.py, capped by
  ONEDNN_MAX_CPU_ISA): oneDNN where its int8 kernels are exact (VNNI), elsewhere
  native, with oneDNN's reason, unless every weight is within +-64;
- bad quantization parameters and bad options as clear errors."""

import itertools
import json
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpu_isa  # noqa: E402  (what this CPU implies, found from /proc/cpuinfo and ONEDNN_MAX_CPU_ISA)

CLI = os.environ.get("TESSERA_CLI")
# oneDNN's int8 kernels compute what ONNX defines on this CPU (VNNI: 8-bit products accumulated in
# int32). Without VNNI they add pairs of u8 x s8 products in a saturating int16, so Tessera gives oneDNN
# an int8 op only when every weight is within +-64 (2 x 255 x 64 fits int16), and native runs the rest.
DNNL_INT8 = cpu_isa.dnnl_int8_exact()
INT16_SAFE_WEIGHT = 64
# Native's int8 path against the float64 meaning: the integers are exact, so only float32 rounding of
# the scaled results separates them (measured with error_against_meaning: at most 6.4e-8 of
# max|expected| on Net and 9.7e-8 on the attention block, over 400 random inputs each, also for files
# calibrated with oneDNN capped at SSE41; a one-quantum shift of any intermediate zero point moves the
# output by 1e-3 to 1e-1 of max|expected|).
FLOAT32_ROUNDING = 2 * float(np.finfo(np.float32).eps)
# ... once a value that the float64 meaning puts within TIE_MARGIN quanta of a rounding tie (x / scale
# near k + 0.5) may round either way: float32 arithmetic does round some the other way (all such flips
# measured were within 3.6e-6 quanta of a tie; 3e-5 is about 2 float32 ulps at 255).
TIE_MARGIN = 3e-5


class Add(nn.Module):
    def forward(self, a, b):
        return a + b


class Net(nn.Module):
    """Conv+Relu, a residual Add of two Convs + Relu, MaxPool, a depthwise Conv+ReLU6, a
    strided Conv without activation, GlobalAveragePool and a Linear head:
    one module per op, so that hooks see every quantized tensor."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.skip = nn.Conv2d(16, 16, 1)
        self.add = Add()
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.relu6 = nn.ReLU6()
        self.conv3 = nn.Conv2d(16, 24, 3, stride=2, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        a = self.relu1(self.conv1(x))
        b = self.relu2(self.add(self.conv2(a), self.skip(a)))  # both signed: zero points inside the range
        c = self.relu6(self.dw(self.pool(b)))
        return self.fc(self.flatten(self.gap(self.conv3(c))))


def make_net(folder):
    torch.manual_seed(0)
    net = Net().eval()
    path = os.path.join(folder, "net.onnx")
    torch.onnx.export(net, torch.randn(1, 3, 16, 16), path, opset_version=13, input_names=["input"],
                      output_names=["logits"])
    return net, path


def samples(count, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(count)]


def initializers(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def producers(model):
    return {out: node for node in model.graph.node for out in node.output}


def report_nodes(session):
    """The placement report's nodes by name: backend, note and each backend's refusal, by backend."""
    return {n["name"]: n for n in json.loads(session.report("json"))["nodes"]}


def int8_backend(small_weights=False):
    """Where the default backends must run an int8 op that oneDNN otherwise takes, on this CPU."""
    return "dnnl" if DNNL_INT8 or small_weights else "native"


def assert_int8_placement(session, op_type, small_weights=False, count=None):
    """Every executed op_type node (default backends) runs where this CPU implies, and when that is
    native, oneDNN's reason is in the report and in placement()'s reason."""
    nodes = [n for n in report_nodes(session).values() if n["op_type"] == op_type and n["backend"] != "folded"]
    assert nodes and (count is None or len(nodes) == count), (op_type, len(nodes), count)
    rows = {p["node"]: p for p in session.placement()}
    expected = int8_backend(small_weights)
    for n in nodes:
        assert n["backend"] == expected == rows[n["name"]]["backend"], (n["name"], n["backend"], expected,
                                                                          cpu_isa.dnnl_isa_name())
        if expected == "dnnl":
            continue
        refusal = n["refusals"]["dnnl"]
        # placement()'s reason names it too: "claimed (priority 2 of 2; dnnl refused: ...)".
        assert "dnnl refused: " + refusal in rows[n["name"]]["reason"], rows[n["name"]]
        if op_type == "MatMulInteger":
            # oneDNN declares MatMulInteger only inside its patterns (with the scale after it), and a
            # pattern's refusal is not reported: the node says only that it was not declared alone.
            assert refusal == "MatMulInteger is not declared", refusal
            assert "pattern MatMulInteger" not in n["note"], n["note"]
        else:
            assert "this CPU runs oneDNN at %s, without VNNI" % cpu_isa.dnnl_isa_name() in refusal, refusal
            assert "int16" in refusal and ("beyond +-%d" % INT16_SAFE_WEIGHT in refusal or
                                           "weights computed at run time" in refusal), refusal


def within_int16_safe_weights(model):
    """A copy of a QDQ model with every int8 weight halved (so within +-64) and its scale doubled, and
    every int32 bias halved with its scale doubled (biases stay on x_scale * w_scale): the model oneDNN
    takes on every CPU."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {t.name: t for t in model.graph.initializer}
    halved = 0
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in inits:
            continue
        q = numpy_helper.to_array(inits[node.input[0]])
        if q.dtype not in (np.int8, np.int32):
            continue
        scale = numpy_helper.to_array(inits[node.input[1]])
        inits[node.input[0]].CopyFrom(numpy_helper.from_array(np.round(q / 2).astype(q.dtype), node.input[0]))
        inits[node.input[1]].CopyFrom(numpy_helper.from_array((scale * 2).astype(np.float32), node.input[1]))
        halved += 1
    assert halved > 0
    for t in model.graph.initializer:
        if t.data_type == TensorProto.INT8:
            assert np.abs(numpy_helper.to_array(t).astype(np.int32)).max() <= INT16_SAFE_WEIGHT, t.name
    return model


# ---------------------------------------------------------------- reference --

def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _bcast(param, x, axis):
    if param.ndim == 0 or param.size == 1:
        return param.reshape(())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    return param.reshape(shape)


def evaluate_qdq(model, feeds, ties=None, flips=()):
    """The QDQ model's meaning (ONNX's definitions), in float64 with PyTorch ops. `ties`: a list that
    gets (distance, node, index) for every value a QuantizeLinear rounds that lies within TIE_MARGIN of
    a rounding tie (x / scale within TIE_MARGIN of k + 0.5); `flips`: such (node, index) pairs to round
    the other way."""
    values = {k: torch.from_numpy(v.astype(np.float64)) for k, v in initializers(model).items()}
    values.update({k: torch.from_numpy(v.astype(np.float64)) for k, v in feeds.items()})
    for node in model.graph.node:
        a = _attrs(node)
        x = [values[i] if i else None for i in node.input]
        op = node.op_type
        if op == "QuantizeLinear":
            zp_dtype = initializers(model)[node.input[2]].dtype
            lo, hi = (0, 255) if zp_dtype == np.uint8 else (-128, 127)
            s, z = _bcast(x[1], x[0], a.get("axis", 1)), _bcast(x[2], x[0], a.get("axis", 1))
            t = x[0] / s
            y = torch.round(t)  # half to even, as ONNX
            if ties is not None:
                distance = ((t - torch.floor(t)) - 0.5).abs().reshape(-1)
                ties.extend((distance[i].item(), node.name, i)
                            for i in torch.nonzero(distance < TIE_MARGIN).reshape(-1).tolist())
            flipped = [i for name, i in flips if name == node.name]
            if flipped:
                y, t_flat = y.reshape(-1).clone(), t.reshape(-1)
                for i in flipped:
                    y[i] = torch.floor(t_flat[i]) if y[i] > t_flat[i] else torch.ceil(t_flat[i])
                y = y.reshape(t.shape)
            y = torch.clamp(y + z, lo, hi)
        elif op == "DequantizeLinear":
            s, z = _bcast(x[1], x[0], a.get("axis", 1)), _bcast(x[2], x[0], a.get("axis", 1))
            y = (x[0] - z) * s
        elif op == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            y = F.conv2d(F.pad(x[0], (pads[1], pads[3], pads[0], pads[2])), x[1], x[2] if len(x) > 2 else None,
                         stride=a.get("strides", [1, 1]), dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
        elif op == "Relu":
            y = torch.relu(x[0])
        elif op == "Clip":
            y = torch.clamp(x[0], float(x[1]), float(x[2]))
        elif op == "Add":
            y = x[0] + x[1]
        elif op == "MaxPool":
            pads = a.get("pads", [0, 0, 0, 0])
            y = F.max_pool2d(F.pad(x[0], (pads[1], pads[3], pads[0], pads[2]), value=-np.inf), a["kernel_shape"],
                             a.get("strides", a["kernel_shape"]))
        elif op == "GlobalAveragePool":
            y = x[0].mean(dim=(2, 3), keepdim=True)
        elif op == "Flatten":
            y = x[0].reshape(x[0].shape[0], -1)
        elif op == "Gemm":
            b = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (x[0] @ b) + a.get("beta", 1.0) * (x[2] if len(x) > 2 else 0)
        elif op == "MatMul":
            y = x[0] @ x[1]
        elif op == "Div":
            y = x[0] / x[1]
        elif op == "Mul":
            y = x[0] * x[1]
        elif op == "Erf":
            y = torch.erf(x[0])
        elif op == "Transpose":
            y = x[0].permute(*a["perm"])
        elif op == "Constant":
            y = torch.from_numpy(numpy_helper.to_array(a["value"]).astype(np.float64))
        else:
            raise AssertionError("reference: no " + op)
        values[node.output[0]] = y
    return [values[o.name].numpy() for o in model.graph.output]


def error_against_meaning(model, feeds, actual):
    """max |actual - meaning| / max |meaning| for the model's first output, where `meaning` is the float64
    evaluation, or, for a value some QuantizeLinear rounds within TIE_MARGIN of a tie (float32 may
    round it either way), the evaluation with up to the 10 closest such values rounded the other way
    (the smallest error over those choices; one choice is enough when none is that close)."""
    def error(expected):
        return float(np.abs(actual - expected).max() / np.abs(expected).max())

    ties = []
    best = error(evaluate_qdq(model, feeds, ties=ties)[0])
    near = [(name, i) for _, name, i in sorted(ties)[:10]]
    for k in range(1, len(near) + 1):
        for chosen in itertools.combinations(near, k):
            if best <= FLOAT32_ROUNDING:
                return best
            best = min(best, error(evaluate_qdq(model, feeds, flips=chosen)[0]))
    return best


# -------------------------------------------------------------------- tests --

@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("quantize"))
    net, path = make_net(folder)
    calibration = os.path.join(folder, "calibration")
    os.makedirs(calibration)
    data = samples(6)
    for k, x in enumerate(data):
        np.save(os.path.join(calibration, "%02d.npy" % k), x)
    out = os.path.join(folder, "net.qdq.onnx")
    run = subprocess.run([CLI, "quantize", path, "-o", out, "--calibration", calibration, "--per-channel"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return net, path, out, data, run.stdout


@pytest.fixture(scope="module")
def small_weights(quantized, tmp_path_factory):
    """The quantized Net with every weight within +-64 (within_int16_safe_weights): oneDNN takes it
    with or without VNNI."""
    path = str(tmp_path_factory.mktemp("small") / "net.small.qdq.onnx")
    onnx.save(within_int16_safe_weights(onnx.load(quantized[2])), path)
    return path


@pytest.fixture(scope="module")
def on_dnnl_here(quantized, small_weights):
    """A quantized Net whose int8 convolutions oneDNN runs on this CPU: the file itself where oneDNN's
    int8 kernels are exact, else its copy with weights within +-64."""
    return quantized[2] if DNNL_INT8 else small_weights


def test_cli_summary_names_what_it_did(quantized):
    _, _, _, _, summary = quantized
    assert "minmax over 6 samples" in summary
    assert "per output channel" in summary
    assert "Conv 5" in summary and "Add 1" in summary and "MaxPool 1" in summary and "Gemm 1" in summary
    assert "Relu 2" in summary and "Clip 1" in summary  # folded into the ranges
    assert "Flatten (1)" in summary


def test_file_is_valid_qdq(quantized):
    _, _, out, _, _ = quantized
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    prod = producers(model)
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            for name in node.input:
                assert prod[name].op_type == "DequantizeLinear", (node.name, name)
    # Relu and the ReLU6 Clip stay between their Conv / Add and the QuantizeLinear.
    for node in model.graph.node:
        if node.op_type in ("Relu", "Clip"):
            assert prod[node.input[0]].op_type in ("Conv", "Add"), node.name


def test_activation_ranges_match_torch_hooks(quantized):
    net, _, out, data, _ = quantized
    ranges = {}

    def hook(name):
        def record(_module, _inputs, output):
            lo, hi = float(output.min()), float(output.max())
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
        return record

    for name, module in net.named_modules():
        if name:
            module.register_forward_hook(hook(name))
    with torch.no_grad():
        for x in data:
            net(torch.from_numpy(x))
    ranges["input"] = (min(float(x.min()) for x in data), max(float(x.max()) for x in data))
    model = onnx.load(out)
    inits, prod = initializers(model), producers(model)
    checked = 0
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear":
            continue
        tensor = node.input[0]
        module = "input" if tensor == "input" else prod[tensor].name.split("/")[1]
        # MaxPool's output is quantized with its input's parameters (so that it pools the 8-bit values).
        lo, hi = min(ranges["relu2" if module == "pool" else module][0], 0.0), max(ranges["relu2" if module == "pool" else module][1], 0.0)
        scale = (hi - lo) / 255.0
        zero_point = int(np.clip(np.round(-lo / scale), 0, 255))
        assert float(inits[node.input[1]]) == pytest.approx(scale, rel=1e-5), tensor
        assert int(inits[node.input[2]]) == zero_point, tensor
        assert inits[node.input[2]].dtype == np.uint8
        checked += 1
    assert checked == 10  # input, relu1, conv2, skip, relu2, pool, relu6, conv3, gap, flatten: each once


def test_weights_and_biases(quantized):
    _, path, out, _, _ = quantized
    floats = initializers(onnx.load(path))
    model = onnx.load(out)
    inits, prod = initializers(model), producers(model)
    convs = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
    assert len(convs) == 6
    for node in convs:
        w_dq = prod[node.input[1]]
        w_q, w_scale, w_zp = (inits[i] for i in w_dq.input)
        original = floats[w_dq.input[0][:-len("_quantized")]]
        assert w_q.dtype == np.int8 and not w_zp.any()
        axis = _attrs(w_dq).get("axis", 1)
        if node.op_type == "Gemm":
            assert axis == 0  # transB = 1: the rows of B are the output channels
        channels = np.moveaxis(original, axis, 0).reshape(original.shape[axis], -1)
        np.testing.assert_allclose(w_scale, np.abs(channels).max(axis=1) / 127, rtol=1e-6)
        dequantized = (np.moveaxis(w_q, axis, 0).reshape(channels.shape).astype(np.float64) * w_scale[:, None])
        assert np.all(np.abs(dequantized - channels) <= w_scale[:, None] / 2 + 1e-7)
        # Bias: int32 on the accumulator's scale (input scale x weight scale).
        b_dq = prod[node.input[2]]
        b_q, b_scale, _ = (inits[i] for i in b_dq.input)
        x_scale = inits[prod[node.input[0]].input[1]]
        assert b_q.dtype == np.int32
        np.testing.assert_allclose(b_scale, x_scale * w_scale, rtol=1e-6)
        bias = floats[b_dq.input[0][:-len("_quantized")]]
        assert np.all(np.abs(b_q * b_scale - bias) <= b_scale / 2 + 1e-7)


@pytest.mark.parametrize("backends", [["native"], None])
def test_runs_what_the_file_means(quantized, backends):
    """Native runs the folded QLinear kernels (exact requantisation): within float32 rounding of
    the float64 meaning. oneDNN (where this CPU lets it run int8) its int8 primitives, whose residual
    sum skips one rounding: a looser bound."""
    _, _, out, _, _ = quantized
    model = onnx.load(out)
    session = tessera.InferenceSession(out, backends=backends)
    ops = {p["op_type"]: p["backend"] for p in session.placement()}
    # The classifier's Gemm, left in float32, runs on the 8-bit values: an int32 product scaled once.
    assert "MatMulInteger" in ops and "Gemm" not in ops
    if backends:
        int8_ops = {p["backend"] for p in session.placement() if p["op_type"] in ("QLinearConv", "MatMulInteger")}
        assert int8_ops == {"native"}, int8_ops
    else:
        assert_int8_placement(session, "QLinearConv", count=5)
        assert_int8_placement(session, "MatMulInteger", count=1)
        fused = any("pattern MatMulIntegerScaleBias" in p["note"] for p in session.placement())
        assert fused == DNNL_INT8
    # The MaxPool between its DequantizeLinear and QuantizeLinear pools the 8-bit values.
    notes = [p["note"] for p in session.placement() if p["op_type"] == "QuantizeLinear"]
    assert any("folded into the quantized op '/pool/MaxPool'" in n for n in notes), notes
    worst = 0.0
    for x in samples(8, seed=7):
        expected = evaluate_qdq(model, {"input": x})[0]
        actual = session.run(None, {"input": x})[0]
        error = error_against_meaning(model, {"input": x}, actual) if backends else \
            np.abs(actual - expected).max() / np.abs(expected).max()
        worst = max(worst, error)
        cos = float((actual * expected).sum() / np.linalg.norm(actual) / np.linalg.norm(expected))
        assert cos > (0.9999 if backends else 0.999), cos
    assert worst <= (FLOAT32_ROUNDING if backends else 0.05), worst


def test_weights_within_64_run_on_dnnl_on_every_cpu(small_weights):
    """Without VNNI, oneDNN still takes int8 convolutions and products whose weights are all within +-64
    (pairs of u8 x s8 products then fit its int16): placed there on every CPU, and what the file means."""
    model = onnx.load(small_weights)
    session = tessera.InferenceSession(small_weights)
    assert_int8_placement(session, "QLinearConv", small_weights=True, count=5)
    assert_int8_placement(session, "MatMulInteger", small_weights=True, count=1)
    assert any("pattern MatMulIntegerScaleBias" in p["note"] for p in session.placement())
    native = tessera.InferenceSession(small_weights, backends=["native"])
    for x in samples(4, seed=17):
        expected = evaluate_qdq(model, {"input": x})[0]
        actual = session.run(None, {"input": x})[0]
        assert np.abs(actual - expected).max() < 0.05 * np.abs(expected).max()
        cos = float((actual * expected).sum() / np.linalg.norm(actual) / np.linalg.norm(expected))
        assert cos > 0.999, cos
        assert error_against_meaning(model, {"input": x}, native.run(None, {"input": x})[0]) <= FLOAT32_ROUNDING


def test_float_model_agrees(quantized):
    net, _, out, _, _ = quantized
    session = tessera.InferenceSession(out)
    for x in samples(4, seed=3):
        with torch.no_grad():
            expected = net(torch.from_numpy(x)).numpy()
        actual = session.run(None, {"input": x})[0]
        assert np.abs(actual - expected).max() < 0.1 * np.abs(expected).max()


def test_python_api_methods_and_exclude(quantized, tmp_path):
    _, path, _, data, _ = quantized
    ranges = {}
    for method in ("minmax", "percentile", "entropy"):
        out = str(tmp_path / (method + ".onnx"))
        seen = []
        summary = tessera.quantize(path, out, calibration=[{"input": x} for x in data], method=method,
                                   percentile=99.0, progress=lambda phase, done, total: seen.append((phase, done, total)))
        assert method in summary
        assert seen[-1][1:] == (6, 6)
        model = onnx.load(out)
        inits = initializers(model)
        q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "input")
        ranges[method] = float(inits[q.input[1]]) * 255
    # Clipping methods keep a narrower range of the (normal) input than its min / max.
    assert ranges["percentile"] < ranges["minmax"]
    assert ranges["entropy"] < ranges["minmax"]
    out = str(tmp_path / "exclude.onnx")
    summary = tessera.quantize(path, out, random=2, exclude=["/conv1/Conv", "Gemm"])
    assert "excluded (--exclude)" in summary
    assert "excluded (--exclude): '/conv1/Conv'" in summary and "excluded (--exclude): '/fc/Gemm'" in summary
    excluded = onnx.load(out)
    kept = [n for n in excluded.graph.node if n.name in ("/conv1/Conv", "/fc/Gemm")]
    assert len(kept) == 2
    prod, inits, floats = producers(excluded), initializers(excluded), initializers(onnx.load(path))
    for n in kept:
        # Weights and bias left float: the float model's own initializers, unchanged, read directly.
        for name in n.input[1:]:
            assert prod.get(name) is None and inits[name].dtype == np.float32, (n.name, name)
            np.testing.assert_array_equal(inits[name], floats[name])
    # The other convolutions were quantized all the same.
    others = [n for n in excluded.graph.node if n.op_type == "Conv" and n.name != "/conv1/Conv"]
    assert len(others) == 4
    for n in others:
        assert prod[n.input[1]].op_type == "DequantizeLinear" and inits[prod[n.input[1]].input[0]].dtype == np.int8


def test_bad_options_are_clear_errors(quantized, tmp_path):
    _, path, _, _, _ = quantized
    with pytest.raises(tessera.InvalidArgument, match="no node or op type named 'nope'"):
        tessera.quantize(path, str(tmp_path / "x.onnx"), random=1, exclude=["nope"])
    with pytest.raises(tessera.InvalidArgument, match="unknown calibration method"):
        tessera.quantize(path, str(tmp_path / "x.onnx"), random=1, method="median")
    with pytest.raises(tessera.InvalidArgument, match="input"):
        tessera.quantize(path, str(tmp_path / "x.onnx"), calibration=[[np.zeros((1, 3, 8, 8), np.float32)]])
    assert not os.path.exists(tmp_path / "x.onnx")
    with pytest.raises(tessera.InvalidArgument, match="already quantized"):
        tessera.quantize(quantized[2], str(tmp_path / "twice.onnx"), random=1)
    empty = tmp_path / "empty"
    empty.mkdir()
    run = subprocess.run([CLI, "quantize", path, "-o", str(tmp_path / "y.onnx"), "--calibration", str(empty)],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "holds no .npy file" in run.stderr


class Attention(nn.Module):
    """Linear layers on a sequence (MatMul with constant weights + Add), a product of two
    activations (MatMul of computed operands) and a GELU feed-forward, as in a transformer."""

    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(16, 32)
        self.lin2 = nn.Linear(32, 16)
        self.ff1 = nn.Linear(16, 48)
        self.ff2 = nn.Linear(48, 16)

    def forward(self, x):
        h = torch.relu(self.lin1(x))
        scores = h @ h.transpose(1, 2)
        y = scores @ self.lin2(h)
        return self.ff2(F.gelu(self.ff1(y)))


@pytest.mark.parametrize("backends", [["native"], None])
def test_matmuls_run_what_the_file_means(tmp_path, backends):
    torch.manual_seed(0)
    path, out = str(tmp_path / "att.onnx"), str(tmp_path / "att.qdq.onnx")
    torch.onnx.export(Attention().eval(), torch.randn(1, 8, 16), path, opset_version=13, input_names=["x"],
                      output_names=["y"])
    rng = np.random.default_rng(5)
    data = [{"x": rng.standard_normal((1, 8, 16)).astype(np.float32)} for _ in range(4)]
    summary = tessera.quantize(path, out, calibration=data, per_channel=True)
    assert "MatMul 6" in summary
    model = onnx.load(out)
    session = tessera.InferenceSession(out, backends=backends)
    ops = [p["op_type"] for p in session.placement() if p["backend"] != "folded"]
    assert ops.count("QLinearMatMul") == 6
    if backends:
        assert {p["backend"] for p in session.placement() if p["op_type"] == "QLinearMatMul"} == {"native"}
    else:
        # Four with constant weights (beyond +-64 here) and two products of activations.
        assert_int8_placement(session, "QLinearMatMul", count=6)
        # ff1's bias, GELU and the quantization of ff2's input run as post-ops of one int8 matmul.
        fused = any("pattern QLinearMatMulBiasGeluQuantize" in p["note"] for p in session.placement())
        assert fused == DNNL_INT8
    for sample in data + [{"x": rng.standard_normal((1, 8, 16)).astype(np.float32)}]:
        actual = session.run(None, sample)[0]
        if backends:
            error = error_against_meaning(model, sample, actual)
            assert error <= FLOAT32_ROUNDING, error
        else:
            expected = evaluate_qdq(model, sample)[0]
            error = np.abs(actual - expected).max() / np.abs(expected).max()
            assert error < 0.03, error


def qdq_model(scale, zero_point, zp_type=TensorProto.UINT8):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]),
                               helper.make_tensor("z", zp_type, [], [zero_point])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("scale", [0.0, -0.5, float("inf"), float("nan")])
def test_bad_scales_are_clear_errors(scale):
    with pytest.raises(tessera.InvalidArgument, match="node 'quant' \\(QuantizeLinear\\).*scale"):
        tessera.InferenceSession(qdq_model(scale, 0)).run(None, {"x": np.ones(4, np.float32)})


def test_good_qdq_roundtrip():
    y = tessera.InferenceSession(qdq_model(0.5, 10)).run(None, {"x": np.array([0, 1.2, -6, 200], np.float32)})[0]
    np.testing.assert_array_equal(y, [0, 1.0, -5.0, 122.5])


def test_check_compares_int8_regions_with_the_exact_meaning(on_dnnl_here):
    session = tessera.InferenceSession(on_dnnl_here)
    assert_int8_placement(session, "QLinearConv", small_weights=True, count=5)  # on oneDNN: checked against native
    table = session.check({"input": samples(1, seed=11)[0]}, format="table")
    assert "int8 (" in table and "all within tolerance" in table
    # A tolerance no int8 region meets is reported, naming the region.
    strict = session.check({"input": samples(1, seed=11)[0]}, tolerance=1e-9, format="table")
    assert "over tolerance" in strict


def test_int8_artifact_runs_the_same(on_dnnl_here, tmp_path):
    """The oneDNN int8 payload (8-bit slots, scales, zero points, sum post-ops) survives a .tsr round trip."""
    out = on_dnnl_here
    artifact = str(tmp_path / "net.tsr")
    tessera.compile(out, artifact, input_shapes={"input": [1, 3, 16, 16]})
    x = samples(1, seed=21)[0]
    direct = tessera.InferenceSession(out).run(None, {"input": x})[0]
    loaded = tessera.InferenceSession(artifact)
    assert any(p["op_type"] == "QLinearConv" and p["backend"] == "dnnl" for p in loaded.placement())
    np.testing.assert_array_equal(loaded.run(None, {"input": x})[0], direct)


def test_mismatched_quantization_parameters_are_clear_errors():
    def model(scale_dims, zp_type, axis=1):
        nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq", axis=axis)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("q", TensorProto.UINT8, [2, 3])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                                  [helper.make_tensor("s", TensorProto.FLOAT, scale_dims, [0.5] * int(np.prod(scale_dims))),
                                   helper.make_tensor("z", zp_type, scale_dims, [1] * int(np.prod(scale_dims)))])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m.SerializeToString()

    q = np.array([[0, 1, 2], [3, 4, 255]], np.uint8)
    # Per axis 1: three scales. Four is a mismatch, named with the axis and its size.
    with pytest.raises(tessera.InvalidArgument, match="node 'dq' \\(DequantizeLinear\\).*4 values but axis 1"):
        tessera.InferenceSession(model([4], TensorProto.UINT8)).run(None, {"q": q})
    # An axis past the input's rank (a per-channel bias written with the default axis 1, say).
    with pytest.raises(tessera.InvalidArgument, match="node 'dq' \\(DequantizeLinear\\): axis 2 is out of range.*rank 2"):
        tessera.InferenceSession(model([3], TensorProto.UINT8, axis=2)).run(None, {"q": q})
    # The zero point's type must be the quantized input's.
    with pytest.raises(tessera.InvalidArgument, match="node 'dq' \\(DequantizeLinear\\)"):
        tessera.InferenceSession(model([3], TensorProto.INT8)).run(None, {"q": q})
    y = tessera.InferenceSession(model([3], TensorProto.UINT8)).run(None, {"q": q})[0]
    np.testing.assert_array_equal(y, (q.astype(np.float32) - 1) * 0.5)


def _qdq_model(nodes, inits, inputs, output, shape, opset=13):
    graph = helper.make_graph(nodes, "qdq", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _dq(name, axis=None):
    kw = {} if axis is None else {"axis": axis}
    return helper.make_node("DequantizeLinear", [name, name + "_s", name + "_z"], [name + "_f"], name=name + "_dq", **kw)


def _params(inits, name, scale, zero_point):
    inits[name + "_s"] = np.asarray(scale, np.float32)
    inits[name + "_z"] = np.asarray(zero_point)


def handmade_products():
    """QDQ products left in float32 (no QuantizeLinear after them), written by hand the way ONNX
    Runtime's quantizer writes them: int8 activations with a zero point, per-channel int8 weights,
    an int32 bias on x_scale * w_scale; a 3-D MatMul on uint8; a Gemm with alpha (not folded) and
    uint8 weights with a zero point (MatMulInteger on native only)."""
    rng = np.random.default_rng(11)
    cases = {}
    # Gemm, transB, per output channel, int8 x with zero point 3, int32 bias.
    inits = {}
    w = rng.integers(-127, 128, (12, 40)).astype(np.int8)
    ws = (rng.random(12) * 0.02 + 0.005).astype(np.float32)
    inits["w"] = w
    _params(inits, "w", ws, np.zeros(12, np.int8))
    _params(inits, "x", 0.05, np.int8(3))
    inits["b"] = rng.integers(-3000, 3000, 12).astype(np.int32)
    _params(inits, "b", (np.float32(0.05) * ws).astype(np.float32), np.zeros(12, np.int32))
    nodes = [_dq("x"), _dq("w", axis=0), _dq("b", axis=0),
             helper.make_node("Gemm", ["x_f", "w_f", "b_f"], ["y"], name="fc", transB=1)]
    cases["gemm_int8_per_channel"] = (
        _qdq_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.INT8, [3, 40])], "y", [3, 12]),
        {"x": rng.integers(-128, 128, (3, 40)).astype(np.int8)}, "MatMulInteger", True)
    # MatMul on a 3-D uint8 activation, per-tensor weights, no bias.
    inits = {"w": rng.integers(-127, 128, (16, 24)).astype(np.int8)}
    _params(inits, "w", 0.01, np.int8(0))
    _params(inits, "x", 0.02, np.uint8(128))
    nodes = [_dq("x"), _dq("w"), helper.make_node("MatMul", ["x_f", "w_f"], ["y"], name="mm")]
    cases["matmul_3d_uint8"] = (
        _qdq_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 5, 16])], "y", [2, 5, 24]),
        {"x": rng.integers(0, 256, (2, 5, 16)).astype(np.uint8)}, "MatMulInteger", True)
    # Gemm with alpha 0.5: not folded, a float Gemm on the dequantized values.
    inits = {"w": rng.integers(-127, 128, (8, 6)).astype(np.int8)}
    _params(inits, "w", 0.03, np.int8(0))
    _params(inits, "x", 0.1, np.uint8(10))
    nodes = [_dq("x"), _dq("w"), helper.make_node("Gemm", ["x_f", "w_f"], ["y"], name="fc", alpha=0.5)]
    cases["gemm_alpha_not_folded"] = (
        _qdq_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.UINT8, [4, 8])], "y", [4, 6]),
        {"x": rng.integers(0, 256, (4, 8)).astype(np.uint8)}, "Gemm", True)
    # uint8 weights with a zero point: folded, but oneDNN's int8 matmul takes neither.
    inits = {"w": rng.integers(0, 256, (10, 7)).astype(np.uint8)}
    _params(inits, "w", 0.02, np.uint8(120))
    _params(inits, "x", 0.04, np.uint8(0))
    nodes = [_dq("x"), _dq("w"), helper.make_node("MatMul", ["x_f", "w_f"], ["y"], name="mm")]
    cases["matmul_uint8_weights"] = (
        _qdq_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.UINT8, [3, 10])], "y", [3, 7]),
        {"x": rng.integers(0, 256, (3, 10)).astype(np.uint8)}, "MatMulInteger", False)
    # Gemm with int8 weights within +-64 (both ends present) and uint8 activations up to 255: the largest
    # pairs of products still fit int16, so oneDNN takes it with or without VNNI.
    inits = {"w": np.concatenate([[[64] * 40, [-64] * 40], rng.integers(-64, 65, (6, 40))]).astype(np.int8)}
    _params(inits, "w", 0.01, np.int8(0))
    _params(inits, "x", 0.02, np.uint8(0))
    nodes = [_dq("x"), _dq("w"), helper.make_node("Gemm", ["x_f", "w_f"], ["y"], name="fc", transB=1)]
    x = rng.integers(0, 256, (4, 40)).astype(np.uint8)
    x[0] = 255  # every product at its largest
    cases["gemm_weights_within_64"] = (
        _qdq_model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.UINT8, [4, 40])], "y", [4, 8]),
        {"x": x}, "MatMulInteger", True)
    return cases


@pytest.mark.parametrize("case", sorted(handmade_products()))
@pytest.mark.parametrize("backends", [["native"], None])
def test_float_products_run_on_the_integers(case, backends, tmp_path):
    model, feeds, op, on_dnnl = handmade_products()[case]
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    session = tessera.InferenceSession(path, backends=backends)
    placed = {p["op_type"]: p["backend"] for p in session.placement() if p["backend"] != "folded"}
    assert op in placed, placed
    if backends is None and on_dnnl and op != "Gemm":
        weights = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "w")
        assert_int8_placement(session, op, small_weights=np.abs(weights.astype(np.int32)).max() <= INT16_SAFE_WEIGHT)
    else:
        assert placed[op] == ("dnnl" if backends is None and on_dnnl else "native"), placed
    expected = evaluate_qdq(model, feeds)[0]
    actual = session.run(None, feeds)[0]
    assert actual.shape == expected.shape
    # Only float32 rounding separates the int32 product scaled once from the float64 meaning.
    bound = FLOAT32_ROUNDING if op == "MatMulInteger" and placed[op] == "native" else 1e-5
    assert np.abs(actual - expected).max() <= bound * np.abs(expected).max(), case


def test_cli_weights_only_quantizes_the_matmul_weights_and_refuses_models_without_any(tmp_path):
    """`tessera quantize --weights-only`: Attention's four constant Linear weights become int8 per output
    column behind DequantizeLinear (the product of two activations stays float), nothing is calibrated,
    and the file runs what it means: float32 activations times the dequantized weights (numpy, float64).
    A model with no constant MatMul/Gemm weight (a convolution) is a clear error that writes nothing."""
    torch.manual_seed(3)
    net = Attention().eval()
    path, out = str(tmp_path / "attention.onnx"), str(tmp_path / "attention.w8.onnx")
    torch.onnx.export(net, torch.randn(2, 5, 16), path, input_names=["x"], output_names=["y"], opset_version=17)
    run = subprocess.run([CLI, "quantize", path, "-o", out, "--weights-only"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "weight-only int8" in run.stdout and "MatMul 4" in run.stdout, run.stdout
    assert "MatMul (2): its second operand is not a constant" in run.stdout, run.stdout
    model = onnx.load(out)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 4 and not [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    for node in dq:
        q, scale = inits[node.input[0]], inits[node.input[1]]
        assert q.dtype == np.int8 and scale.shape == (q.shape[1],) and np.abs(q).max() == 127
    # The weights as the file states them, in float64, through the module's own structure.
    weights = {}
    for node in dq:
        q, scale = inits[node.input[0]], inits[node.input[1]]
        weights[q.shape] = weights.get(q.shape, []) + [q.astype(np.float64) * scale.astype(np.float64)]
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    lin = {name: (weights[tuple(getattr(net, name).weight.shape[::-1])].pop(0), getattr(net, name).bias.detach().double().numpy())
           for name in ("lin1", "lin2", "ff1", "ff2")}
    affine = lambda v, name: v @ lin[name][0] + lin[name][1]  # noqa: E731
    h = np.maximum(affine(x.astype(np.float64), "lin1"), 0)
    y = (h @ h.transpose(0, 2, 1)) @ affine(h, "lin2")
    f = affine(y, "ff1")
    f = 0.5 * f * (1 + np.vectorize(math.erf)(f / math.sqrt(2)))
    expected = affine(f, "ff2")
    got = tessera.InferenceSession(out).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    conv_path = str(tmp_path / "conv.onnx")
    torch.onnx.export(nn.Conv2d(3, 4, 3).eval(), torch.randn(1, 3, 8, 8), conv_path, opset_version=17)
    bad = subprocess.run([CLI, "quantize", conv_path, "-o", str(tmp_path / "conv.w8.onnx"), "--weights-only"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "no MatMul or Gemm whose second operand is a constant float32 matrix" in bad.stderr
    assert not os.path.exists(tmp_path / "conv.w8.onnx")
