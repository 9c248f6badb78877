"""tessera.torch.partition with dynamic axes: which dims of every value change with the inputs' dynamic axes.

Contract: ``_normalize_axes(dynamic_axes, names, example_inputs)`` checks the caller's ``dynamic_axes`` (keyed
by input position or name, each a list of axes or {axis: name}, as ``torch.onnx.export`` takes it) and returns
{input position: {axis: symbol}}, raising ValueError for an input, axis or name that does not exist.
``_probe(record, example_inputs, axes)`` runs the module once more with every dynamic axis at another size (the
axes sharing a symbol move together; a few sizes are tried, since a module may need one to be even, say) and
returns (probe inputs, {fx node: value}); it raises InvalidArgument when the module fails at every size tried.
``_Dynamics(nodes, values, probe_values)`` compares the two recordings: ``dims[n]`` is the set of dims of
tensor n that changed (a tuple of such sets for a tuple of tensors), ``unstable[n]`` says why n's result
changed in kind or rank (such a node stays in PyTorch), and ``is_static_changed(n)`` whether a shape value
(x.size(0)) changed.

A dim that changed is dynamic; one that did not is taken as fixed, and a partition compiled for it refuses
another size with a clear error. Depends on torch and tessera.InvalidArgument only.
"""

import torch

from . import InvalidArgument


def _normalize_axes(dynamic_axes, names, example_inputs):
    """{input position: {axis: symbol}} from the caller's dynamic_axes."""
    if not isinstance(dynamic_axes, dict):
        raise TypeError("tessera.torch.partition: dynamic_axes must be a dict keyed by input position or name, "
                        "not %s" % type(dynamic_axes).__name__)
    result = {}
    for key, axes in dynamic_axes.items():
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise ValueError("tessera.torch.partition: dynamic_axes key %r is neither an input position nor a name"
                             % (key,))
        if isinstance(key, str):
            if key not in names:
                raise ValueError("tessera.torch.partition: dynamic_axes names input '%s', but the inputs are %s"
                                 % (key, names))
            position = names.index(key)
        else:
            if not 0 <= key < len(example_inputs):
                raise ValueError("tessera.torch.partition: dynamic_axes names input %d, but there are %d inputs"
                                 % (key, len(example_inputs)))
            position = key
        value = example_inputs[position]
        if not isinstance(value, torch.Tensor):
            raise ValueError("tessera.torch.partition: dynamic_axes names input '%s', which is a %s, not a tensor"
                             % (names[position], type(value).__name__))
        if isinstance(axes, dict):
            pairs = list(axes.items())
        elif isinstance(axes, (list, tuple)):
            pairs = [(axis, None) for axis in axes]
        else:
            raise ValueError("tessera.torch.partition: dynamic_axes['%s'] must be a list of axes or {axis: name}, "
                             "not %s" % (names[position], type(axes).__name__))
        chosen = result.setdefault(position, {})
        for axis, symbol in pairs:
            if isinstance(axis, bool) or not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                raise ValueError("tessera.torch.partition: dynamic_axes['%s'] names axis %r, but the input has "
                                 "rank %d" % (names[position], axis, value.dim()))
            axis %= value.dim()
            if symbol is not None and (not isinstance(symbol, str) or not symbol):
                raise ValueError("tessera.torch.partition: dynamic_axes['%s'][%d] must be a name, not %r"
                                 % (names[position], axis, symbol))
            chosen[axis] = symbol if symbol is not None else "%s_dim%d" % (names[position], axis)
    return {p: a for p, a in result.items() if a}


def _resized(value, axis, size):
    """value with `axis` at `size`: its slices repeated (ids stay valid ids, masks stay masks)."""
    old = value.shape[axis]
    if old == 0:
        shape = list(value.shape)
        shape[axis] = size
        return torch.zeros(shape, dtype=value.dtype)
    index = torch.arange(size) % old
    return value.index_select(axis, index)


def _probe_sizes(axes, example_inputs):
    """Candidate {symbol: size} maps, each moving every symbol away from its example size."""
    example = {}
    for position, chosen in axes.items():
        for axis, symbol in chosen.items():
            example.setdefault(symbol, example_inputs[position].shape[axis])
    symbols = sorted(example)
    candidates = []
    # Different steps for different symbols, so that two dims that happen to be equal in the example
    # (batch 2, sequence 2) differ in the probe and neither is taken for the other.
    for step in (lambda s, k: s + 1 + k, lambda s, k: 2 * s + 2 * k if s else 2 + k,
                 lambda s, k: s - 1 - k if s > 1 + k else s + 3 + k, lambda s, k: 4 * s + 4 * k if s else 4 + k):
        sizes = {symbol: step(example[symbol], k) for k, symbol in enumerate(symbols)}
        if all(sizes[s] != example[s] for s in symbols) and sizes not in candidates:
            candidates.append(sizes)
    return candidates


def _probe(record, example_inputs, axes):
    """(probe inputs, recorded values) at the first candidate size the module runs at."""
    failures = []
    for sizes in _probe_sizes(axes, example_inputs):
        inputs = list(example_inputs)
        for position, chosen in axes.items():
            value = inputs[position]
            for axis, symbol in chosen.items():
                value = _resized(value, axis, sizes[symbol])
            inputs[position] = value
        try:
            return inputs, record(tuple(inputs))
        except InvalidArgument as error:
            failures.append("%s: %s" % (", ".join("%s=%d" % kv for kv in sorted(sizes.items())),
                                        str(error).replace("tessera.torch.partition: ", "")))
    raise InvalidArgument("tessera.torch.partition: the dynamic axes must be able to change, but the module fails "
                          "at every other size tried (%s)" % "; ".join(failures))


def _changed_dims(a, b):
    """(dims of tensor a that differ in b, or None when the rank or dtype differs)."""
    if not isinstance(b, torch.Tensor) or a.dim() != b.dim() or a.dtype != b.dtype:
        return None
    return frozenset(d for d in range(a.dim()) if a.shape[d] != b.shape[d])


class _Dynamics:
    """What changes between the example's recording and the probe's (see the module's contract)."""

    def __init__(self, nodes, values, probe_values):
        self.dims = {}
        self.unstable = {}
        self.changed = set()  # non-tensor values that differ (shape values among them)
        for n in nodes:
            if n not in values:
                continue
            a, b = values[n], probe_values.get(n)
            if isinstance(a, torch.Tensor):
                dims = _changed_dims(a, b)
                if dims is None:
                    self.unstable[n] = "its result's rank or dtype changes with the dynamic axes"
                else:
                    self.dims[n] = dims
            elif isinstance(a, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in a):
                if not isinstance(b, (tuple, list)) or len(a) != len(b):
                    self.unstable[n] = "its number of results changes with the dynamic axes"
                    continue
                per = []
                for x, y in zip(a, b):
                    if isinstance(x, torch.Tensor):
                        dims = _changed_dims(x, y)
                        if dims is None:
                            self.unstable[n] = "a result's rank or dtype changes with the dynamic axes"
                            break
                        per.append(dims)
                    else:
                        per.append(None if y is None else frozenset())
                else:
                    self.dims[n] = tuple(per)
            else:
                try:
                    same = bool(a == b) if not isinstance(a, torch.Tensor) else False
                except Exception:  # noqa: BLE001  (a value that cannot compare: take it as changed)
                    same = False
                if not same:
                    self.changed.add(n)

    def has_dynamic_dims(self, n):
        dims = self.dims.get(n)
        if dims is None:
            return n in self.unstable
        if isinstance(dims, tuple):
            return any(d for d in dims)
        return bool(dims)
