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
import copy
import io
import keyword
import linecache
import os
import pickle
import threading
import warnings
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
    if isinstance(value, dict):
        # {selector: backend} for place, {backend: selector} for deny: the package's one reading of them.
        from . import _strings as package_strings
        return package_strings(value, what)
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} must be a string or a list of strings, got {type(value).__name__}") from None
    for item in items:
        if not isinstance(item, str) or "\n" in item:
            raise TypeError(f"{what} must hold strings without newlines, got {item!r}")
    return items


def _options(backends=None, threads=None, place=None, deny=None, min_region_size=None, strict=False,
             cache_size=None, precision=None, tuning=None):
    """The torch op's option dict (strings; the op sets each through the C API's tsr_options_set, whose
    names these are, plus cache_size)."""
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
    if tuning is not None:
        tuning = os.fspath(tuning)
        if not isinstance(tuning, str) or "\0" in tuning:
            raise ValueError(f"tuning must be a path without NUL characters, got {tuning!r}")
        options["tuning"] = tuning
    return options


def make_model(data, kind="tsr", **options):
    """A ``torch.classes.tessera.Model`` from bytes (or a path).

    kind="tsr": data is a .tsr artifact, or an ONNX model compiled now for its fixed shapes.
    kind="onnx": data is an ONNX model compiled once with its open dims open, for every shape that fits
    them (dynamic axes); only a model with an input of unknown rank is compiled per input shape at run time.
    options: backends, threads, place, deny, min_region_size, strict, cache_size (shapes kept for such a model),
    precision ("fp32", "bf16" or "bf16-all", as the CLI's --precision), tuning (a tuning record's path, as
    ``tessera.tune`` writes it).
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
    Save it with ``torch.jit.save(torch.jit.script(module), path)``: ``torch.save`` and pickle refuse it
    (pickle.PicklingError saying so), as its model is a TorchBind object only TorchScript serializes.
    The outputs never require grad. Errors (wrong number, dtype, shape or device of inputs) raise
    ValueError with Tessera's message; inside TorchScript they surface as ``torch.jit.Error``.
    """

    def __init__(self, model, input_names, output_names):
        super().__init__()
        self.model = model
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.updated_inputs = []  # names of the inputs forward updates in place (see compile)

    def tessera_model(self):
        """The ``torch.classes.tessera.Model`` this module runs."""
        return self.model

    def report(self, format="table"):
        """Tessera's placement report (table, json, dot or html) for the shape run last."""
        return self.model.report(format)

    def extra_repr(self):
        return f"kind={self.model.kind()!r}, inputs={self.input_names}, outputs={self.output_names}"

    def __reduce_ex__(self, protocol):
        # torch.save(module), pickle.dumps(module), multiprocessing: the compiled model is a TorchBind
        # object only TorchScript serializes, and the class is generated per signature; without this the
        # pickler fails on the class name ("attribute lookup TesseraModule0 on tessera.torch failed").
        raise pickle.PicklingError(
            f"{type(self).__name__} (made by tessera.torch.compile) cannot be pickled, so torch.save of it (or "
            "of a module holding it) fails: save it with torch.jit.save(torch.jit.script(module), path) (the "
            "compiled model travels inside the file) and load that with tessera.torch.load(path)")

    # copy.copy and copy.deepcopy go through __reduce_ex__ unless these exist: they copy as nn.Module does
    # (the TorchBind model deep-copies through its own pickle).
    def __copy__(self):
        duplicate = type(self).__new__(type(self))
        duplicate.__setstate__(self.__dict__)
        return duplicate

    def __deepcopy__(self, memo):
        duplicate = type(self).__new__(type(self))
        memo[id(self)] = duplicate
        duplicate.__setstate__(copy.deepcopy(self.__dict__, memo))
        return duplicate


_class_lock = threading.Lock()
_classes = {}


def _module_class(parameters, num_outputs, as_tuple, updated=()):
    """A TesseraModule subclass whose forward takes `parameters` and returns a tensor or a tuple; the
    inputs at the indices `updated` are then overwritten with the model's outputs num_outputs, ... (the
    new values of inputs the original forward updated in place).

    TorchScript needs a fixed signature and reads a method's source, so the class is generated and
    its source registered with linecache (as torch.fx does for GraphModule code).
    """
    key = (tuple(parameters), num_outputs, as_tuple, tuple(updated))
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
                  + "".join(f"        {parameters[i]}.copy_(outputs[{num_outputs + k}])\n"
                            for k, i in enumerate(updated))
                  + f"        return {result}\n")
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


def _same_values(a, b):
    """Whether two tensors of one dtype hold the same values (NaN where the other has NaN too)."""
    if a.shape != b.shape:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())
    return torch.equal(a, b)


def _outputs_structure(module, example_inputs):
    """(number of outputs, returned as a tuple, indices of the inputs the forward updates in place) from
    one eager run in eval mode, without gradients, on copies of the example inputs (left untouched)."""
    with torch.no_grad():
        copies = tuple(x.detach().clone() for x in example_inputs)
    versions = [c._version for c in copies]
    was_training = getattr(module, "training", False)
    if was_training:
        module.eval()
    try:
        with torch.no_grad():
            outputs = module(*copies)
    finally:
        if was_training:
            module.train()
    if isinstance(outputs, torch.Tensor):
        count, as_tuple = 1, False
    elif isinstance(outputs, (tuple, list)) and outputs and all(isinstance(o, torch.Tensor) for o in outputs):
        count, as_tuple = len(outputs), True
    else:
        raise TypeError("tessera.torch.compile: the module must return a tensor or a tuple/list of tensors, "
                        f"got {type(outputs).__name__}")
    # An in-place update (x.add_(1), x[0] = 0, ...) bumps the tensor's version, and torch.onnx.export traces
    # it; one autograd does not see (through .data) changes the values only, and the trace would miss it.
    updated = []
    for i, (given, copy_, version) in enumerate(zip(example_inputs, copies, versions)):
        if copy_.shape != given.shape:
            raise ValueError(f"tessera.torch.compile: the module resizes input {i} in place "
                             f"({tuple(given.shape)} -> {tuple(copy_.shape)}), which an ONNX model cannot express")
        if copy_._version != version:
            updated.append(i)
        elif not _same_values(copy_, given):
            raise ValueError(f"tessera.torch.compile: the module changes input {i} in place without autograd "
                             "seeing it (through .data?), so torch.onnx.export cannot trace the change; update "
                             "it with an in-place op on the tensor itself (x.add_(1)), or out of place")
    return count, as_tuple, updated


def _with_updated_inputs(module, updated):
    """The module to export for one that updates inputs in place: its outputs, then those inputs' new values
    (ONNX has no in-place update of a graph input; the compiled forward copies them back, as eager would).

    A shallow copy of the module (sharing its submodules, parameters and buffers) whose forward calls the
    module's and appends the inputs: the exported node names stay what they are for the module itself
    ("/fc1/Gemm", not "/module/fc1/Gemm"), which place=, deny= and tessera.torch.partition rely on."""
    forward = module.forward

    def forward_and_updated(*inputs):
        outputs = forward(*inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        return tuple(outputs) + tuple(inputs[i] for i in updated)

    wrapper = type(module).__new__(type(module))
    wrapper.__dict__.update(module.__dict__)
    object.__setattr__(wrapper, "forward", forward_and_updated)
    return wrapper


def compile(module, example_inputs, backends=None, dynamic_axes=None, threads=None, *, place=None, deny=None,
            min_region_size=None, strict=False, cache_size=8, input_names=None, output_names=None,
            opset_version=14, precision=None, tuning=None):
    """Compiles `module` with Tessera and returns a :class:`TesseraModule` that runs it.

    module: an ``nn.Module`` (or ScriptModule) that ``torch.onnx.export`` can export; it is exported
        in eval mode (dropout off, batch norm with running statistics) and left as it was.
    example_inputs: a tensor or a tuple of tensors, the inputs the forward takes.
    backends: Tessera backends to use, highest priority first ("dnnl,native" or a list); default: all.
    dynamic_axes: as ``torch.onnx.export`` takes it, keyed by input name or position, e.g.
        ``{0: {0: "batch"}}``: those dims may change from call to call; the model is compiled once,
        now, with them open, and runs every shape that fits without compiling again (`cache_size` is
        accepted for older code). Without dynamic_axes it is compiled for the example shapes only.
    threads: Tessera's intra-op threads (default 1).
    place, deny, min_region_size, strict: Tessera's placement options (see the CLI's --place ...).
    precision: "fp32" (default), "bf16" or "bf16-all" (see the CLI's --precision).
    tuning: the path of a tuning record (``tessera.tune`` on the exported model) whose placement to apply.
    input_names, output_names: names in the exported ONNX model (default input_0..., output_0...).

    The result returns a tensor when the module returns one, a tuple otherwise. Inference only:
    an input that requires grad while grad mode is on raises ValueError (see TesseraModule).

    A forward that updates inputs in place (``x.add_(1)``, ``x[0] = 0``) works as in eager PyTorch: the
    compiled module returns the same values and writes the inputs' new values into the caller's tensors
    (with ``copy_``, after the run; an output is a new tensor, never the input itself). Compiling leaves
    the example inputs untouched.
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
    num_outputs, as_tuple, updated = _outputs_structure(module, example_inputs)
    output_names = list(output_names) if output_names is not None else [f"output_{i}" for i in range(num_outputs)]
    if len(output_names) != num_outputs:
        raise ValueError(f"tessera.torch.compile: {len(output_names)} output names for {num_outputs} outputs")
    # Inputs the forward updates in place come back as extra outputs, named after them.
    update_names = []
    for i in updated:
        name = f"{input_names[i]}_updated"
        while name in input_names or name in output_names or name in update_names:
            name += "_"
        update_names.append(name)

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
        for i, name in zip(updated, update_names):
            if input_names[i] in axes:
                axes[name] = axes[input_names[i]]  # an updated input's new value has the input's shape

    if updated and (isinstance(module, torch.jit.ScriptModule) or not hasattr(module, "__dict__")):
        # torch.onnx.export takes a ScriptModule's graph as it is (no trace to add the new values to as
        # outputs), and a traced wrapper cannot call one (torch 1.13: "not part of the active trace").
        raise ValueError(f"tessera.torch.compile: the ScriptModule updates input(s) {updated} in place, which "
                         "an ONNX model cannot express: compile the Python module (before torch.jit.script), "
                         "or update out of place")
    exported = _with_updated_inputs(module, updated) if updated else module
    buffer = io.BytesIO()
    failure = None
    try:
        with torch.enable_grad(), warnings.catch_warnings():
            # Traced with grad on and floating-point inputs requiring grad: otherwise torch 1.13's
            # TransformerEncoder(Layer) takes its fused inference fast path, which ONNX cannot export.
            # Tracing computes no gradient, and the caller's tensors are left untouched: detached views,
            # or, for a forward that updates inputs in place, copies that are not leaves (clone() of one
            # that requires grad: autograd refuses an in-place update of a leaf that requires grad).
            if updated:
                export_inputs = tuple(x.detach().requires_grad_(True).clone() if x.is_floating_point()
                                      else x.detach().clone() for x in example_inputs)
            else:
                export_inputs = tuple(x.detach().requires_grad_(True) if x.is_floating_point() else x
                                      for x in example_inputs)
            # The updated inputs come back as outputs (_with_updated_inputs): the exporter's warning that it
            # removes their in-place updates from the graph ("This changes graph semantics") is moot.
            warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
            torch.onnx.export(exported, export_inputs, buffer, input_names=input_names,
                              output_names=output_names + update_names, dynamic_axes=axes,
                              opset_version=opset_version, do_constant_folding=True)
    except Exception as error:  # noqa: BLE001  (re-raised below, as ExportError)
        failure = f"{type(error).__name__}: {error}"
    if failure is not None:
        # Raised outside the except block on purpose: the export's traceback holds frames with torch's
        # half-built ONNX graph, and while they live every later torch.onnx.export in the process fails
        # ("Unable to cast from non-held to held instance"). Only the message is kept.
        raise ExportError(f"tessera.torch.compile: torch.onnx.export failed: {failure}")
    options = _options(backends=backends, threads=threads, place=place, deny=deny,
                       min_region_size=min_region_size, strict=strict, cache_size=cache_size,
                       precision=precision, tuning=tuning)
    model = torch.classes.tessera.Model("onnx" if axes else "tsr", buffer.getvalue(), options)
    if len(model.input_names()) != len(example_inputs):
        raise ValueError(f"tessera.torch.compile: the exported model has {len(model.input_names())} inputs "
                         f"({model.input_names()}) for {len(example_inputs)} example inputs; "
                         "torch.onnx.export drops inputs the module does not use")
    cls = _module_class(_parameter_names(input_names), num_outputs, as_tuple, updated)
    compiled = cls(model, model.input_names(), model.output_names()[:num_outputs])
    compiled.updated_inputs = [model.input_names()[i] for i in updated]
    with torch.no_grad():
        # Compiles the example shape now, so errors show here rather than later (on copies of inputs the
        # forward updates: compiling leaves the caller's tensors as they were).
        compiled(*(x.clone() if i in updated else x for i, x in enumerate(example_inputs)))
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
