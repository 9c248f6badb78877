// ModelRepository: scanning, loading, unloading and polling (model_repository.h).
#include "model_repository.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace tessera::serve {

namespace fs = std::filesystem;

namespace {

/// A version directory's name as a number: digits only, no sign, fits int64.
std::optional<int64_t> version_number(const std::string& s) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(s);
}

std::vector<int64_t> version_dirs(const std::string& dir) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec)) continue;
    if (auto v = version_number(e.path().filename().string())) out.push_back(*v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Sizes and modification times of the config and of the files in the version directories.
std::string fingerprint(const std::string& dir) {
  std::vector<std::string> parts;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 1) {
      it.disable_recursion_pending();
      continue;
    }
    std::error_code fe;
    if (!it->is_regular_file(fe)) continue;
    const auto time = fs::last_write_time(it->path(), fe).time_since_epoch().count();
    parts.push_back(fs::relative(it->path(), dir, fe).string() + ":" + std::to_string(it->file_size(fe)) + ":" +
                    std::to_string(time));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + "\n";
  return out;
}

}  // namespace

ModelRepository::ModelRepository(std::vector<std::string> roots, ControlMode mode, int64_t drain_ms)
    : roots_(std::move(roots)), mode_(mode), drain_ms_(drain_ms) {
  for (const std::string& root : roots_) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      throw ServeError(ErrorKind::kInvalidArgument, "model repository '" + root + "' is not a directory");
    }
  }
}

ModelRepository::~ModelRepository() { stop(); }

std::map<std::string, std::string> ModelRepository::scan() {
  std::map<std::string, std::string> found;
  for (const std::string& root : roots_) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.' || !e.is_directory(ec)) continue;
      if (found.count(name)) {
        throw ServeError(ErrorKind::kInvalidArgument,
                         "model '" + name + "' is in two repositories: " + found[name] + " and " + e.path().string());
      }
      found[name] = e.path().string();
    }
  }
  return found;
}

void ModelRepository::load_initial(const std::vector<std::string>& names) {
  std::vector<std::string> wanted;
  const bool all = mode_ != ControlMode::kExplicit || std::find(names.begin(), names.end(), "*") != names.end();
  if (all) {
    for (const auto& [name, dir] : scan()) wanted.push_back(name);
  } else {
    wanted = names;
  }
  for (const std::string& name : wanted) {
    try {
      load(name, std::nullopt);
      std::cerr << "tessera serve: model '" << name << "' is ready\n";
    } catch (const ServeError& e) {
      std::cerr << "tessera serve: model '" << name << "' failed to load: " << e.what() << "\n";
    }
  }
}

void ModelRepository::load(const std::string& name, const std::optional<std::string>& config_json) {
  std::lock_guard<std::mutex> serial(load_mutex_);
  const std::map<std::string, std::string> found = scan();
  auto where = found.find(name);
  if (where == found.end()) throw ServeError(ErrorKind::kNotFound, "no model named '" + name + "' in the model repository");
  const std::string dir = where->second;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[name];
    e.dir = dir;
    e.state = "LOADING";
    e.reason.clear();
  }
  const std::string print = fingerprint(dir);
  auto fail = [&](const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[name];
    e.state = e.versions.empty() ? "UNAVAILABLE" : "READY";  // the versions already serving stay
    e.reason = reason;
    e.fingerprint = print;  // poll mode retries a failed load only when its files change
  };
  try {
    auto config = std::make_shared<ModelConfigFile>(config_json ? ModelConfigFile::from_json(*config_json, dir, name)
                                                                : ModelConfigFile::read(dir, name));
    for (const std::string& w : config->ignored_fields()) {
      std::cerr << "tessera serve: model '" << name << "': config.pbtxt " << w << " (not used by Tessera; skipped)\n";
    }
    const std::vector<int64_t> serve = config->versions_to_serve(version_dirs(dir));
    if (serve.empty()) {
      throw ServeError(ErrorKind::kInvalidArgument, "model '" + name + "' has no version directory to serve (" + dir +
                                                        "/1/model.onnx, for example)");
    }
    const ModelSettings settings = config->settings();
    std::map<int64_t, std::shared_ptr<ServedModel>> loaded;
    for (int64_t v : serve) {
      const std::string version_dir = (fs::path(dir) / std::to_string(v)).string();
      const fs::path file = fs::path(version_dir) / config->model_file(version_dir);
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) {
        throw ServeError(ErrorKind::kInvalidArgument, "model '" + name + "' version " + std::to_string(v) + ": " +
                                                          file.string() + " is not a regular file");
      }
      auto model = std::make_shared<ServedModel>(name, std::to_string(v), file.string(), settings);
      config->check_against(model->inputs(), model->outputs());
      model->start();
      loaded[v] = model;
    }
    std::map<int64_t, std::shared_ptr<ServedModel>> replaced;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Entry& e = entries_[name];
      replaced.swap(e.versions);
      e.versions = loaded;
      e.config = config;
      e.fingerprint = print;
      e.state = "READY";
      e.reason.clear();
    }
    for (auto& [v, model] : replaced) model->stop(drain_ms_);
  } catch (const ServeError& e) {
    fail(e.what());
    throw;
  } catch (const std::exception& e) {
    fail(e.what());
    throw ServeError(ErrorKind::kInternal, "model '" + name + "': " + e.what());
  }
}

void ModelRepository::unload(const std::string& name) {
  std::lock_guard<std::mutex> serial(load_mutex_);
  std::map<int64_t, std::shared_ptr<ServedModel>> versions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end() || it->second.versions.empty()) {
      throw ServeError(ErrorKind::kNotFound, "model '" + name + "' is not loaded");
    }
    versions.swap(it->second.versions);
    it->second.state = "UNLOADING";
  }
  for (auto& [v, model] : versions) model->stop(drain_ms_);
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entries_[name];
  e.state = "UNAVAILABLE";
  e.reason = "unloaded";
}

std::vector<ModelIndexEntry> ModelRepository::index(bool ready_only) {
  std::map<std::string, std::string> found;
  try {
    found = scan();
  } catch (const ServeError&) {
    // a duplicate name shows in load errors; the index lists what is loaded
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, e] : entries_) found.emplace(name, e.dir);
  std::vector<ModelIndexEntry> out;
  for (const auto& [name, dir] : found) {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      if (!ready_only) out.push_back({name, "", "UNAVAILABLE", "not loaded"});
      continue;
    }
    const Entry& e = it->second;
    if (e.versions.empty()) {
      if (!ready_only) out.push_back({name, "", e.state, e.reason});
      continue;
    }
    for (const auto& [v, model] : e.versions) {
      const std::string state = e.state == "READY" && !model->ready() ? "UNAVAILABLE" : e.state;
      if (ready_only && state != "READY") continue;
      out.push_back({name, std::to_string(v), state, e.reason});
    }
  }
  return out;
}

std::shared_ptr<ServedModel> ModelRepository::find(const std::string& name, const std::string& version) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ServeError(ErrorKind::kNotFound, "unknown model '" + name + "'");
  const Entry& e = it->second;
  if (e.versions.empty()) {
    throw ServeError(ErrorKind::kUnavailable, "model '" + name + "' is not available: " +
                                                  (e.reason.empty() ? e.state : e.reason));
  }
  if (version.empty()) return e.versions.rbegin()->second;
  const std::optional<int64_t> v = version_number(version);
  auto vit = v ? e.versions.find(*v) : e.versions.end();
  if (vit == e.versions.end()) {
    throw ServeError(ErrorKind::kNotFound, "model '" + name + "' has no version '" + version + "' loaded");
  }
  return vit->second;
}

std::vector<std::string> ModelRepository::versions(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  auto it = entries_.find(name);
  if (it != entries_.end())
    for (const auto& [v, model] : it->second.versions) out.push_back(std::to_string(v));
  return out;
}

std::string ModelRepository::config_json(const std::string& name, const std::string& version) {
  std::shared_ptr<ServedModel> model = find(name, version);
  std::shared_ptr<ModelConfigFile> config;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    config = entries_[name].config;
  }
  return config->json(model->inputs(), model->outputs());
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::loaded() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, e] : entries_)
    for (const auto& [v, model] : e.versions) out.push_back(model);
  return out;
}

bool ModelRepository::ready(bool strict) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, e] : entries_) {
    if (e.state == "LOADING" && e.versions.empty()) return false;
    if (strict && e.state != "READY" && !(e.state == "UNAVAILABLE" && e.reason == "unloaded")) return false;
  }
  return true;
}

void ModelRepository::poll_once() {
  std::map<std::string, std::string> found;
  try {
    found = scan();
  } catch (const ServeError& e) {
    std::cerr << "tessera serve: repository poll: " << e.what() << "\n";
    return;
  }
  // The directories are read before the lock is taken: requests look models up under it.
  std::map<std::string, std::string> prints;
  for (const auto& [name, dir] : found) prints[name] = fingerprint(dir);
  std::vector<std::string> to_load, to_unload;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, print] : prints) {
      auto it = entries_.find(name);
      // New, or changed since it was last loaded or last failed to load (not while it loads).
      if (it == entries_.end() || (it->second.fingerprint != print && it->second.state != "LOADING")) to_load.push_back(name);
    }
    for (const auto& [name, e] : entries_)
      if (!found.count(name) && !e.versions.empty()) to_unload.push_back(name);
  }
  for (const std::string& name : to_load) {
    try {
      load(name, std::nullopt);
      std::cerr << "tessera serve: model '" << name << "' (re)loaded\n";
    } catch (const ServeError& e) {
      std::cerr << "tessera serve: model '" << name << "' failed to load: " << e.what() << "\n";
    }
  }
  for (const std::string& name : to_unload) {
    try {
      unload(name);
      std::cerr << "tessera serve: model '" << name << "' removed from the repository: unloaded\n";
    } catch (const ServeError&) {
    }
  }
}

void ModelRepository::start_polling(int seconds) {
  poller_ = std::thread([this, seconds] {
    std::unique_lock<std::mutex> lock(poll_mutex_);
    while (!stopping_) {
      poll_cv_.wait_for(lock, std::chrono::seconds(seconds));
      if (stopping_) break;
      lock.unlock();
      poll_once();
      lock.lock();
    }
  });
}

void ModelRepository::stop() {
  {
    std::lock_guard<std::mutex> lock(poll_mutex_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  std::vector<std::shared_ptr<ServedModel>> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [name, e] : entries_) {
      for (auto& [v, model] : e.versions) all.push_back(model);
      e.versions.clear();
      e.state = "UNAVAILABLE";
      e.reason = "server stopping";
    }
  }
  for (auto& model : all) model->stop(drain_ms_);
}

}  // namespace tessera::serve
