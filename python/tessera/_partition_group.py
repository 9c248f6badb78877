"""tessera.torch.partition, step 3: group the supported nodes into partitions without cycles.

Contract: ``_Grouping(facts, candidates)`` grows partitions of candidate nodes in topological order so that
no partition waits, through PyTorch nodes or another partition, for its own results, and keeps a tuple and
the nodes picking its elements together; ``partitions()`` lists them in graph order. ``grouping.users`` and
``grouping.inputs`` are the run-time edges (constants and shape values a partition holds as literals
excluded; a shape value a partition computes is an edge from the tensors it is computed from). ``_partition_inputs`` is what one partition reads; ``_needed`` says which nodes outside the
partitions must still run.

Depends only on the _Graph facts (_partition_trace), passed in; imports nothing.
"""


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
                if n in candidates and i in facts.shape_computed:
                    # A shape value that changes with the dynamic axes: the partition computes it from the
                    # shapes of the tensors it comes from, which it reads.
                    for source in facts.shape_sources(i):
                        if source not in self.inputs[n]:
                            self.users[source].append(n)
                            self.inputs[n].append(source)
                    continue
                if n in candidates and (i.op == "get_attr" or i in facts.static):
                    continue  # a partition holds constants and shape values as literals: no run-time edge
                if i not in self.inputs[n]:
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
