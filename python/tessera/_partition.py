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

Shape values (``x.size(0)``) are constants inside partitions, unless ``dynamic_axes`` makes them change: the
module then runs once more with those axes at other sizes (``_partition_dynamic``), every value's dims
that changed stay open in the partitions (compiled once, for every size), and a partition computes the
shape values it reads from its inputs' shapes. An in-place op goes to Tessera (out of
place) only when nothing else reads what it changes; one left in PyTorch keeps its order relative to the
readers of what it changes, and the views it changes through stay real PyTorch views.

torch 1.13's own ``CapabilityBasedPartitioner`` is not used: it misses ``call_module`` nodes with
``allows_single_node_partition=False`` and can form partitions with cycles. ``torch._dynamo`` (torch 2)
is feature-detected, never imported here: :func:`dynamo_backend` has the signature of a dynamo backend.

The steps live in sibling modules, each starting with its contract: ``_partition_trace`` (1: tracing,
recording, the graph facts), ``_partition_support`` (2: one node at a time), ``_partition_group`` (3),
``_partition_compile`` (4: one partition), ``_partition_assemble`` (4: the returned module) and
``_partition_report`` (the report's classes), and ``_partition_dynamic`` (the dynamic axes' probe). This module keeps the public entry points and re-exports the
public names; ``_torch_bridge`` (the runtime switch tests patch) is looked up here when ``partition`` runs.
"""

import importlib.util
import warnings

import torch

from ._partition_assemble import PartitionedModule, _assemble
from ._partition_compile import _Compiler, _PartitionFailed
from ._partition_dynamic import _Dynamics, _normalize_axes, _probe
from ._partition_group import _Grouping, _needed, _partition_inputs
from ._partition_report import NodePlacement, PartitionInfo, PartitionReport
from ._partition_support import _SupportChecker
from ._partition_trace import TraceError, _Graph, _record, _trace

__all__ = ["partition", "PartitionedModule", "PartitionReport", "NodePlacement", "PartitionInfo", "TraceError",
           "dynamo_available", "dynamo_backend"]


def _torch_bridge():
    """tessera.torch when its op library loads, else None (the InferenceSession fallback is used)."""
    try:
        from . import torch as bridge
        bridge.load_library()
        return bridge
    except (ImportError, OSError, RuntimeError):
        return None


# -- the entry point -------------------------------------------------------------------------------------

def partition(module, example_inputs, backends=None, min_size=1, threads=None, *, strict=False, verify=True,
              opset_version=14, dynamic_axes=None):
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
    dynamic_axes: the input dims that may change from call to call, as ``torch.onnx.export`` takes them,
        keyed by input position or name: ``{0: [0]}`` or ``{"ids": {0: "batch", 1: "seq"}}`` (axes with the
        same name change together). The module runs once more with those axes at other sizes; the dims
        that change with them stay open, so each partition compiles once and runs every size. A node
        whose result changes rank with them, or that reads the size of a tensor it does not take, stays
        in PyTorch (the report says why).

    Returns a :class:`PartitionedModule` (a GraphModule) whose ``tessera_report`` says which node ran
    where and why; PyTorch-side layers are shared with ``module``. The partitions are compiled for the
    example inputs' shapes, with the dims dynamic_axes opens left open: other shapes raise an error naming
    the input. Inference only: call it under ``torch.no_grad()``. Raises TypeError for a module or inputs of the wrong type, TraceError when
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
    dynamics, probe_values, named_axes = None, None, {}
    if dynamic_axes:
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        axes = _normalize_axes(dynamic_axes, names, list(example_inputs))
        named_axes = {names[p]: axes[p] for p in sorted(axes)}
        if axes:
            # The probe first: recording sets node.meta["tensor_meta"], which should end as the example's.
            _, probe_values = _probe(lambda inputs: _record(gm, inputs, "them"), list(example_inputs), axes)
    values = _record(gm, tuple(example_inputs))
    if probe_values is not None:
        dynamics = _Dynamics(gm.graph.nodes, values, probe_values)
    facts = _Graph(module, gm, values, dynamics, probe_values)
    checker = _SupportChecker(facts, backends, strict, opset_version, verify)
    # _torch_bridge is looked up in this module's globals on each call: patching
    # tessera._partition._torch_bridge switches the runtime.
    compiler = _Compiler(facts, backends, threads, strict, opset_version, verify, _torch_bridge())

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
    return _assemble(facts, grouping, needed, result, reasons, node_backend, checker.checked, compiler.runtime,
                     named_axes)


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
