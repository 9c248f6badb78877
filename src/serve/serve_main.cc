// tessera-serve (also `tessera serve`): the Open Inference Protocol server over a
// model repository. Flags follow Triton's names and default ports, so scripts
// written for Triton carry over. SIGTERM or SIGINT drains: the server reports not
// ready at once, refuses new requests (UNAVAILABLE), lets queued ones finish
// within --exit-timeout-secs, then exits.
#include <signal.h>

#include <charconv>
#include <cstring>
#include <limits>
#include <iostream>
#include <string>
#include <vector>

#include "grpc_frontend.h"
#include "http_frontend.h"
#include "omp_wait_defaults.h"
#include "server_state.h"

namespace {

constexpr const char* kUsage = R"(usage: tessera serve --model-repository DIR [options]
  --model-repository DIR        a model repository (ROOT/MODEL/VERSION/model.{tsr,onnx}); may be repeated
  --http-port N                 HTTP/REST port (default 8000; 0: any free port)
  --grpc-port N                 gRPC port (default 8001; 0: any free port)
  --metrics-port N              Prometheus /metrics port (default 8002; 0: any free port)
  --http-address ADDR           address to listen on (default 0.0.0.0)
  --allow-http true|false       serve HTTP (default true)
  --allow-grpc true|false       serve gRPC (default true)
  --allow-metrics true|false    serve /metrics (default true)
  --model-control-mode MODE     none (load every model at start), poll (also reload on changes),
                                explicit (only --load-model at start, then the repository API)
  --load-model NAME             explicit mode: load NAME at start ("*": every model); may be repeated
  --repository-poll-secs N      poll mode: seconds between scans (default 15)
  --strict-readiness true|false ready only when every model loaded (default true)
  --exit-timeout-secs N         on SIGTERM, how long queued requests may take to finish (default 30)
  --http-thread-count N         HTTP handler threads (default 64; each open request holds one)
  --http-max-input-size BYTES   largest request body (default 268435456)
  --grpc-max-message-size BYTES largest gRPC message, both ways (default 2147483647; gRPC's own is 4 MiB)
)";

struct Flags {
  std::vector<std::string> repositories;
  int http_port = 8000, grpc_port = 8001, metrics_port = 8002;
  int grpc_max_message = std::numeric_limits<int>::max();
  std::string address = "0.0.0.0";
  bool allow_http = true, allow_grpc = true, allow_metrics = true, strict_readiness = true;
  tessera::serve::ControlMode mode = tessera::serve::ControlMode::kNone;
  std::vector<std::string> load_models;
  int poll_secs = 15, exit_timeout_secs = 30, http_threads = 64;
  size_t max_input = size_t{256} << 20;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "tessera serve: error: " << message << "\n" << kUsage;
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
    usage_error(flag + " takes an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not '" + v + "'");
  }
  return n;
}

bool parse_bool(const std::string& flag, const std::string& v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  usage_error(flag + " takes true or false, not '" + v + "'");
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    const size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage_error(flag.rfind("--", 0) == 0 ? flag + " needs a value" : "unexpected argument '" + flag + "'");
      value = argv[++i];
    }
    if (flag == "--model-repository" || flag == "--model-store") f.repositories.push_back(value);
    else if (flag == "--http-port") f.http_port = static_cast<int>(parse_int(flag, value, 0, 65535));
    else if (flag == "--grpc-port") f.grpc_port = static_cast<int>(parse_int(flag, value, 0, 65535));
    else if (flag == "--allow-grpc") f.allow_grpc = parse_bool(flag, value);
    else if (flag == "--grpc-max-message-size")
      f.grpc_max_message = static_cast<int>(parse_int(flag, value, 1024, std::numeric_limits<int>::max()));
    else if (flag == "--metrics-port") f.metrics_port = static_cast<int>(parse_int(flag, value, 0, 65535));
    else if (flag == "--http-address") f.address = value;
    else if (flag == "--allow-http") f.allow_http = parse_bool(flag, value);
    else if (flag == "--allow-metrics") f.allow_metrics = parse_bool(flag, value);
    else if (flag == "--strict-readiness") f.strict_readiness = parse_bool(flag, value);
    else if (flag == "--load-model") f.load_models.push_back(value);
    else if (flag == "--repository-poll-secs") f.poll_secs = static_cast<int>(parse_int(flag, value, 1, 86400));
    else if (flag == "--exit-timeout-secs") f.exit_timeout_secs = static_cast<int>(parse_int(flag, value, 0, 86400));
    else if (flag == "--http-thread-count") f.http_threads = static_cast<int>(parse_int(flag, value, 1, 4096));
    else if (flag == "--http-max-input-size") f.max_input = static_cast<size_t>(parse_int(flag, value, 1024, int64_t{1} << 40));
    else if (flag == "--model-control-mode") {
      if (value == "none") f.mode = tessera::serve::ControlMode::kNone;
      else if (value == "poll") f.mode = tessera::serve::ControlMode::kPoll;
      else if (value == "explicit") f.mode = tessera::serve::ControlMode::kExplicit;
      else usage_error("--model-control-mode takes none, poll or explicit, not '" + value + "'");
    } else {
      usage_error("unknown flag '" + flag + "'");
    }
  }
  if (f.repositories.empty()) usage_error("--model-repository is required");
  if (!f.load_models.empty() && f.mode != tessera::serve::ControlMode::kExplicit) {
    usage_error("--load-model needs --model-control-mode explicit");
  }
  if (!f.allow_http && !f.allow_grpc) usage_error("nothing to serve: HTTP and gRPC are both off");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::cli::apply_omp_wait_defaults(argv);
  const Flags flags = parse_flags(argc, argv);
  // Every thread started from here on inherits the blocked signals; main waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  using namespace tessera::serve;
  try {
    ModelRepository repository(flags.repositories, flags.mode, int64_t{flags.exit_timeout_secs} * 1000);
    ServerState state(repository, flags.strict_readiness);
    // The front ends come up first, so that liveness answers (and readiness says no) while models load.
    std::unique_ptr<HttpFrontend> http, metrics;
    std::unique_ptr<GrpcFrontend> grpc;
    if (flags.allow_http) {
      http = std::make_unique<HttpFrontend>(state, false, flags.http_threads, flags.max_input);
      http->start(flags.address, flags.http_port);
    }
    if (flags.allow_grpc) {
      grpc = std::make_unique<GrpcFrontend>(state, flags.grpc_max_message);
      grpc->start(flags.address, flags.grpc_port);
    }
    if (flags.allow_metrics) {
      metrics = std::make_unique<HttpFrontend>(state, true, 4, 1024);
      metrics->start(flags.address, flags.metrics_port);
    }
    std::cerr << "tessera serve: listening:" << (http ? " http=" + std::to_string(http->port()) : "")
              << (grpc ? " grpc=" + std::to_string(grpc->port()) : "") << (metrics ? " metrics=" + std::to_string(metrics->port()) : "") << std::endl;
    repository.load_initial(flags.load_models);
    state.started = true;
    if (flags.mode == ControlMode::kPoll) repository.start_polling(flags.poll_secs);
    std::cerr << "tessera serve: " << (state.ready() ? "ready" : "started, not ready (a model failed to load)") << std::endl;
    int received = 0;
    sigwait(&signals, &received);
    std::cerr << "tessera serve: " << strsignal(received) << ": draining (at most " << flags.exit_timeout_secs << " s)"
              << std::endl;
    state.draining = true;
    repository.stop();
    if (http) http->stop();
    if (grpc) grpc->stop();
    if (metrics) metrics->stop();
    std::cerr << "tessera serve: stopped" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessera serve: error: " << e.what() << "\n";
    return 1;
  }
}
