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
};

/// Prometheus text exposition of every loaded model's statistics (Triton's metric names).
std::string render_metrics(ServerState& state);

}  // namespace tessera::serve
