// tessera._tessera: the Python bindings, over the C API only (tessera/tessera.h),
// never the core's internals. The user-facing API (InferenceSession, compile,
// per-shape variants, the exceptions) is python/tessera/__init__.py; this file
// converts tensors and errors:
//  - inputs: numpy arrays are read in place through the buffer they expose;
//    objects with __dlpack__ are consumed as DLPack capsules and read in
//    place; both are copied (and counted, copy_count()) only when not compact
//    row-major, not aligned to their element size or not in native byte order;
//  - outputs: Tessera allocates them (tsr_model_run_alloc) and they are handed
//    over without a copy, as numpy arrays owning the memory, or as Tensor
//    objects that export it through __dlpack__ (any number of times: every
//    export shares the one allocation, freed when the last holder lets go);
//  - models with sequence, optional or string inputs or outputs (which
//    tsr_model_run refuses) run through tsr_model_run_values instead: lists
//    become sequences, None an empty optional, numpy str (or object-of-str)
//    arrays string tensors, numeric tensors are copied into tsr_values; outputs
//    come back as lists (sequences), None (empty optionals) and numpy str
//    arrays; the tensors of sequences and optionals are copied out (values are
//    immutable and may share tensors), plain tensor outputs handed over as above;
//  - every tsr_status becomes an exception of the package's classes (set at
//    import by set_error_types), with the C API's message;
//  - the GIL is released while a model runs, and a model stays alive until
//    its last run returns even when its session is closed meanwhile.
//
// The module is split along those seams: python/binding/binding.h (what the
// files share), binding_common.cc (errors, dtypes, options, module functions),
// binding_values.cc (inputs, outputs, tsr_values), binding_model.cc (Model,
// Source, quantize, tune).
#include "binding/binding.h"

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's bindings over its C API (use the tessera package, not this module)";
  tessera_py::bind_common(m);
  tessera_py::bind_values(m);
  tessera_py::bind_model(m);
}
