"""Session options: SessionOptions (ONNX Runtime's shape), the type check of each option (a wrong type
names the option, never pybind11's "Unable to cast ..."), and their conversion to the C API's options by
name (tsr_options_set: the one list of option names, which the CLI and the torch op read too)."""

import operator
import os

from . import _tessera
from ._errors import InvalidArgument, _described, _path


class SessionOptions:
    """Options of a session or a compile. Every field defaults to None (Tessera's default).

    threads          int: intra-op threads (ONNX Runtime's name, intra_op_num_threads, also works)
    backends         str or list of str: backends to partition among, highest priority first:
                     "dnnl,native" or ["dnnl", "native"]
    place            str, list of str or dict {selector: backend}: manual placements, "SELECTOR=BACKEND"
                     (node name, op type or "op:TYPE")
    deny             str, list of str or dict {backend: selector}: denials, "BACKEND:SELECTOR"
    min_region_size  int: regions of non-native backends with fewer nodes run on native (default 1)
    strict           bool: fail, naming the nodes no listed backend supports, instead of falling back
    input_shapes     dict {input or dim name: list of ints, or int}: compile for these shapes up front
    freeze_weights   bool: initializers listed as graph inputs become constants (default True)
    max_variants     int: no longer used (a model with open dims compiles once for every shape); accepted
                     for older code
    precision        str: "fp32" (default), "bf16" (Conv/MatMul/Gemm in bfloat16 with float32 accumulation
                     where a backend supports it; the final layer in float32) or "bf16-all" (the final layer too)
    tuning           str or os.PathLike: the path of a tuning record (tessera.tune) whose placement to apply
    dim_bounds       dict {open dim name: (min, max)} (or "NAME=MIN..MAX" strings): each run checks the dims
                     of that name against them, and memory is sized for the upper bounds once, so runs
                     within them allocate nothing after the first; applies to .tsr artifacts too
    input_values     dict {input name: number or bool} (or "NAME=VALUE" strings): fixes one-element inputs
                     at compile time, so that what depends on them folds (an If on a sample rate takes its
                     branch then); each run checks that the value fed is that one

    A value of the wrong type raises InvalidArgument naming the option when it is set. A compiled .tsr
    artifact takes threads and dim_bounds (and max_variants, which it does not need) only: its placement, precision and
    input shapes were fixed when it was compiled, so the other options raise InvalidArgument for it.
    """

    # The C API's options by name (tsr_option_names: the one list, which the CLI and the torch op read
    # too), then the package's own: shapes to bind up front and the variant cache's size.
    _FIELDS = tuple(_tessera.option_names()) + ("input_shapes", "max_variants")

    def __init__(self, **fields):
        for name in self._FIELDS:
            setattr(self, name, None)
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if name == "intra_op_num_threads":
            name = "threads"
        if name not in self._FIELDS:
            raise InvalidArgument("unknown session option %r (options: %s)" % (name, ", ".join(self._FIELDS)))
        object.__setattr__(self, name, None if value is None else _OPTION_CHECKS[name](name, value))

    @property
    def intra_op_num_threads(self):
        return self.threads

    def _copy_with(self, **overrides):
        merged = SessionOptions(**{n: getattr(self, n) for n in self._FIELDS})
        for name, value in overrides.items():
            if value is not None:
                setattr(merged, name, value)
        return merged

    def _native(self, for_artifact=False):
        """The _tessera.Options for a compile (or, for_artifact, a .tsr load: threads only): each C option
        set as the text tsr_options_set takes."""
        settings = []
        for name in _tessera.option_names():
            value = getattr(self, name)
            if value is None or (for_artifact and name not in ("threads", "dim_bounds")):
                continue
            if name == "dim_bounds":
                settings += [(name, "%s=%d..%d" % (dim, low, high)) for dim, (low, high) in value.items()]
            elif name == "input_values":
                settings += [(name, "%s=%s" % item) for item in value.items()]
            elif name in ("place", "deny"):
                settings += [(name, rule) for rule in _strings(value, name)]
            elif name == "backends":
                settings.append((name, value if isinstance(value, str) else ",".join(value)))
            elif name == "tuning":
                settings.append((name, _path(value, "tuning")))
            elif isinstance(value, bool):
                settings.append((name, "1" if value else "0"))
            else:
                settings.append((name, str(value)))
        if for_artifact:
            return _tessera.Options(settings)
        shapes = {}
        for name, dims in (self.input_shapes or {}).items():
            shapes[name] = [dims] if isinstance(dims, int) else list(dims)
        return _tessera.Options(settings, shapes)

    def _fixed_in_artifact(self):
        """The options set here that a compiled artifact cannot apply (its placement, precision and shapes
        were fixed when it was compiled): [(name, value)], leaving out values that ask for the default."""
        defaults = {"strict": False, "freeze_weights": True, "min_region_size": 1, "precision": "fp32"}
        given = []
        for name in self._FIELDS:
            if name in ("threads", "max_variants", "dim_bounds"):
                continue
            value = getattr(self, name)
            if value is None or (name in ("place", "deny", "input_shapes") and not value):
                continue
            if name in defaults and value == defaults[name]:
                continue
            given.append((name, value))
        return given


# -- option types: checked in Python, so a wrong type says which option it is (not pybind11's "Unable to
# cast Python instance ... to C++ type ...") ------------------------------------------------------------

_INT32 = (-2 ** 31, 2 ** 31 - 1)
_INT64 = (-2 ** 63, 2 ** 63 - 1)


def _wrong_type(name, expected, value):
    return InvalidArgument("option %r must be %s, not %s" % (name, expected, _described(value)))


def _is_bool(value):
    """A Python or numpy bool (numpy.bool_, numpy 2's numpy.bool)."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"))


def _as_int(value):
    """value as an int when it is an integer (numpy's too), else None; bools are not integers here."""
    if _is_bool(value):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _int_option(name, value):
    number = _as_int(value)
    if number is None:
        raise _wrong_type(name, "an int", value)
    return number  # passed as text: the library's own range check names the valid range


def _max_variants_option(name, value):
    number = _as_int(value)
    if number is None:
        raise _wrong_type(name, "an int", value)
    if number < 1:
        raise InvalidArgument("option 'max_variants' must be at least 1, not %d" % number)
    return number


def _bool_option(name, value):
    if not _is_bool(value):
        raise _wrong_type(name, "a bool (True or False)", value)
    return bool(value)


def _str_option(name, value):
    if not isinstance(value, str):
        raise _wrong_type(name, "a str", value)
    return value


def _str_list(name, value, expected):
    """A list of str from a str-free iterable of str (a list, a tuple, ...)."""
    if isinstance(value, (bytes, bytearray, dict)) or not hasattr(value, "__iter__"):
        raise _wrong_type(name, expected, value)
    items = list(value)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidArgument("option %r must be %s; its item %d is %s" % (name, expected, index, _described(item)))
    return items


def _backends_option(name, value):
    if isinstance(value, str):
        return value
    return _str_list(name, value, "a str or a list of str")


def _rules_option(name, value):
    """place ("SELECTOR=BACKEND" or {selector: backend}) and deny ("BACKEND:SELECTOR" or {backend: selector})."""
    expected = ("a str, a list of str or a dict {selector: backend}" if name == "place"
                else "a str, a list of str or a dict {backend: selector}")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise InvalidArgument("option %r must be %s; it maps %s to %s"
                                      % (name, expected, _described(key), _described(item)))
        return dict(value)
    return _str_list(name, value, expected)


def _input_shapes_option(name, value):
    expected = "a dict {input or dim name: list of ints, or int}"
    if not isinstance(value, dict):
        raise _wrong_type(name, expected, value)
    shapes = {}
    for key, dims in value.items():
        if not isinstance(key, str):
            raise InvalidArgument("option 'input_shapes' must be %s; a key is %s" % (expected, _described(key)))
        number = _as_int(dims)
        if number is not None:
            items = [number]
        elif isinstance(dims, (str, bytes, bytearray, dict)) or not hasattr(dims, "__iter__"):
            raise InvalidArgument("option 'input_shapes' must be %s; %r maps to %s" % (expected, key, _described(dims)))
        else:
            items = list(dims)
        for index, dim in enumerate(items):
            size = _as_int(dim)
            if size is None:
                raise InvalidArgument("option 'input_shapes' must be %s; dimension %d of %r is %s"
                                      % (expected, index, key, _described(dim)))
            if not _INT64[0] <= size <= _INT64[1]:
                raise InvalidArgument("option 'input_shapes': dimension %d of %r (%d) is out of range"
                                      % (index, key, size))
            items[index] = size
        shapes[key] = items[0] if number is not None else items
    return shapes


def _dim_bounds_option(name, value):
    """{dim name: (min, max)}, or "NAME=MIN..MAX" strings (one, or a list), as a dict."""
    expected = "a dict {open dim name: (min, max)} or \"NAME=MIN..MAX\" strings"
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        parsed = {}
        for text in value:
            dim, _, bounds = text.partition("=") if isinstance(text, str) else ("", "", "")
            low, dots, high = bounds.partition("..")
            if not dim or not dots or _as_int(_maybe_int(low)) is None or _as_int(_maybe_int(high)) is None:
                raise InvalidArgument("option %r must be %s; got %s" % (name, expected, _described(text)))
            parsed[dim] = (int(low), int(high))
        value = parsed
    if not isinstance(value, dict):
        raise _wrong_type(name, expected, value)
    bounds = {}
    for dim, pair in value.items():
        ok = isinstance(dim, str) and isinstance(pair, (list, tuple)) and len(pair) == 2
        low, high = (_as_int(pair[0]), _as_int(pair[1])) if ok else (None, None)
        if low is None or high is None:
            raise InvalidArgument("option %r must be %s; %s maps to %s" % (name, expected, _described(dim),
                                                                          _described(pair)))
        if not 0 <= low <= high <= _INT64[1]:
            raise InvalidArgument("option %r: %s=%d..%d is not a range of sizes MIN..MAX with 0 <= MIN <= MAX"
                                  % (name, dim, low, high))
        bounds[dim] = (low, high)
    return bounds


def _input_values_option(name, value):
    """{input name: value text}, from {name: number or bool} or "NAME=VALUE" strings (one, or a list)."""
    expected = "a dict {input name: number or bool} or \"NAME=VALUE\" strings"
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        parsed = {}
        for text in value:
            key, eq, number = text.rpartition("=") if isinstance(text, str) else ("", "", "")
            if not key or not eq or not number:
                raise InvalidArgument("option %r must be %s; got %s" % (name, expected, _described(text)))
            parsed[key] = number
        return parsed
    if not isinstance(value, dict):
        raise _wrong_type(name, expected, value)
    texts = {}
    for key, item in value.items():
        if hasattr(item, "item") and getattr(item, "size", 1) == 1:  # a numpy scalar or one-element array
            item = item.item()
        if not isinstance(key, str) or not key or isinstance(item, str) or not isinstance(item, (bool, int, float)):
            raise InvalidArgument("option %r must be %s; %s maps to %s" % (name, expected, _described(key),
                                                                          _described(item)))
        texts[key] = ("1" if item else "0") if isinstance(item, bool) else repr(item)
    return texts


def _maybe_int(text):
    try:
        return int(text)
    except ValueError:
        return None


def _path_option(name, value):
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise _wrong_type(name, "a path (str, bytes or os.PathLike)", value)
    return value


_OPTION_CHECKS = {
    "threads": _int_option, "backends": _backends_option, "place": _rules_option, "deny": _rules_option,
    "min_region_size": _int_option, "strict": _bool_option, "input_shapes": _input_shapes_option,
    "freeze_weights": _bool_option, "max_variants": _max_variants_option, "precision": _str_option,
    "tuning": _path_option, "dim_bounds": _dim_bounds_option, "input_values": _input_values_option,
}
# Every option has its type check: an option the C API gains fails here until it has one.
assert set(_OPTION_CHECKS) == set(SessionOptions._FIELDS), set(_OPTION_CHECKS) ^ set(SessionOptions._FIELDS)


def _strings(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):  # {selector: backend} for place, {backend: selector} for deny
        return [("%s=%s" if what == "place" else "%s:%s") % item for item in value.items()]
    return [str(v) for v in value]


def _options_from(backends, threads, options, overrides):
    if options is None:
        options = SessionOptions()
    elif isinstance(options, dict):
        options = SessionOptions(**options)
    elif not isinstance(options, SessionOptions):
        raise InvalidArgument("options must be a tessera.SessionOptions or a dict, not %s" % type(options).__name__)
    return options._copy_with(backends=backends, threads=threads, **overrides)


SessionOptions.__module__ = "tessera"  # shown as tessera.SessionOptions, where users find it
