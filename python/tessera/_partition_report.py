"""tessera.torch.partition's report: where each fx node ran, and why the rest stayed in PyTorch.

Contract: plain result classes, filled in by _partition_assemble: :class:`NodePlacement` (one fx node),
:class:`PartitionInfo` (one Tessera partition) and :class:`PartitionReport` (all of them; ``str()`` is a
table), and the two placements that are not partitions, ``PYTORCH`` and ``CONSTANT``.

Depends on nothing.
"""


PYTORCH = "pytorch"
CONSTANT = "constant"  # a shape value that only partitions read: it does not run


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
    per Tessera partition; ``dynamic_axes``: {input name: {axis: name}}, the dims left open (empty: the
    example's shapes only). ``str(report)`` is a table."""

    def __init__(self, nodes, partitions, checked, runtime, dynamic_axes=None):
        self.nodes = nodes
        self.partitions = partitions
        self.nodes_checked = checked  # distinct single-node compiles (the rest came from the cache)
        self.runtime = runtime
        self.dynamic_axes = dynamic_axes or {}

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
        shapes = "Tessera runs the partitions for the example input shapes"
        if self.dynamic_axes:
            shapes += ", with these dims open (any size): " + ", ".join(
                "%s[%d] (%s)" % (name, axis, symbol)
                for name, axes in self.dynamic_axes.items() for axis, symbol in sorted(axes.items()))
        lines = ["Tessera partitioning: %d of %d nodes in %d Tessera partition(s), %d in PyTorch (runtime: %s)"
                 % (len(self.tessera_nodes()), len(self.nodes), len(self.partitions), len(self.pytorch_nodes()),
                    self.runtime), shapes + ".", ""]
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
