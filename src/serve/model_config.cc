// ModelConfigFile: config.pbtxt (or JSON) → ModelSettings, and back to JSON (model_config.h).
#include "model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/model_config.pb.h"

namespace tessera::serve {

namespace fs = std::filesystem;
namespace pb = tessera::serve::config;

struct ParsedConfig {
  pb::ModelConfig message;
  std::string model_dir;
  std::string name;
  std::vector<std::string> ignored;
};

namespace {

ServeError config_error(const std::string& where, const std::string& what) {
  return ServeError(ErrorKind::kInvalidArgument, where + ": " + what);
}

/// Collects the parser's errors with their places, and its warnings (the unknown fields it skips).
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int line, int column, const std::string& message) override {
    warnings.push_back("line " + std::to_string(line + 1) + ": " + message);
  }
  std::string error;
  std::vector<std::string> warnings;
};

/// "TYPE_FP32" → the protocol's FP32 (TYPE_STRING is BYTES).
const DataType* protocol_type(pb::DataType t) {
  if (t == pb::TYPE_STRING) return data_type_named("BYTES");
  const std::string name = pb::DataType_Name(t);
  return name.rfind("TYPE_", 0) == 0 ? data_type_named(name.substr(5)) : nullptr;
}

pb::DataType config_type(const DataType* t) {
  pb::DataType out = pb::TYPE_INVALID;
  const std::string name = std::string(t->name) == "BYTES" ? "TYPE_STRING" : std::string("TYPE_") + t->name;
  pb::DataType_Parse(name, &out);
  return out;
}

void validate(ParsedConfig& parsed, const std::string& where) {
  const pb::ModelConfig& m = parsed.message;
  if (!m.name().empty() && m.name() != parsed.name) {
    throw config_error(where, "name '" + m.name() + "' differs from the model's directory name '" + parsed.name + "'");
  }
  if (m.max_batch_size() < 0) throw config_error(where, "max_batch_size must be 0 or more");
  for (const pb::ModelInstanceGroup& g : m.instance_group()) {
    if (g.kind() == pb::ModelInstanceGroup::KIND_GPU) {
      throw config_error(where, "instance_group kind KIND_GPU: tessera serve runs on the CPU (use KIND_CPU)");
    }
    if (g.count() < 0 || g.count() > 256) throw config_error(where, "instance_group count must be 0..256");
  }
  for (const pb::ModelWarmup& w : m.model_warmup()) {
    if (m.max_batch_size() > 0 && (w.batch_size() < 1 || static_cast<int>(w.batch_size()) > m.max_batch_size())) {
      throw config_error(where, "model_warmup '" + w.name() + "': batch_size must be 1..max_batch_size");
    }
    for (const auto& [input, spec] : w.inputs()) {
      if (!protocol_type(spec.data_type())) throw config_error(where, "model_warmup '" + w.name() + "' input '" + input + "': no data_type");
      for (int64_t d : spec.dims())
        if (d < 0) throw config_error(where, "model_warmup '" + w.name() + "' input '" + input + "': dims must be 0 or more");
      if (!spec.input_data_file().empty()) {
        const fs::path file(spec.input_data_file());
        if (file.is_absolute() || file.lexically_normal().string().rfind("..", 0) == 0) {
          throw config_error(where, "model_warmup '" + w.name() + "' input '" + input +
                                        "': input_data_file must name a file inside the model's warmup/ directory");
        }
      }
    }
  }
}

}  // namespace

ModelConfigFile::ModelConfigFile() : parsed_(std::make_unique<ParsedConfig>()) {}
ModelConfigFile::ModelConfigFile(ModelConfigFile&&) noexcept = default;
ModelConfigFile& ModelConfigFile::operator=(ModelConfigFile&&) noexcept = default;
ModelConfigFile::~ModelConfigFile() = default;

ModelConfigFile ModelConfigFile::read(const std::string& model_dir, const std::string& name) {
  ModelConfigFile config;
  config.parsed_->model_dir = model_dir;
  config.parsed_->name = name;
  const fs::path path = fs::path(model_dir) / "config.pbtxt";
  std::error_code ec;
  if (!fs::exists(path, ec)) return config;
  if (!fs::is_regular_file(path, ec)) throw config_error(path.string(), "not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw config_error(path.string(), "cannot be read");
  if (text.str().size() > (1 << 20)) throw config_error(path.string(), "larger than 1 MiB");
  google::protobuf::TextFormat::Parser parser;
  Collector collector;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(true);
  if (!parser.ParseFromString(text.str(), &config.parsed_->message)) {
    throw config_error(path.string(), collector.error.empty() ? "cannot be parsed" : collector.error);
  }
  config.parsed_->ignored = collector.warnings;
  validate(*config.parsed_, path.string());
  return config;
}

ModelConfigFile ModelConfigFile::from_json(const std::string& json, const std::string& model_dir, const std::string& name) {
  ModelConfigFile config;
  config.parsed_->model_dir = model_dir;
  config.parsed_->name = name;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &config.parsed_->message, options);
  if (!status.ok()) throw config_error("the load request's config", std::string(status.message()));
  validate(*config.parsed_, "the load request's config");
  return config;
}

const std::vector<std::string>& ModelConfigFile::ignored_fields() const { return parsed_->ignored; }

ModelSettings ModelConfigFile::settings() const {
  const pb::ModelConfig& m = parsed_->message;
  ModelSettings s;
  s.max_batch_size = m.max_batch_size();
  s.dynamic_batching = m.has_dynamic_batching() && m.max_batch_size() > 0;
  if (m.has_dynamic_batching()) {
    const pb::ModelDynamicBatching& b = m.dynamic_batching();
    s.max_queue_delay_us = b.max_queue_delay_microseconds();
    s.preferred_batch_sizes.assign(b.preferred_batch_size().begin(), b.preferred_batch_size().end());
    s.max_queue_size = b.default_queue_policy().max_queue_size();
    s.default_timeout_us = b.default_queue_policy().default_timeout_microseconds();
    s.allow_timeout_override = b.default_queue_policy().allow_timeout_override();
  }
  int instances = 0;
  for (const pb::ModelInstanceGroup& g : m.instance_group()) instances += std::max(1, g.count());
  s.instances = std::max(1, instances);
  std::vector<std::pair<std::string, std::string>> options;
  for (const auto& [key, value] : m.parameters()) options.emplace_back(key, value.string_value());
  std::sort(options.begin(), options.end());
  s.options = options;
  std::mt19937 rng(20261205);
  for (const pb::ModelWarmup& w : m.model_warmup()) {
    ModelSettings::Warmup warmup;
    warmup.name = w.name();
    warmup.count = std::max<int>(1, static_cast<int>(w.count()));
    std::vector<std::string> names;
    for (const auto& entry : w.inputs()) names.push_back(entry.first);
    std::sort(names.begin(), names.end());
    for (const std::string& input : names) {
      const pb::ModelWarmup::Input& spec = w.inputs().at(input);
      std::vector<int64_t> shape(spec.dims().begin(), spec.dims().end());
      if (m.max_batch_size() > 0) shape.insert(shape.begin(), w.batch_size());
      const DataType* type = protocol_type(spec.data_type());
      if (spec.input_data_type_case() == pb::ModelWarmup::Input::kInputDataFile) {
        const fs::path file = fs::path(parsed_->model_dir) / "warmup" / spec.input_data_file();
        std::ifstream in(file, std::ios::binary);
        if (!in) throw config_error(file.string(), "warm-up data cannot be read");
        std::stringstream bytes;
        bytes << in.rdbuf();
        Tensor t;
        t.name = input;
        t.type = type;
        t.shape = shape;
        if (type->element_bytes == 0) {
          throw config_error(file.string(), "warm-up data files for BYTES inputs are not supported");
        }
        const size_t want = static_cast<size_t>(element_count(shape)) * type->element_bytes;
        if (bytes.str().size() != want) {
          throw config_error(file.string(), "holds " + std::to_string(bytes.str().size()) + " bytes; input '" + input +
                                                "' of shape " + shape_text(shape) + " needs " + std::to_string(want));
        }
        own_bytes(t, bytes.str());
        warmup.inputs.push_back(std::move(t));
      } else {
        warmup.inputs.push_back(filled_tensor(input, type, shape, spec.random_data(), rng));
      }
    }
    s.warmups.push_back(std::move(warmup));
  }
  return s;
}

std::string ModelConfigFile::model_file(const std::string& version_dir) const {
  const std::string& named = parsed_->message.default_model_filename();
  if (!named.empty()) return named;
  std::error_code ec;
  if (fs::exists(fs::path(version_dir) / "model.tsr", ec)) return "model.tsr";
  return "model.onnx";
}

std::vector<int64_t> ModelConfigFile::versions_to_serve(const std::vector<int64_t>& present) const {
  const pb::ModelVersionPolicy& policy = parsed_->message.version_policy();
  if (policy.has_all()) return present;
  if (policy.has_specific()) {
    std::vector<int64_t> out;
    for (int64_t v : policy.specific().versions())
      if (std::find(present.begin(), present.end(), v) != present.end()) out.push_back(v);
    std::sort(out.begin(), out.end());
    return out;
  }
  const size_t n = std::max<uint32_t>(1, policy.has_latest() ? policy.latest().num_versions() : 1);
  return std::vector<int64_t>(present.end() - static_cast<std::ptrdiff_t>(std::min(n, present.size())), present.end());
}

void ModelConfigFile::check_against(const std::vector<TensorMetadata>& inputs,
                                   const std::vector<TensorMetadata>& outputs) const {
  const pb::ModelConfig& m = parsed_->message;
  const bool batched = m.max_batch_size() > 0;
  auto check = [&](const char* what, const std::string& name, pb::DataType type, const auto& dims,
                   const std::vector<TensorMetadata>& actual) {
    const std::string where = "model '" + parsed_->name + "': config " + what + " '" + name + "'";
    auto it = std::find_if(actual.begin(), actual.end(), [&](const TensorMetadata& t) { return t.name == name; });
    if (it == actual.end()) throw config_error(where, std::string("the model has no ") + what + " of that name");
    if (type != pb::TYPE_INVALID && protocol_type(type) != it->type) {
      throw config_error(where, std::string("data_type ") + pb::DataType_Name(type) + " but the model's is " + it->type->name);
    }
    std::vector<int64_t> model_dims(it->shape.begin() + (batched && !it->shape.empty() ? 1 : 0), it->shape.end());
    bool same = static_cast<size_t>(dims.size()) == model_dims.size();
    for (int i = 0; same && i < dims.size(); ++i) {
      same = dims.Get(i) == -1 || model_dims[static_cast<size_t>(i)] == -1 || dims.Get(i) == model_dims[static_cast<size_t>(i)];
    }
    if (!dims.empty() && !same) {
      std::vector<int64_t> listed(dims.begin(), dims.end());
      throw config_error(where, "dims " + shape_text(listed) + " but the model's are " + shape_text(model_dims) +
                                    (batched ? " (without the batch dim)" : ""));
    }
  };
  for (const pb::ModelTensor& t : m.input()) check("input", t.name(), t.data_type(), t.dims(), inputs);
  for (const pb::ModelOutputTensor& t : m.output()) check("output", t.name(), t.data_type(), t.dims(), outputs);
}

std::string ModelConfigFile::json(const std::vector<TensorMetadata>& inputs, const std::vector<TensorMetadata>& outputs) const {
  pb::ModelConfig m = parsed_->message;
  m.set_name(parsed_->name);
  if (m.platform().empty() && m.backend().empty()) m.set_backend("tessera");
  const bool batched = m.max_batch_size() > 0;
  auto dims_of = [&](const TensorMetadata& t) {
    std::vector<int64_t> dims(t.shape.begin() + (batched && !t.shape.empty() ? 1 : 0), t.shape.end());
    return dims;
  };
  if (m.input_size() == 0) {
    for (const TensorMetadata& t : inputs) {
      pb::ModelTensor* in = m.add_input();
      in->set_name(t.name);
      in->set_data_type(config_type(t.type));
      for (int64_t d : dims_of(t)) in->add_dims(d);
    }
  }
  if (m.output_size() == 0) {
    for (const TensorMetadata& t : outputs) {
      pb::ModelOutputTensor* out = m.add_output();
      out->set_name(t.name);
      out->set_data_type(config_type(t.type));
      for (int64_t d : dims_of(t)) out->add_dims(d);
    }
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(m, &text, options);
  return text;
}

}  // namespace tessera::serve
