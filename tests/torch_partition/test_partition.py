"""tessera.torch.partition (python/tessera/_partition.py): Tessera runs what it supports, PyTorch the rest.

Every result is compared with eager PyTorch on the same module; structure (which node ran where) is
checked against the traced graph, computed here independently of the partitioner.
"""

import importlib.util
import os
import sys

import pytest
import torch
import torch.fx
import torchvision  # Debian's python3-torchvision: required (no skip), like torch itself

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from assert_close import assert_close  # noqa: E402  (the NaN-aware check shared with tests/torch/)

import tessera  # noqa: E402
import tessera._partition as tessera_partition  # noqa: E402  (the implementation, for its runtime switch)
import tessera.torch  # noqa: E402
from tessera.torch import PartitionedModule, TraceError, partition  # noqa: E402

torch.set_num_threads(1)  # 2 cores: keep eager PyTorch from fighting Tessera's threads


def fresh_inputs(inputs, seed):
    """New random values of the example inputs' shapes and dtypes (integers within the example's range,
    e.g. embedding ids), so that a comparison also covers inputs partition() has never seen."""
    generator = torch.Generator().manual_seed(seed)
    fresh = []
    for x in inputs:
        if x.is_floating_point():
            fresh.append(torch.randn(x.shape, generator=generator, dtype=x.dtype))
        elif x.dtype == torch.bool:
            fresh.append(torch.randint(0, 2, x.shape, generator=generator).bool())
        else:
            low, high = int(x.min()), int(x.max()) + 1
            fresh.append(torch.randint(low, high, x.shape, generator=generator, dtype=x.dtype))
    assert any(not torch.equal(f, x) for f, x in zip(fresh, inputs)), "the fresh inputs equal the example"
    return fresh


def outputs_of(module, inputs):
    with torch.no_grad():
        out = module(*inputs)
    return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def compare(model, partitioned, inputs):
    expected, actual = outputs_of(model, inputs), outputs_of(partitioned, inputs)
    assert len(actual) == len(expected), (len(actual), len(expected))
    for a, e in zip(actual, expected):
        assert_close(a, e)  # tests/lib/assert_close.py: fp32 tolerance, NaN only where PyTorch has NaN
    return expected


def run_both(model, partitioned, *inputs, fresh=2):
    """partitioned against eager PyTorch on the example inputs and on `fresh` sets of new random inputs
    of the same shapes (a partition that replayed what it saw when partition() checked the example
    would pass the first comparison, not the others)."""
    example_expected = compare(model, partitioned, inputs)
    for k in range(fresh):
        expected = compare(model, partitioned, fresh_inputs(inputs, seed=1000 + k))
        # The model's outputs depend on the new values, so replaying the example's outputs would fail.
        assert any(not torch.equal(e, x) for e, x in zip(expected, example_expected)), "same outputs for new inputs"


def where(report, node):
    return report[node].where


def ancestors(graph_module, names):
    """Names of every node upstream of the named nodes in graph_module's graph (not the nodes themselves)."""
    nodes = {n.name: n for n in graph_module.graph.nodes}
    seen, stack = set(), [nodes[name] for name in names]
    while stack:
        for i in stack.pop().all_input_nodes:
            if i.name not in seen:
                seen.add(i.name)
                stack.append(i)
    return seen


def assert_no_partition_waits_for_itself(model, report):
    """In the module's own traced graph, nothing a partition reads is computed from the partition's nodes."""
    traced = torch.fx.symbolic_trace(model)
    for info in report.partitions:
        upstream = ancestors(traced, info.inputs)
        assert not upstream & set(info.nodes), (info.name, sorted(upstream & set(info.nodes)))


def partition_calls(partitioned):
    return [n for n in partitioned.graph.nodes if n.op == "call_module" and n.target.startswith("tessera_partition_")]


def compute_nodes(partitioned):
    return [n for n in partitioned.graph.nodes if n.op in ("call_module", "call_function", "call_method")]


# -- models ----------------------------------------------------------------------------------------------

class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.relu(self.conv2(y)) + y
        return torch.softmax(self.fc(self.pool(y).flatten(1)), dim=1)


class ErfinvInTheMiddle(torch.nn.Module):
    """conv layers around torch.special.erfinv, which torch 1.13 cannot export to ONNX."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.tanh(torch.relu(self.conv1(x))) * 0.9
        y = torch.special.erfinv(y)
        y = torch.relu(self.conv2(y))
        return self.fc(y.view(y.size(0), -1))


class SwishPlusOne(torch.autograd.Function):
    """A custom op: exports to ONNX as custom::SwishPlusOne, which Tessera does not have."""

    @staticmethod
    def forward(ctx, x):
        return x * torch.sigmoid(x) + 1

    @staticmethod
    def symbolic(g, x):
        return g.op("custom::SwishPlusOne", x)


@torch.fx.wrap
def swish_plus_one(x):
    return SwishPlusOne.apply(x)


class CustomOpInTheMiddle(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(swish_plus_one(torch.relu(self.fc1(x))))


class Diamond(torch.nn.Module):
    """A (supported) -> U (unsupported) -> C (supported), and A -> C directly: grouping A and C together
    would make a partition that waits, through U, for its own output."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.c = torch.nn.Linear(8, 8)

    def forward(self, x):
        a = torch.relu(self.a(x))
        u = swish_plus_one(a)
        return self.c(u) + a


class Tuples(torch.nn.Module):
    """torch.topk and torch.chunk produce tuples; their elements are picked with [i] and .values."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        top = torch.topk(y, 4)
        halves = torch.chunk(y, 2, dim=1)
        return top.values * 2 + halves[0][:, :4] - halves[1][:, :4], top[1]


class TwoSizes(torch.nn.Module):
    """A 2-node partition (fc1, relu), an unsupported op, then a 4-node one (fc2, tanh, fc3, add)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.fc3 = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.special.erfinv(torch.tanh(torch.relu(self.fc1(x))) * 0.5)
        return self.fc3(torch.tanh(self.fc2(y))) + 1.0


class MutatesAPartitionOutput(torch.nn.Module):
    """An in-place op in PyTorch changes fc1's output, which later nodes read after the change."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc1(x)
        y.mul_(2)
        return self.fc2(y) * 3 + y


class ControlFlow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return x


# -- tests -----------------------------------------------------------------------------------------------

def test_all_supported_cnn_is_one_partition():
    torch.manual_seed(0)
    model = SmallCnn().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 8, 8)
    result = partition(model, x)
    assert partition is tessera_partition.partition
    assert isinstance(result, PartitionedModule) and isinstance(result, torch.fx.GraphModule)
    report = result.tessera_report
    assert [info.name for info in report.partitions] == ["tessera_partition_0"]
    assert report.pytorch_nodes() == []
    assert {e.where for e in report.nodes} == {"tessera_partition_0"}
    assert all(e.backend in ("dnnl", "native", "dnnl,native") for e in report.nodes if e.op == "Conv2d")
    assert [n.op for n in compute_nodes(result)] == ["call_module"]  # the whole model is one Tessera call
    assert type(result.tessera_partition_0).__name__.startswith("TesseraModule")
    assert "1 Tessera partition(s), 0 in PyTorch" in str(report)
    run_both(model, result, x)
    run_both(model, result, torch.randn(2, 3, 8, 8))  # new values, same shapes


def test_op_onnx_cannot_export_stays_in_pytorch():
    torch.manual_seed(1)
    model = ErfinvInTheMiddle().eval()
    x = torch.randn(2, 3, 6, 6)
    result = partition(model, x)
    report = result.tessera_report
    assert len(report.partitions) == 2
    erfinv = report["special_erfinv"]
    assert erfinv.where == "pytorch"
    assert "ONNX export failed" in erfinv.reason and "erfinv" in erfinv.reason
    assert [e.node for e in report.pytorch_nodes()] == ["special_erfinv"]
    assert where(report, "conv1") == where(report, "tanh") == "tessera_partition_0"
    assert where(report, "conv2") == where(report, "fc") == where(report, "view") == "tessera_partition_1"
    assert report["size"].where == "constant"  # y.size(0) is a constant inside the partition
    text = str(report)
    assert "special_erfinv" in text and "ONNX export failed" in text
    # Between the two Tessera calls, PyTorch runs erfinv and nothing else.
    assert [n.target for n in compute_nodes(result)] == ["tessera_partition_0", torch.special.erfinv,
                                                           "tessera_partition_1"]
    run_both(model, result, x)
    run_both(model, result, torch.randn(2, 3, 6, 6))


def test_op_tessera_lacks_stays_in_pytorch():
    torch.manual_seed(2)
    model = CustomOpInTheMiddle().eval()
    x = torch.randn(4, 16)
    result = partition(model, x)
    report = result.tessera_report
    custom = report["swish_plus_one"]
    assert custom.where == "pytorch"
    assert "Tessera" in custom.reason and "Unsupported" in custom.reason and "SwishPlusOne" in custom.reason
    assert len(report.partitions) == 2
    assert where(report, "fc1") != where(report, "fc2")
    run_both(model, result, x)


def test_no_partition_depends_on_itself():
    torch.manual_seed(3)
    model = Diamond().eval()
    x = torch.randn(3, 8)
    result = partition(model, x)
    report = result.tessera_report
    assert report["swish_plus_one"].where == "pytorch"
    a, c = where(report, "a"), where(report, "c")
    assert a.startswith("tessera_partition_") and c.startswith("tessera_partition_") and a != c
    assert where(report, "relu") == a and where(report, "add") == c
    assert_no_partition_waits_for_itself(model, report)
    # The direct edge A -> C crosses between the partitions as an input of C's.
    second = [info for info in report.partitions if info.name == c][0]
    assert set(second.inputs) == {"swish_plus_one", "relu"}
    run_both(model, result, x)


def test_tuple_producing_ops_stay_with_their_elements():
    torch.manual_seed(4)
    model = Tuples().eval()
    x = torch.randn(3, 16)
    result = partition(model, x)
    report = result.tessera_report
    assert len(report.partitions) == 1 and report.pytorch_nodes() == []
    assert report["topk"].backend == "native" and report["chunk"].backend.startswith("dnnl")
    outputs = report.partitions[0].outputs  # tensors picked from the tuples, never the tuples themselves
    assert sorted(outputs) == ["getitem_4", "sub"]  # top[1] is getitem_4
    run_both(model, result, x)


def test_tuple_producer_left_in_pytorch_takes_its_elements_along():
    # Only oneDNN, strictly: oneDNN has no TopK, so topk and the elements picked from it stay in PyTorch,
    # while chunk (a Split) and the rest go to Tessera. No tuple crosses a boundary.
    torch.manual_seed(5)
    model = Tuples().eval()
    x = torch.randn(3, 16)
    result = partition(model, x, backends=["dnnl"], strict=True)
    report = result.tessera_report
    assert report["topk"].where == "pytorch" and "TopK" in report["topk"].reason
    for element in ("getitem_4", "getattr_1"):  # top[1] and top.values
        assert report[element].where == "pytorch" and "element of 'topk'" in report[element].reason
    assert report["chunk"].where.startswith("tessera_partition_")
    assert {e.backend for e in report.tessera_nodes()} <= {"dnnl", "-"}
    traced = {n.name: n for n in torch.fx.symbolic_trace(model).graph.nodes}
    for info in report.partitions:
        for name in info.inputs + info.outputs:
            assert name not in ("topk", "chunk"), (info.name, name)
        assert all(traced[name].op != "call_function" or traced[name].target is not torch.topk for name in info.nodes)
    assert_no_partition_waits_for_itself(model, report)
    run_both(model, result, x)


def test_min_size_keeps_small_partitions_in_pytorch():
    torch.manual_seed(6)
    model = TwoSizes().eval()
    x = torch.randn(4, 8)
    every = partition(model, x).tessera_report
    assert [len(info.nodes) for info in every.partitions] == [4, 4]  # fc1, relu, tanh, mul | fc2, tanh_1, fc3, add

    result = partition(model, x, min_size=5)
    report = result.tessera_report
    assert report.partitions == []
    assert all("fewer than min_size=5" in e.reason for e in report.nodes if e.node != "special_erfinv")
    run_both(model, result, x)

    model.fc3 = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    result = partition(model, x, min_size=5)
    report = result.tessera_report
    assert [len(info.nodes) for info in report.partitions] == [6]
    assert report["fc1"].where == "pytorch"
    assert "its partition has 4 node(s), fewer than min_size=5" in report["fc1"].reason
    run_both(model, result, x)


def test_in_place_change_in_pytorch_is_seen_by_later_nodes():
    torch.manual_seed(7)
    model = MutatesAPartitionOutput().eval()
    x = torch.randn(2, 8)
    result = partition(model, x)
    report = result.tessera_report
    assert report["mul_"].where == "pytorch" and "in place" in report["mul_"].reason
    assert where(report, "fc1") != where(report, "fc2")
    assert_no_partition_waits_for_itself(model, report)
    run_both(model, result, x)


def test_bad_inputs_give_clear_errors():
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        partition(lambda x: x, torch.randn(2))
    with pytest.raises(TypeError, match="example_inputs"):
        partition(SmallCnn().eval(), "not a tensor")
    with pytest.raises(ValueError, match="min_size"):
        partition(SmallCnn().eval(), torch.randn(1, 3, 8, 8), min_size=0)
    with pytest.raises(TraceError, match="cannot trace ControlFlow: .*control flow") as caught:
        partition(ControlFlow().eval(), torch.randn(2, 4))
    assert isinstance(caught.value, tessera.InvalidArgument)
    with pytest.raises(tessera.InvalidArgument, match="failed at node 'conv1'"):
        partition(SmallCnn().eval(), torch.randn(1, 4, 8, 8))  # 4 channels for a 3-channel conv
    with pytest.raises(TypeError, match="ScriptModule"):
        partition(torch.jit.script(SmallCnn().eval()), torch.randn(1, 3, 8, 8))


def test_session_runtime_when_the_torch_op_is_missing(monkeypatch):
    monkeypatch.setattr(tessera_partition, "_torch_bridge", lambda: None)
    torch.manual_seed(8)
    model = ErfinvInTheMiddle().eval()
    x = torch.randn(2, 3, 6, 6)
    result = partition(model, x)
    assert "InferenceSession" in result.tessera_report.runtime
    assert len(result.tessera_report.partitions) == 2
    run_both(model, result, x)


def test_graph_module_input_script_and_dynamo_door():
    torch.manual_seed(9)
    model = ErfinvInTheMiddle().eval()
    x = torch.randn(2, 3, 6, 6)
    traced = torch.fx.symbolic_trace(model)
    result = partition(traced, x)
    assert len(result.tessera_report.partitions) == 2
    run_both(model, torch.jit.script(result), x)  # the mix is a TorchScript-able module
    forward = tessera.torch.dynamo_backend(traced, [x])  # the signature torch._dynamo calls
    run_both(model, forward, x)
    had_dynamo = "torch._dynamo" in sys.modules
    assert tessera.torch.dynamo_available() == (importlib.util.find_spec("torch._dynamo") is not None)
    assert ("torch._dynamo" in sys.modules) == had_dynamo  # feature-detected, not imported


def test_torchvision_resnet_identical_layers_checked_once():
    torch.manual_seed(10)
    model = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(1, 3, 32, 32)
    result = partition(model, x, threads=2)
    report = result.tessera_report
    assert len(report.partitions) == 1 and report.pytorch_nodes() == []
    assert report.nodes_checked < len(report.nodes) / 2  # layers of the same shape share one check
    assert model.layer1[0].bn1.training is False  # the user's layers keep their mode
    run_both(model, result, x)


class ChangesAView(torch.nn.Module):
    """An in-place op through a view changes the viewed tensor, which later nodes read."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.fc1(x))
        y[:, :4].mul_(-1)  # y's first half changes through the view
        return self.fc2(torch.tanh(y)) + y


def test_in_place_change_through_a_view_reaches_the_base():
    torch.manual_seed(11)
    model = ChangesAView().eval()
    x = torch.randn(3, 8)
    result = partition(model, x)
    report = result.tessera_report
    assert report["getitem"].where == "pytorch" and "changes in place" in report["getitem"].reason
    assert report["mul_"].where == "pytorch"
    assert_no_partition_waits_for_itself(model, report)
    run_both(model, result, x)


class MethodNames(torch.nn.Module):
    """Nodes named like nn.Module methods: x.to(...) is fx node "to", x.double() is "double"."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).to(torch.float64).double().type(torch.float32) * 2


def test_nodes_named_like_module_methods():
    torch.manual_seed(12)
    model = MethodNames().eval()
    x = torch.randn(2, 4)
    result = partition(model, x)
    report = result.tessera_report
    assert len(report.partitions) == 1 and report.pytorch_nodes() == []
    assert report["to"].backend not in ("", "-")  # mapped back from the compiled partition's placement
    run_both(model, result, x)


class ShapeOnlyInput(torch.nn.Module):
    """ones_like(u) reads only u's shape: the ONNX export of the second partition drops that input."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        u = torch.special.erfinv(x * 0.5)
        return self.fc(x) + torch.ones_like(u) * 2


@pytest.mark.parametrize("runtime", ["op", "session"])
def test_input_read_only_for_its_shape(monkeypatch, runtime):
    if runtime == "session":
        monkeypatch.setattr(tessera_partition, "_torch_bridge", lambda: None)
    torch.manual_seed(13)
    model = ShapeOnlyInput().eval()
    x = torch.randn(2, 4)
    result = partition(model, x)
    report = result.tessera_report
    second = report.partitions[-1]
    assert report["fc"].where == second.name and second.inputs == ["x"]
    run_both(model, result, x)


class Attention(torch.nn.Module):
    """nn.MultiheadAttention returns (output, None) with need_weights=False; the ids are int64."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 16)
        self.attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, ids):
        x = self.embedding(ids)
        x = self.norm(x + self.attention(x, x, x, need_weights=False)[0])
        return torch.special.erfinv(torch.tanh(x) * 0.5).sum(1)


def test_tuple_with_none_and_integer_inputs():
    torch.manual_seed(14)
    model = Attention().eval()
    ids = torch.randint(0, 50, (2, 6))
    result = partition(model, ids)
    report = result.tessera_report
    assert report["attention"].where == report["getitem"].where == report["embedding"].where == "tessera_partition_0"
    assert report["special_erfinv"].where == "pytorch"
    run_both(model, result, ids)


class SizeFromAnotherInput(torch.nn.Module):
    """`a` is read only for its size: n = a.size(0) becomes a constant inside the partition."""

    def forward(self, a, b):
        n = a.size(0)
        return torch.relu(b[:n] * 2)


def test_an_input_read_only_for_its_size_keeps_its_example_shape():
    """Partitioned at a=(3,4), called with a=(5,4): once returned 3 rows where PyTorch gives 5; now a clear
    error names the input and both shapes. At the example shape it still runs, on fresh values too."""
    model = SizeFromAnotherInput().eval()
    a, b = torch.randn(3, 4), torch.randn(6, 4)
    result = partition(model, (a, b))
    run_both(model, result, a, b)
    with torch.no_grad(), pytest.raises(ValueError, match=r"input 'a' has shape \[5, 4\], but the module was "
                                                          r"partitioned for \[3, 4\]"):
        result(torch.randn(5, 4), b)
    scripted = torch.jit.script(result)  # the check scripts with the rest
    run_both(model, scripted, a, b)
    with torch.no_grad(), pytest.raises(Exception, match=r"input 'a' has shape \[5, 4\]"):
        scripted(torch.randn(5, 4), b)
