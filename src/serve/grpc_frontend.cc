// gRPC service implementation (grpc_frontend.h): request and response conversion
// between inference.proto's messages and serve_types, typed contents or raw bytes.
#include "grpc_frontend.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <condition_variable>
#include <cstring>
#include <limits>
#include <thread>

#include "proto/inference.grpc.pb.h"

namespace tessera::serve {

namespace {

using grpc::ServerContext;
using grpc::Status;
namespace pb = ::inference;

Status status_of(const ServeError& e) { return Status(static_cast<grpc::StatusCode>(grpc_code_of(e.kind)), e.what()); }

template <typename F>
Status guarded(F&& body) {
  try {
    body();
    return Status::OK;
  } catch (const ServeError& e) {
    return status_of(e);
  } catch (const std::exception& e) {
    return status_of(ServeError(ErrorKind::kInternal, e.what()));
  }
}

bool has_typed(const pb::InferTensorContents& c) {
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() || c.uint_contents_size() ||
         c.uint64_contents_size() || c.fp32_contents_size() || c.fp64_contents_size() || c.bytes_contents_size();
}

/// Typed contents → the datatype's bytes, checking the field, the count and each value's range.
std::string typed_bytes(const pb::ModelInferRequest::InferInputTensor& in, const DataType& type, int64_t n) {
  const pb::InferTensorContents& c = in.contents();
  const DLDataType dl = type.dl;
  std::string bytes(static_cast<size_t>(n) * type.element_bytes, '\0');
  auto need = [&](int size, const char* field) {
    if (size != n) {
      invalid_argument("input '" + in.name() + "': " + field + " has " + std::to_string(size) + " values; shape needs " + std::to_string(n) +
          " (datatype " + type.name + " is sent in " + field + ")");
    }
  };
  auto store = [&](int64_t i, auto value) { std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(value)), &value, sizeof(value)); };
  auto range = [&](int64_t v, int64_t lo, int64_t hi, int64_t i) {
    if (v < lo || v > hi) invalid_argument("input '" + in.name() + "': value " + std::to_string(v) + " at " + std::to_string(i) + " is out of range for " + type.name);
  };
  const std::string name = type.name;
  if (n == 0 && !has_typed(c)) return bytes;  // nothing to send, in any form
  if (name == "BOOL") {
    need(c.bool_contents_size(), "bool_contents");
    for (int64_t i = 0; i < n; ++i) bytes[static_cast<size_t>(i)] = c.bool_contents(static_cast<int>(i)) ? 1 : 0;
  } else if (name == "FP32") {
    need(c.fp32_contents_size(), "fp32_contents");
    std::memcpy(bytes.data(), c.fp32_contents().data(), bytes.size());
  } else if (name == "FP64") {
    need(c.fp64_contents_size(), "fp64_contents");
    std::memcpy(bytes.data(), c.fp64_contents().data(), bytes.size());
  } else if (name == "INT64") {
    need(c.int64_contents_size(), "int64_contents");
    std::memcpy(bytes.data(), c.int64_contents().data(), bytes.size());
  } else if (name == "UINT64") {
    need(c.uint64_contents_size(), "uint64_contents");
    std::memcpy(bytes.data(), c.uint64_contents().data(), bytes.size());
  } else if (dl.code == kDLInt) {
    need(c.int_contents_size(), "int_contents");
    const int64_t hi = (int64_t{1} << (dl.bits - 1)) - 1;
    for (int64_t i = 0; i < n; ++i) {
      const int32_t v = c.int_contents(static_cast<int>(i));
      range(v, -hi - 1, hi, i);
      if (dl.bits == 8) store(i, static_cast<int8_t>(v));
      else if (dl.bits == 16) store(i, static_cast<int16_t>(v));
      else store(i, v);
    }
  } else if (dl.code == kDLUInt) {
    need(c.uint_contents_size(), "uint_contents");
    const int64_t hi = (int64_t{1} << dl.bits) - 1;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t v = c.uint_contents(static_cast<int>(i));
      range(v, 0, hi, i);
      if (dl.bits == 8) store(i, static_cast<uint8_t>(v));
      else if (dl.bits == 16) store(i, static_cast<uint16_t>(v));
      else store(i, v);
    }
  } else {
    invalid_argument("input '" + in.name() + "': " + name + " has no typed contents; send it in raw_input_contents");
  }
  return bytes;
}

InferRequest request_from_proto(const pb::ModelInferRequest& req) {
  InferRequest out;
  out.id = req.id();
  for (const auto& [key, p] : req.parameters()) {
    if (key == "timeout") {
      if (p.parameter_choice_case() == pb::InferParameter::kInt64Param && p.int64_param() >= 0) out.timeout_us = static_cast<uint64_t>(p.int64_param());
      else if (p.parameter_choice_case() == pb::InferParameter::kUint64Param) out.timeout_us = p.uint64_param();
      else invalid_argument("parameter 'timeout' must be microseconds, an integer 0 or more");
    }
  }
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != req.inputs_size()) {
    invalid_argument("raw_input_contents has " + std::to_string(req.raw_input_contents_size()) + " entries for " +
        std::to_string(req.inputs_size()) + " inputs; it needs one per input, in order");
  }
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    Tensor t;
    t.name = in.name();
    t.type = data_type_named(in.datatype());
    if (!t.type) invalid_argument("input '" + t.name + "': unknown datatype '" + in.datatype() + "'");
    if (in.shape_size() > 32) invalid_argument("input '" + t.name + "': more than 32 dims");
    int64_t n = 1;
    for (int64_t d : in.shape()) {
      if (d < 0) invalid_argument("input '" + t.name + "': dims must be 0 or more");
      if (d != 0 && n > (int64_t{1} << 40) / d) invalid_argument("input '" + t.name + "': shape is too large");
      n *= d;
      t.shape.push_back(d);
    }
    if (raw) {
      if (has_typed(in.contents())) invalid_argument("input '" + t.name + "' has both contents and raw_input_contents");
      const std::string& bytes = req.raw_input_contents(i);
      if (t.type->element_bytes == 0) {
        t.strings = split_bytes_elements(bytes.data(), bytes.size(), t.name);
        if (static_cast<int64_t>(t.strings.size()) != n) invalid_argument("input '" + t.name + "' has " + std::to_string(t.strings.size()) + " BYTES elements; shape needs " + std::to_string(n));
      } else {
        if (bytes.size() != static_cast<size_t>(n) * t.type->element_bytes) {
          invalid_argument("input '" + t.name + "': raw_input_contents has " + std::to_string(bytes.size()) + " bytes; " + t.type->name +
              " of shape " + shape_text(t.shape) + " needs " + std::to_string(static_cast<size_t>(n) * t.type->element_bytes));
        }
        t.data = bytes.data();  // the request message outlives the call
        t.bytes = bytes.size();
      }
    } else if (t.type->element_bytes == 0) {
      const auto& c = in.contents().bytes_contents();
      if (c.size() != n) invalid_argument("input '" + t.name + "': bytes_contents has " + std::to_string(c.size()) + " values; shape needs " + std::to_string(n));
      t.strings.assign(c.begin(), c.end());
    } else {
      own_bytes(t, typed_bytes(in, *t.type, n));
    }
    out.inputs.push_back(std::move(t));
  }
  for (const auto& o : req.outputs()) {
    if (o.parameters().count("classification")) {
      throw ServeError(ErrorKind::kUnsupported, "output '" + o.name() + "': the classification extension is not supported");
    }
    out.outputs.push_back({o.name(), false});
  }
  return out;
}

void fill_typed(const Tensor& t, pb::InferTensorContents* c) {
  if (t.type->element_bytes == 0) {
    for (const std::string& s : t.strings) c->add_bytes_contents(s);
    return;
  }
  const int64_t n = element_count(t.shape);
  const DLDataType dl = t.type->dl;
  const std::string name = t.type->name;
  auto load = [&](auto zero, int64_t i) {
    decltype(zero) v;
    std::memcpy(&v, t.data + i * static_cast<int64_t>(sizeof(v)), sizeof(v));
    return v;
  };
  for (int64_t i = 0; i < n; ++i) {
    if (name == "BOOL") c->add_bool_contents(t.data[i] != 0);
    else if (name == "FP32") c->add_fp32_contents(load(float{}, i));
    else if (name == "FP64") c->add_fp64_contents(load(double{}, i));
    else if (name == "INT64") c->add_int64_contents(load(int64_t{}, i));
    else if (name == "UINT64") c->add_uint64_contents(load(uint64_t{}, i));
    else if (dl.code == kDLInt) c->add_int_contents(dl.bits == 8 ? load(int8_t{}, i) : dl.bits == 16 ? load(int16_t{}, i) : load(int32_t{}, i));
    else c->add_uint_contents(dl.bits == 8 ? load(uint8_t{}, i) : dl.bits == 16 ? load(uint16_t{}, i) : load(uint32_t{}, i));
  }
}

/// Raw outputs when the request came raw (tritonclient's way) or an output has no typed form (FP16, BF16).
void response_to_proto(const InferResponse& r, bool raw, pb::ModelInferResponse* out) {
  out->set_model_name(r.model_name);
  out->set_model_version(r.model_version);
  out->set_id(r.id);
  for (const Tensor& t : r.outputs) raw = raw || (t.type->dl.bits == 16 && (t.type->dl.code == kDLFloat || t.type->dl.code == kDLBfloat));
  for (const Tensor& t : r.outputs) {
    auto* o = out->add_outputs();
    o->set_name(t.name);
    o->set_datatype(t.type->name);
    for (int64_t d : t.shape) o->add_shape(d);
    if (raw) {
      if (t.type->element_bytes == 0) out->add_raw_output_contents(join_bytes_elements(t.strings));
      else out->add_raw_output_contents(t.data, t.bytes);
    } else {
      fill_typed(t, o->mutable_contents());
    }
  }
}

void duration_to_proto(const Duration& d, pb::StatisticDuration* out) {
  out->set_count(static_cast<uint64_t>(d.count));
  out->set_ns(static_cast<uint64_t>(d.ns));
}

void stats_to_proto(const ServedModel& model, pb::ModelStatistics* out) {
  const ModelStats s = model.stats();
  out->set_name(model.name());
  out->set_version(model.version());
  out->set_last_inference(static_cast<uint64_t>(s.last_inference_ms));
  out->set_inference_count(static_cast<uint64_t>(s.inference_count));
  out->set_execution_count(static_cast<uint64_t>(s.execution_count));
  auto* is = out->mutable_inference_stats();
  duration_to_proto(s.success, is->mutable_success());
  duration_to_proto(s.fail, is->mutable_fail());
  duration_to_proto(s.queue, is->mutable_queue());
  duration_to_proto(s.compute_input, is->mutable_compute_input());
  duration_to_proto(s.compute_infer, is->mutable_compute_infer());
  duration_to_proto(s.compute_output, is->mutable_compute_output());
  for (const auto& [size, b] : s.batches) {
    auto* bs = out->add_batch_stats();
    bs->set_batch_size(static_cast<uint64_t>(size));
    duration_to_proto(b.compute_input, bs->mutable_compute_input());
    duration_to_proto(b.compute_infer, bs->mutable_compute_infer());
    duration_to_proto(b.compute_output, bs->mutable_compute_output());
  }
}

class Service final : public pb::GRPCInferenceService::Service {
 public:
  explicit Service(ServerState& state) : state_(state) {}

  Status ServerLive(ServerContext*, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    r->set_live(state_.live());
    return Status::OK;
  }
  Status ServerReady(ServerContext*, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    r->set_ready(state_.ready());
    return Status::OK;
  }
  Status ModelReady(ServerContext*, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    return guarded([&] {
      r->set_ready(state_.model_ready(q->name(), q->version()));
    });
  }
  Status ServerMetadata(ServerContext*, const pb::ServerMetadataRequest*, pb::ServerMetadataResponse* r) override {
    r->set_name(kServerName);
    r->set_version(kServerVersion);
    for (const char* e : kExtensions) r->add_extensions(e);
    return Status::OK;
  }
  Status ModelMetadata(ServerContext*, const pb::ModelMetadataRequest* q, pb::ModelMetadataResponse* r) override {
    return guarded([&] {
      const auto model = state_.repository.find(q->name(), q->version());
      r->set_name(model->name());
      for (const std::string& v : state_.repository.versions(model->name())) r->add_versions(v);
      r->set_platform("tessera");
      for (const auto* list : {&model->inputs(), &model->outputs()}) {
        for (const TensorMetadata& t : *list) {
          auto* m = list == &model->inputs() ? r->add_inputs() : r->add_outputs();
          m->set_name(t.name);
          m->set_datatype(t.type->name);
          for (int64_t d : t.shape) m->add_shape(d);
        }
      }
    });
  }
  Status ModelInfer(ServerContext* context, const pb::ModelInferRequest* q, pb::ModelInferResponse* r) override {
    return guarded([&] {
      auto model = state_.model_for_request(q->model_name(), q->model_version());
      InferRequest request;
      try {
        request = request_from_proto(*q);
      } catch (const ServeError& e) {
        model->count_failure(e.kind);
        throw;
      }
      request.model_name = model->name();
      request.model_version = model->version();
      const InferResponse response = model->infer(std::move(request), [context] { return context->IsCancelled(); });
      response_to_proto(response, q->raw_input_contents_size() > 0, r);
    });
  }
  Status ModelConfig(ServerContext*, const pb::ModelConfigRequest* q, pb::ModelConfigResponse* r) override {
    return guarded([&] {
      const std::string json = state_.repository.config_json(q->name(), q->version());
      const auto s = google::protobuf::util::JsonStringToMessage(json, r->mutable_config());
      if (!s.ok()) throw ServeError(ErrorKind::kInternal, std::string("config: ") + std::string(s.message()));
    });
  }
  Status ModelStatistics(ServerContext*, const pb::ModelStatisticsRequest* q, pb::ModelStatisticsResponse* r) override {
    return guarded([&] {
      for (const auto& model : state_.models_for_stats(q->name(), q->version())) stats_to_proto(*model, r->add_model_stats());
    });
  }
  Status RepositoryIndex(ServerContext*, const pb::RepositoryIndexRequest* q, pb::RepositoryIndexResponse* r) override {
    return guarded([&] {
      for (const ModelIndexEntry& e : state_.repository.index(q->ready())) {
        auto* m = r->add_models();
        m->set_name(e.name);
        m->set_version(e.version);
        m->set_state(e.state);
        m->set_reason(e.reason);
      }
    });
  }
  Status RepositoryModelLoad(ServerContext*, const pb::RepositoryModelLoadRequest* q, pb::RepositoryModelLoadResponse*) override {
    return guarded([&] {
      state_.require_explicit_mode();
      std::optional<std::string> config;
      auto it = q->parameters().find("config");
      if (it != q->parameters().end()) {
        if (it->second.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam) invalid_argument("parameter 'config' must be JSON text");
        config = it->second.string_param();
      }
      state_.repository.load(q->model_name(), config);
    });
  }
  Status RepositoryModelUnload(ServerContext*, const pb::RepositoryModelUnloadRequest* q, pb::RepositoryModelUnloadResponse*) override {
    return guarded([&] {
      state_.require_explicit_mode();
      state_.repository.unload(q->model_name());
    });
  }

 private:
  ServerState& state_;
};

}  // namespace

struct GrpcFrontend::Impl {
  ServerState& state;
  int max_message_bytes;
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::thread health;
  std::mutex mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  Impl(ServerState& state, int max_message_bytes) : state(state), max_message_bytes(max_message_bytes), service(state) {}
};

GrpcFrontend::GrpcFrontend(ServerState& state, int max_message_bytes)
    : impl_(std::make_unique<Impl>(state, max_message_bytes)) {}

GrpcFrontend::~GrpcFrontend() { stop(); }

void GrpcFrontend::start(const std::string& host, int port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &impl_->port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a second server on the port is an error, not a sharer
  builder.SetMaxReceiveMessageSize(impl_->max_message_bytes);
  builder.SetMaxSendMessageSize(impl_->max_message_bytes);
  builder.RegisterService(&impl_->service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) throw std::runtime_error("cannot bind gRPC to " + host + ":" + std::to_string(port));
  // grpc.health.v1.Health follows readiness (checked every 100 ms).
  impl_->health = std::thread([impl = impl_.get()] {
    std::unique_lock<std::mutex> lock(impl->mutex);
    int last = -1;
    while (!impl->stopping) {
      const int ready = impl->state.ready() ? 1 : 0;
      if (ready != last) impl->server->GetHealthCheckService()->SetServingStatus(ready == 1);
      last = ready;
      impl->stop_cv.wait_for(lock, std::chrono::milliseconds(100));
    }
  });
}

int GrpcFrontend::port() const { return impl_->port; }

void GrpcFrontend::stop() {
  if (!impl_->server) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->health.joinable()) impl_->health.join();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server.reset();
}

}  // namespace tessera::serve
