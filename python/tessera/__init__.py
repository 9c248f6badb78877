"""Tessera from Python: run ONNX models and compiled .tsr artifacts.

The API follows ONNX Runtime's, so switching is a one-line change::

    import tessera
    session = tessera.InferenceSession("model.onnx")          # or the model's bytes
    outputs = session.run(None, {"input": array})             # list of numpy arrays

Inputs may be numpy arrays, torch tensors, or anything with ``__dlpack__``;
they are read in place (copied, and counted by ``copy_count()``, only when not
compact row-major, misaligned or byte-swapped). Outputs are allocated by
Tessera and handed over without a copy: as numpy arrays, or with
``run(..., as_dlpack=True)`` as :class:`Tensor` objects that ``torch.from_dlpack``
and ``numpy.from_dlpack`` take without copying. Errors are :class:`Error`
subclasses carrying Tessera's message. The GIL is released while a model runs,
and one session may be run from several threads at once.

Models with ONNX sequences, optionals or string tensors as inputs or outputs
run too (their numeric tensors are then copied once, in and out):

- a string tensor is a numpy array of dtype str (``'<U...'``; an object array
  whose elements are all ``str`` is taken as input too), in UTF-8 inside
  Tessera. numpy drops trailing NUL characters from str elements;
- a sequence is a list (or tuple) of arrays or array-likes: ``[a, b]``, ``[]``;
- an optional is ``None`` (empty) or its content: an array for an optional
  tensor, a list of arrays for an optional sequence.

Outputs come back the same way (a sequence as a list of numpy arrays, an
empty optional as None, a string tensor as a str array of its shape). A value
of the wrong kind (a list of arrays for a tensor input, an array for a sequence, None
for an input that is not optional) raises :class:`InvalidArgument` naming the
input. :meth:`InferenceSession.get_inputs` says what each input is
(``NodeArg.kind``, ``NodeArg.type`` such as ``"seq(tensor(float))"``).

A model whose inputs have open dimensions (e.g. ``["batch", 3, 224, 224]``)
is compiled once, with those dims open, and runs at every shape that fits them
without compiling again (give ``input_shapes`` to fix them instead). What a
backend prepares per shape (oneDNN primitives) is kept in a cache bounded by
bytes for the process (``TESSERA_SHAPE_CACHE_MB``, default 32); ``max_variants``
is accepted for older code and no longer bounds anything.
"""

import json
import os
import re
import threading
import warnings

__all__ = [
    "Error", "InvalidArgument", "Unsupported", "InternalError",
    "InferenceSession", "SessionOptions", "NodeArg", "Tensor", "IOBinding",
    "compile", "quantize", "tune", "backends", "load_backend_plugin", "copy_count",
]


# OpenMP's wait policy, before the library (and with it GNU libgomp) loads: a short spin, so that two of
# a run's threads sharing a CPU do not keep each other off it for a whole time slice at every parallel
# step (see tools/omp_wait_defaults.cc, which sets the same for the CLI). libgomp reads it once, when it
# is first loaded: where it is loaded already (torch imported first), its own setting stays.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "1000"

from ._errors import Error, InternalError, InvalidArgument, Unsupported, _described, _path  # noqa: E402
from . import _tessera  # noqa: E402  (the exceptions above must exist first)
from ._options import SessionOptions, _options_from, _strings  # noqa: E402,F401  (_strings: tessera.torch)
from ._iobinding import IOBinding  # noqa: E402

_tessera.set_error_types(Error, InvalidArgument, Unsupported, InternalError)

Tensor = _tessera.Tensor

_NUMPY_TYPES = {
    "float32": "float", "float16": "float16", "float64": "double", "bfloat16": "bfloat16",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool",
    "str": "string",
}

# NodeArg.kind -> ONNX Runtime's NodeArg.type for it, from the tensor type "tensor(float)".
_KIND_TYPES = {
    "tensor": "%s", "sequence": "seq(%s)", "optional_tensor": "optional(%s)", "optional_sequence": "optional(seq(%s))",
}


def copy_count():
    """Input copies made so far in this process (see the module docstring)."""
    return _tessera.copy_count()


def backends():
    """The backends, highest priority first (loaded plug-ins, then the built-in ones): a list of dicts
    with name, description, default, version, fallback, plugin_path and plugin_abi (None when built in)."""
    return _tessera.backends()


def load_backend_plugin(path):
    """Loads a backend plug-in (a shared library implementing include/tessera/backend_plugin.h) for the
    rest of the process and returns its backend's name. Its backend then takes part in every later
    compile (first in priority unless SessionOptions.backends says otherwise) and loads artifacts that
    name it. Loading the same path again does nothing. The TESSERA_BACKEND_PLUGINS environment variable
    (paths separated by ':') loads plug-ins the same way."""
    return _tessera.load_backend_plugin(_path(path, "the plug-in path"))


def quantize(model, output, calibration=None, method="minmax", percentile=None, per_channel=False, exclude=(),
             random=None, seed=0, progress=None, backends=None, threads=None, options=None, weights_only=False):
    """Static post-training quantization, as `tessera quantize` does: writes `output`, a QDQ ONNX model
    (QuantizeLinear / DequantizeLinear around Conv, MatMul, Gemm, Add, pooling and Concat; int8 weights,
    uint8 activations, int32 biases) that Tessera and ONNX Runtime both run, and returns the summary
    (what was quantized, what stayed float and why).

    calibration: samples to run the float model on, each a dict {input name: array} or a sequence of
    arrays in input order (an iterable is read once); None: `random` random inputs (default 16).
    method: "minmax", "percentile" (keeping `percentile` percent of the values, default 99.99) or
    "entropy". per_channel: one weight scale per output channel. exclude: node names or op types left in
    float. progress(phase, done, total) is called after each calibration run. backends, threads and
    options set how the calibration runs.

    weights_only: weight-only int8 instead: the constant weights of MatMul and Gemm become int8 with a
    scale per output column behind a DequantizeLinear, activations stay float, nothing is calibrated
    (calibration and method are ignored). Tessera's native backend then runs products of few rows (a
    decoder's token steps) reading the 8-bit weights."""
    names = [info[0] for info in _tessera.Source.load_path(_path(model, "model"), None).inputs()]
    samples = []
    for sample in calibration or ():
        if isinstance(sample, dict):
            missing = [n for n in names if n not in sample]
            if missing:
                raise InvalidArgument("calibration sample %d has no %s" % (len(samples), ", ".join(repr(m) for m in missing)))
            samples.append([_prepare_input(sample[n]) for n in names])
        else:
            samples.append([_prepare_input(v) for v in sample])
    if calibration is not None and not samples:
        raise InvalidArgument("calibration holds no sample")
    if isinstance(exclude, str):
        exclude = [exclude]
    native = _options_from(backends, threads, options, {})._native()
    return _tessera.quantize(_path(model, "model"), _path(output, "output"), native, samples, method,
                             float(percentile or 0), bool(per_channel), ",".join(exclude),
                             int(random or 0), int(seed), progress, bool(weights_only))


def tune(model, output, backends=None, threads=None, options=None, budget=None, progress=None, **overrides):
    """Measured placement, as `tessera tune` does: compiles and times candidate placements of ``model``
    (an ONNX path) on random inputs of its shapes (the default priority order, each backend alone, then
    regions of the fastest moved to other backends) within ``budget`` seconds (default 60), writes the
    tuning record (JSON) to ``output`` and returns the table of candidates. Apply the record with
    ``InferenceSession(model, tuning=output)`` or ``compile(..., tuning=output)``. Options as for
    InferenceSession; a model with open dims is tuned as one plan for every shape (its dims stay open),
    measured at the sizes ``input_shapes`` gives, and its record applies with the dims open or bound.
    progress(phase, done, total) is called before each candidate."""
    unknown = set(overrides) - (set(SessionOptions._FIELDS) - {"threads", "backends", "max_variants", "tuning"})
    if unknown:
        raise InvalidArgument("unknown argument(s): %s" % ", ".join(sorted(unknown)))
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidArgument("tune takes the path of an ONNX model")
    native = _options_from(backends, threads, options, overrides)._native()
    return _tessera.tune(_path(model, "model"), _path(output, "output"), native, float(budget or 0), progress)


class NodeArg:
    """An input or output: name, shape (ints, and a dim's name or None where the model leaves it open;
    None when even the rank is unknown), type ("tensor(float)" as ONNX Runtime writes it; "tensor(string)",
    "seq(tensor(float))", "optional(tensor(int64))", "optional(seq(tensor(float)))"), dtype ("float32", ...,
    "str" for strings) and kind ("tensor", "sequence", "optional_tensor" or "optional_sequence"). For a
    sequence or an optional, dtype and shape describe the tensors it holds (shape None, or dims None, where
    they may differ)."""

    __slots__ = ("name", "shape", "type", "dtype", "kind")

    def __init__(self, name, dtype, shape, dim_names, kind="tensor"):
        self.name = name
        self.dtype = dtype
        self.kind = kind
        self.type = _KIND_TYPES.get(kind, kind + "(%s)") % ("tensor(%s)" % _NUMPY_TYPES.get(dtype, dtype))
        if shape is None:
            self.shape = None
        else:
            self.shape = [d if d >= 0 else (n or None) for d, n in zip(shape, dim_names)]

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def _warn(model):
    """Compile-time warnings (e.g. bf16 asked for where no backend runs it) as Python warnings."""
    for text in model.warnings():
        warnings.warn("tessera: " + text, RuntimeWarning, stacklevel=3)


def _read_model(path_or_bytes):
    """(bytes or None, path or None, label) of a model given as a path, bytes or an onnx.ModelProto."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes), None, "<bytes>"
    if hasattr(path_or_bytes, "SerializeToString"):  # onnx.ModelProto
        return path_or_bytes.SerializeToString(), None, getattr(path_or_bytes.graph, "name", "") or "<onnx.ModelProto>"
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        return None, _path(path), path
    raise InvalidArgument("a model is a path, bytes or an onnx.ModelProto, not %s" % type(path_or_bytes).__name__)


def _is_torch_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "requires_grad")


# The run's message for uint8 data given for a bool input ("input 'x': expected bool[4], got uint8[4]").
_UINT8_FOR_BOOL = re.compile(r"expected bool\[[^\]]*\], got uint8\[")


def _is_bool_tensor(value):
    """A tessera.Tensor (a run's output with as_dlpack=True) holding bools."""
    return isinstance(value, Tensor) and value.dtype == "bool"


def _prepare_input(value):
    """torch tensors: detached when they require grad (inference only: no gradient flows back), and
    bool ones viewed through numpy (DLPack 0.6 has no bool); a bool tessera.Tensor (an output of
    run(..., as_dlpack=True), which its __dlpack__ hands over as uint8 for the same reason) viewed as a
    numpy bool array over the same memory; the same for the items of a list or tuple (a sequence).
    Everything else goes as is."""
    if isinstance(value, (list, tuple)):
        if any(_is_torch_tensor(v) or _is_bool_tensor(v) for v in value):
            return [_prepare_input(v) for v in value]
        return value
    if _is_bool_tensor(value):
        return value.numpy()  # a view: no copy
    if _is_torch_tensor(value):
        if value.requires_grad:
            value = value.detach()
        if str(value.dtype) == "torch.bool" and str(value.device) == "cpu":
            value = value.numpy()
    return value


def _provider_names(providers):
    """Backend names from ONNX Runtime's providers: a name, or a list of names or (name, options) pairs."""
    if isinstance(providers, str):
        return [providers]
    if isinstance(providers, (bytes, bytearray, dict)) or not hasattr(providers, "__iter__"):
        raise _wrong_type("providers", "a list of str", providers)
    names = []
    for index, item in enumerate(providers):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            item = item[0]  # (name, provider options), as ONNX Runtime takes them
        if not isinstance(item, str):
            raise InvalidArgument("option 'providers' must be a list of str; its item %d is %s"
                                  % (index, _described(item)))
        names.append(item)
    return names


def _artifact_refuses(label, names, detail=None):
    """The InvalidArgument for options given to a session of a compiled .tsr artifact (names: quoted)."""
    return InvalidArgument(
        "%s %s cannot apply to %s: it is a compiled .tsr artifact, whose placement, precision and input "
        "shapes were fixed when it was compiled%s (loading one takes threads only); give %s to "
        "tessera.compile (or the session of the ONNX model) instead, or leave %s out"
        % ("option" if len(names) == 1 else "options", ", ".join(names), label,
           "" if detail is None else " (%s)" % detail, "it" if len(names) == 1 else "them",
           "it" if len(names) == 1 else "them"))


def _backends_used(model, label):
    """The backends a compiled model's placement uses (folded nodes run nowhere), highest priority first:
    in the order the model lists its backends (its report's), then any other in order of appearance."""
    used = []
    for p in model.placement():
        if p["region"] >= 0 and p["backend"] and p["backend"] not in used:
            used.append(p["backend"])
    try:
        order = json.loads(model.report("json", label)).get("backends") or []
    except (Error, ValueError):
        order = []
    rank = {name: i for i, name in enumerate(order)}
    return sorted(used, key=lambda name: (rank.get(name, len(rank)), used.index(name)))


class InferenceSession:
    """A compiled model, ready to run. ``path_or_bytes``: an ONNX file or .tsr artifact path, their
    bytes, or an onnx.ModelProto. ``backends`` ("dnnl,native" or a list), ``threads`` and ``options``
    (a SessionOptions or a dict of its fields) choose how it compiles; the keyword arguments ``place``,
    ``deny``, ``min_region_size``, ``strict``, ``input_shapes`` and ``max_variants`` override fields of
    ``options``. ``providers`` is accepted for ONNX Runtime code: "CPUExecutionProvider" means the
    default backends, and Tessera backend names may be given instead. A .tsr artifact takes ``threads``
    only: its placement, precision and input shapes were fixed when it was compiled, so any other
    compile option (a value other than its default) raises InvalidArgument naming it."""

    def __init__(self, path_or_bytes, backends=None, threads=None, options=None, providers=None, **overrides):
        unknown = set(overrides) - (set(SessionOptions._FIELDS) - {"threads", "backends"}) - {"sess_options",
                                                                                            "provider_options"}
        if unknown:
            raise InvalidArgument("unknown argument(s): %s" % ", ".join(sorted(unknown)))
        if options is None and overrides.get("sess_options") is not None:
            options = overrides["sess_options"]
        overrides.pop("sess_options", None)
        overrides.pop("provider_options", None)
        from_providers = False
        if providers is not None and backends is None:
            names = _provider_names(providers)
            backends = [p for p in names if p != "CPUExecutionProvider"] or None
            from_providers = backends is not None
        self._options = _options_from(backends, threads, options, overrides)
        self._lock = threading.Lock()
        self._closed = False
        self._artifact_backends = None  # for a .tsr artifact: the backends its placement uses (get_backends)
        self._fixed = None
        data, path, self._label = _read_model(path_or_bytes)
        is_artifact = _tessera.is_artifact_bytes(data) if data is not None else _tessera.is_artifact_file(path)
        self._is_artifact = bool(is_artifact)
        if is_artifact:
            # Its placement, precision and shapes were fixed when it was compiled: an option that would
            # change them is refused rather than silently ignored (the artifact loads with threads only).
            fixed = self._options._fixed_in_artifact()
            if fixed:
                raise _artifact_refuses(self._label, ["%r%s" % (n, " (given as providers)" if n == "backends"
                                                              and from_providers else "") for n, _ in fixed])
            native = self._options._native(for_artifact=True)
            self._fixed = (_tessera.Model.load_bytes(data, self._label, native) if data is not None
                           else _tessera.Model.load_path(path, native))
            if self._options.precision is not None:  # "fp32": the default, which a bf16 artifact is not
                computed = sorted({p["precision"] for p in self._fixed.placement() if p["precision"]})
                if computed:
                    self._fixed.close()
                    raise _artifact_refuses(self._label, ["'precision'"], "it computes in %s" % ", ".join(computed))
            self._inputs = [NodeArg(*i) for i in self._fixed.inputs()]
            self._outputs = [NodeArg(*o) for o in self._fixed.outputs()]
            return
        freeze = self._options.freeze_weights
        import_options = _tessera.Options([] if freeze is None else [("freeze_weights", "1" if freeze else "0")])
        source = (_tessera.Source.load_bytes(data, self._label, import_options) if data is not None
                  else _tessera.Source.load_path(path, import_options))
        self._inputs = [NodeArg(*i) for i in source.inputs()]
        self._outputs = [NodeArg(*o) for o in source.outputs()]
        # Open dims (e.g. ["batch", 3, 224, 224]) stay open: the model compiles once, now, for every value
        # they take when it runs (errors show up here, as ONNX Runtime's do). input_shapes fixes them.
        self._fixed = source.compile(self._options._native())
        _warn(self._fixed)
        self._inputs = [NodeArg(*i) for i in self._fixed.inputs()]
        self._outputs = [NodeArg(*o) for o in self._fixed.outputs()]

    # -- description -----------------------------------------------------------------------------

    def get_inputs(self):
        """The inputs, as NodeArg (name, shape, type, dtype)."""
        return list(self._inputs)

    def get_outputs(self):
        """The outputs, as NodeArg; for a model with open dims, as the model declares them."""
        return list(self._outputs)

    def get_backends(self):
        """The backends this session partitions among, highest priority first. For a compiled .tsr
        artifact: the backends its placement uses (those of placement(), in the artifact's priority
        order), which its compile fixed."""
        if self._is_artifact:
            if self._artifact_backends is None:
                self._artifact_backends = _backends_used(self._model("get_backends"), self._label)
            return list(self._artifact_backends)
        chosen = self._options.backends
        if chosen is None:
            return [b["name"] for b in backends() if b["default"]]
        names = chosen.split(",") if isinstance(chosen, str) else list(chosen)
        return names if "native" in names or self._options.strict else names + ["native"]

    get_providers = get_backends

    def _model(self, what):
        """The compiled model placement, reports and saving describe."""
        self._check_open()
        return self._fixed

    def placement(self):
        """Where each node ran and why: a list of dicts (node, op_type, backend, region, reason, note,
        precision: "bf16" where it computes in bfloat16, else ""; precision_note: why a Conv/MatMul/Gemm
        stays float32 under precision="bf16")."""
        return self._model("placement").placement()

    def regions(self):
        """The regions, in execution order: dicts of backend, memory_space, nodes, inputs, outputs, payload_bytes."""
        return self._model("regions").regions()

    def stats(self):
        """What the session's runs have done, counted over every run: a dict of compiles (1: the model
        compiled once, whatever shapes it ran at; 0 for a .tsr artifact, loaded), runs, shape_cache_hits
        and shape_cache_misses (regions with open dims that found what they prepare per input shape, e.g.
        oneDNN primitives, or had to prepare it: misses are new shapes), shape_prepare_ms (the time that
        took), shape_fallbacks (region runs that went to native at shapes their backend refused),
        shape_deferrals (region runs that went to native at shapes not yet prepared, where preparing them
        was measured to cost more than that run; a shape that comes back is prepared) and
        allocations (memory a run allocated instead of reusing an earlier run's: 0 once warmed up), and
        binding_copies and binding_copy_bytes (io_binding buffers a run could not use in place and copied)."""
        s = dict(self._model("stats").stats())
        s["compiles"] = 0 if self._is_artifact else 1
        return s

    def summary(self):
        """Arena and constant bytes, parameter count, copies per run and the model's metadata."""
        return self._model("summary").summary()

    def report(self, format="table"):
        """The placement report as text: format "table", "json", "dot" or "html"."""
        return self._model("report").report(format, self._label)

    def save(self, path):
        """Writes the compiled model as a .tsr artifact (a model with open dims keeps them open)."""
        self._model("save").save(_path(path, "the path to save to"))

    def to_bytes(self):
        """The compiled model as .tsr artifact bytes."""
        return self._model("to_bytes").to_bytes()

    # -- running ---------------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise InvalidArgument("the session is closed")

    def _ordered_inputs(self, input_feed):
        if not isinstance(input_feed, dict):
            raise InvalidArgument("input_feed must be a dict of input name to array, not %s"
                                  % type(input_feed).__name__)
        names = [n.name for n in self._inputs]
        if len(input_feed) != len(names) or any(n not in input_feed for n in names):
            missing = [n for n in names if n not in input_feed]
            extra = [str(n) for n in input_feed if n not in names]
            parts = []
            if missing:
                parts.append("missing input(s): %s" % ", ".join(missing))
            if extra:
                parts.append("unknown input(s): %s" % ", ".join(extra))
            raise InvalidArgument("; ".join(parts) + " (the model's inputs: %s)" % ", ".join(names))
        return [_prepare_input(input_feed[n]) for n in names]

    def _variant(self, inputs):
        """The compiled model (one for every input shape)."""
        self._check_open()
        return self._fixed

    def _select(self, outputs, output_names):
        if output_names is None:
            return outputs
        names = [o.name for o in self._outputs]
        if isinstance(output_names, str):
            raise InvalidArgument("output_names is a list of names (or None), not a string")
        selected = []
        for name in output_names:
            if name not in names:
                raise InvalidArgument("unknown output %r (the model's outputs: %s)" % (name, ", ".join(names)))
            selected.append(outputs[names.index(name)])
        return selected

    def run(self, output_names, input_feed, run_options=None, as_dlpack=False):
        """Runs the model. ``output_names``: the outputs to return (None: all); ``input_feed``: a dict of
        input name to numpy array, torch tensor or anything with ``__dlpack__`` (for a sequence input a list
        of them, for an optional one None or its content, for a string tensor a numpy str array). Returns a
        list of numpy arrays, or of :class:`Tensor` (DLPack, no copy) when ``as_dlpack``; a sequence output
        is a list of them, an empty optional None, a string tensor a numpy str array (also with
        ``as_dlpack``: DLPack has no strings). Torch tensors that require grad are read detached: inference
        only, no gradient flows back."""
        self._check_open()
        if run_options is not None:
            raise InvalidArgument("run_options are not supported (pass None)")
        inputs = self._ordered_inputs(input_feed)
        model = self._variant(inputs)
        try:
            outputs = model.run(inputs, as_dlpack)
        except InvalidArgument as error:
            if _UINT8_FOR_BOOL.search(str(error)) is None:
                raise
            raise InvalidArgument(
                "%s (a bool output of run(..., as_dlpack=True) reaches torch.from_dlpack and numpy.from_dlpack as "
                "uint8, since DLPack 0.6 has no bool: feed the tessera.Tensor itself, or convert it with .bool() "
                "in torch or .astype(bool) in numpy)" % error) from None
        return self._select(outputs, output_names)

    def io_binding(self):
        """An IOBinding for this session (tessera._iobinding: bind inputs and output buffers, run with
        run_with_iobinding, e.g. to keep a decoder's key/value cache in one buffer)."""
        self._check_open()
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        """Runs with the inputs and output buffers bound in ``iobinding``; read the outputs with its
        get_outputs()."""
        self._check_open()
        if run_options is not None:
            raise InvalidArgument("run_options are not supported (pass None)")
        if not isinstance(iobinding, IOBinding) or iobinding._session is not self:
            raise InvalidArgument("run_with_iobinding takes an IOBinding made by this session's io_binding()")
        iobinding._run(self._variant(None))

    def check(self, input_feed, tolerance=None, min_cosine=None, reference="native", format="dict"):
        """Accuracy region by region: runs the model on ``input_feed`` and, after each region, the same
        region's nodes on the native backend (float32) on the inputs that region read, and compares every
        region output. Returns a dict (as ``tessera check --json`` writes): ``regions`` with per output
        ``max_abs_error``, ``relative_error`` (over max |reference|), ``cosine``, ``mismatches`` and
        ``within_tolerance``, and ``regions_over_tolerance``. ``tolerance`` (relative error) and
        ``min_cosine`` default by precision (1e-4 for float32 regions; 3e-2 and 0.999 with bf16 nodes; 0.1 and
        0.99 with quantized ops).
        ``reference="fp64"`` runs the reference in float64 (native regions are then compared too).
        ``format``: "dict" (the default), "table" (the CLI's text), "json" or "html" (a self-contained page)."""
        self._check_open()
        if reference not in ("native", "fp64"):
            raise InvalidArgument("reference must be 'native' or 'fp64', not %r" % (reference,))
        if format not in ("dict", "table", "json", "html"):
            raise InvalidArgument("format must be 'dict', 'table', 'json' or 'html', not %r" % (format,))
        inputs = self._ordered_inputs(input_feed)
        model = self._variant(inputs)
        table, text, html, _ = model.check(inputs, -1.0 if tolerance is None else float(tolerance),
                                           -1.0 if min_cosine is None else float(min_cosine), reference == "fp64",
                                           self._label)
        return {"dict": lambda: json.loads(text), "table": lambda: table, "json": lambda: text,
                "html": lambda: html}[format]()

    def profile(self, input_feed, runs=10):
        """Runs ``runs`` times and returns what it measured (mean per run): total_ms, nodes (dicts of node,
        op_type, backend, ms), inner_nodes (the nodes inside compiled If / Loop / Scan bodies: dicts of
        node (the one holding it), path below it, op_type, backend, ms; their time is part of their node's,
        a Loop's trips summed), regions (dicts of backend, ms, fallbacks to native for non-finite inputs),
        copies and copy_bytes per run, and the outputs of the last run."""
        self._check_open()
        inputs = self._ordered_inputs(input_feed)
        model = self._variant(inputs)
        outputs, node_ms, region_ms, fallbacks, copies, copy_bytes, inner = model.profile(inputs, int(runs))
        placement = model.placement()
        regions = model.regions()
        nodes = [{"node": p["node"], "op_type": p["op_type"], "backend": p["backend"], "ms": ms / runs}
                 for p, ms in zip(placement, node_ms)]
        inner_nodes = [{"node": placement[row]["node"], "path": path, "op_type": op, "backend": backend,
                        "ms": ms / runs} for row, path, op, backend, ms in inner]
        return {
            "total_ms": sum(region_ms) / runs,
            "nodes": nodes,
            "inner_nodes": inner_nodes,
            "regions": [{"backend": r["backend"], "ms": ms / runs, "fallbacks": f}
                        for r, ms, f in zip(regions, region_ms, fallbacks)],
            "copies": copies / runs,
            "copy_bytes": copy_bytes / runs,
            "outputs": outputs,
        }

    def close(self):
        """Frees the compiled model; runs in flight finish first. Later calls raise InvalidArgument."""
        with self._lock:
            self._closed = True
            if self._fixed is not None:
                self._fixed.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def compile(model, path, backends=None, threads=None, options=None, **overrides):
    """Compiles ``model`` (an ONNX path, bytes or onnx.ModelProto) and writes it to ``path`` as one .tsr
    artifact (plan, constants and every backend's payload), for ``InferenceSession``, ``tessera run`` and
    the C API. Options as for InferenceSession; open dims stay open unless input_shapes fixes them (the
artifact then runs at every shape that fits). Returns path."""
    unknown = set(overrides) - (set(SessionOptions._FIELDS) - {"threads", "backends", "max_variants"})
    if unknown:
        raise InvalidArgument("unknown argument(s): %s" % ", ".join(sorted(unknown)))
    opts = _options_from(backends, threads, options, overrides)
    target = _path(path, "the output path")  # checked before the compile, not after it
    data, source_path, label = _read_model(model)
    if (_tessera.is_artifact_bytes(data) if data is not None else _tessera.is_artifact_file(source_path)):
        raise InvalidArgument("%s is already a compiled artifact" % label)
    native = opts._native()
    compiled = (_tessera.Model.load_bytes(data, label, native) if data is not None
                else _tessera.Model.load_path(source_path, native))
    _warn(compiled)
    try:
        compiled.save(target)
    finally:
        compiled.close()
    return path
