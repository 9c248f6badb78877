"""Partitioning inside PyTorch: Tessera runs the parts of a module it supports, PyTorch the rest.

``partition(module, example_inputs)`` (re-exported as ``tessera.torch.partition``):

1. traces the module with ``torch.fx.symbolic_trace`` (or takes a GraphModule as it is) and runs it once
   on the example inputs, recording every node's value (shape propagation, with the values kept);
2. asks Tessera about each node: the node alone, on its example-shaped inputs, is exported to ONNX in
   memory and compiled with ``tessera.InferenceSession`` (the same support declarations and placement
   as the CLI's), then run and compared with PyTorch. Nodes that export, compile and agree are
   candidates; identical layers on identical shapes are asked once;
3. groups the candidates into partitions with no dependency cycle (a partition never waits, through
   PyTorch nodes or another partition, for its own results) and never lets a tuple cross a partition
   boundary; partitions smaller than ``min_size`` stay in PyTorch;
4. compiles each partition through ``tessera.torch.compile`` (the ``torch.ops.tessera.run`` op), checks
   it against PyTorch on the example inputs, and returns a :class:`PartitionedModule` (a GraphModule)
   that calls the partitions and the PyTorch nodes in a dependency order, with a report of where each
   node ran and why the rest stayed in PyTorch.

Shape values (``x.size(0)``) are constants inside partitions. An in-place op goes to Tessera (out of
place) only when nothing else reads what it changes; one left in PyTorch keeps its order relative to the
readers of what it changes, and the views it changes through stay real PyTorch views.

torch 1.13's own ``CapabilityBasedPartitioner`` is not used: it misses ``call_module`` nodes with
``allows_single_node_partition=False`` and can form partitions with cycles. ``torch._dynamo`` (torch 2)
is feature-detected, never imported here: :func:`dynamo_backend` has the signature of a dynamo backend.
"""

import copy
import heapq
import importlib.util
import io
import json
import operator
import warnings
from typing import List

import torch
import torch.fx
from torch.fx.passes import shape_prop
from torch.fx.node import Node, map_aggregate, map_arg

from . import Error, InvalidArgument, InferenceSession

__all__ = ["partition", "PartitionedModule", "PartitionReport", "NodePlacement", "PartitionInfo", "TraceError",
           "dynamo_available", "dynamo_backend"]

PYTORCH = "pytorch"
CONSTANT = "constant"  # a shape value that only partitions read: it does not run


class TraceError(InvalidArgument):
    """torch.fx could not trace the module (data-dependent control flow, an unsupported Python construct)."""


# -- values: what each fx node computed on the example inputs ----------------------------------------------

# Non-tensor values that depend only on shapes (x.size(0), x.shape[1] * 2, x.dim()): with the shapes fixed
# by compilation they are constants, so a partition takes them as literals instead of as inputs.
_SHAPE_METHODS = {"size", "dim", "numel", "nelement", "ndimension"}
_SHAPE_ATTRIBUTES = {"shape", "ndim", "dtype", "device", "is_cuda", "layout"}
_SCALAR_FUNCTIONS = {operator.getitem, operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
                     operator.mod, operator.neg, operator.pow, len, int, float, max, min}
_LITERAL_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.Size)

# In-place operators the tracer records as functions.
_OUT_OF_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                 operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                 operator.imod: operator.mod,
                 operator.ipow: operator.pow, operator.iand: operator.and_, operator.ior: operator.or_,
                 operator.ixor: operator.xor}
_INPLACE_FUNCTIONS = set(_OUT_OF_PLACE) | {operator.setitem}
# Ops whose result may share memory with their first input.
_VIEW_METHODS = {"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "expand", "expand_as", "narrow",
                 "select", "squeeze", "unsqueeze", "flatten", "unflatten", "t", "as_strided", "chunk", "split",
                 "unbind", "diagonal", "movedim", "contiguous", "detach", "__getitem__", "unfold", "swapaxes"}
_VIEW_FUNCTIONS = {operator.getitem, getattr, torch.reshape, torch.transpose, torch.permute, torch.flatten,
                   torch.squeeze, torch.unsqueeze, torch.narrow, torch.select, torch.chunk, torch.split, torch.unbind,
                   torch.t, torch.movedim, torch.diagonal, torch.detach, torch.swapaxes}


def _is_literal(value):
    if isinstance(value, (tuple, list)):
        return all(_is_literal(v) for v in value)
    return isinstance(value, _LITERAL_TYPES)


def _clone(value):
    """Values are recorded as clones: a later in-place op must not change what a node produced."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return map_aggregate(value, lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v)
    return value  # a torch.Size stays a Size


class _Recorder(shape_prop.ShapeProp):
    """ShapeProp (node.meta['tensor_meta']) that also keeps each node's value, and names the failing node."""

    def __init__(self, module):
        super().__init__(module)
        self.values = {}
        self.failed_node = None

    def run_node(self, n):
        try:
            result = torch.fx.Interpreter.run_node(self, n)
        except Exception:
            self.failed_node = n
            raise
        found = []

        def meta(value):
            if isinstance(value, torch.Tensor):
                found.append(True)
                return shape_prop._extract_tensor_metadata(value)
            return value

        tensor_meta = map_aggregate(result, meta)
        if found:
            n.meta["tensor_meta"] = tensor_meta
        n.meta["type"] = type(result)
        self.values[n] = _clone(result)
        return result


def _kind(value):
    """tensor, tuple (a flat tuple or list of tensors, some may be None), literal (a constant-like Python
    value) or other."""
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value) \
            and all(isinstance(v, torch.Tensor) or v is None for v in value):
        return "tuple"
    if _is_literal(value):
        return "literal"
    return "other"


def _describe_value(value):
    if isinstance(value, (tuple, list)):
        return "a %s of %d values" % (type(value).__name__, len(value))
    return "a %s" % type(value).__name__


# -- graph facts -----------------------------------------------------------------------------------------

class _Graph:
    """The traced graph with its recorded values and the facts partitioning needs about each node."""

    def __init__(self, module, graph_module, values):
        self.module = module
        self.gm = graph_module
        self.nodes = list(graph_module.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.values = values
        self.kind = {n: _kind(values[n]) if n in values else "other" for n in self.nodes}
        self.static = set()  # shape-derived non-tensor values
        for n in self.nodes:
            if self._is_static(n):
                self.static.add(n)
        # In-place ops: ordering edges (the op runs after earlier readers of what it changes, and before
        # later ones), and the views sharing that memory stay real PyTorch views (a partition's output is
        # a new tensor, so a change made through it would not reach the base).
        self.order_after = {n: [] for n in self.nodes}
        self.changed_views = {}  # view node -> the in-place op that changes its memory
        for n in self.nodes:
            target = self.mutated_input(n)
            if target is None:
                continue
            for alias in self.aliases(target):
                if self.is_view(alias):
                    self.changed_views.setdefault(alias, n)
                for user in alias.users:
                    if user is not n and not (self.is_view(user) and user.args[0] is alias):
                        if self.index[user] > self.index[n]:
                            self.order_after[n].append(user)
                        else:
                            self.order_after[user].append(n)

    def is_view(self, n):
        """Whether n may return a view of its first input (conservatively: reshape and contiguous too)."""
        if not n.args or not isinstance(n.args[0], Node) or self.kind[n] not in ("tensor", "tuple"):
            return False
        return (n.op == "call_method" and n.target in _VIEW_METHODS) or \
            (n.op == "call_function" and n.target in _VIEW_FUNCTIONS)

    def aliases(self, n):
        """n, the tensor it is a view of, and every view of that tensor."""
        base = n
        while self.is_view(base):
            base = base.args[0]
        found, stack = [base], [base]
        while stack:
            v = stack.pop()
            for user in v.users:
                if self.is_view(user) and user.args[0] is v and user not in found:
                    found.append(user)
                    stack.append(user)
        return found

    def _is_static(self, n):
        if self.kind[n] != "literal" or n.op not in ("call_function", "call_method"):
            return False
        inputs = n.all_input_nodes
        if n.op == "call_method" and n.target in _SHAPE_METHODS:
            return bool(inputs) and self.kind[inputs[0]] == "tensor" and all(i in self.static for i in inputs[1:])
        if n.op == "call_function" and n.target is getattr and len(n.args) == 2 and n.args[1] in _SHAPE_ATTRIBUTES:
            return self.kind.get(n.args[0]) == "tensor"
        if n.op == "call_function" and n.target in _SCALAR_FUNCTIONS:
            return all(i in self.static for i in inputs)
        return False

    def glued_producer(self, n):
        """The tuple-valued node n picks an element of (tuple[i], namedtuple.values), else None."""
        if n.op != "call_function" or n.target not in (operator.getitem, getattr) or not n.args:
            return None
        producer = n.args[0]
        if isinstance(producer, Node) and self.kind[producer] == "tuple" and self.kind[n] == "tensor":
            return producer
        return None

    def mutated_input(self, n):
        """The node whose tensor n changes in place, or None."""
        target = n.args[0] if n.args and isinstance(n.args[0], Node) else None
        if target is None:
            return None
        if n.op == "call_method" and n.target.endswith("_") and not n.target.startswith("_"):
            return target
        if n.op == "call_function":
            name = getattr(n.target, "__name__", "")
            if n.target in _INPLACE_FUNCTIONS or (name.endswith("_") and not name.startswith("_")) \
                    or n.kwargs.get("inplace") is True:
                return target
        if n.op == "call_module" and getattr(self.gm.get_submodule(n.target), "inplace", False) is True:
            return target
        return None

    def callable_form(self, n):
        """(op, target, kwargs, layer) to run n in a partition: an in-place op in its out-of-place form. A
        partition takes an in-place op only when nothing else reads what it changes, so the change itself
        is not needed, and out of place it exports to ONNX with the tracing inputs requiring grad."""
        op, target, kwargs = n.op, n.target, dict(n.kwargs)
        layer = self.gm.get_submodule(target) if op == "call_module" else None
        if self.mutated_input(n) is None:
            return op, target, kwargs, layer
        if kwargs.get("inplace") is True:
            kwargs["inplace"] = False
        if op == "call_module" and getattr(layer, "inplace", False) is True:
            layer = copy.copy(layer)  # shares the parameters; only the flag differs
            layer.inplace = False
        elif op == "call_method" and hasattr(torch.Tensor, target[:-1]):
            target = target[:-1]
        elif op == "call_function" and target in _OUT_OF_PLACE:
            target = _OUT_OF_PLACE[target]
        elif op == "call_function":
            name = getattr(target, "__name__", "")
            for namespace in (torch, torch.nn.functional, torch.special):
                if getattr(namespace, name, None) is target and callable(getattr(namespace, name[:-1], None)):
                    target = getattr(namespace, name[:-1])
                    break
        return op, target, kwargs, layer

    def fetch(self, target):
        value = self.gm
        for part in target.split("."):
            value = getattr(value, part)
        return value

    def describe(self, n):
        if n.op == "call_module":
            return type(self.gm.get_submodule(n.target)).__name__
        if n.op == "call_method":
            return ".%s()" % n.target
        if n.op == "call_function":
            return _function_name(n.target)
        return n.op


def _function_name(function):
    try:
        name = torch.fx.node._get_qualified_name(function)
    except Exception:  # noqa: BLE001  (a private helper of torch.fx: any failure means a plainer name)
        return getattr(function, "__name__", repr(function))
    for private, public in (("_operator.", "operator."), ("torch._C._nn.", "torch.nn.functional."),
                            ("torch._C._fft.fft_", "torch.fft."), ("torch._C._special.special_", "torch.special."),
                            ("torch._C._linalg.linalg_", "torch.linalg.")):
        if name.startswith(private):
            return public + name[len(private):]
    return name


# -- asking Tessera about one node -----------------------------------------------------------------------

class _NodeCall(torch.nn.Module):
    """One fx node as a module, so that the ONNX export scopes its ONNX nodes under the fx node's name
    ("/conv1/inner/Conv" for fx node conv1): the report maps Tessera's placement back to fx nodes."""

    def __init__(self, op, target, inner=None):
        super().__init__()
        self.op = op
        self.target = target
        if inner is not None:
            self.inner = inner

    def forward(self, *args, **kwargs):
        if self.op == "call_module":
            return self.inner(*args, **kwargs)
        if self.op == "call_method":
            return getattr(args[0], self.target)(*args[1:], **kwargs)
        return self.target(*args, **kwargs)


class _modes_kept:
    """Keeps every submodule's training flag. torch.onnx.export switches a module to eval and back with
    module.train(flag of the root), which would put the user's layers (shared with the wrappers exported
    here) into the wrapper's mode."""

    def __init__(self, module):
        self.modes = [(m, m.training) for m in module.modules()]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for m, training in self.modes:
            m.training = training


def _export(module, inputs, input_names, output_names, opset_version):
    """ONNX bytes, or (None, reason). The exception is not kept: while its traceback (frames holding
    torch's half-built ONNX graph) lives, later exports in the process fail."""
    # Floating inputs require grad under enable_grad, as tessera.torch.compile does, so that torch 1.13's
    # fused inference fast paths (TransformerEncoderLayer) are not taken: ONNX cannot export them.
    inputs = tuple(x.detach().requires_grad_(True) if x.is_floating_point() else x for x in inputs)
    buffer = io.BytesIO()
    failure = None
    with warnings.catch_warnings(), _modes_kept(module):
        warnings.simplefilter("ignore")
        try:
            with torch.enable_grad():
                torch.onnx.export(module, inputs, buffer, input_names=input_names, output_names=output_names,
                                  opset_version=opset_version, do_constant_folding=True)
        except Exception as error:  # noqa: BLE001  (any failure means: stays in PyTorch)
            failure = "%s: %s" % (type(error).__name__, _first_line(str(error)))
    if failure is not None:
        return None, failure
    return buffer.getvalue(), None


def _first_line(text):
    """The first line of an error message, without torch's boilerplate ("Please feel free to request ...")."""
    text = text.strip()
    text = text.splitlines()[0] if text else text
    for boilerplate in (" Please feel free", " Please report a bug", " Please open an issue"):
        if boilerplate in text:
            text = text[:text.index(boilerplate)]
    return text


def _results_differ(actual, expected):
    """None when actual matches expected (fp32 tolerance), else a description of the difference."""
    if tuple(actual.shape) != tuple(expected.shape):
        return "shape %s instead of %s" % (list(actual.shape), list(expected.shape))
    if expected.is_floating_point():
        actual = actual.to(expected.dtype)
        scale = expected.abs().max().item() if expected.numel() else 0.0
        tolerance = 1e-3 * expected.abs() + 1e-3 * scale + 1e-5
        difference = (actual - expected).abs()
        same_finite = torch.isfinite(actual).eq(torch.isfinite(expected))
        if not bool((difference <= tolerance).all()) or not bool(same_finite.all()):
            return "max abs difference %.3g (largest |value| %.3g)" % (difference.max().item(), scale)
        return None
    if not torch.equal(actual.to(expected.dtype), expected):
        return "%d of %d values differ" % (int((actual.to(expected.dtype) != expected).sum()), expected.numel())
    return None


class _Decision:
    __slots__ = ("supported", "reason", "backend")

    def __init__(self, supported, reason="", backend=""):
        self.supported = supported
        self.reason = reason
        self.backend = backend


def _backend_summary(backends):
    names = sorted({b for b in backends if b and b != "folded"})
    if names:
        return ",".join(names)
    return "folded" if backends else "-"


class _SupportChecker:
    """Tessera's decision for single nodes, cached by (op, target, module configuration, input signature)."""

    def __init__(self, facts, backends, strict, opset_version, verify):
        self.facts = facts
        self.backends = backends
        self.strict = strict
        self.opset_version = opset_version
        self.verify = verify
        self.cache = {}
        self.checked = 0

    def decide(self, n):
        facts = self.facts
        if facts.kind[n] == "tuple":
            whole = [u for u in n.users if facts.glued_producer(u) is not n]
            if whole:
                return _Decision(False, "its tuple result is used whole by '%s'; a tuple cannot cross a partition "
                                        "boundary" % whole[0].name)
        elif facts.kind[n] != "tensor":
            return _Decision(False, "returns %s, not a tensor" % _describe_value(facts.values.get(n)))
        tensor_inputs = []
        for i in n.all_input_nodes:
            if i.op == "get_attr" or i in facts.static:
                continue
            if facts.kind[i] == "tuple":
                return _Decision(False, "takes the tuple '%s' whole; a tuple cannot cross a partition "
                                        "boundary" % i.name)
            if facts.kind[i] != "tensor":
                return _Decision(False, "takes %s computed at run time by '%s'" % (_describe_value(facts.values.get(i)),
                                                                                     i.name))
            tensor_inputs.append(i)
        if not tensor_inputs:
            return _Decision(False, "has no tensor input from the graph (a constant)")
        mutated = facts.mutated_input(n)
        if mutated is not None and (mutated.op in ("placeholder", "get_attr") or len(mutated.users) > 1
                                    or facts.is_view(mutated)):
            return _Decision(False, "changes '%s' in place, and that change is seen elsewhere" % mutated.name)
        if n in facts.changed_views:
            return _Decision(False, "a view whose memory '%s' changes in place" % facts.changed_views[n].name)
        key = self._key(n)
        decision = self.cache.get(key)
        if decision is None:
            decision = self._ask_tessera(n)
            self.cache[key] = decision
        return decision

    def _key(self, n):
        facts = self.facts

        def signature(a):
            if a.op == "get_attr":
                value = facts.values.get(a)
                return ("constant", tuple(value.shape), str(value.dtype)) if isinstance(value, torch.Tensor) else \
                    ("constant", repr(value))
            if a in facts.static:
                return ("literal", repr(facts.values[a]))
            value = facts.values[a]
            return ("tensor", tuple(value.shape), str(value.dtype))

        args = repr(map_arg(n.args, signature))
        kwargs = repr(sorted(map_arg(n.kwargs, signature).items()))
        if n.op == "call_module":
            layer = facts.gm.get_submodule(n.target)
            target = (type(layer), repr(layer),
                      tuple((name, tuple(t.shape), str(t.dtype)) for name, t in layer.state_dict().items()))
        else:
            target = n.target
        return (n.op, target, args, kwargs)

    def _ask_tessera(self, n):
        """Exports n alone on its example inputs, compiles it with Tessera and runs it against PyTorch."""
        self.checked += 1
        facts = self.facts
        graph = torch.fx.Graph()
        root = {}
        inputs = []
        env = {}

        def value_of(a):
            if a in env:
                return env[a]
            if a.op == "get_attr":
                name = "_constant%d" % len(root)
                root[name] = facts.fetch(a.target)
                env[a] = graph.get_attr(name)
            elif a in facts.static:
                env[a] = facts.values[a]
            else:
                env[a] = graph.placeholder("input_%d" % len(inputs))
                inputs.append(a)
            return env[a]

        op, target, kwargs, layer = facts.callable_form(n)
        args = map_arg(n.args, value_of)
        kwargs = map_arg(kwargs, value_of)
        if op == "call_module":
            root["layer"] = layer
            result = graph.call_module("layer", args, kwargs)
        elif op == "call_method":
            result = graph.call_method(target, args, kwargs)
        else:
            result = graph.call_function(target, args, kwargs)
        expected = facts.values[n]
        if facts.kind[n] == "tuple":  # its tensors (MultiheadAttention returns (output, None))
            positions = [k for k, v in enumerate(expected) if isinstance(v, torch.Tensor)]
            outputs = [expected[k] for k in positions]
            graph.output(tuple(graph.call_function(operator.getitem, (result, k)) for k in positions))
        else:
            outputs = [expected]
            graph.output(result)
        single = torch.fx.GraphModule(root, graph).eval()
        input_names = ["input_%d" % k for k in range(len(inputs))]
        output_names = ["output_%d" % k for k in range(len(outputs))]
        example = [facts.values[a] for a in inputs]
        data, failure = _export(single, example, input_names, output_names, self.opset_version)
        if failure is not None:
            return _Decision(False, "ONNX export failed: %s" % failure)
        try:
            session = InferenceSession(data, backends=self.backends, threads=1, strict=self.strict or None)
            feed = {arg.name: example[input_names.index(arg.name)] for arg in session.get_inputs()}
            actual = session.run(None, feed) if self.verify else []
            placement = session.placement()
        except Error as error:
            return _Decision(False, "Tessera: %s: %s" % (type(error).__name__, _tessera_message(error)))
        for k, (got, want) in enumerate(zip(actual, outputs)):
            difference = _results_differ(torch.from_numpy(got.copy()), want)
            if difference is not None:
                return _Decision(False, "Tessera's result differs from PyTorch's (output %d: %s)" % (k, difference))
        return _Decision(True, "", _backend_summary(p["backend"] for p in placement))


def _tessera_message(error):
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return " ".join(lines)


# -- grouping without cycles -----------------------------------------------------------------------------

class _Grouping:
    """Partitions of candidate nodes, grown in topological order. A node joins (and partitions merge) only
    when the result has no path partition -> outside node(s) -> same partition; another partition on such
    a path counts as one unit (it runs whole), so the partitions, as units, form an acyclic graph."""

    def __init__(self, facts, candidates):
        self.facts = facts
        self.candidates = candidates
        self.part_of = {}
        self.parts = {}
        self.users = {n: [] for n in facts.nodes}  # run-time edges: data, and the order of in-place changes
        self.inputs = {n: [] for n in facts.nodes}  # the values a node reads at run time
        for n in facts.nodes:
            for i in n.all_input_nodes:
                if n in candidates and (i.op == "get_attr" or i in facts.static):
                    continue  # a partition holds constants and shape values as literals: no run-time edge
                self.users[i].append(n)
                self.inputs[n].append(i)
            for later in facts.order_after[n]:
                self.users[n].append(later)
        self._grow()

    def _creates_cycle(self, members):
        index = self.facts.index
        # Edges run forward in graph order, so a node outside every partition that comes after all members
        # cannot lead back to them (a partition's nodes can: it runs whole).
        limit = max(index[m] for m in members)
        stack = [u for m in members for u in self.users[m] if u not in members]
        seen = set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            if v in members:
                return True
            part = self.part_of.get(v)
            if part is None and index[v] > limit:
                continue
            group = self.parts[part] if part is not None else (v,)
            for w in group:
                seen.add(w)
                stack.extend(u for u in self.users[w] if u not in seen)
        return False

    def _grow(self):
        next_id = 0
        for n in self.facts.nodes:
            if n not in self.candidates:
                continue
            producer = self.facts.glued_producer(n)
            if producer is not None:
                part = self.part_of[producer]
                self.parts[part].append(n)
                self.part_of[n] = part
                continue
            neighbours = []
            for i in self.inputs[n]:
                part = self.part_of.get(i)
                if part is not None and part not in neighbours:
                    neighbours.append(part)
            home = None
            for part in neighbours:
                if not self._creates_cycle(set(self.parts[part]) | {n}):
                    home = part
                    break
            if home is None:
                home = next_id
                next_id += 1
                self.parts[home] = []
            self.parts[home].append(n)
            self.part_of[n] = home
            for part in neighbours:
                if part != home and part in self.parts and \
                        not self._creates_cycle(set(self.parts[home]) | set(self.parts[part])):
                    moved = self.parts.pop(part)
                    for m in moved:
                        self.part_of[m] = home
                    self.parts[home].extend(moved)
        # Sorted by position, numbered by first node.
        for part in self.parts.values():
            part.sort(key=self.facts.index.__getitem__)

    def partitions(self):
        return sorted(self.parts.values(), key=lambda p: self.facts.index[p[0]])


# -- report ----------------------------------------------------------------------------------------------

class NodePlacement:
    """Where one fx node ran. ``where``: a partition name, "pytorch", or "constant" (a shape value only
    partitions read, so it does not run). ``backend``: the Tessera backend(s) running it, from the compiled
    partition's placement (its ONNX nodes are scoped under the fx node's name); where the export left no
    node of its own (a BatchNorm folded into the Conv before it), from the node's own check; "folded":
    Tessera computed it at compile time. ``reason``: why it is not in Tessera."""

    __slots__ = ("node", "op", "where", "backend", "reason")

    def __init__(self, node, op, where, backend="", reason=""):
        self.node = node
        self.op = op
        self.where = where
        self.backend = backend
        self.reason = reason

    def __repr__(self):
        return "NodePlacement(%r, %r, where=%r, backend=%r, reason=%r)" % (
            self.node, self.op, self.where, self.backend, self.reason)


class PartitionInfo:
    """One Tessera partition: its fx nodes, inputs and outputs (fx node names), and the nodes per backend."""

    __slots__ = ("name", "nodes", "inputs", "outputs", "backends")

    def __init__(self, name, nodes, inputs, outputs, backends):
        self.name = name
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.backends = backends

    def __repr__(self):
        return "PartitionInfo(%r, %d nodes, inputs=%r, outputs=%r, backends=%r)" % (
            self.name, len(self.nodes), self.inputs, self.outputs, self.backends)


class PartitionReport:
    """Which fx node ran where, and why the rest stayed in PyTorch. ``nodes``: NodePlacement per compute
    node (placeholders, constants and the output left out), in graph order; ``partitions``: PartitionInfo
    per Tessera partition. ``str(report)`` is a table."""

    def __init__(self, nodes, partitions, checked, runtime):
        self.nodes = nodes
        self.partitions = partitions
        self.nodes_checked = checked  # distinct single-node compiles (the rest came from the cache)
        self.runtime = runtime

    def __getitem__(self, name):
        for entry in self.nodes:
            if entry.node == name:
                return entry
        raise KeyError(name)

    def pytorch_nodes(self):
        return [e for e in self.nodes if e.where == PYTORCH]

    def tessera_nodes(self):
        return [e for e in self.nodes if e.where not in (PYTORCH, CONSTANT)]

    def __str__(self):
        lines = ["Tessera partitioning: %d of %d nodes in %d Tessera partition(s), %d in PyTorch (runtime: %s)"
                 % (len(self.tessera_nodes()), len(self.nodes), len(self.partitions), len(self.pytorch_nodes()),
                    self.runtime), "Tessera runs the partitions for the example input shapes.", ""]
        for info in self.partitions:
            counts = ", ".join("%s %d" % item for item in sorted(info.backends.items()))
            lines.append("%s: %d fx nodes (Tessera nodes: %s); inputs: %s; outputs: %s" % (
                info.name, len(info.nodes), counts or "none", ", ".join(info.inputs), ", ".join(info.outputs)))
        if self.partitions:
            lines.append("")
        rows = [("Node", "Op", "Where", "Backend", "Why not in Tessera")]
        for e in self.nodes:
            reason = e.reason if len(e.reason) <= 160 else e.reason[:157] + "..."
            rows.append((e.node, e.op, e.where, e.backend or "-", reason))
        widths = [max(len(r[k]) for r in rows) for k in range(4)]
        for row in rows:
            lines.append("  ".join(row[k].ljust(widths[k]) for k in range(4)) + "  " + row[4])
        return "\n".join(line.rstrip() for line in lines)

    def __repr__(self):
        return "<PartitionReport: %d partitions, %d nodes in PyTorch>" % (len(self.partitions),
                                                                          len(self.pytorch_nodes()))


class PartitionedModule(torch.fx.GraphModule):
    """The GraphModule :func:`partition` returns: Tessera partitions (submodules ``tessera_partition_N``)
    and PyTorch nodes. ``tessera_report`` is the :class:`PartitionReport`; ``print_report()`` prints it.
    Inference only: run it under ``torch.no_grad()`` (a partition refuses inputs that require grad)."""

    def print_report(self, file=None):
        print(str(self.tessera_report), file=file)

    def __deepcopy__(self, memo):
        holder = torch.nn.Module()
        holder.__dict__ = copy.deepcopy(self.__dict__, memo)
        result = PartitionedModule(holder, holder.__dict__["_graph"], class_name="PartitionedModule")
        result.tessera_report = self.tessera_report
        return result


# -- compiling a partition -------------------------------------------------------------------------------

class _KeepInputs(torch.nn.Module):
    """A partition whose ONNX export dropped inputs it reads only for their shapes: the dropped ones are
    fixed to their example values (shapes are fixed by compilation anyway)."""

    def __init__(self, inner, kept, examples):
        super().__init__()
        self.inner = inner
        self.kept = kept
        self.examples = examples

    def forward(self, *kept_inputs):
        values = list(self.examples)
        for position, value in zip(self.kept, kept_inputs):
            values[position] = value
        return self.inner(*values)


class _SessionModule(torch.nn.Module):
    """The runtime used when libtessera_torch.so is missing: a tessera.InferenceSession called from Python."""

    def __init__(self, session, input_names):
        super().__init__()
        self.session = session
        self.input_names = input_names
        self.num_outputs = len(session.get_outputs())

    def forward(self, *inputs):
        feed = {name: x.detach().contiguous() for name, x in zip(self.input_names, inputs)}
        outputs = [torch.from_dlpack(o) for o in self.session.run(None, feed, as_dlpack=True)]
        return outputs[0] if self.num_outputs == 1 else tuple(outputs)

    def __deepcopy__(self, memo):
        return _SessionModule(self.session, self.input_names)  # a session is immutable and thread-safe: shared


def _torch_bridge():
    """tessera.torch when its op library loads, else None (the InferenceSession fallback is used)."""
    try:
        from . import torch as bridge
        bridge.load_library()
        return bridge
    except (ImportError, OSError, RuntimeError):
        return None


class _Compiler:
    def __init__(self, facts, backends, threads, strict, opset_version, verify):
        self.facts = facts
        self.backends = backends
        self.threads = threads
        self.strict = strict
        self.opset_version = opset_version
        self.verify = verify
        self.bridge = _torch_bridge()
        self.runtime = "torch.ops.tessera.run" if self.bridge is not None else "tessera.InferenceSession (Python)"

    def build(self, nodes, inputs, outputs):
        """The partition as a GraphModule for export: each node a _NodeCall named after it."""
        facts = self.facts
        graph = torch.fx.Graph()
        root = {}
        env = {}
        for i in inputs:
            env[i] = graph.placeholder(i.name)
        members = set(nodes)
        taken = {n.name for n in nodes}
        wrappers = {}  # attribute name -> fx node name

        def value_of(a):
            if a in env:
                return env[a]
            if a.op == "get_attr":
                name = "_tessera_constant%d" % len(root)
                root[name] = facts.fetch(a.target)
                env[a] = graph.get_attr(name)
                return env[a]
            assert a in facts.static and a not in members, a
            return facts.values[a]

        for n in nodes:
            op, target, kwargs, layer = facts.callable_form(n)
            args = map_arg(n.args, value_of)
            kwargs = map_arg(kwargs, value_of)
            if facts.glued_producer(n) is not None:
                env[n] = graph.call_function(target, args, kwargs)
                continue
            # Named after the node, unless that name is taken by a Module attribute (x.to(...) is node "to").
            name = n.name
            while name.startswith("_") or hasattr(torch.fx.GraphModule, name) or name in root or name in taken:
                name = "node_" + name
            wrappers[name] = n.name
            root[name] = _NodeCall(op, target, layer)
            env[n] = graph.call_module(name, args, kwargs)
        graph.output(env[outputs[0]] if len(outputs) == 1 else tuple(env[o] for o in outputs))
        return torch.fx.GraphModule(root, graph).eval(), wrappers

    def compile(self, nodes, inputs, outputs):
        """(module to call, indices of the inputs it takes, {fx node name: backends}, {backend: Tessera nodes})
        or raises _PartitionFailed."""
        module, wrappers = self.build(nodes, inputs, outputs)
        examples = [self.facts.values[i] for i in inputs]
        input_names = [i.name for i in inputs]
        output_names = [o.name for o in outputs]
        kept = list(range(len(inputs)))
        if self.bridge is not None:
            compiled, placement = self._compile_op(module, examples, input_names, output_names, kept)
        else:
            compiled, placement = self._compile_session(module, examples, input_names, output_names, kept)
        if self.verify:
            with torch.no_grad():
                actual = compiled(*[examples[k] for k in kept])
            actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
            for o, got in zip(outputs, actual):
                difference = _results_differ(got, self.facts.values[o])
                if difference is not None:
                    raise _PartitionFailed("Tessera's result for '%s' differs from PyTorch's (%s)"
                                           % (o.name, difference))
        by_node = {}
        counts = {}
        for onnx_name, backend in placement:
            if backend != "folded":
                counts[backend] = counts.get(backend, 0) + 1
            scope = onnx_name.split("/")[1] if onnx_name.startswith("/") and onnx_name.count("/") >= 2 else None
            if scope in wrappers:
                by_node.setdefault(wrappers[scope], []).append(backend)
        return compiled, kept, {n: _backend_summary(b) for n, b in by_node.items()}, counts

    def _dropped_inputs(self, module, examples, input_names, output_names):
        data, failure = _export(module, examples, input_names, output_names, self.opset_version)
        if failure is not None:
            raise _PartitionFailed("ONNX export of the partition failed: %s" % failure)
        import onnx
        present = {v.name for v in onnx.load_from_string(data).graph.input}
        return [k for k, n in enumerate(input_names) if n in present]

    def _compile_op(self, module, examples, input_names, output_names, kept):
        bridge = self.bridge
        target, names, inputs = module, input_names, examples
        for attempt in range(2):
            failure = None
            try:
                with _modes_kept(target), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the tracer's warnings, about shapes fixed by design
                    compiled = bridge.compile(target, tuple(inputs), backends=self.backends, threads=self.threads,
                                              strict=self.strict, input_names=names,
                                              output_names=output_names, opset_version=self.opset_version)
            except bridge.ExportError as error:
                failure = _first_line(str(error).replace("tessera.torch.compile: ", ""))
            except (ValueError, TypeError, RuntimeError, Error) as error:
                failure = "%s: %s" % (type(error).__name__, _tessera_message(error))
                if attempt == 0 and "inputs" in str(error):
                    kept[:] = self._dropped_inputs(module, examples, input_names, output_names)
                    if len(kept) < len(examples):
                        target = _KeepInputs(module, kept, examples).eval()
                        names = [input_names[k] for k in kept]
                        inputs = [examples[k] for k in kept]
                        continue
            if failure is not None:
                raise _PartitionFailed("compiling the partition failed: %s" % failure)
            break
        report = json.loads(compiled.report("json"))
        return compiled, [(n["name"], n["backend"]) for n in report.get("nodes", [])]

    def _compile_session(self, module, examples, input_names, output_names, kept):
        data, failure = _export(module, examples, input_names, output_names, self.opset_version)
        if failure is not None:
            raise _PartitionFailed("ONNX export of the partition failed: %s" % failure)
        try:
            session = InferenceSession(data, backends=self.backends, threads=self.threads, strict=self.strict or None)
        except Error as error:
            raise _PartitionFailed("compiling the partition failed: %s" % _tessera_message(error)) from None
        present = [arg.name for arg in session.get_inputs()]
        kept[:] = [k for k, n in enumerate(input_names) if n in present]
        return (_SessionModule(session, [input_names[k] for k in kept]),
                [(p["node"], p["backend"]) for p in session.placement()])


class _PartitionFailed(Exception):
    pass


# -- the entry point -------------------------------------------------------------------------------------

def _trace(module, num_inputs):
    if isinstance(module, torch.fx.GraphModule):
        graph = torch.fx.Graph()
        output = graph.graph_copy(module.graph, {})
        graph.output(output)
        return torch.fx.GraphModule(module, graph)
    failure = None
    try:
        if torch.fx.Tracer().is_leaf_module(module, ""):
            # A torch.nn layer given as the root (fx traces into the root even when it is a leaf type):
            # one call_module, as it would be inside a model.
            graph = torch.fx.Graph()
            inputs = [graph.placeholder("input_%d" % k) for k in range(num_inputs)]
            graph.output(graph.call_module("layer", tuple(inputs)))
            return torch.fx.GraphModule({"layer": module}, graph)
        return torch.fx.symbolic_trace(module)
    except Exception as error:  # noqa: BLE001  (re-raised below with the reason)
        failure = "%s: %s" % (type(error).__name__, _first_line(str(error)))
    raise TraceError(
        "tessera.torch.partition: torch.fx.symbolic_trace cannot trace %s: %s. Make the untraceable part a "
        "leaf (torch.fx.wrap for a function, a leaf module in a custom torch.fx.Tracer) and pass the "
        "resulting GraphModule, or compile the whole module with tessera.torch.compile"
        % (type(module).__name__, failure))


def _record(graph_module, example_inputs):
    recorder = _Recorder(graph_module)
    failure = None
    with _modes_kept(graph_module):
        try:
            graph_module.eval()
            with torch.no_grad():
                recorder.run(*[_clone(x) for x in example_inputs])
        except Exception as error:  # noqa: BLE001
            where = " at node '%s'" % recorder.failed_node.name if recorder.failed_node is not None else ""
            failure = "running the module on the example inputs failed%s: %s: %s" % (
                where, type(error).__name__, _first_line(str(error)))
    if failure is not None:
        raise InvalidArgument("tessera.torch.partition: " + failure)
    return recorder.values


def partition(module, example_inputs, backends=None, min_size=1, threads=None, *, strict=False, verify=True,
              opset_version=14):
    """Runs the parts of ``module`` that Tessera supports with Tessera and the rest with PyTorch.

    module: an ``nn.Module`` that ``torch.fx.symbolic_trace`` can trace, or a ``torch.fx.GraphModule``
        (trace it yourself, e.g. with leaf modules, when symbolic_trace cannot).
    example_inputs: a tensor or a tuple of inputs; partitions are compiled for these shapes.
    backends: Tessera backends, highest priority first ("dnnl,native" or a list); default: Tessera's.
    min_size: partitions with fewer fx nodes stay in PyTorch (a call into Tessera has a cost).
    threads: Tessera's intra-op threads for the partitions.
    strict: only the listed backends, never Tessera's native fallback (nodes they lack stay in PyTorch).
    verify: compare each node and each partition with PyTorch on the example inputs (fp32 tolerance);
        what disagrees stays in PyTorch.

    Returns a :class:`PartitionedModule` (a GraphModule) whose ``tessera_report`` says which node ran
    where and why; PyTorch-side layers are shared with ``module``. The partitions are compiled for the
    example inputs' shapes: other shapes raise an error from the partition. Inference only: call it under
    ``torch.no_grad()``. Raises TypeError for a module or inputs of the wrong type, TraceError when
    torch.fx cannot trace the module, InvalidArgument when the module fails on the example inputs.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError("tessera.torch.partition: module must be a torch.nn.Module, not %s" % type(module).__name__)
    if isinstance(module, torch.jit.ScriptModule):
        raise TypeError("tessera.torch.partition: a ScriptModule cannot be traced by torch.fx; pass the Python module")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError("tessera.torch.partition: example_inputs must be a tensor or a tuple of inputs, not %s"
                        % type(example_inputs).__name__)
    if not isinstance(min_size, int) or min_size < 1:
        raise ValueError("tessera.torch.partition: min_size must be an int of at least 1, not %r" % (min_size,))
    if module.training:
        warnings.warn("tessera.torch.partition: the module is in training mode; Tessera partitions compute as in "
                      "eval mode (inference only). Call module.eval() first.", stacklevel=2)

    gm = _trace(module, len(example_inputs))
    values = _record(gm, tuple(example_inputs))
    facts = _Graph(module, gm, values)
    checker = _SupportChecker(facts, backends, strict, opset_version, verify)
    compiler = _Compiler(facts, backends, threads, strict, opset_version, verify)

    compute = [n for n in facts.nodes if n.op in ("call_module", "call_function", "call_method")]
    reasons = {}
    node_backend = {}
    for n in compute:
        if n in facts.static:
            reasons[n] = "shape value (%s), not a tensor" % type(values[n]).__name__
        elif facts.glued_producer(n) is None:
            decision = checker.decide(n)
            if decision.supported:
                node_backend[n] = decision.backend
            else:
                reasons[n] = decision.reason
    for n in compute:  # an element of a tuple goes where the tuple's producer goes
        producer = facts.glued_producer(n)
        if producer is not None and producer in reasons:
            reasons[n] = "element of '%s', which stays in PyTorch" % producer.name
    candidates = {n for n in compute if n not in reasons}

    compiled_cache = {}
    while True:
        grouping = _Grouping(facts, candidates)
        dropped = False
        planned = []
        for nodes in grouping.partitions():
            size = sum(1 for n in nodes if facts.glued_producer(n) is None)
            if size < min_size:
                reason = "its partition has %d node(s), fewer than min_size=%d" % (size, min_size)
            elif all(node_backend.get(n) in ("folded", "-") for n in nodes if facts.glued_producer(n) is None):
                reason = "its partition computes nothing at run time (all folded at compile time)"
            else:
                planned.append(nodes)
                continue
            for n in nodes:
                reasons[n] = reason
                candidates.discard(n)
            dropped = True
        if dropped:
            continue
        needed = _needed(facts, grouping)
        result = []
        for nodes in planned:
            members = set(nodes)
            inputs = _partition_inputs(facts, grouping, nodes)
            outputs = [n for n in nodes if any(u not in members and needed.get(u, False) for u in n.users)]
            key = (frozenset(members), tuple(inputs), tuple(outputs))
            if not outputs:
                failure = "its results are not used"
            elif key in compiled_cache:
                failure = compiled_cache[key] if isinstance(compiled_cache[key], str) else None
            else:
                try:
                    compiled_cache[key] = compiler.compile(nodes, inputs, outputs)
                    failure = None
                except _PartitionFailed as error:
                    failure = str(error)
                    compiled_cache[key] = failure
            if failure is not None:
                for n in nodes:
                    reasons[n] = failure
                    candidates.discard(n)
                dropped = True
                break
            result.append((nodes, inputs, outputs, compiled_cache[key]))
        if not dropped:
            break
    return _assemble(facts, grouping, needed, result, reasons, node_backend, checker.checked, compiler.runtime)


def _partition_inputs(facts, grouping, nodes):
    members = set(nodes)
    inputs = []
    for n in nodes:
        for i in grouping.inputs[n]:
            if i not in members and i not in inputs:
                inputs.append(i)
    return inputs


def _needed(facts, grouping):
    """Which nodes outside partitions must still run: shape values only partitions read are not."""
    needed = {}
    for n in reversed(facts.nodes):
        if n in grouping.part_of:
            needed[n] = True
        elif n.op in ("output", "placeholder") or n.is_impure() or facts.mutated_input(n) is not None \
                or n.op in ("call_module", "call_method", "call_function") and n not in facts.static:
            needed[n] = True  # PyTorch nodes run as they did (they may have side effects)
        else:
            needed[n] = any(needed.get(u, False) and u in grouping.users[n] for u in n.users)
    return needed


def _assemble(facts, grouping, needed, result, reasons, node_backend, checked, runtime):
    """The final GraphModule: partitions and PyTorch nodes in an order that respects every dependency."""
    part_index = {}
    for k, (nodes, _, _, _) in enumerate(result):
        for n in nodes:
            part_index[n] = k
    # Units: a partition (its index) or a single PyTorch node; edges from grouping.users (run-time needs).
    def unit(n):
        return ("partition", part_index[n]) if n in part_index else ("node", n)

    units = {}
    for n in facts.nodes:
        units.setdefault(unit(n), []).append(n)
    successors = {u: set() for u in units}
    indegree = {u: 0 for u in units}
    for n in facts.nodes:
        for user in grouping.users[n]:  # run-time needs (literals and constants inside partitions excluded)
            a, b = unit(n), unit(user)
            if a != b and b not in successors[a]:
                successors[a].add(b)
                indegree[b] += 1
    first = {u: min(facts.index[n] for n in members) for u, members in units.items()}
    ready = [(first[u], k, u) for k, u in enumerate(units) if indegree[u] == 0]
    keys = {u: k for k, u in enumerate(units)}
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, u = heapq.heappop(ready)
        order.append(u)
        for v in successors[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, (first[v], keys[v], v))
    if len(order) != len(units):
        raise AssertionError("tessera.torch.partition: internal error: the partitions form a cycle")

    graph = torch.fx.Graph()
    root = {}
    env = {}
    infos = []
    checked_inputs = set()
    placements = {}
    for u in order:
        if u[0] == "node":
            n = u[1]
            if not needed.get(n, False):
                continue  # a shape value or constant that only partitions read
            env[n] = graph.node_copy(n, lambda a: env[a])
            if n.op in ("call_module", "get_attr"):
                root[n.target] = facts.fetch(n.target)
            continue
        nodes, inputs, outputs, (compiled, kept, by_node, counts) = result[u[1]]
        name = "tessera_partition_%d" % u[1]
        root[name] = compiled
        call = graph.call_module(name, tuple(env[inputs[k]] for k in kept))
        checked_inputs.update(inputs[k] for k in kept)  # a partition refuses other shapes of what it reads
        for position, o in enumerate(outputs):
            env[o] = call if len(outputs) == 1 else graph.call_function(operator.getitem, (call, position))
        for n in nodes:
            backend = by_node.get(n.name) or node_backend.get(n, "")
            if facts.glued_producer(n) is not None:
                backend = "-"  # picks a tuple element: no computation of its own
            placements[n] = (name, backend)
        infos.append(PartitionInfo(name, [n.name for n in nodes], [inputs[k].name for k in kept],
                                   [o.name for o in outputs], counts))
    infos.sort(key=lambda info: int(info.name.rsplit("_", 1)[1]))
    entries = []
    for n in facts.nodes:
        if n.op not in ("call_module", "call_function", "call_method"):
            continue
        if n in placements:
            entries.append(NodePlacement(n.name, facts.describe(n), placements[n][0], placements[n][1]))
        elif not needed.get(n, False):
            entries.append(NodePlacement(n.name, facts.describe(n), CONSTANT, "", "shape value (%s): a constant "
                                         "in the partitions that read it" % type(facts.values[n]).__name__))
        else:
            entries.append(NodePlacement(n.name, facts.describe(n), PYTORCH, "", reasons.get(n, "")))
    _guard_example_shapes(facts, graph, env, checked_inputs)
    module = PartitionedModule(root, graph, class_name="PartitionedModule")
    module.tessera_report = PartitionReport(entries, infos, checked, runtime)
    return module


def _check_example_shape(value: torch.Tensor, shape: List[int], name: str) -> torch.Tensor:
    """The guard _guard_example_shapes puts after an input: the example's shape, or a clear error.
    TorchScript-able, so that a partitioned module still scripts."""
    if list(value.shape) != shape:
        raise ValueError("tessera.torch.partition: input '" + name + "' has shape " + str(list(value.shape)) +
                         ", but the module was partitioned for " + str(shape) + ": sizes read from it (such as "
                         "x.size(0)) are constants in the partitions. Partition it again for this shape.")
    return value


def _guard_example_shapes(facts, graph, env, checked_inputs):
    """Shape values (x.size(0), x.shape[1]) become constants inside partitions, so an input whose shape any
    of them depends on must keep its example shape: a check after each such input that no partition
    reads (a partition refuses other shapes itself) refuses another (a module that read `n = a.size(0)`
    once returned the example's n rows for a larger `a`)."""
    depends = set()  # inputs some shape value depends on
    for n in facts.static:
        stack, seen = [n], set()
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            if m.op == "placeholder":
                depends.add(m)
            stack.extend(m.all_input_nodes)
    for p in facts.nodes:
        if p.op != "placeholder" or p not in depends or p not in env or p in checked_inputs:
            continue
        value = facts.values.get(p)
        if not isinstance(value, torch.Tensor):
            continue
        users = list(env[p].users)
        with graph.inserting_after(env[p]):
            checked = graph.call_function(_check_example_shape, (env[p], list(value.shape), p.name))
        for user in users:
            user.replace_input_with(env[p], checked)


# -- torch._dynamo (torch 2), feature-detected -----------------------------------------------------------

def dynamo_available():
    """Whether this torch has torch._dynamo (torch.compile); looked up without importing it."""
    try:
        return importlib.util.find_spec("torch._dynamo") is not None
    except (ImportError, ValueError):
        return False


def dynamo_backend(graph_module, example_inputs, **options):
    """A torch._dynamo backend: ``torch.compile(model, backend=tessera.torch.dynamo_backend)`` on a torch
    that has dynamo. It partitions the GraphModule dynamo captured and returns its forward. Works on any
    GraphModule, with or without dynamo."""
    return partition(graph_module, tuple(example_inputs), **options).forward
