"""tessera.torch.partition, step 4: compile one partition and check it against PyTorch.

Contract: ``_Compiler(facts, ..., bridge).compile(nodes, inputs, outputs)`` builds the partition as a
GraphModule of ``_NodeCall`` wrappers named after the fx nodes, compiles it with ``bridge.compile``
(tessera.torch: the ``torch.ops.tessera.run`` op) or, when ``bridge`` is None, with a
``tessera.InferenceSession`` called from Python (``_SessionModule``), checks it against the recorded values
when ``verify``, and returns (module to call, indices of the inputs it takes, {fx node name: backends},
{backend: Tessera node count}); it raises ``_PartitionFailed`` with the reason otherwise. With dynamic
axes the partition is exported with its inputs' and outputs' dynamic dims open, computes the shape values
it reads from its inputs' shapes, and is checked at the probe's shapes as well (one compiled model serves
both). The caller chooses
``bridge`` (``tessera._partition._torch_bridge()``).

Depends on torch, torch.fx, onnx (imported when needed), tessera (Error, InferenceSession), _partition_trace
(_modes_kept, _first_line) and _partition_support (_NodeCall, _export, _dynamic_axes, _results_differ,
_backend_summary, _tessera_message).
"""

import json
import warnings

import torch
import torch.fx
from torch.fx.node import map_arg

from . import Error, InferenceSession
from ._partition_support import _NodeCall, _backend_summary, _dynamic_axes, _export, _results_differ, _tessera_message
from ._partition_trace import _first_line, _modes_kept


class _KeepInputs(torch.nn.Module):
    """A partition whose ONNX export dropped inputs it does not need: the dropped ones are fixed to their
    example values for the export (the exported model does not read them)."""

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


class _Compiler:
    def __init__(self, facts, backends, threads, strict, opset_version, verify, bridge):
        self.facts = facts
        self.backends = backends
        self.threads = threads
        self.strict = strict
        self.opset_version = opset_version
        self.verify = verify
        self.bridge = bridge  # tessera.torch, or None: the InferenceSession fallback
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
            if a in facts.shape_computed:
                return facts.rebuild(graph, a, value_of, env)
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
        dynamic = _dynamic_axes(self.facts, list(zip(input_names, inputs)) + list(zip(output_names, outputs)))
        if self.bridge is not None:
            compiled, placement = self._compile_op(module, examples, input_names, output_names, kept, dynamic)
        else:
            compiled, placement = self._compile_session(module, examples, input_names, output_names, kept, dynamic)
        if self.verify:
            trials = [(self.facts.values, "")]
            if dynamic is not None:
                trials.append((self.facts.probe_values, " at the dynamic axes' other sizes"))
            for values, where in trials:
                try:
                    with torch.no_grad():
                        actual = compiled(*[values[inputs[k]] for k in kept])
                except (ValueError, RuntimeError, Error) as error:
                    raise _PartitionFailed("running the partition%s failed: %s" % (where, _tessera_message(error))) \
                        from None
                actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
                for o, got in zip(outputs, actual):
                    difference = _results_differ(got, values[o])
                    if difference is not None:
                        raise _PartitionFailed("Tessera's result for '%s' differs from PyTorch's%s (%s)"
                                               % (o.name, where, difference))
        by_node = {}
        counts = {}
        for onnx_name, backend in placement:
            if backend != "folded":
                counts[backend] = counts.get(backend, 0) + 1
            scope = onnx_name.split("/")[1] if onnx_name.startswith("/") and onnx_name.count("/") >= 2 else None
            if scope in wrappers:
                by_node.setdefault(wrappers[scope], []).append(backend)
        return compiled, kept, {n: _backend_summary(b) for n, b in by_node.items()}, counts

    def _dropped_inputs(self, module, examples, input_names, output_names, dynamic):
        data, failure = _export(module, examples, input_names, output_names, self.opset_version, dynamic)
        if failure is not None:
            raise _PartitionFailed("ONNX export of the partition failed: %s" % failure)
        import onnx
        present = {v.name for v in onnx.load_from_string(data).graph.input}
        return [k for k, n in enumerate(input_names) if n in present]

    def _compile_op(self, module, examples, input_names, output_names, kept, dynamic):
        bridge = self.bridge
        target, names, inputs = module, input_names, examples
        for attempt in range(2):
            failure = None
            try:
                with _modes_kept(target), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the tracer's warnings, about shapes fixed by design
                    axes = {k: v for k, v in dynamic.items() if k in names or k in output_names} if dynamic else None
                    compiled = bridge.compile(target, tuple(inputs), backends=self.backends, threads=self.threads,
                                              strict=self.strict, input_names=names, dynamic_axes=axes or None,
                                              output_names=output_names, opset_version=self.opset_version)
            except bridge.ExportError as error:
                failure = _first_line(str(error).replace("tessera.torch.compile: ", ""))
            except (ValueError, TypeError, RuntimeError, Error) as error:
                failure = "%s: %s" % (type(error).__name__, _tessera_message(error))
                if attempt == 0 and "inputs" in str(error):
                    kept[:] = self._dropped_inputs(module, examples, input_names, output_names, dynamic)
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

    def _compile_session(self, module, examples, input_names, output_names, kept, dynamic):
        data, failure = _export(module, examples, input_names, output_names, self.opset_version, dynamic)
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
