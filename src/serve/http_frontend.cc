// HTTP routes (http_frontend.h). Paths follow the Open Inference Protocol's REST
// API; bodies are JSON, errors {"error": "..."} with Triton's status codes.
#include "http_frontend.h"

#include <httplib.h>

#include <charconv>
#include <optional>
#include <nlohmann/json.hpp>

#include "http_codec.h"
#include "peer_socket.h"

namespace tessera::serve {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ServeError& e) {
  res.status = http_status_of(e.kind);
  res.set_content(error_json(e.what()), "application/json");
}

/// Runs a handler body, turning every exception into an error response.
template <typename F>
void guarded(httplib::Response& res, F&& body) {
  try {
    body();
  } catch (const ServeError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ServeError(ErrorKind::kInternal, e.what()));
  }
}

json tensor_metadata(const TensorMetadata& t) { return json{{"name", t.name}, {"datatype", t.type->name}, {"shape", t.shape}}; }

json duration(const Duration& d) { return json{{"count", d.count}, {"ns", d.ns}}; }

json model_stats_json(const ServedModel& model) {
  const ModelStats s = model.stats();
  json batches = json::array();
  for (const auto& [size, b] : s.batches) {
    batches.push_back({{"batch_size", size},
                       {"compute_input", duration(b.compute_input)},
                       {"compute_infer", duration(b.compute_infer)},
                       {"compute_output", duration(b.compute_output)}});
  }
  return json{{"name", model.name()},
              {"version", model.version()},
              {"last_inference", s.last_inference_ms},
              {"inference_count", s.inference_count},
              {"execution_count", s.execution_count},
              {"inference_stats",
               {{"success", duration(s.success)},
                {"fail", duration(s.fail)},
                {"queue", duration(s.queue)},
                {"compute_input", duration(s.compute_input)},
                {"compute_infer", duration(s.compute_infer)},
                {"compute_output", duration(s.compute_output)},
                {"cache_hit", duration({})},
                {"cache_miss", duration({})}}},
              {"batch_stats", batches},
              // Tessera's own (clients of the protocol ignore keys they do not know).
              {"tessera", {{"load_runs", s.load_runs}, {"batching", s.batching}}}};
}

/// The request body's JSON object, or {} for an empty body.
json body_object(const std::string& body) {
  if (body.empty()) return json::object();
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw ServeError(ErrorKind::kInvalidArgument, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ServeError(ErrorKind::kInvalidArgument, "the body must be a JSON object");
  return j;
}

/// A header's value as a byte count: digits only, nothing else.
std::optional<size_t> parse_size(const std::string& text) {
  size_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

/// How long a connection may stay idle before the server closes it: waiting for its next request
/// (keep-alive), for a request's next bytes, or to take the response's.
constexpr time_t kIdleTimeoutSeconds = 60;

// Path patterns: MODEL and VERSION are any text without '/'.
const std::string kModel = R"(/v2/models/([^/]+))";
const std::string kVersioned = kModel + R"((?:/versions/([^/]+))?)";

}  // namespace

HttpFrontend::HttpFrontend(ServerState& state, bool metrics_only, int threads, size_t max_body_bytes)
    : state_(state), server_(std::make_unique<httplib::Server>()), max_body_bytes_(max_body_bytes) {
  const size_t pool = static_cast<size_t>(std::max(1, threads));
  server_->new_task_queue = [pool] { return new httplib::ThreadPool(pool); };
  server_->set_payload_max_length(max_body_bytes);
  server_->set_keep_alive_max_count(1u << 30);
  server_->set_keep_alive_timeout(kIdleTimeoutSeconds);
  // httplib's default read timeout, 5 s, answered 400 to a client that paused longer inside a request
  // (Python's http.client sends the headers and the body with separate calls; a loaded machine, or a
  // slow link between a large body's pieces), which then read "connection reset by peer".
  server_->set_read_timeout(kIdleTimeoutSeconds, 0);
  server_->set_write_timeout(kIdleTimeoutSeconds, 0);
  server_->set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the same
  // port binds without an error and takes half the connections.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, ServeError(ErrorKind::kInternal, e.what()));
    } catch (...) {
      send_error(res, ServeError(ErrorKind::kInternal, "unknown error"));
    }
  });
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error
    if (res.status == 404) res.set_content(error_json("no such endpoint: " + req.method + " " + req.path), "application/json");
    else if (res.status == 413) res.set_content(error_json("the request body is larger than the server's limit"), "application/json");
  });
  if (metrics_only) add_metrics_route();
  else add_routes();
}

HttpFrontend::~HttpFrontend() { stop(); }

void HttpFrontend::start(const std::string& host, int port) {
  if (port == 0) {
    port_ = server_->bind_to_any_port(host);
    if (port_ < 0) throw std::runtime_error("cannot bind " + host + " to a free port");
  } else {
    if (!server_->bind_to_port(host, port)) throw std::runtime_error("cannot bind " + host + ":" + std::to_string(port));
    port_ = port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void HttpFrontend::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

void HttpFrontend::add_metrics_route() {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] { res.set_content(render_metrics(state_), "text/plain; version=0.0.4; charset=utf-8"); });
  });
}

void HttpFrontend::add_routes() {
  httplib::Server& s = *server_;
  ServerState& state = state_;
  s.Get("/v2/health/live", [&state](const httplib::Request&, httplib::Response& res) {
    send_json(res, state.live() ? 200 : 400, {{"live", state.live()}});
  });
  s.Get("/v2/health/ready", [&state](const httplib::Request&, httplib::Response& res) {
    const bool ready = state.ready();
    send_json(res, ready ? 200 : 400, {{"ready", ready}});
  });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"name", kServerName}, {"version", kServerVersion}, {"extensions", kExtensions}});
  });
  s.Get(kVersioned + "/ready", [&state](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const bool ready = state.model_ready(req.matches[1], req.matches[2]);
      send_json(res, ready ? 200 : 400, {{"name", req.matches[1].str()}, {"ready", ready}});
    });
  });
  s.Get(kVersioned + "/config", [&state](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { res.set_content(state.repository.config_json(req.matches[1], req.matches[2]), "application/json"); });
  });
  auto stats = [&state](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      json all = json::array();
      const bool named = req.matches.size() > 1 && req.matches[1].matched;
      for (const auto& model : state.models_for_stats(named ? req.matches[1].str() : "", named ? req.matches[2].str() : "")) {
        all.push_back(model_stats_json(*model));
      }
      send_json(res, 200, {{"model_stats", all}});
    });
  };
  s.Get("/v2/models/stats", stats);
  s.Get(kVersioned + "/stats", stats);
  s.Get(kVersioned, [&state](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const auto model = state.repository.find(req.matches[1], req.matches[2]);
      json inputs = json::array(), outputs = json::array();
      for (const TensorMetadata& t : model->inputs()) inputs.push_back(tensor_metadata(t));
      for (const TensorMetadata& t : model->outputs()) outputs.push_back(tensor_metadata(t));
      send_json(res, 200,
                {{"name", model->name()},
                 {"versions", state.repository.versions(model->name())},
                 {"platform", "tessera"},
                 {"inputs", inputs},
                 {"outputs", outputs}});
    });
  });
  const size_t max_body = max_body_bytes_;
  s.Post(kVersioned + "/infer",
         [&state, max_body](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
           guarded(res, [&] {
             std::optional<size_t> header_length;
             if (req.has_header("Inference-Header-Content-Length")) {
               const std::string v = req.get_header_value("Inference-Header-Content-Length");
               header_length = parse_size(v);
               if (!header_length) invalid_argument("Inference-Header-Content-Length '" + v + "' is not a number");
             }
             // The body goes into a buffer where the binary part (after the JSON header) starts 64-byte
             // aligned, so that the model reads the tensors in place rather than copying them to align them.
             auto body = std::make_shared<std::string>();
             const size_t expected = parse_size(req.get_header_value("Content-Length")).value_or(0);
             body->reserve(std::min(expected, max_body) + 128);  // a Content-Length above the limit gets 413
             const size_t misalign = (reinterpret_cast<uintptr_t>(body->data()) + header_length.value_or(0)) % 64;
             const size_t start = misalign ? 64 - misalign : 0;
             body->assign(start, '\0');
             reader([&](const char* data, size_t size) {
               body->append(data, size);
               return true;
             });
             auto model = state.model_for_request(req.matches[1], req.matches[2]);
             InferRequest request;
             try {
               request = parse_infer_request(body, start, header_length);
             } catch (const ServeError& e) {
               model->count_failure(e.kind);
               throw;
             }
             request.model_name = model->name();
             request.model_version = model->version();
             // While the request waits in the queue, a client that hung up takes it out (counted as
             // cancelled). Its socket is looked up at the first check (10 ms in), not for every request.
             std::optional<int> client_socket;
             auto client_gone = [&req, &client_socket] {
               if (!client_socket) client_socket = find_connection_socket(req.remote_addr, req.remote_port, req.local_port);
               return *client_socket >= 0 && peer_closed(*client_socket);
             };
             const InferResponse response = model->infer(std::move(request), client_gone);
             HttpBody out = write_infer_response(response);
             if (out.header_length) res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
             res.status = 200;
             res.set_content(std::move(out.body), out.content_type);
           });
         });
  s.Post("/v2/repository/index", [&state](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const json body = body_object(req.body);
      bool ready_only = false;
      if (body.contains("ready")) {
        if (!body["ready"].is_boolean()) throw ServeError(ErrorKind::kInvalidArgument, "'ready' must be true or false");
        ready_only = body["ready"].get<bool>();
      }
      json out = json::array();
      for (const ModelIndexEntry& e : state.repository.index(ready_only)) {
        json entry{{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
        if (!e.version.empty()) entry["version"] = e.version;
        out.push_back(entry);
      }
      send_json(res, 200, out);
    });
  });
  auto repository_call = [&state](bool load) {
    return [&state, load](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        state.require_explicit_mode();
        const json body = body_object(req.body);
        std::optional<std::string> config;
        if (body.contains("parameters")) {
          const json& p = body["parameters"];
          if (!p.is_object()) throw ServeError(ErrorKind::kInvalidArgument, "'parameters' must be an object");
          if (p.contains("config")) {
            if (!p["config"].is_string()) throw ServeError(ErrorKind::kInvalidArgument, "parameter 'config' must be JSON text");
            config = p["config"].get<std::string>();
          }
        }
        if (load) state.repository.load(req.matches[1], config);
        else state.repository.unload(req.matches[1]);
        res.status = 200;
        res.set_content("{}", "application/json");
      });
    };
  };
  s.Post(R"(/v2/repository/models/([^/]+)/load)", repository_call(true));
  s.Post(R"(/v2/repository/models/([^/]+)/unload)", repository_call(false));
}

}  // namespace tessera::serve
