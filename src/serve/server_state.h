// What every front end of `tessera serve` (HTTP, gRPC, metrics) shares: the model
// repository, whether the server is draining, and the answers to liveness and
// readiness, which never wait on inference.
#pragma once

#include <atomic>
#include <string>

#include "model_repository.h"

namespace tessera::serve {

constexpr const char* kServerName = "tessera";
constexpr const char* kServerVersion = "0.1.0";
/// The protocol extensions this server implements, as GET /v2 lists them.
constexpr const char* kExtensions[] = {"binary_tensor_data", "model_repository", "statistics",
                                       "model_configuration", "schedule_policy"};

struct ServerState {
  ServerState(ModelRepository& repository, bool strict_readiness)
      : repository(repository), strict_readiness(strict_readiness) {}
  ModelRepository& repository;
  bool strict_readiness;
  std::atomic<bool> started{false};   // the models to serve at start have been loaded (or failed)
  std::atomic<bool> draining{false};  // SIGTERM: not ready, no new requests

  bool live() const { return true; }
  bool ready() const { return started.load() && !draining.load() && repository.ready(strict_readiness); }
  /// The model version to run a new request on; UNAVAILABLE while draining.
  std::shared_ptr<ServedModel> model_for_request(const std::string& name, const std::string& version) {
    if (draining.load()) throw ServeError(ErrorKind::kUnavailable, "the server is shutting down");
    return repository.find(name, version);
  }
  /// Whether the model version is ready for requests; NOT_FOUND for a model or version the server
  /// does not know (an unavailable one is just not ready).
  bool model_ready(const std::string& name, const std::string& version) {
    try {
      return repository.find(name, version)->ready() && !draining.load();
    } catch (const ServeError& e) {
      if (e.kind == ErrorKind::kNotFound) throw;
      return false;
    }
  }
  /// The versions a statistics request covers: every loaded one (name ""), a model's loaded ones
  /// (version ""), or one. Throws NOT_FOUND / UNAVAILABLE as find does.
  std::vector<std::shared_ptr<ServedModel>> models_for_stats(const std::string& name, const std::string& version) {
    if (!name.empty() && !version.empty()) return {repository.find(name, version)};
    if (!name.empty()) repository.find(name, "");
    std::vector<std::shared_ptr<ServedModel>> out;
    for (auto& model : repository.loaded())
      if (name.empty() || model->name() == name) out.push_back(model);
    return out;
  }
  /// The repository's load and unload calls are for explicit mode only (UNAVAILABLE otherwise).
  void require_explicit_mode() const {
    if (repository.mode() != ControlMode::kExplicit) {
      throw ServeError(ErrorKind::kUnavailable, "explicit model load / unload needs --model-control-mode explicit");
    }
  }
};

/// Prometheus text exposition of every loaded model's statistics (Triton's metric names).
std::string render_metrics(ServerState& state);

}  // namespace tessera::serve
