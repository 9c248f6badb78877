// The runtime's BodyCompiler (backends/native/compiled_body.h): a control-flow
// body compiled as a model of its own with the enclosing model's options.
#pragma once
#include "backends/native/compiled_body.h"
#include "runtime/session.h"

namespace tessera {

/// Compiles bodies with `options`' threads, backends, precision and those of
/// its placement selectors that apply to the body; input shapes, input values,
/// tuning records and dim bounds are the enclosing model's and do not apply.
native::BodyCompiler make_body_compiler(const CompileOptions& options);

}  // namespace tessera
