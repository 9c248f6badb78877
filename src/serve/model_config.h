// A served model's configuration: REPO/MODEL/config.pbtxt in protobuf text format
// (model_config.proto, Triton's field names), or JSON of the same message given to
// the repository load call. Turns it into ModelSettings; renders it as JSON for
// GET .../config.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "served_model.h"

namespace tessera::serve {

struct ParsedConfig;  // holds the protobuf message (model_config.cc)

class ModelConfigFile {
 public:
  /// The configuration of the model in `model_dir` named `name`: config.pbtxt when
  /// present, defaults otherwise. Throws ServeError (INVALID_ARGUMENT) naming the
  /// file, line and column of a parse error, or the field with a bad value.
  static ModelConfigFile read(const std::string& model_dir, const std::string& name);
  /// The same from JSON text (the load call's "config" parameter).
  static ModelConfigFile from_json(const std::string& json, const std::string& model_dir, const std::string& name);

  ModelConfigFile(ModelConfigFile&&) noexcept;
  ModelConfigFile& operator=(ModelConfigFile&&) noexcept;
  ~ModelConfigFile();

  /// The settings a version loads with; warm-up data files are read from model_dir/warmup.
  ModelSettings settings() const;
  /// The file name a version directory holds ("model.tsr" when present there, else "model.onnx",
  /// or default_model_filename).
  std::string model_file(const std::string& version_dir) const;
  /// The versions to serve among those present (sorted ascending), by the version policy
  /// (default: the latest one).
  std::vector<int64_t> versions_to_serve(const std::vector<int64_t>& present) const;
  /// The configuration as JSON (Triton's field names), with the inputs and outputs
  /// filled in from the model when the file lists none.
  std::string json(const std::vector<TensorMetadata>& inputs, const std::vector<TensorMetadata>& outputs) const;
  /// The inputs and outputs the configuration lists (if any) must be the model's, with
  /// its datatypes and dims (-1 matching any; without the batch dim when max_batch_size > 0).
  /// Throws ServeError naming the tensor.
  void check_against(const std::vector<TensorMetadata>& inputs, const std::vector<TensorMetadata>& outputs) const;
  /// Fields of the text that Tessera does not use (skipped when parsed).
  const std::vector<std::string>& ignored_fields() const;

 private:
  ModelConfigFile();
  std::unique_ptr<ParsedConfig> parsed_;
};

}  // namespace tessera::serve
