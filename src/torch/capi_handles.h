// Owning handles for the C API's objects (tsr_status, tsr_options, tsr_model,
// tsr_source, C buffers), so the bridge never leaks one on an early return or
// an exception. Plain C++ over tessera/tessera.h: no torch here.
#ifndef TESSERA_TORCH_CAPI_HANDLES_H_
#define TESSERA_TORCH_CAPI_HANDLES_H_

#include <tessera/tessera.h>

#include <memory>

namespace tessera_torch {

struct StatusDeleter {
  void operator()(tsr_status* status) const { tsr_status_free(status); }
};
struct OptionsDeleter {
  void operator()(tsr_options* options) const { tsr_options_free(options); }
};
struct ModelDeleter {
  void operator()(tsr_model* model) const { tsr_model_free(model); }
};
struct SourceDeleter {
  void operator()(tsr_source* source) const { tsr_source_free(source); }
};
struct BufferDeleter {
  void operator()(void* data) const { tsr_buffer_free(data); }
};
struct StringDeleter {
  void operator()(char* text) const { tsr_string_free(text); }
};

using StatusPtr = std::unique_ptr<tsr_status, StatusDeleter>;
using OptionsPtr = std::unique_ptr<tsr_options, OptionsDeleter>;
using SourcePtr = std::unique_ptr<tsr_source, SourceDeleter>;
using BufferPtr = std::unique_ptr<void, BufferDeleter>;
using StringPtr = std::unique_ptr<char, StringDeleter>;
// Shared: a compiled variant evicted from the cache stays alive until the runs using it finish.
using SharedModel = std::shared_ptr<const tsr_model>;

}  // namespace tessera_torch

#endif  // TESSERA_TORCH_CAPI_HANDLES_H_
