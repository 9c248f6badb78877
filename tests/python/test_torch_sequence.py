"""TorchScript modules that build a Python list in a loop, exported to ONNX and run by Tessera.

torch.jit.script keeps `for i in range(x.size(0))` as a Loop whose trip count comes from the input's shape,
and the list as an ONNX sequence: SequenceEmpty before the loop, SequenceInsert in its body (inside an If when
the append is conditional), then ConcatFromSequence for torch.stack / torch.cat, SequenceLength for len() and
SequenceAt for indexing. The tests assert that the exported graphs really have that form (so that they fail
if the exporter ever unrolls the loop or drops the sequence), then compare Tessera's outputs, through the
Python API (one session, compiled per input length) and the CLI (ONNX and a compiled .tsr), with the scripted
module's own at several lengths, 1 and 0 among them. Random weights, nothing downloaded."""
import os
import subprocess
import warnings
from typing import List

import numpy as np
import onnx
import pytest
import torch

import tessera

CLI = os.environ.get("TESSERA_CLI")

# Sequence ops appear in exported loops from opset 13 (below it the exporter turns the list into Loop scan
# outputs); 17 is the highest the Debian torch (1.13) exports.
OPSETS = (13, 17)
FEATURES = 4
HIDDEN = 3


class StackRows(torch.nn.Module):
    """torch.stack over a list with one entry per row: relu(Linear(x[i])) + i."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, HIDDEN)

    def forward(self, x):
        rows: List[torch.Tensor] = []
        for i in range(x.size(0)):
            rows.append(torch.relu(self.lin(x[i])) + float(i))
        return torch.stack(rows)


class CatRows(torch.nn.Module):
    """torch.cat over a list with one entry per row: x[i] * i."""

    def forward(self, x):
        rows: List[torch.Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i] * i)
        return torch.cat(rows)


class KeepPositiveRows(torch.nn.Module):
    """Appends Linear(x[i]) * (i + 1) only for rows with a positive sum (an If inside the Loop); returns the
    list's length, its last entry (out[-1]) and its first (out[0]), or constants when it is empty."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(FEATURES, HIDDEN)

    def forward(self, x):
        kept: List[torch.Tensor] = []
        for i in range(x.size(0)):
            row = x[i]
            if bool(row.sum() > 0):
                kept.append(self.lin(row) * float(i + 1))
        n = len(kept)
        if n > 0:
            last = kept[-1]
        else:
            last = torch.zeros_like(self.lin.bias)
        first = kept[0] if n > 0 else torch.ones_like(self.lin.bias)
        return torch.tensor(n), last, first


OUTPUTS = {StackRows: ["y"], CatRows: ["y"], KeepPositiveRows: ["n", "last", "first"]}


def op_types(graph):
    """(op_type, depth) of every node of graph and of its subgraphs, depth 0 for graph's own nodes."""
    found = []

    def walk(g, depth):
        for node in g.node:
            found.append((node.op_type, depth))
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(sub, depth + 1)

    walk(graph, 0)
    return found


def count(found, op, depth=None):
    return sum(1 for o, d in found if o == op and (depth is None or d == depth))


def export(module_type, opset, folder):
    torch.manual_seed(0)
    scripted = torch.jit.script(module_type().eval())
    names = OUTPUTS[module_type]
    path = str(folder / ("%s_opset%d.onnx" % (module_type.__name__, opset)))
    dynamic = {"x": {0: "rows"}}
    if module_type is not KeepPositiveRows:
        dynamic["y"] = {0: "out_rows"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(scripted, (torch.randn(5, FEATURES),), path, opset_version=opset, input_names=["x"],
                          output_names=names, dynamic_axes=dynamic)
    return scripted, path


@pytest.fixture(scope="module", params=[(t, o) for t in OUTPUTS for o in OPSETS],
                ids=lambda p: "%s-opset%d" % (p[0].__name__, p[1]))
def exported(request, tmp_path_factory):
    module_type, opset = request.param
    scripted, path = export(module_type, opset, tmp_path_factory.mktemp("torch_sequence"))
    return module_type, opset, scripted, path


def rows(signs, seed):
    """A (len(signs), FEATURES) float32 input whose row i has a positive sum for '+' and negative for '-'."""
    x = np.random.default_rng(seed).standard_normal((len(signs), FEATURES)).astype(np.float32)
    for i, sign in enumerate(signs):
        if (x[i].sum() > 0) != (sign == "+"):
            x[i] = -x[i]
    return x


def reference(scripted, x):
    with torch.no_grad():
        out = scripted(torch.from_numpy(x))
    return [t.detach().numpy() for t in (out if isinstance(out, tuple) else (out,))]


def assert_same(got, expected, what):
    assert len(got) == len(expected), what
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.dtype == e.dtype and g.shape == e.shape, "%s: %s%s, torch %s%s" % (what, g.dtype, g.shape,
                                                                                      e.dtype, e.shape)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


def test_exported_graph_keeps_loop_and_sequence(exported):
    module_type, opset, _, path = exported
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert {o.domain or "ai.onnx": o.version for o in model.opset_import}.get("ai.onnx") == opset
    # The loop length is the input's open first dimension, not a number fixed at export.
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and not dims[0].HasField("dim_value")
    found = op_types(model.graph)
    # One Loop, one SequenceInsert in it: an unrolled loop would have none or several, and no Loop.
    assert count(found, "Loop", 0) == 1, found
    assert count(found, "SequenceEmpty", 0) == 1, found
    assert count(found, "SequenceInsert") == 1, found
    if module_type is KeepPositiveRows:
        # The append sits in an If in the Loop's body; len() and the indexing are on the sequence.
        assert count(found, "If", 1) == 1 and count(found, "SequenceInsert", 2) == 1, found
        assert count(found, "SequenceLength", 0) == 1, found
        assert count(found, "SequenceAt", 1) == 2, found
    else:
        assert count(found, "SequenceInsert", 1) == 1, found
        assert count(found, "ConcatFromSequence", 0) == 1, found
        concat = next(n for n in model.graph.node if n.op_type == "ConcatFromSequence")
        new_axis = {a.name: a.i for a in concat.attribute}.get("new_axis", 0)
        assert new_axis == (1 if module_type is StackRows else 0)


# Row signs per case (KeepPositiveRows keeps the '+' rows): several lengths, 1 and 0 among them, with
# nothing kept in some.
CASES = ["+-++-", "-+-", "+", "-", "--", ""]


def test_python_api_matches_torch(exported):
    module_type, _, scripted, path = exported
    session = tessera.InferenceSession(path)
    assert [o.name for o in session.get_outputs()] == OUTPUTS[module_type]
    for seed, signs in enumerate(CASES):
        x = rows(signs, seed)
        what = "%s with %d rows" % (module_type.__name__, len(signs))
        if len(signs) == 0 and module_type is not KeepPositiveRows:
            # torch.stack / torch.cat of an empty list is an error in torch, and ConcatFromSequence of an
            # empty sequence one in ONNX: Tessera must say so rather than make up a shape.
            with pytest.raises(RuntimeError):
                reference(scripted, x)
            with pytest.raises(tessera.InvalidArgument, match="ConcatFromSequence.*empty sequence"):
                session.run(None, {"x": x})
            continue
        assert_same(session.run(None, {"x": x}), reference(scripted, x), what)


def cli(*args):
    run = subprocess.run([CLI, *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.skipif(not CLI, reason="TESSERA_CLI not set")
def test_cli_matches_torch(exported, tmp_path):
    """`tessera run` on the ONNX model at two lengths, and on a .tsr compiled for one of them."""
    module_type, _, scripted, path = exported
    names = OUTPUTS[module_type]
    artifact = str(tmp_path / "model.tsr")
    cli("compile", path, "-o", artifact, "--input-shape", "x=%dx%d" % (5, FEATURES))
    for model, signs in ((path, "+-++-"), (path, "-"), (artifact, "-++-+")):
        x = rows(signs, len(signs))
        np.save(tmp_path / "x.npy", x)
        out = tmp_path / ("out_%s_%d" % (os.path.basename(model), len(signs)))
        cli("run", model, "--input", "x=%s" % (tmp_path / "x.npy"), "--output-dir", str(out))
        assert_same([np.load(out / (n + ".npy")) for n in names], reference(scripted, x),
                    "CLI %s with %d rows" % (os.path.basename(model), len(signs)))
