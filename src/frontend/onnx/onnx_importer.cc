#include "frontend/onnx/onnx_importer.h"

#include <fcntl.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "frontend/onnx/raw_data_spans.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera::onnx_frontend {
namespace {

/// The bytes of the regular file `path`. Opened without blocking, so that a
/// FIFO is refused instead of waited on, and a directory is named as one.
std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    throw_user_error("cannot open '", path, "': ", std::strerror(error));
  }
  std::string data;
  struct stat info {};
  const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  if (regular) {
    data.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    data.resize(done);
  }
  ::close(fd);
  if (!regular) throw_user_error("cannot read '", path, "': ", S_ISDIR(info.st_mode) ? "it is a directory" : "it is not a regular file");
  return data;
}

TensorType tensor_type_from_proto(const onnx::TypeProto::Tensor& tensor_type, const std::string& value_name) {
  TensorType out;
  out.dtype = dtype_from_onnx(tensor_type.elem_type(), value_name);
  if (tensor_type.has_shape()) {
    out.rank_known = true;
    for (const auto& dim : tensor_type.shape().dim()) {
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) throw_user_error("value '", value_name, "' has a negative dimension");
        out.dims.push_back(dim.dim_value());
        out.symbols.emplace_back();
      } else {
        out.dims.push_back(-1);
        out.symbols.push_back(dim.has_dim_param() ? dim.dim_param() : "");
      }
    }
  }
  return out;
}

/// A sequence's element type: a tensor (of unknown type when the model leaves it out).
TensorType sequence_element_from_proto(const onnx::TypeProto::Sequence& sequence, const std::string& value_name) {
  if (!sequence.has_elem_type() || sequence.elem_type().value_case() == onnx::TypeProto::VALUE_NOT_SET) return {};
  if (!sequence.elem_type().has_tensor_type()) {
    throw_unsupported("value '", value_name, "' is a sequence of non-tensors (only sequences of tensors are supported)");
  }
  return tensor_type_from_proto(sequence.elem_type().tensor_type(), value_name);
}

TensorType type_from_proto(const onnx::TypeProto& type, const std::string& value_name) {
  switch (type.value_case()) {
    case onnx::TypeProto::VALUE_NOT_SET: return {};
    case onnx::TypeProto::kTensorType: return tensor_type_from_proto(type.tensor_type(), value_name);
    case onnx::TypeProto::kSequenceType:
      return TensorType::of_kind(ValueKind::kSequence, sequence_element_from_proto(type.sequence_type(), value_name));
    case onnx::TypeProto::kOptionalType: {
      const onnx::TypeProto::Optional& optional = type.optional_type();
      if (!optional.has_elem_type()) throw_user_error("value '", value_name, "' is an optional without an element type");
      const onnx::TypeProto& elem = optional.elem_type();
      if (elem.has_tensor_type()) {
        return TensorType::of_kind(ValueKind::kOptionalTensor, tensor_type_from_proto(elem.tensor_type(), value_name));
      }
      if (elem.has_sequence_type()) {
        return TensorType::of_kind(ValueKind::kOptionalSequence,
                                   sequence_element_from_proto(elem.sequence_type(), value_name));
      }
      throw_unsupported("value '", value_name, "' is an optional of neither a tensor nor a sequence");
    }
    default:
      throw_unsupported("value '", value_name, "' is a ", type.has_map_type() ? "map" : "sparse tensor or other non-tensor",
                        ", which is not supported (tensors, sequences of tensors and optionals are)");
  }
}

class Importer {
 public:
  /// `lifted`: the main graph's initializers' raw_data taken out of the bytes before parsing (null, or
  /// a view per initializer, null where the proto keeps its own).
  Importer(const onnx::ModelProto& model, std::string base_dir, const ImportOptions& options,
           const LiftedRawData* lifted = nullptr)
      : model_(model), base_dir_(std::move(base_dir)), options_(options) {
    if (!lifted) return;
    const onnx::GraphProto& g = model_.graph();
    for (int i = 0; i < g.initializer_size(); ++i) {
      if (lifted->had_raw_data[static_cast<size_t>(i)]) lifted_[&g.initializer(i)] = lifted->raw_data[static_cast<size_t>(i)];
    }
  }

  Graph run() {
    read_opsets();
    if (!model_.has_graph()) throw_user_error("the model has no graph (is this an ONNX file?)");
    const onnx::GraphProto& g = model_.graph();
    graph_.name = g.name();
    read_metadata();
    if (g.sparse_initializer_size() > 0) throw_unsupported("sparse initializers are not supported");

    std::map<std::string, const onnx::TensorProto*> initializers;
    for (const auto& init : g.initializer()) {
      if (init.name().empty()) throw_user_error("an initializer has no name");
      initializers[init.name()] = &init;
    }
    std::set<std::string> input_names;
    for (const auto& input : g.input()) {
      if (input.name().empty()) throw_user_error("a graph input has no name");
      if (!input_names.insert(input.name()).second) throw_user_error("graph input '", input.name(), "' is listed twice");
      auto it = initializers.find(input.name());
      if (it != initializers.end() && options_.freeze_weights) continue;  // becomes a constant below
      TensorType type = type_from_proto(input.type(), input.name());
      if (type.dtype == DType::kUndefined) throw_user_error("graph input '", input.name(), "' has no element type");
      ValueId id = graph_.add_value(input.name(), type);
      graph_.inputs.push_back(id);
      if (it != initializers.end()) {
        // An input with a default value that is fed at run time: its type comes from the initializer.
        Tensor t = initializer_tensor(*it->second);
        graph_.value(id).type = TensorType::make(t.dtype(), t.shape());
      }
    }
    for (const auto& [name, proto] : initializers) {
      if (graph_.find_value(name) != kNoValue) continue;
      graph_.add_constant(name, initializer_tensor(*proto));
    }
    Scope scope{&graph_, nullptr, {}};
    std::vector<const onnx::NodeProto*> order = topological_order(g, graph_, false);
    for (size_t k = 0; k < order.size(); ++k) import_node(*order[k], k, scope);
    for (const auto& output : g.output()) {
      ValueId id = graph_.find_value(output.name());
      if (id == kNoValue) throw_user_error("graph output '", output.name(), "' is not produced by any node, initializer or input");
      if (std::find(graph_.outputs.begin(), graph_.outputs.end(), id) != graph_.outputs.end()) {
        throw_unsupported("graph output '", output.name(), "' is listed twice");
      }
      // The declared type stands in for a node output's type until inference
      // (so that an imported, not yet compiled model can describe its outputs).
      if (graph_.value(id).type.dtype == DType::kUndefined && !graph_.is_constant(id) && output.has_type()) {
        graph_.value(id).type = type_from_proto(output.type(), output.name());
      }
      graph_.outputs.push_back(id);
    }
    if (graph_.outputs.empty()) throw_user_error("the graph has no outputs");
    return std::move(graph_);
  }

 private:
  void read_opsets() {
    for (const auto& opset : model_.opset_import()) {
      std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
      opsets_[domain] = static_cast<int>(opset.version());
    }
    if (model_.opset_import_size() == 0) opsets_[""] = 1;  // IR version 1-2 models
    auto it = opsets_.find("");
    if (it != opsets_.end() && (it->second < 1 || it->second > 17)) {
      throw_unsupported("the model uses ONNX opset ", it->second, "; Tessera supports opsets 7 to 17");
    }
  }

  void read_metadata() {
    if (!model_.producer_name().empty()) graph_.metadata["producer_name"] = model_.producer_name();
    if (!model_.producer_version().empty()) graph_.metadata["producer_version"] = model_.producer_version();
    if (!model_.domain().empty()) graph_.metadata["domain"] = model_.domain();
    if (model_.model_version()) graph_.metadata["model_version"] = std::to_string(model_.model_version());
    if (!model_.doc_string().empty()) graph_.metadata["doc_string"] = model_.doc_string();
    graph_.metadata["ir_version"] = std::to_string(model_.ir_version());
    for (const auto& prop : model_.metadata_props()) graph_.metadata[prop.key()] = prop.value();
  }

  /// One graph being imported and its enclosing graphs. A name a subgraph
  /// reads from an enclosing graph becomes an input of the subgraph (a
  /// capture), listed in `captures` in first-use order after the formal inputs.
  struct Scope {
    Graph* graph;
    Scope* parent;
    std::vector<std::string> captures;
  };
  struct Subgraph {
    Graph* graph;
    std::vector<std::string> captures;
  };

  /// The value `name` as seen from scope's graph, capturing it through every
  /// enclosing subgraph between its definition and here.
  ValueId resolve(const std::string& name, Scope& scope, const std::string& where) {
    ValueId id = scope.graph->find_value(name);
    if (id != kNoValue) return id;
    if (!scope.parent) {
      throw_user_error(where, ": input '", name,
                       "' is not produced by any node, initializer or graph input (of this graph or an enclosing one)");
    }
    ValueId outer = resolve(name, *scope.parent, where);
    ValueId inner = scope.graph->add_value(name, scope.parent->graph->value(outer).type);
    scope.graph->inputs.push_back(inner);
    scope.captures.push_back(name);
    return inner;
  }

  /// Appends the outer values the node's subgraphs capture to its inputs, after
  /// the formal ones, and gives every subgraph inputs for all of them in that
  /// one order (If's branches share one capture list).
  void append_captures(Node& node, std::vector<Subgraph>& subgraphs, Scope& scope, const std::string& where) {
    std::vector<std::string> all;
    for (const Subgraph& sub : subgraphs) {
      for (const std::string& name : sub.captures) {
        if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
      }
    }
    for (Subgraph& sub : subgraphs) {
      Graph& g = *sub.graph;
      std::vector<ValueId> inputs(g.inputs.begin(), g.inputs.end() - static_cast<ptrdiff_t>(sub.captures.size()));
      for (const std::string& name : all) {
        ValueId id = g.find_value(name);
        if (id == kNoValue) id = g.add_value(name);
        inputs.push_back(id);
      }
      g.inputs = std::move(inputs);
    }
    node.attrs.set("tessera_formal_inputs", Attribute::of_int(static_cast<int64_t>(node.inputs.size())));
    for (const std::string& name : all) node.inputs.push_back(resolve(name, scope, where));
  }

  Graph import_subgraph(const onnx::GraphProto& g, const std::string& where, Scope& parent,
                        std::vector<std::string>& captures) {
    Graph sub;
    sub.name = g.name();
    if (g.sparse_initializer_size() > 0) throw_unsupported(where, ": sparse initializers are not supported");
    for (const auto& input : g.input()) {
      if (input.name().empty()) throw_user_error(where, ": a subgraph input has no name");
      if (sub.find_value(input.name()) != kNoValue) throw_user_error(where, ": subgraph input '", input.name(), "' is listed twice");
      sub.inputs.push_back(sub.add_value(input.name(), type_from_proto(input.type(), input.name())));
    }
    for (const auto& init : g.initializer()) {
      if (init.name().empty()) throw_user_error(where, ": a subgraph initializer has no name");
      if (sub.find_value(init.name()) == kNoValue) sub.add_constant(init.name(), tensor_from_proto(init, base_dir_));
    }
    Scope scope{&sub, &parent, {}};
    std::vector<const onnx::NodeProto*> order = topological_order(g, sub, true);
    for (size_t k = 0; k < order.size(); ++k) import_node(*order[k], k, scope);
    for (const auto& output : g.output()) {
      ValueId id = resolve(output.name(), scope, where);
      TensorType declared = type_from_proto(output.type(), output.name());
      // The declared type stands in for a node output's type until inference.
      if (sub.value(id).type.dtype == DType::kUndefined && !sub.is_constant(id)) sub.value(id).type = declared;
      sub.outputs.push_back(id);
    }
    if (sub.outputs.empty()) throw_user_error(where, ": the subgraph has no outputs");
    captures = std::move(scope.captures);
    return sub;
  }

  /// Names a node's subgraphs (at any depth) read but do not define.
  static void collect_free_names(const onnx::GraphProto& g, std::set<std::string>& out) {
    std::set<std::string> defined;
    for (const auto& input : g.input()) defined.insert(input.name());
    for (const auto& init : g.initializer()) defined.insert(init.name());
    for (const auto& node : g.node()) defined.insert(node.output().begin(), node.output().end());
    std::set<std::string> used;
    for (const auto& node : g.node()) {
      for (const auto& in : node.input()) {
        if (!in.empty()) used.insert(in);
      }
      for (const auto& a : node.attribute()) {
        if (a.type() == onnx::AttributeProto::GRAPH) collect_free_names(a.g(), used);
      }
    }
    for (const auto& output : g.output()) used.insert(output.name());
    for (const std::string& name : used) {
      if (!defined.count(name)) out.insert(name);
    }
  }
  static std::set<std::string> subgraph_free_names(const onnx::NodeProto& node) {
    std::set<std::string> out;
    for (const auto& a : node.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) collect_free_names(a.g(), out);
    }
    return out;
  }

  /// ONNX requires nodes to be sorted; accept unsorted graphs too, and name the
  /// value when an input is never produced (or a cycle exists). A node with
  /// subgraphs also waits for the values of this graph its subgraphs read.
  std::vector<const onnx::NodeProto*> topological_order(const onnx::GraphProto& g, const Graph& graph, bool nested) {
    std::set<std::string> available;
    for (const Value& v : graph.values) available.insert(v.name);
    std::set<std::string> produced_here;
    for (const auto& node : g.node()) {
      for (const auto& out : node.output()) produced_here.insert(out);
    }
    std::vector<const onnx::NodeProto*> pending;
    for (const auto& node : g.node()) pending.push_back(&node);
    std::vector<const onnx::NodeProto*> order;
    while (!pending.empty()) {
      std::vector<const onnx::NodeProto*> still;
      for (const onnx::NodeProto* node : pending) {
        bool ready = true;
        // In a subgraph, names not produced here come from enclosing graphs; they
        // are resolved, or reported, on import.
        for (const auto& in : node->input()) {
          ready &= in.empty() || available.count(in) > 0 || (nested && !produced_here.count(in));
        }
        for (const std::string& in : subgraph_free_names(*node)) {
          ready &= available.count(in) > 0 || !produced_here.count(in);
        }
        if (!ready) {
          still.push_back(node);
          continue;
        }
        order.push_back(node);
        for (const auto& out : node->output()) {
          if (!out.empty()) available.insert(out);
        }
      }
      if (still.size() == pending.size()) {
        const onnx::NodeProto& node = *still.front();
        for (const auto& in : node.input()) {
          if (!in.empty() && !available.count(in)) {
            throw_user_error("node '", node.name().empty() ? node.op_type() : node.name(), "' (", node.op_type(),
                             "): input '", in, "' is not produced by any node, initializer or graph input",
                             still.size() > 1 ? " (or the graph has a cycle)" : "");
          }
        }
      }
      pending = std::move(still);
    }
    return order;
  }

  Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& where) {
    switch (a.type()) {
      case onnx::AttributeProto::INT: return Attribute::of_int(a.i());
      case onnx::AttributeProto::FLOAT: return Attribute::of_float(a.f());
      case onnx::AttributeProto::STRING: return Attribute::of_string(a.s());
      case onnx::AttributeProto::INTS: return Attribute::of_ints({a.ints().begin(), a.ints().end()});
      case onnx::AttributeProto::FLOATS: return Attribute::of_floats({a.floats().begin(), a.floats().end()});
      case onnx::AttributeProto::STRINGS: {
        Attribute out;
        out.kind = Attribute::Kind::kStrings;
        out.strings.assign(a.strings().begin(), a.strings().end());
        return out;
      }
      case onnx::AttributeProto::TENSOR: return Attribute::of_tensor(tensor_from_proto(a.t(), base_dir_));
      case onnx::AttributeProto::TYPE_PROTO: return Attribute::of_ints(encode_type_attribute(type_from_proto(a.tp(), a.name())));
      case onnx::AttributeProto::GRAPHS:
        throw_unsupported(where, ": attribute '", a.name(), "' is a list of subgraphs, which is not supported");
      default:
        throw_unsupported(where, ": attribute '", a.name(), "' has an unsupported kind (", static_cast<int>(a.type()), ")");
    }
  }

  std::string node_name(const onnx::NodeProto& proto, size_t index) {
    std::string base = proto.name().empty() ? proto.op_type() + "_" + std::to_string(index) : proto.name();
    std::string name = base;
    for (int i = 1; node_names_.count(name); ++i) name = base + "_" + std::to_string(i);
    node_names_.insert(name);
    return name;
  }

  void import_node(const onnx::NodeProto& proto, size_t index, Scope& scope) {
    Graph& graph = *scope.graph;  // the graph this node belongs to (a subgraph, or the main graph)
    Node node;
    node.name = node_name(proto, index);
    node.op_type = proto.op_type();
    node.domain = proto.domain() == "ai.onnx" ? "" : proto.domain();
    auto opset = opsets_.find(node.domain);
    if (opset == opsets_.end()) {
      throw_user_error(node.describe(), ": domain '", node.domain, "' is not in the model's opset imports");
    }
    node.opset = opset->second;
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) {
      throw_unsupported(node.describe(), ": unknown op '", node.op_type, "'",
                        node.domain.empty() ? std::string() : " in domain '" + node.domain + "'", " (opset ", node.opset,
                        ")");
    }
    if (node.opset < schema->min_opset || node.opset > schema->max_opset) {
      throw_unsupported(node.describe(), ": opset ", node.opset, " is not supported for ", node.op_type, " (supported: ",
                        schema->min_opset, " to ", schema->max_opset, ")");
    }
    std::string where = node.describe() + " (opset " + std::to_string(node.opset) + ")";
    std::vector<Subgraph> subgraphs;
    for (const auto& a : proto.attribute()) {
      if (!a.ref_attr_name().empty()) throw_unsupported(where, ": attribute references are only valid inside functions");
      if (a.type() == onnx::AttributeProto::GRAPH) {
        Attribute attr;
        attr.kind = Attribute::Kind::kGraph;
        std::vector<std::string> captures;
        attr.graph = std::make_shared<Graph>(import_subgraph(a.g(), where + " attribute '" + a.name() + "'", scope, captures));
        subgraphs.push_back({attr.graph.get(), std::move(captures)});
        node.attrs.set(a.name(), std::move(attr));
        continue;
      }
      node.attrs.set(a.name(), convert_attribute(a, where));
    }
    for (const AttributeSpec& spec : schema->attributes) {
      const Attribute* a = node.attrs.find(spec.name);
      if (!a) {
        if (spec.required) throw_user_error(where, ": required attribute '", spec.name, "' is missing");
        if (spec.default_value) node.attrs.set(spec.name, *spec.default_value);
      } else if (a->kind != spec.kind) {
        // ONNX allows an int where a float is expected in some exporters; convert that one case.
        if (spec.kind == Attribute::Kind::kFloat && a->kind == Attribute::Kind::kInt) {
          node.attrs.set(spec.name, Attribute::of_float(static_cast<float>(a->i)));
        } else {
          throw_user_error(where, ": attribute '", spec.name, "' is ", attribute_kind_name(a->kind), ", expected ",
                           attribute_kind_name(spec.kind));
        }
      }
    }
    int n_in = proto.input_size();
    while (n_in > 0 && proto.input(n_in - 1).empty()) --n_in;  // trailing omitted optionals
    if (n_in < schema->min_inputs || n_in > schema->max_inputs) {
      throw_user_error(where, ": has ", n_in, " inputs, expected ", schema->min_inputs,
                       schema->max_inputs != schema->min_inputs ? " to " + std::to_string(schema->max_inputs) : "");
    }
    for (int i = 0; i < n_in; ++i) {
      const std::string& in = proto.input(i);
      node.inputs.push_back(in.empty() ? kNoValue : resolve(in, scope, where));
    }
    if (!subgraphs.empty()) append_captures(node, subgraphs, scope, where);
    int n_out = proto.output_size();
    if (n_out < schema->min_outputs || n_out > schema->max_outputs) {
      throw_user_error(where, ": has ", n_out, " outputs, expected ", schema->min_outputs,
                       schema->max_outputs != schema->min_outputs ? " to " + std::to_string(schema->max_outputs) : "");
    }
    for (int i = 0; i < n_out; ++i) {
      const std::string& out = proto.output(i);
      if (out.empty()) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      if (graph.find_value(out) != kNoValue) throw_user_error(where, ": output '", out, "' is already defined elsewhere");
      node.outputs.push_back(graph.add_value(out));
    }
    if (schema->normalize) schema->normalize(graph, node);
    graph.nodes.push_back(std::move(node));
  }

  Tensor initializer_tensor(const onnx::TensorProto& proto) const {
    auto it = lifted_.find(&proto);
    return tensor_from_proto(proto, base_dir_, it == lifted_.end() ? nullptr : &it->second);
  }

  const onnx::ModelProto& model_;
  std::map<const onnx::TensorProto*, std::string_view> lifted_;
  std::string base_dir_;
  ImportOptions options_;
  Graph graph_;
  std::map<std::string, int> opsets_;
  std::set<std::string> node_names_;
};

}  // namespace

namespace {

Graph import_onnx_span(const char* bytes, size_t size, const std::string& base_dir, const ImportOptions& options) {
  onnx::ModelProto model;
  if (size > static_cast<size_t>(INT32_MAX)) throw_unsupported("models over 2 GiB must use external data");
  // The weights' bytes stay where they are (the file mapping) until each is copied into its tensor.
  LiftedRawData lifted;
  if (lift_initializer_raw_data(bytes, size, &lifted) &&
      model.ParseFromArray(lifted.stripped.data(), static_cast<int>(lifted.stripped.size())) &&
      static_cast<size_t>(model.graph().initializer_size()) == lifted.raw_data.size()) {
    lifted.stripped = std::string();
    return Importer(model, base_dir, options, &lifted).run();
  }
  model.Clear();
  if (!model.ParseFromArray(bytes, static_cast<int>(size))) {
    throw_user_error("not a valid ONNX model: the protobuf is malformed or truncated");
  }
  return Importer(model, base_dir, options).run();
}

/// A regular file mapped read-only for the length of an import (the protobuf parser reads it in place: no
/// zero-filled copy of the whole file first), or nothing where it cannot be (not regular, empty).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat info {};
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
      void* data = ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (data != MAP_FAILED) {
        data_ = data;
        size_ = static_cast<size_t>(info.st_size);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& options) {
  return import_onnx_span(bytes.data(), bytes.size(), base_dir, options);
}

Graph import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  try {
    MappedFile mapped(path);
    if (mapped.data()) return import_onnx_span(mapped.data(), mapped.size(), dir, options);
    const std::string bytes = read_file(path);  // what cannot be mapped: its errors name why
    return import_onnx_bytes(bytes, dir, options);
  } catch (const Error& e) {
    throw Error(e.kind(), path + ": " + e.what());
  }
}

Tensor load_tensor_proto_file(const std::string& path) {
  std::string bytes = read_file(path);
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw_user_error(path, ": not a valid TensorProto");
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(proto, dir.empty() ? "." : dir);
}

namespace {

BoxedValue boxed_from_sequence(const onnx::SequenceProto& proto, const std::string& path, const std::string& dir) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR) {
    throw_unsupported(path, ": a sequence of non-tensors (elem_type ", proto.elem_type(), ") is not supported");
  }
  BoxedValue box;
  for (const auto& t : proto.tensor_values()) box.items.push_back(tensor_from_proto(t, dir));
  return box;
}

}  // namespace

BoxedValue load_boxed_proto_file(const std::string& path, ValueKind kind) {
  std::string bytes = read_file(path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (kind == ValueKind::kSequence) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) throw_user_error(path, ": not a valid SequenceProto");
    return boxed_from_sequence(proto, path, dir);
  }
  if (kind != ValueKind::kOptionalTensor && kind != ValueKind::kOptionalSequence) {
    throw_internal_error("load_boxed_proto_file: ", value_kind_name(kind), " is not boxed");
  }
  onnx::OptionalProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) throw_user_error(path, ": not a valid OptionalProto");
  BoxedValue box;
  box.kind = kind;
  switch (proto.elem_type()) {
    case onnx::OptionalProto::UNDEFINED: box.present = false; return box;
    case onnx::OptionalProto::TENSOR:
      if (kind != ValueKind::kOptionalTensor) throw_user_error(path, ": holds a tensor, but an optional sequence is expected");
      if (!proto.has_tensor_value()) {
        box.present = false;
      } else {
        box.items.push_back(tensor_from_proto(proto.tensor_value(), dir));
      }
      return box;
    case onnx::OptionalProto::SEQUENCE:
      if (kind != ValueKind::kOptionalSequence) throw_user_error(path, ": holds a sequence, but an optional tensor is expected");
      if (!proto.has_sequence_value()) {
        box.present = false;
        return box;
      }
      box.items = boxed_from_sequence(proto.sequence_value(), path, dir).items;
      return box;
    default:
      throw_unsupported(path, ": an optional of elem_type ", proto.elem_type(), " is not supported");
  }
}

}  // namespace tessera::onnx_frontend
