"""Tessera inside PyTorch: a compiled model as a torch op.

``tessera.torch.compile(module, example_inputs)`` exports a module to ONNX in
memory, compiles it with Tessera, and returns an ``nn.Module`` whose forward is
one call of the op ``torch.ops.tessera.run``::

    import tessera.torch
    fast = tessera.torch.compile(model.eval(), torch.randn(1, 3, 224, 224))
    with torch.no_grad():
        y = fast(x)

The op and the model class ``torch.classes.tessera.Model`` live in
``libtessera_torch.so`` (C++ over Tessera's C API), which ``load_library()``
loads; ``compile`` and ``load`` call it for you. Contiguous CPU inputs are read
in place, and outputs are Tessera's own buffers handed to torch through DLPack,
without copies. The returned module can be ``torch.jit.script``-ed or traced,
saved with ``torch.jit.save`` (the compiled model travels inside the file) and
loaded in another process after ``tessera.torch.load_library()`` (or with
``tessera.torch.load(path)``).

This module talks to Tessera only through ``libtessera_torch.so``; it does not
need the ``tessera`` package's own extension.
"""

import builtins
import io
import keyword
import linecache
import os
import threading
from typing import Tuple  # noqa: F401  (used by the generated forward methods)

import torch

__all__ = ["ExportError", "TesseraModule", "compile", "load", "load_library", "library_path", "make_model"]

_LIBRARY_NAME = "libtessera_torch.so"
_library_lock = threading.Lock()
_library_loaded = False


def library_path():
    """The path of libtessera_torch.so: beside this file, in the installed or build-tree package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_NAME)


def load_library():
    """Loads libtessera_torch.so into torch (``torch.ops.tessera``, ``torch.classes.tessera``).

    Idempotent and thread-safe. Call it before ``torch.jit.load`` of a module that uses Tessera.
    """
    global _library_loaded
    with _library_lock:
        if _library_loaded:
            return
        path = library_path()
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} not found: build it with `ninja -C build tessera_torch` (or install Tessera)")
        torch.ops.load_library(path)
        _library_loaded = True


def _strings(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and what == "place":
        return [f"{selector}={backend}" for selector, backend in value.items()]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} must be a string or a list of strings, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str) or "\n" in item:
            raise TypeError(f"{what} must hold strings without newlines, got {item!r}")
    return items


def _options(backends=None, threads=None, place=None, deny=None, min_region_size=None, strict=False,
             cache_size=None, precision=None):
    options = {}
    if backends is not None:
        options["backends"] = ",".join(_strings(backends, "backends"))
    if threads is not None:
        options["threads"] = str(int(threads))
    if place:
        options["place"] = "\n".join(_strings(place, "place"))
    if deny:
        options["deny"] = "\n".join(_strings(deny, "deny"))
    if min_region_size is not None:
        options["min_region_size"] = str(int(min_region_size))
    if strict:
        options["strict"] = "1"
    if cache_size is not None:
        options["cache_size"] = str(int(cache_size))
    if precision is not None:
        options["precision"] = str(precision)
    return options


def make_model(data, kind="tsr", **options):
    """A ``torch.classes.tessera.Model`` from bytes (or a path).

    kind="tsr": data is a .tsr artifact, or an ONNX model compiled now for its fixed shapes.
    kind="onnx": data is an ONNX model compiled per input shape at run time (for dynamic axes).
    options: backends, threads, place, deny, min_region_size, strict, cache_size (compiled shapes kept),
    precision ("fp32", "bf16" or "bf16-all", as the CLI's --precision).
    """
    load_library()
    if isinstance(data, (str, os.PathLike)):
        with open(data, "rb") as f:
            data = f.read()
    return torch.classes.tessera.Model(kind, bytes(data), _options(**options))


class ExportError(RuntimeError):
    """torch.onnx.export could not export the module given to :func:`compile` (the message says why)."""


class TesseraModule(torch.nn.Module):
    """Base of the modules :func:`compile` returns: ``forward`` runs ``torch.ops.tessera.run(self.model, ...)``.

    Inference only: Tessera computes no gradients, so an input that requires grad while grad mode is
    on raises ValueError (run under ``torch.no_grad()`` / ``torch.inference_mode()``, or detach it).
    The outputs never require grad. Errors (wrong number, dtype, shape or device of inputs) raise
    ValueError with Tessera's message; inside TorchScript they surface as ``torch.jit.Error``.
    """

    def __init__(self, model, input_names, output_names):
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def tessera_model(self):
        """The ``torch.classes.tessera.Model`` this module runs."""
        return self.model

    def report(self, format="table"):
        """Tessera's placement report (table, json, dot or html) for the shape run last."""
        return self.model.report(format)

    def extra_repr(self):
        return f"kind={self.model.kind()!r}, inputs={self.input_names}, outputs={self.output_names}"


_class_lock = threading.Lock()
_classes = {}


def _module_class(parameters, num_outputs, as_tuple):
    """A TesseraModule subclass whose forward takes `parameters` and returns a tensor or a tuple.

    TorchScript needs a fixed signature and reads a method's source, so the class is generated and
    its source registered with linecache (as torch.fx does for GraphModule code).
    """
    key = (tuple(parameters), num_outputs, as_tuple)
    with _class_lock:
        if key in _classes:
            return _classes[key]
        name = f"TesseraModule{len(_classes)}"
        signature = ", ".join(f"{p}: torch.Tensor" for p in parameters)
        if as_tuple:
            returns = "Tuple[" + ", ".join(["torch.Tensor"] * num_outputs) + "]"
            result = "(" + "".join(f"outputs[{i}], " for i in range(num_outputs)) + ")"
        else:
            returns, result = "torch.Tensor", "outputs[0]"
        inputs = ", ".join(parameters)
        # Eager Python calls the model's run method, the op's work without the op's Python argument
        # conversion (~4 us a call instead of ~12 in torch 1.13); TorchScript and tracing see the op.
        source = (f"class {name}(TesseraModule):\n"
                  f"    def forward(self, {signature}) -> {returns}:\n"
                  f"        if torch.jit.is_scripting() or torch.jit.is_tracing():\n"
                  f"            outputs = torch.ops.tessera.run(self.model, [{inputs}])\n"
                  f"        else:\n"
                  f"            outputs = self.model.run([{inputs}])\n"
                  f"        return {result}\n")
        filename = f"<tessera.torch generated {name}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = {"torch": torch, "Tuple": Tuple, "TesseraModule": TesseraModule, "__name__": __name__}
        exec(builtins.compile(source, filename, "exec"), namespace)  # noqa: S102
        cls = namespace[name]
        cls.__qualname__ = name
        _classes[key] = cls
        return cls


_RESERVED = {"self", "torch", "Tuple", "TesseraModule", "outputs"}  # names the generated forward uses


def _parameter_names(names):
    """Python parameter names for the generated forward: the input names where they can be, else input_<i>."""
    used, parameters = set(), []
    for i, name in enumerate(names):
        usable = name.isidentifier() and not keyword.iskeyword(name) and name not in _RESERVED
        candidate = name if usable else f"input_{i}"
        while candidate in used:
            candidate += "_"
        used.add(candidate)
        parameters.append(candidate)
    return parameters


def _outputs_structure(module, example_inputs):
    """(number of outputs, returned as a tuple) from one eager run in eval mode, without gradients."""
    was_training = getattr(module, "training", False)
    if was_training:
        module.eval()
    try:
        with torch.no_grad():
            outputs = module(*example_inputs)
    finally:
        if was_training:
            module.train()
    if isinstance(outputs, torch.Tensor):
        return 1, False
    if isinstance(outputs, (tuple, list)) and outputs and all(isinstance(o, torch.Tensor) for o in outputs):
        return len(outputs), True
    raise TypeError("tessera.torch.compile: the module must return a tensor or a tuple/list of tensors, "
                    f"got {type(outputs).__name__}")


def compile(module, example_inputs, backends=None, dynamic_axes=None, threads=None, *, place=None, deny=None,
            min_region_size=None, strict=False, cache_size=8, input_names=None, output_names=None,
            opset_version=14, precision=None):
    """Compiles `module` with Tessera and returns a :class:`TesseraModule` that runs it.

    module: an ``nn.Module`` (or ScriptModule) that ``torch.onnx.export`` can export; it is exported
        in eval mode (dropout off, batch norm with running statistics) and left as it was.
    example_inputs: a tensor or a tuple of tensors, the inputs the forward takes.
    backends: Tessera backends to use, highest priority first ("dnnl,native" or a list); default: all.
    dynamic_axes: as ``torch.onnx.export`` takes it, keyed by input name or position, e.g.
        ``{0: {0: "batch"}}``: those dims may change from call to call. Each new input shape is
        compiled on first use and kept (the `cache_size` most recently used shapes). Without
        dynamic_axes the model is compiled now for the example shapes only.
    threads: Tessera's intra-op threads (default 1).
    place, deny, min_region_size, strict: Tessera's placement options (see the CLI's --place ...).
    precision: "fp32" (default), "bf16" or "bf16-all" (see the CLI's --precision).
    input_names, output_names: names in the exported ONNX model (default input_0..., output_0...).

    The result returns a tensor when the module returns one, a tuple otherwise. Inference only:
    an input that requires grad while grad mode is on raises ValueError (see TesseraModule).
    """
    load_library()
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    for i, value in enumerate(example_inputs):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"tessera.torch.compile: example input {i} is a {type(value).__name__}, not a tensor")
    input_names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(example_inputs))]
    if len(input_names) != len(example_inputs):
        raise ValueError(f"tessera.torch.compile: {len(input_names)} input names for {len(example_inputs)} inputs")
    num_outputs, as_tuple = _outputs_structure(module, example_inputs)
    output_names = list(output_names) if output_names is not None else [f"output_{i}" for i in range(num_outputs)]
    if len(output_names) != num_outputs:
        raise ValueError(f"tessera.torch.compile: {len(output_names)} output names for {num_outputs} outputs")

    axes = None
    if dynamic_axes:
        axes = {}
        for key, value in dynamic_axes.items():
            if isinstance(key, int):
                if not 0 <= key < len(input_names):
                    raise ValueError(f"tessera.torch.compile: dynamic_axes names input {key}, "
                                     f"but there are {len(input_names)} inputs")
                key = input_names[key]
            axes[key] = value

    # Traced with grad on and floating-point inputs requiring grad: otherwise torch 1.13's
    # TransformerEncoder(Layer) takes its fused inference fast path, which ONNX cannot export.
    # Tracing computes no gradient, and the caller's tensors are left untouched (detached views).
    export_inputs = tuple(x.detach().requires_grad_(True) if x.is_floating_point() else x for x in example_inputs)
    buffer = io.BytesIO()
    failure = None
    try:
        with torch.enable_grad():
            torch.onnx.export(module, export_inputs, buffer, input_names=input_names, output_names=output_names,
                              dynamic_axes=axes, opset_version=opset_version, do_constant_folding=True)
    except Exception as error:  # noqa: BLE001  (re-raised below, as ExportError)
        failure = f"{type(error).__name__}: {error}"
    if failure is not None:
        # Raised outside the except block on purpose: the export's traceback holds frames with torch's
        # half-built ONNX graph, and while they live every later torch.onnx.export in the process fails
        # ("Unable to cast from non-held to held instance"). Only the message is kept.
        raise ExportError(f"tessera.torch.compile: torch.onnx.export failed: {failure}")
    options = _options(backends=backends, threads=threads, place=place, deny=deny,
                       min_region_size=min_region_size, strict=strict, cache_size=cache_size,
                       precision=precision)
    model = torch.classes.tessera.Model("onnx" if axes else "tsr", buffer.getvalue(), options)
    if len(model.input_names()) != len(example_inputs):
        raise ValueError(f"tessera.torch.compile: the exported model has {len(model.input_names())} inputs "
                         f"({model.input_names()}) for {len(example_inputs)} example inputs; "
                         "torch.onnx.export drops inputs the module does not use")
    cls = _module_class(_parameter_names(input_names), num_outputs, as_tuple)
    compiled = cls(model, model.input_names(), model.output_names())
    with torch.no_grad():
        compiled(*example_inputs)  # compiles the example shape now, so errors show here rather than later
    return compiled


def load(path, map_location="cpu"):
    """``torch.jit.load`` of a module that uses Tessera (saved with ``torch.jit.save``), after load_library()."""
    load_library()
    return torch.jit.load(path, map_location=map_location)


def __getattr__(name):
    """tessera.torch.partition and its companions, defined in tessera._partition, imported on first use
    (so that importing tessera.torch stays cheap and never depends on torch.fx)."""
    if not name.startswith("__"):
        try:
            from . import _partition
        except ImportError:
            _partition = None
        if name in getattr(_partition, "__all__", ()):
            return getattr(_partition, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
