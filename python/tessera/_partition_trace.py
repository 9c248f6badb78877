"""tessera.torch.partition, step 1: trace a module with torch.fx and record what each node computed.

Contract: ``_trace`` turns a module into a GraphModule (or raises :class:`TraceError`), ``_record`` runs it
once on the example inputs and returns {fx node: value} (values cloned, ``node.meta["tensor_meta"]`` set),
and :class:`_Graph` holds the facts the later steps need about each node: its kind (tensor, tuple,
literal), shape-derived values, views and in-place changes, and the out-of-place form a partition runs.
With dynamic axes (a ``_partition_dynamic._Dynamics``) it also knows each tensor's dynamic dims and which
shape values a partition must compute from its inputs' shapes (``shape_computed``, ``rebuild``) rather
than hold as constants.
Also the two helpers every later step shares: ``_modes_kept`` and ``_first_line``.

Depends on torch and torch.fx and on tessera.InvalidArgument only; nothing here asks Tessera anything.
"""

import copy
import operator

import torch
import torch.fx
from torch.fx.passes import shape_prop
from torch.fx.node import Node, map_aggregate, map_arg

from . import InvalidArgument


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

    def __init__(self, module, graph_module, values, dynamics=None, probe_values=None):
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
        # With dynamic axes: the probe's recording, and the shape values that depend on a dynamic dim (or
        # changed with the probe). A partition computes those from its inputs' shapes.
        self.dynamics = dynamics
        self.probe_values = probe_values
        self.shape_computed = set()
        if dynamics is not None:
            for n in self.nodes:
                if n in self.static and (n in dynamics.changed or any(
                        dynamics.has_dynamic_dims(i) or i in self.shape_computed for i in n.all_input_nodes)):
                    self.shape_computed.add(n)
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

    def dynamic_dims(self, n):
        """The dims of tensor n that change with the dynamic axes (empty without dynamic axes)."""
        if self.dynamics is None:
            return frozenset()
        dims = self.dynamics.dims.get(n, frozenset())
        return dims if isinstance(dims, frozenset) else frozenset()

    def shape_sources(self, n):
        """The tensors (not constants) whose shapes the shape value n is computed from."""
        found, stack, seen = [], [n], {n}
        while stack:
            for i in stack.pop().all_input_nodes:
                if i in seen:
                    continue
                seen.add(i)
                if i in self.static:
                    stack.append(i)
                elif i.op != "get_attr":
                    found.append(i)
        return found

    def rebuild(self, graph, n, value_of, env):
        """The shape value n (in shape_computed) as nodes of `graph`, computed from the tensors value_of gives;
        env memoizes (fx node -> graph node). Other shape values are taken as the constants they are."""
        if n in env:
            return env[n]

        def arg(a):
            if a in self.shape_computed:
                return self.rebuild(graph, a, value_of, env)
            if a in self.static:
                return self.values[a]
            return value_of(a)

        args = map_arg(n.args, arg)
        kwargs = map_arg(n.kwargs, arg)
        if n.op == "call_method":
            env[n] = graph.call_method(n.target, args, kwargs)
        else:
            env[n] = graph.call_function(n.target, args, kwargs)
        return env[n]

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


# -- helpers the later steps share -----------------------------------------------------------------------

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


def _first_line(text):
    """The first line of an error message, without torch's boilerplate ("Please feel free to request ...")."""
    text = text.strip()
    text = text.splitlines()[0] if text else text
    for boilerplate in (" Please feel free", " Please report a bug", " Please open an issue"):
        if boilerplate in text:
            text = text[:text.index(boilerplate)]
    return text


# -- tracing and recording -------------------------------------------------------------------------------

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


def _record(graph_module, example_inputs, what="the example inputs"):
    recorder = _Recorder(graph_module)
    failure = None
    with _modes_kept(graph_module):
        try:
            graph_module.eval()
            with torch.no_grad():
                recorder.run(*[_clone(x) for x in example_inputs])
        except Exception as error:  # noqa: BLE001
            where = " at node '%s'" % recorder.failed_node.name if recorder.failed_node is not None else ""
            failure = "running the module on %s failed%s: %s: %s" % (
                what, where, type(error).__name__, _first_line(str(error)))
    if failure is not None:
        raise InvalidArgument("tessera.torch.partition: " + failure)
    return recorder.values
