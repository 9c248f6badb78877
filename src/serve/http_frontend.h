// The HTTP/REST front end of `tessera serve` (cpp-httplib): the Open Inference
// Protocol's endpoints and Triton's extensions (config, statistics, repository),
// and, on its own port, /metrics. Handlers run on a pool of threads; health,
// metadata and metrics never wait on a model's queue.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "server_state.h"

namespace httplib {
class Server;
}

namespace tessera::serve {

class HttpFrontend {
 public:
  /// metrics_only: serve GET /metrics alone (the metrics port).
  HttpFrontend(ServerState& state, bool metrics_only, int threads, size_t max_body_bytes);
  ~HttpFrontend();
  /// Binds host:port (0: any free port) and serves on a thread. Throws std::runtime_error when it cannot bind.
  void start(const std::string& host, int port);
  int port() const { return port_; }
  void stop();

 private:
  void add_routes();
  void add_metrics_route();
  ServerState& state_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  size_t max_body_bytes_;
};

}  // namespace tessera::serve
