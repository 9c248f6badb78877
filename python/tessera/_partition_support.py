"""tessera.torch.partition, step 2: ask Tessera about each fx node alone.

Contract: ``_SupportChecker(facts, ...).decide(node)`` returns a ``_Decision`` (supported, reason, backend).
A node of the right kind is exported alone to ONNX in memory on its example inputs, compiled with
``tessera.InferenceSession`` and, with ``verify``, run and compared with PyTorch; identical layers on
identical input signatures are asked once (cached). With dynamic axes the node is exported with its
inputs' dynamic dims open and checked at the probe's shapes too. Also the export and comparison helpers that compiling
a whole partition reuses: ``_NodeCall``, ``_export``, ``_results_differ``, ``_backend_summary``,
``_tessera_message``.

Depends on torch, torch.fx, tessera (Error, InferenceSession) and _partition_trace (the _Graph facts,
_describe_value, _modes_kept, _first_line).
"""

import io
import operator
import warnings

import torch
import torch.fx
from torch.fx.node import map_arg

from . import Error, InferenceSession
from ._partition_trace import _describe_value, _first_line, _modes_kept


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


def _dynamic_axes(facts, names_and_nodes):
    """torch.onnx.export's dynamic_axes for the given (ONNX name, fx node) pairs: each dynamic dim open,
    under a name of its own (two dims that are equal at run time need not be told so), or None."""
    axes = {}
    for name, n in names_and_nodes:
        dims = facts.dynamic_dims(n)
        if dims:
            axes[name] = {d: "%s_d%d" % (name, d) for d in sorted(dims)}
    return axes or None


def _export(module, inputs, input_names, output_names, opset_version, dynamic_axes=None):
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
                                  dynamic_axes=dynamic_axes, opset_version=opset_version, do_constant_folding=True)
        except Exception as error:  # noqa: BLE001  (any failure means: stays in PyTorch)
            failure = "%s: %s" % (type(error).__name__, _first_line(str(error)))
    if failure is not None:
        return None, failure
    return buffer.getvalue(), None


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
        if facts.dynamics is not None and n in facts.dynamics.unstable:
            return _Decision(False, facts.dynamics.unstable[n])
        tensor_inputs = []
        for i in n.all_input_nodes:
            if i in facts.shape_computed:
                # A partition computes this shape value from the shapes of the tensors it comes from, which
                # the partition then reads as inputs.
                other = [s for s in facts.shape_sources(i) if facts.kind[s] != "tensor"]
                if other:
                    return _Decision(False, "reads the shape value '%s' of '%s', %s, which changes with the "
                                            "dynamic axes" % (i.name, other[0].name,
                                                              _describe_value(facts.values.get(other[0]))))
                continue
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
            if a in facts.shape_computed:
                return ("shape", chain(a))
            if a in facts.static:
                return ("literal", repr(facts.values[a]))
            value = facts.values[a]
            return ("tensor", tuple(value.shape), str(value.dtype), tuple(sorted(facts.dynamic_dims(a))))

        def chain(a):
            """A shape value computed in the partition, by what it computes from which of n's inputs."""
            def part(x):
                if x in facts.shape_computed:
                    return chain(x)
                if x in facts.static:
                    return repr(facts.values[x])
                if x.op == "get_attr":
                    return ("constant", x.name)
                value = facts.values[x]
                return ("shape of", tuple(value.shape), tuple(sorted(facts.dynamic_dims(x))),
                        n.all_input_nodes.index(x) if x in n.all_input_nodes else x.name)
            return (a.op, repr(a.target), repr(map_arg(a.args, part)), repr(sorted(map_arg(a.kwargs, part).items())))

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
            elif a in facts.shape_computed:
                facts.rebuild(graph, a, value_of, env)
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
        dynamic = None
        if facts.dynamics is not None:
            dynamic = _dynamic_axes(facts, list(zip(input_names, inputs)))
            out_nodes = [n] * len(outputs)
            if facts.kind[n] == "tuple":
                dims = facts.dynamics.dims.get(n, ())
                axes = dynamic or {}
                for k, position in enumerate(positions):
                    if position < len(dims) and dims[position]:
                        axes[output_names[k]] = {d: "%s_d%d" % (output_names[k], d) for d in sorted(dims[position])}
                dynamic = axes or None
            else:
                dynamic = {**(dynamic or {}), **(_dynamic_axes(facts, zip(output_names, out_nodes)) or {})} or None
        data, failure = _export(single, example, input_names, output_names, self.opset_version, dynamic)
        if failure is not None:
            return _Decision(False, "ONNX export failed: %s" % failure)
        # The example's shapes, and with dynamic axes the probe's: one compiled model must serve both.
        trials = [(example, outputs)]
        if dynamic is not None and self.verify:
            probe = facts.probe_values[n]
            probe_outputs = [probe[k] for k in positions] if facts.kind[n] == "tuple" else [probe]
            trials.append(([facts.probe_values[a] for a in inputs], probe_outputs))
        try:
            session = InferenceSession(data, backends=self.backends, threads=1, strict=self.strict or None)
            results = []
            for values, _ in trials if self.verify else []:
                feed = {arg.name: values[input_names.index(arg.name)] for arg in session.get_inputs()}
                results.append(session.run(None, feed))
            placement = session.placement()
        except Error as error:
            return _Decision(False, "Tessera: %s: %s" % (type(error).__name__, _tessera_message(error)))
        for trial, (actual, (_, wanted)) in enumerate(zip(results, trials)):
            for k, (got, want) in enumerate(zip(actual, wanted)):
                difference = _results_differ(torch.from_numpy(got.copy()), want)
                if difference is not None:
                    shapes = " at the dynamic axes' other sizes" if trial else ""
                    return _Decision(False, "Tessera's result differs from PyTorch's%s (output %d: %s)"
                                     % (shapes, k, difference))
        return _Decision(True, "", _backend_summary(p["backend"] for p in placement))


def _tessera_message(error):
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return " ".join(lines)
