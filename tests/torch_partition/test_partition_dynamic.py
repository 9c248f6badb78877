"""tessera.torch.partition with dynamic_axes: partitions compiled once that run every size of the open dims.

Each result is compared with eager PyTorch on the same module at shapes partition() never saw; the
compile counters of the torch op say that no partition compiled again. The structure expected (which
node runs where) is written here from the models' code, not asked of the partitioner.
"""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from assert_close import assert_close  # noqa: E402  (the NaN-aware check shared with tests/torch/)

import tessera  # noqa: E402
import tessera._partition as tessera_partition  # noqa: E402  (the implementation, for its runtime switch)
import tessera.torch  # noqa: E402
from tessera.torch import partition  # noqa: E402

torch.set_num_threads(1)


def outputs_of(module, inputs):
    with torch.no_grad():
        out = module(*inputs)
    return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def compare(model, partitioned, inputs):
    expected, actual = outputs_of(model, inputs), outputs_of(partitioned, inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_close(a, e)


def compile_counts(partitioned):
    """{partition: times its model compiled}, for the torch op's partitions."""
    return {name: sub.tessera_model().compile_count() for name, sub in partitioned.named_children()
            if name.startswith("tessera_partition_")}


class Encoder(torch.nn.Module):
    """Token ids and a mask, both [batch, seq]; sizes read from the ids shape a reshape and a view in other
    partitions; erfinv (no ONNX export) splits the graph; chunk gives a tuple whose elements have the
    dynamic dims."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(50, 16)
        self.attention = torch.nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, ids, mask):
        x = self.embedding(ids)
        batch = ids.shape[0]
        seq = ids.size(1)
        x = self.norm(x + self.attention(x, x, x, need_weights=False)[0])
        parts = torch.chunk(self.fc(x), 2, dim=-1)
        gated = torch.special.erfinv(torch.tanh(parts[0]) * 0.5) * mask.unsqueeze(-1)
        return (gated + parts[1]).reshape(batch, seq * 8).sum(-1), x.view(batch * seq, 16)


@pytest.mark.parametrize("runtime", ["op", "session"])
def test_encoder_compiles_once_and_runs_every_batch_and_length(monkeypatch, runtime):
    if runtime == "session":
        monkeypatch.setattr(tessera_partition, "_torch_bridge", lambda: None)
    torch.manual_seed(0)
    model = Encoder().eval()
    ids, mask = torch.randint(0, 50, (2, 6)), torch.ones(2, 6)
    axes = {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}
    result = partition(model, (ids, mask), dynamic_axes=axes)
    report = result.tessera_report
    assert report.dynamic_axes == axes
    assert "ids[1] (seq)" in str(report)
    # Only erfinv stays in PyTorch: the reshape and the view read sizes of `ids`, which their partitions
    # now compute from ids' shape (the sizes themselves do not run).
    assert [e.node for e in report.pytorch_nodes()] == ["special_erfinv"]
    for node in ("getitem", "size", "mul_2", "mul_3"):
        assert report[node].where == "constant" and "computed from" in report[node].reason, report[node]
    assert report["reshape"].where.startswith("tessera_partition_")
    assert report["view"].where.startswith("tessera_partition_")
    generator = torch.Generator().manual_seed(1)
    for batch, seq in [(2, 6), (1, 1), (3, 17), (1, 40), (4, 3), (2, 6)]:
        fresh_ids = torch.randint(0, 50, (batch, seq), generator=generator)
        fresh_mask = (torch.rand(batch, seq, generator=generator) > 0.3).float()
        compare(model, result, (fresh_ids, fresh_mask))
    if runtime == "op":
        counts = compile_counts(result)
        assert len(counts) == 2 and set(counts.values()) == {1}, counts


class CnnHead(torch.nn.Module):
    """The classic flatten `y.view(y.size(0), -1)` and a size added to the logits."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        y = y.view(y.size(0), -1)
        return self.fc(y) + y.shape[0]


def test_cnn_with_open_batch_scripts_and_runs_every_batch():
    torch.manual_seed(2)
    model = CnnHead().eval()
    result = partition(model, torch.randn(2, 3, 8, 8), dynamic_axes={0: [0]})
    report = result.tessera_report
    assert report.pytorch_nodes() == [] and len(report.partitions) == 1
    assert report.dynamic_axes == {"x": {0: "x_dim0"}}
    scripted = torch.jit.script(result)
    for batch in (1, 2, 5, 9):
        x = torch.randn(batch, 3, 8, 8)
        compare(model, result, (x,))
        compare(model, scripted, (x,))
    assert set(compile_counts(result).values()) == {1}
    # A fixed dim is still fixed: a clear error naming the input, not a wrong answer.
    with torch.no_grad(), pytest.raises(ValueError, match="x"):
        result(torch.randn(2, 3, 10, 10))


class SizeFromAnotherInput(torch.nn.Module):
    """n = a.size(0) from an input whose shape stays fixed; b's rows are open."""

    def forward(self, a, b):
        n = a.size(0)
        return torch.relu(b[:n] * 2) + b.sum()


def test_constant_sizes_from_fixed_dims_stay_guarded():
    model = SizeFromAnotherInput().eval()
    a, b = torch.randn(3, 4), torch.randn(6, 4)
    result = partition(model, (a, b), dynamic_axes={"b": [0]})
    for rows in (6, 3, 11):
        compare(model, result, (a, torch.randn(rows, 4)))
    with torch.no_grad(), pytest.raises(ValueError, match=r"input 'a' has shape \[5, 4\], but the module was "
                                                          r"partitioned for \[3, 4\]"):
        result(torch.randn(5, 4), b)


class SizeOfAReduction(torch.nn.Module):
    """n comes from a's columns through a reduction over its open rows: a constant the guard on `a` (which
    no partition reads) must check, while a's rows change freely."""

    def forward(self, a, b):
        n = torch.special.erfinv(a).sum(0).size(0)
        return torch.relu(b[:, :n] * 2)


def test_the_guard_checks_fixed_dims_only():
    model = SizeOfAReduction().eval()
    result = partition(model, (torch.randn(4, 3), torch.randn(2, 5)), dynamic_axes={"a": [0]})
    assert result.tessera_report["relu"].where.startswith("tessera_partition_")
    for rows in (4, 1, 9):
        compare(model, result, (torch.randn(rows, 3), torch.randn(2, 5)))
    with torch.no_grad(), pytest.raises(ValueError, match=r"input 'a' has shape \[7, 4\], but the module was "
                                                          r"partitioned for \[-1, 3\] \(-1: a dynamic axis\)"):
        result(torch.randn(7, 4), torch.randn(2, 5))


class SqueezesTheBatch(torch.nn.Module):
    """At batch 1, squeeze() drops the batch dim; at other sizes it does not: its rank changes."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x).squeeze() * 2)


def test_a_node_whose_rank_changes_with_the_axes_stays_in_pytorch():
    torch.manual_seed(3)
    model = SqueezesTheBatch().eval()
    result = partition(model, torch.randn(1, 4), dynamic_axes={0: [0]})
    report = result.tessera_report
    assert report["squeeze"].where == "pytorch" and "rank" in report["squeeze"].reason
    for batch in (1, 3, 7):
        compare(model, result, (torch.randn(batch, 4),))


@torch.fx.wrap
def scaled_by_position(x):
    # int() makes the length a constant when torch.onnx.export traces this: exported, it holds only for
    # the example's length.
    return x * torch.arange(int(x.shape[-1]), dtype=x.dtype)


class BakesItsLength(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(scaled_by_position(torch.relu(x)) + 1)


@pytest.mark.parametrize("runtime", ["op", "session"])
def test_a_node_exported_for_one_size_only_stays_in_pytorch(monkeypatch, runtime):
    """The node alone runs right at the example's shape; checked at the probe's, it fails, so it stays in
    PyTorch and the rest still runs every length."""
    if runtime == "session":
        monkeypatch.setattr(tessera_partition, "_torch_bridge", lambda: None)
    model = BakesItsLength().eval()
    result = partition(model, torch.randn(2, 6), dynamic_axes={0: {1: "length"}})
    report = result.tessera_report
    assert report["scaled_by_position"].where == "pytorch", report["scaled_by_position"]
    assert report["relu"].where.startswith("tessera_partition_") and report["tanh"].where.startswith("tessera_")
    for length in (6, 1, 13):
        compare(model, result, (torch.randn(2, length),))


class FixedBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return x + self.bias


def test_bad_dynamic_axes_are_clear_errors():
    model, x = FixedBatch().eval(), torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"names input 'y', but the inputs are \['x'\]"):
        partition(model, x, dynamic_axes={"y": [0]})
    with pytest.raises(ValueError, match="names input 1, but there are 1 inputs"):
        partition(model, x, dynamic_axes={1: [0]})
    with pytest.raises(ValueError, match="names axis 2, but the input has rank 2"):
        partition(model, x, dynamic_axes={0: [2]})
    with pytest.raises(ValueError, match="must be a list of axes"):
        partition(model, x, dynamic_axes={0: 0})
    with pytest.raises(TypeError, match="dynamic_axes must be a dict"):
        partition(model, x, dynamic_axes=[0])
    # The module cannot run at another batch: said, with the sizes tried and the failing node.
    with pytest.raises(tessera.InvalidArgument, match=r"fails at every other size tried \(x_dim0=4: .*node 'add'"):
        partition(model, x, dynamic_axes={0: [0]})
