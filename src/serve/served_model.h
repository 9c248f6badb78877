// One version of one model being served: the compiled model (through the C API),
// its metadata, and its scheduler: a bounded queue of requests that N instance
// threads take from, each forming dynamic batches (requests whose inputs agree
// in every dim but the first are concatenated on the batch axis, up to
// max_batch_size, waiting at most max_queue_delay after the oldest). Every
// response is cut from its batch's outputs by its own rows. Statistics follow
// Triton's (counts and cumulative durations), read by /metrics and .../stats.
#pragma once

#include <tessera/tessera.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve_types.h"

namespace tessera::serve {

/// How a model version is loaded and scheduled (from its config.pbtxt; model_config.h).
struct ModelSettings {
  int max_batch_size = 0;            // 0: requests run alone, shapes as the model declares them
  bool dynamic_batching = false;     // concatenate compatible requests
  uint64_t max_queue_delay_us = 0;   // how long the oldest request waits for a fuller batch
  std::vector<int> preferred_batch_sizes;
  uint32_t max_queue_size = 0;       // 0: the default bound (kDefaultMaxQueueSize)
  uint64_t default_timeout_us = 0;   // 0: none
  bool allow_timeout_override = false;
  int instances = 1;                 // threads running batches on the one compiled model
  std::vector<std::pair<std::string, std::string>> options;  // tsr_options_set name, value
  struct Warmup {
    std::string name;
    int count = 1;
    std::vector<Tensor> inputs;  // full shapes (batch included)
  };
  std::vector<Warmup> warmups;
  bool default_warmup = true;  // one zero-filled run at batch 1 when no warmup is configured
};

constexpr uint32_t kDefaultMaxQueueSize = 4096;

struct TensorMetadata {
  std::string name;
  const DataType* type;
  std::vector<int64_t> shape;  // -1: open
};

/// Cumulative count and duration, as Triton's StatisticDuration.
struct Duration {
  int64_t count = 0;
  int64_t ns = 0;
  void add(int64_t n) { ++count, ns += n; }
};

struct ModelStats {
  Duration success, fail, queue, compute_input, compute_infer, compute_output;
  int64_t inference_count = 0;  // batch items (requests' first dims, 1 without batching)
  int64_t execution_count = 0;  // model runs
  int64_t last_inference_ms = 0;
  std::map<std::string, int64_t> failures;  // by reason (REJECTED, CANCELED, BACKEND, OTHER)
  struct Batch {
    Duration compute_input, compute_infer, compute_output;
  };
  std::map<int64_t, Batch> batches;  // by batch size
  struct Region {
    std::string backend;
    double milliseconds = 0;
  };
  std::vector<Region> regions;  // summed over the runs of requests (not warm-ups)
  int64_t pending = 0;          // queued, not yet running
  tsr_model_stats_t runtime{};  // the compiled model's own counters (tsr_model_stats)
  int64_t load_runs = 0;        // runs before the model was ready: warm-ups and the batching measurement
  std::string batching;         // what the batching measurement found and chose ("" without dynamic batching)
};

class ServedModel {
 public:
  /// Loads (and for ONNX, compiles) the file; throws ServeError naming the model on failure.
  ServedModel(std::string name, std::string version, const std::string& path, ModelSettings settings);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const ModelSettings& settings() const { return settings_; }
  const std::vector<TensorMetadata>& inputs() const { return inputs_; }
  const std::vector<TensorMetadata>& outputs() const { return outputs_; }

  /// Runs the configured warm-up requests (or the default one), then starts the
  /// instance threads; the model is ready afterwards. Throws ServeError when a
  /// configured warm-up fails.
  void start();
  bool ready() const { return ready_.load(); }

  /// Runs one request through the queue and returns its response; throws
  /// ServeError. `cancelled` (may be empty) is asked while the request waits:
  /// true takes it out of the queue (counted as CANCELED).
  InferResponse infer(InferRequest request, const std::function<bool()>& cancelled = {});

  /// Stops taking requests (they get UNAVAILABLE), lets the queued ones finish
  /// (waiting at most `timeout_ms`; the rest fail as UNAVAILABLE), joins the threads.
  void stop(int64_t timeout_ms);

  ModelStats stats() const;
  /// Counts a request that failed before reaching the queue (a malformed body).
  void count_failure(ErrorKind kind) { record_failure(kind, 0); }

 private:
  struct Pending;
  void check_request(InferRequest& request) const;
  void run_instance();
  std::vector<std::shared_ptr<Pending>> take_batch(std::unique_lock<std::mutex>& lock);
  void execute(const std::vector<std::shared_ptr<Pending>>& batch);
  /// Runs the model; adds each region's milliseconds to *region_ms (when given; sized by the caller).
  std::vector<Tensor> run_model(const std::vector<Tensor>& inputs, int64_t* infer_ns, std::vector<double>* region_ms);
  std::vector<Tensor> run_model_values(const std::vector<Tensor>& inputs);
  void record_failure(ErrorKind kind, int64_t ns);
  /// Decides batching_pays_ by timing the model at batch 1 and at a full batch (see the .cc).
  void measure_batching(const std::vector<ModelSettings::Warmup>& warmups);

  std::string name_, version_;
  ModelSettings settings_;
  std::unique_ptr<tsr_model, void (*)(tsr_model*)> model_{nullptr, tsr_model_free};  // freed even when the constructor throws
  bool uses_values_ = false;  // has BYTES inputs or outputs: runs through tsr_model_run_values
  std::vector<TensorMetadata> inputs_, outputs_;

  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::deque<std::shared_ptr<Pending>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> instances_;
  std::atomic<bool> ready_{false};
  /// Dynamic batching runs only where a batch measured cheaper a row than single requests
  /// (measure_batching); else requests run one at a time, as with batching off.
  bool batching_pays_ = true;
  mutable std::mutex stats_mutex_;
  ModelStats stats_;
};

}  // namespace tessera::serve
