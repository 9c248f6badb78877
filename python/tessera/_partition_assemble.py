"""tessera.torch.partition, end of step 4: the compiled partitions and the PyTorch nodes as one module.

Contract: ``_assemble(facts, grouping, needed, result, reasons, node_backend, checked, runtime,
dynamic_axes)`` returns a :class:`PartitionedModule` (a GraphModule) that calls the partitions (submodules
``tessera_partition_N``) and the PyTorch nodes in an order respecting every run-time dependency, guards the
inputs whose shapes became constants (``_guard_example_shapes``, ``_check_example_shape``: TorchScript-able;
a dynamic axis is not checked), and carries the :class:`PartitionReport` as ``tessera_report``.

Depends on torch, torch.fx and _partition_report; takes the _Graph facts, the _Grouping and the compiled
partitions from its caller.
"""

import copy
import heapq
import operator
from typing import List

import torch
import torch.fx

from ._partition_report import CONSTANT, PYTORCH, NodePlacement, PartitionInfo, PartitionReport


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


def _assemble(facts, grouping, needed, result, reasons, node_backend, checked, runtime, dynamic_axes=None):
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
        elif not needed.get(n, False) and n in facts.shape_computed:
            entries.append(NodePlacement(n.name, facts.describe(n), CONSTANT, "", "shape value (%s): computed from "
                                         "their inputs' shapes in the partitions that read it"
                                         % type(facts.values[n]).__name__))
        elif not needed.get(n, False):
            entries.append(NodePlacement(n.name, facts.describe(n), CONSTANT, "", "shape value (%s): a constant "
                                         "in the partitions that read it" % type(facts.values[n]).__name__))
        else:
            entries.append(NodePlacement(n.name, facts.describe(n), PYTORCH, "", reasons.get(n, "")))
    _guard_example_shapes(facts, graph, env, checked_inputs)
    module = PartitionedModule(root, graph, class_name="PartitionedModule")
    module.tessera_report = PartitionReport(entries, infos, checked, runtime, dynamic_axes)
    return module


def _check_example_shape(value: torch.Tensor, shape: List[int], name: str) -> torch.Tensor:
    """The guard _guard_example_shapes puts after an input: the example's shape (-1: a dynamic axis, any
    size), or a clear error. TorchScript-able, so that a partitioned module still scripts."""
    same = value.dim() == len(shape)
    if same:
        for d in range(len(shape)):
            if shape[d] != -1 and value.shape[d] != shape[d]:
                same = False
    if not same:
        raise ValueError("tessera.torch.partition: input '" + name + "' has shape " + str(list(value.shape)) +
                         ", but the module was partitioned for " + str(shape) + " (-1: a dynamic axis): sizes "
                         "read from it (such as x.size(0)) are constants in the partitions. Partition it again "
                         "for this shape, or with this axis in dynamic_axes.")
    return value


def _guard_example_shapes(facts, graph, env, checked_inputs):
    """Shape values (x.size(0), x.shape[1]) become constants inside partitions, so an input whose shape any
    of them depends on must keep its example shape: a check after each such input that no partition
    reads (a partition refuses other shapes itself) refuses another (a module that read `n = a.size(0)`
    once returned the example's n rows for a larger `a`)."""
    depends = set()  # inputs some constant shape value depends on
    for n in facts.static - facts.shape_computed:
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
            dynamic = facts.dynamic_dims(p)
            shape = [-1 if d in dynamic else size for d, size in enumerate(value.shape)]
            checked = graph.call_function(_check_example_shape, (env[p], shape, p.name))
        for user in users:
            user.replace_input_with(env[p], checked)
