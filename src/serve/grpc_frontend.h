// The gRPC front end of `tessera serve` (libgrpc++): inference.GRPCInferenceService
// (proto/inference.proto) and the standard grpc.health.v1.Health service, which
// reports SERVING while the server is ready. Message size limits are raised to
// --grpc-max-message-size both ways; a call whose client cancels or whose deadline
// passes while it waits in a model's queue leaves the queue (counted CANCELED).
#pragma once

#include <memory>
#include <string>

#include "server_state.h"

namespace tessera::serve {

class GrpcFrontend {
 public:
  GrpcFrontend(ServerState& state, int max_message_bytes);
  ~GrpcFrontend();
  /// Binds host:port (0: any free port) and serves. Throws std::runtime_error when it cannot bind.
  void start(const std::string& host, int port);
  int port() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::serve
