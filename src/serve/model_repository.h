// The model repository in Triton's layout: ROOT/MODEL/[config.pbtxt]/VERSION/model.{tsr,onnx}
// (several roots allowed; a model name must be unique across them). Loads and
// unloads models at run time: at start (control mode none: every model;
// explicit: those named), on the repository API (explicit mode), or by polling
// the directories for added, changed and removed models (poll mode). A reload
// that fails leaves the versions already serving in place; versions replaced
// or unloaded finish their queued requests first.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model_config.h"
#include "served_model.h"

namespace tessera::serve {

enum class ControlMode { kNone, kPoll, kExplicit };

struct ModelIndexEntry {
  std::string name;
  std::string version;  // "" for a model with no version loaded
  std::string state;    // READY, LOADING, UNLOADING, UNAVAILABLE
  std::string reason;
};

class ModelRepository {
 public:
  ModelRepository(std::vector<std::string> roots, ControlMode mode, int64_t drain_ms);
  ~ModelRepository();

  ControlMode mode() const { return mode_; }
  /// Loads the models to serve at start: all in modes none and poll, the named
  /// ones ("*": all) in explicit mode. Failures are logged and shown in the index.
  void load_initial(const std::vector<std::string>& names);
  /// Loads (or reloads) a model; config_json replaces its config.pbtxt. Throws ServeError.
  void load(const std::string& name, const std::optional<std::string>& config_json);
  /// Unloads every version of a model (NOT_FOUND when none is loaded). Throws ServeError.
  void unload(const std::string& name);
  /// Every model in the roots (and every one loaded), with its versions' states.
  std::vector<ModelIndexEntry> index(bool ready_only);
  /// The version to run: `version` ("" = the highest loaded). Throws NOT_FOUND / UNAVAILABLE.
  std::shared_ptr<ServedModel> find(const std::string& name, const std::string& version);
  /// The loaded versions of a model, ascending (empty when none).
  std::vector<std::string> versions(const std::string& name);
  /// The model's configuration as JSON, for GET .../config.
  std::string config_json(const std::string& name, const std::string& version);
  /// Every loaded version of every model (for metrics and statistics).
  std::vector<std::shared_ptr<ServedModel>> loaded();
  /// No model loading, and (strict) every model asked for is ready.
  bool ready(bool strict);
  /// Poll mode: rescans every `seconds` on a thread until stop().
  void start_polling(int seconds);
  /// Stops polling and unloads everything (letting queued requests finish within the drain time).
  void stop();

 private:
  struct Entry {
    std::string dir;
    std::string state = "UNAVAILABLE";
    std::string reason;
    std::map<int64_t, std::shared_ptr<ServedModel>> versions;
    std::shared_ptr<ModelConfigFile> config;
    std::string fingerprint;  // of the files when loaded (poll mode reloads on a change)
  };
  std::map<std::string, std::string> scan();  // name -> directory; throws on a name in two roots
  void poll_once();

  std::vector<std::string> roots_;
  ControlMode mode_;
  int64_t drain_ms_;
  std::mutex load_mutex_;  // one load or unload at a time
  std::mutex mutex_;       // guards entries_
  std::map<std::string, Entry> entries_;
  std::thread poller_;
  std::mutex poll_mutex_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
};

}  // namespace tessera::serve
