// The C API: tsr_status and tsr_options: every compile and load option, checked where it is set. Nothing here throws (guarded).
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "capi/capi_internal.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

namespace {

/// The options tsr_options_set takes by name, in tsr_option_names' order: the
/// one list of them (the CLI's flags, Python's keyword arguments and the torch
/// op's option dict all read it).
constexpr const char* kOptionNames =
    "threads,backends,place,deny,min_region_size,strict,precision,tuning,freeze_weights,dim_bounds,input_values";

/// A whole decimal integer in [low, high], or a status naming the option.
tsr_status* parse_int(const char* name, const char* text, long long low, long long high, int32_t& out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || v < low || v > high) {
    return make_status(TSR_INVALID_ARGUMENT, std::string("option '") + name + "': '" + text + "' is not an integer from " +
                                                 std::to_string(low) + " to " + std::to_string(high));
  }
  out = static_cast<int32_t>(v);
  return nullptr;
}

tsr_status* parse_bool(const char* name, const char* text, int32_t& out) {
  const std::string t = text;
  if (t == "1" || t == "true" || t == "True") return out = 1, nullptr;
  if (t == "0" || t == "false" || t == "False") return out = 0, nullptr;
  return make_status(TSR_INVALID_ARGUMENT, std::string("option '") + name + "': '" + t + "' is not 1, 0, true or false");
}

}  // namespace

extern "C" {

tsr_status_code tsr_status_code_of(const tsr_status* status) { return status ? status->code : TSR_OK; }

const char* tsr_status_message(const tsr_status* status) { return status ? status->message.c_str() : ""; }

void tsr_status_free(tsr_status* status) { delete status; }

tsr_status* tsr_options_create(tsr_options** out_options) {
  if (!out_options) return null_argument("out_options");
  return guarded([&] { *out_options = new tsr_options(); });
}

void tsr_options_free(tsr_options* options) { delete options; }

tsr_status* tsr_options_set_threads(tsr_options* options, int32_t num_threads) {
  if (!options) return null_argument("options");
  if (num_threads < 1 || num_threads > 1024) return make_status(TSR_INVALID_ARGUMENT, "threads must be between 1 and 1024");
  options->compile.num_threads = num_threads;
  return nullptr;
}

tsr_status* tsr_options_set_input_shape(tsr_options* options, const char* name, const int64_t* dims, size_t rank) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (rank && !dims) return null_argument("dims");
  return guarded([&] { options->compile.input_shapes[name] = checked_shape(name, dims, rank); });
}

tsr_status* tsr_options_set_input_data_shape(tsr_options* options, const char* name, const int64_t* dims, size_t rank) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (rank && !dims) return null_argument("dims");
  return guarded([&] { options->data_shapes[name] = checked_shape(name, dims, rank); });
}

tsr_status* tsr_options_set_freeze_weights(tsr_options* options, int32_t freeze) {
  if (!options) return null_argument("options");
  options->import.freeze_weights = freeze != 0;
  return nullptr;
}

tsr_status* tsr_options_set_backends(tsr_options* options, const char* backend_list) {
  if (!options) return null_argument("options");
  if (!backend_list) return null_argument("backend_list");
  return guarded([&] {
    std::vector<std::string> names;
    std::string list = backend_list;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string name = list.substr(start, comma - start);
      if (name.empty()) tessera::throw_user_error("backend list '", list, "' has an empty name");
      if (!tessera::find_backend(name)) {
        tessera::throw_user_error("unknown backend '", name, "' (known: ", tessera::known_backend_names(),
                                  "; a plug-in backend is loaded with --backend-plugin PATH or TESSERA_BACKEND_PLUGINS)");
      }
      names.push_back(name);
      start = comma + 1;
    }
    options->compile.backends = std::move(names);
  });
}

tsr_status* tsr_options_add_placement(tsr_options* options, const char* placement) {
  if (!options) return null_argument("options");
  if (!placement) return null_argument("placement");
  return guarded([&] {
    std::string text = placement;
    const size_t eq = text.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      tessera::throw_user_error("placement '", text, "' must be SELECTOR=BACKEND (e.g. conv_3=native or op:Softmax=native)");
    }
    options->compile.place.emplace_back(text.substr(0, eq), text.substr(eq + 1));
  });
}

tsr_status* tsr_options_add_denial(tsr_options* options, const char* denial) {
  if (!options) return null_argument("options");
  if (!denial) return null_argument("denial");
  return guarded([&] {
    std::string text = denial;
    const size_t colon = text.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
      tessera::throw_user_error("denial '", text, "' must be BACKEND:SELECTOR (e.g. test:Softmax or test:conv_3)");
    }
    options->compile.deny.emplace_back(text.substr(0, colon), text.substr(colon + 1));
  });
}

tsr_status* tsr_options_set_min_region_size(tsr_options* options, int32_t min_nodes) {
  if (!options) return null_argument("options");
  if (min_nodes < 1) return make_status(TSR_INVALID_ARGUMENT, "the minimum region size must be at least 1");
  options->compile.min_region_size = min_nodes;
  return nullptr;
}

tsr_status* tsr_options_set_strict(tsr_options* options, int32_t strict) {
  if (!options) return null_argument("options");
  options->compile.strict = strict != 0;
  return nullptr;
}

tsr_status* tsr_options_set_precision(tsr_options* options, const char* precision) {
  if (!options) return null_argument("options");
  if (!precision) return null_argument("precision");
  return guarded([&] { options->compile.precision = tessera::parse_precision(precision); });
}

tsr_status* tsr_options_set_tuning(tsr_options* options, const char* record_path) {
  if (!options) return null_argument("options");
  if (!record_path) return null_argument("record_path");
  return guarded([&] {
    options->compile.tuning = std::make_shared<const tessera::TuningRecord>(tessera::read_tuning_record_file(record_path));
  });
}

tsr_status* tsr_options_set_dim_bounds(tsr_options* options, const char* name, int64_t min_size, int64_t max_size) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  return guarded([&] {
    if (min_size < 0 || min_size > max_size) {
      tessera::throw_user_error("dim_bounds: '", name, "=", min_size, "..", max_size,
                                "' is not a range of sizes MIN..MAX with 0 <= MIN <= MAX");
    }
    options->compile.dim_bounds[name] = {min_size, max_size};
  });
}

tsr_status* tsr_options_set_input_value(tsr_options* options, const char* name, const char* value) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (!value) return null_argument("value");
  return guarded([&] {
    if (!*name) tessera::throw_user_error("input_values: the input name is empty");
    options->compile.input_values[name] = value;  // parsed for the input's dtype when the model compiles
  });
}

const char* tsr_option_names(void) { return kOptionNames; }

tsr_status* tsr_options_set(tsr_options* options, const char* name, const char* value) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (!value) return null_argument("value");
  const std::string n = name;
  int32_t number = 0;
  if (n == "threads") {
    if (tsr_status* bad = parse_int(name, value, 1, 1024, number)) return bad;
    return tsr_options_set_threads(options, number);
  }
  if (n == "backends") return tsr_options_set_backends(options, value);
  if (n == "place") return tsr_options_add_placement(options, value);
  if (n == "deny") return tsr_options_add_denial(options, value);
  if (n == "min_region_size") {
    if (tsr_status* bad = parse_int(name, value, 1, 1 << 30, number)) return bad;
    return tsr_options_set_min_region_size(options, number);
  }
  if (n == "strict") {
    if (tsr_status* bad = parse_bool(name, value, number)) return bad;
    return tsr_options_set_strict(options, number);
  }
  if (n == "precision") return tsr_options_set_precision(options, value);
  if (n == "tuning") return tsr_options_set_tuning(options, value);
  if (n == "dim_bounds") {
    // NAME=MIN..MAX
    const std::string text = value;
    const size_t eq = text.rfind('=');
    const size_t dots = eq == std::string::npos ? std::string::npos : text.find("..", eq + 1);
    int64_t low = 0, high = 0;
    auto number = [](const std::string& digits, int64_t& out) {
      if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
      out = std::stoll(digits);
      return true;
    };
    if (eq == std::string::npos || eq == 0 || dots == std::string::npos || !number(text.substr(eq + 1, dots - eq - 1), low) ||
        !number(text.substr(dots + 2), high)) {
      return make_status(TSR_INVALID_ARGUMENT, "option 'dim_bounds': '" + text + "' is not NAME=MIN..MAX (e.g. past=0..1024)");
    }
    return tsr_options_set_dim_bounds(options, text.substr(0, eq).c_str(), low, high);
  }
  if (n == "input_values") {
    // NAME=VALUE (the value parsed for the input's dtype when the model compiles)
    const std::string text = value;
    const size_t eq = text.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      return make_status(TSR_INVALID_ARGUMENT, "option 'input_values': '" + text + "' is not NAME=VALUE (e.g. sr=16000)");
    }
    return tsr_options_set_input_value(options, text.substr(0, eq).c_str(), text.substr(eq + 1).c_str());
  }
  if (n == "freeze_weights") {
    if (tsr_status* bad = parse_bool(name, value, number)) return bad;
    return tsr_options_set_freeze_weights(options, number);
  }
  return make_status(TSR_INVALID_ARGUMENT, "unknown option '" + n + "' (known: " + kOptionNames + ")");
}

}  // extern "C"
