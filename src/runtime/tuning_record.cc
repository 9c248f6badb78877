#include "runtime/tuning_record.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "ir/graph.h"
#include "passes/precision.h"
#include "runtime/session.h"

namespace tessera {
namespace {

constexpr size_t kMaxRecordBytes = 64u << 20;
constexpr int kMaxDepth = 32;

// --- a small, strict JSON reader (objects, arrays, strings, numbers, literals) ---

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  // An object's members: keys[i] names values[i] (a vector of pairs would need Json complete here).
  std::vector<std::string> keys;
  std::vector<Json> values;

  const Json* find(const std::string& key) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &values[i];
    }
    return nullptr;
  }
};

class JsonReader {
 public:
  JsonReader(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  Json document() {
    Json value = parse(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw_user_error("tuning record '", name_, "' is not valid JSON: ", what, " at byte ", pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  Json parse(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    Json v;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = Json::Kind::kObject;
      if (consume('}')) return v;
      do {
        skip_space();
        v.keys.push_back(parse_string());
        expect(':');
        v.values.push_back(parse(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind = Json::Kind::kArray;
      if (consume(']')) return v;
      do {
        v.array.push_back(parse(depth + 1));
      } while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::kString;
      v.string = parse_string();
    } else if (literal("true")) {
      v.kind = Json::Kind::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = Json::Kind::kBool;
    } else if (literal("null")) {
      v.kind = Json::Kind::kNull;
    } else {
      v.kind = Json::Kind::kNumber;
      v.number = parse_number();
    }
    return v;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (text_.compare(pos_, w.size(), w) != 0) return false;
    pos_ += w.size();
    return true;
  }
  double parse_number() {
    const size_t start = pos_;
    while (pos_ < text_.size() && std::string("+-0123456789.eE").find(text_[pos_]) != std::string::npos) ++pos_;
    if (start == pos_) fail("unexpected character");
    const std::string digits = text_.substr(start, pos_ - start);
    char* end = nullptr;
    const double value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size() || !std::isfinite(value)) fail("bad number '" + digits + "'");
    return value;
  }
  std::string parse_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          unsigned code = 0;
          for (int k = 0; k < 4; ++k) {
            const char h = text_[pos_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\u escape");
          }
          // Basic multilingual plane only (what write_tuning_record writes: control characters).
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "-1";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

/// Field access with errors naming the record and the field.
class Fields {
 public:
  Fields(const Json& object, std::string name, std::string where) : object_(object), name_(std::move(name)), where_(std::move(where)) {
    if (object.kind != Json::Kind::kObject) fail(where_, "an object");
  }
  const Json& get(const std::string& key, Json::Kind kind, const char* kind_name) const {
    const Json* v = object_.find(key);
    if (!v) throw_user_error("tuning record '", name_, "': ", where_, " has no field '", key, "'");
    if (v->kind != kind) fail(where_ + "." + key, kind_name);
    return *v;
  }
  const Json* optional(const std::string& key, Json::Kind kind, const char* kind_name) const {
    const Json* v = object_.find(key);
    if (v && v->kind != kind) fail(where_ + "." + key, kind_name);
    return v;
  }
  std::string string(const std::string& key) const { return get(key, Json::Kind::kString, "a string").string; }
  double number(const std::string& key) const { return get(key, Json::Kind::kNumber, "a number").number; }

 private:
  [[noreturn]] void fail(const std::string& where, const char* expected) const {
    throw_user_error("tuning record '", name_, "': ", where, " must be ", expected);
  }
  const Json& object_;
  std::string name_, where_;
};

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= 0xff;  // a separator, so "ab"+"c" differs from "a"+"bc"
  h *= 1099511628211ull;
  return h;
}

}  // namespace

std::string graph_fingerprint(const Graph& graph) {
  uint64_t h = 1469598103934665603ull;
  auto value_name = [&](ValueId id) { return id == kNoValue ? std::string("<none>") : graph.value(id).name; };
  for (ValueId in : graph.inputs) {
    h = fnv1a(h, value_name(in));
    h = fnv1a(h, graph.value(in).type.to_string());
  }
  for (const Node& node : graph.nodes) {
    h = fnv1a(h, node.name);
    h = fnv1a(h, node.domain + "::" + node.op_type);
    for (ValueId in : node.inputs) h = fnv1a(h, value_name(in));
    for (ValueId out : node.outputs) h = fnv1a(h, value_name(out));
  }
  for (ValueId out : graph.outputs) h = fnv1a(h, value_name(out));
  char buffer[20];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(h));
  return buffer;
}

std::string input_shapes_text(const Graph& graph) {
  std::string text;
  for (ValueId in : graph.inputs) {
    const Value& v = graph.value(in);
    text += (text.empty() ? "" : " ") + v.name + "=";
    if (!v.type.rank_known) {
      text += "?";
      continue;
    }
    if (v.type.dims.empty()) text += "scalar";
    for (size_t d = 0; d < v.type.dims.size(); ++d) {
      const bool named = d < v.type.symbols.size() && !v.type.symbols[d].empty();
      text += (d ? "x" : "") + (v.type.dims[d] >= 0 ? std::to_string(v.type.dims[d]) : named ? v.type.symbols[d] : "?");
    }
  }
  return text;
}

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(colon + 1);
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    return name;
  }
  return "unknown";
}

std::string read_isa_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) flags.insert(w);
    break;
  }
  std::string out;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}) {
    if (!flags.count(f)) continue;
    if (!out.empty()) out += ' ';
    out += f;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

// Read once: the machine does not change under a running process.
std::string machine_cpu() {
  static const std::string cpu = read_cpu_model();
  return cpu;
}

std::string machine_isa() {
  static const std::string isa = read_isa_flags();
  return isa;
}

std::string write_tuning_record(const TuningRecord& r) {
  std::ostringstream o;
  o << "{\n  \"format\": \"tessera-tuning\",\n  \"version\": " << TuningRecord::kVersion << ",\n";
  o << "  \"model\": {\"fingerprint\": " << quote(r.fingerprint);
  if (!r.measured_at.empty()) o << ", \"measured_at\": " << quote(r.measured_at);
  o << "},\n";
  o << "  \"machine\": {\"cpu\": " << quote(r.cpu) << ", \"isa\": " << quote(r.isa) << ", \"threads\": " << r.threads << "},\n";
  o << "  \"precision\": " << quote(r.precision) << ",\n  \"backends\": [";
  for (size_t i = 0; i < r.backends.size(); ++i) o << (i ? ", " : "") << quote(r.backends[i]);
  o << "],\n  \"chosen\": " << quote(r.chosen) << ",\n";
  o << "  \"milliseconds\": {\"tuned\": " << number(r.tuned_milliseconds) << ", \"default\": " << number(r.default_milliseconds)
    << ", \"best_single\": " << number(r.best_single_milliseconds) << ", \"best_single_name\": " << quote(r.best_single) << "},\n";
  o << "  \"seconds\": " << number(r.seconds) << ",\n  \"candidates\": [";
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuningCandidate& c = r.candidates[i];
    o << (i ? ",\n" : "\n") << "    {\"name\": " << quote(c.name) << ", \"description\": " << quote(c.description)
      << ", \"milliseconds\": " << number(c.milliseconds) << ", \"accepted\": " << (c.accepted ? "true" : "false");
    if (!c.error.empty()) o << ", \"error\": " << quote(c.error);
    o << "}";
  }
  o << "\n  ],\n  \"placement\": [";
  for (size_t i = 0; i < r.placement.size(); ++i) {
    o << (i ? ",\n" : "\n") << "    {\"node\": " << quote(r.placement[i].first) << ", \"backend\": " << quote(r.placement[i].second) << "}";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

TuningRecord read_tuning_record(const std::string& text, const std::string& name) {
  if (text.size() > kMaxRecordBytes) throw_user_error("tuning record '", name, "' is larger than ", kMaxRecordBytes, " bytes");
  const Json doc = JsonReader(text, name).document();
  const Fields top(doc, name, "the record");
  if (top.string("format") != "tessera-tuning") throw_user_error("tuning record '", name, "': format is not \"tessera-tuning\"");
  const double version = top.number("version");
  if (version != TuningRecord::kVersion) {
    throw_user_error("tuning record '", name, "' has version ", version, "; this build reads version ", TuningRecord::kVersion);
  }
  TuningRecord r;
  const Fields model(top.get("model", Json::Kind::kObject, "an object"), name, "model");
  r.fingerprint = model.string("fingerprint");
  if (const Json* at = model.optional("measured_at", Json::Kind::kString, "a string")) r.measured_at = at->string;
  const Fields machine(top.get("machine", Json::Kind::kObject, "an object"), name, "machine");
  r.cpu = machine.string("cpu");
  r.isa = machine.string("isa");
  const double threads = machine.number("threads");
  if (threads < 1 || threads > 4096 || threads != std::floor(threads)) throw_user_error("tuning record '", name, "': machine.threads must be a whole number from 1");
  r.threads = static_cast<int>(threads);
  r.source = name;
  r.precision = top.string("precision");
  try {
    parse_precision(r.precision);  // a user error for an unknown one
  } catch (const Error& e) {
    throw_user_error("tuning record '", name, "': ", e.what());
  }
  for (const Json& b : top.get("backends", Json::Kind::kArray, "an array").array) {
    if (b.kind != Json::Kind::kString || b.string.empty()) throw_user_error("tuning record '", name, "': backends must hold backend names");
    r.backends.push_back(b.string);
  }
  r.chosen = top.string("chosen");
  if (const Json* ms = top.optional("milliseconds", Json::Kind::kObject, "an object")) {
    const Fields m(*ms, name, "milliseconds");
    r.tuned_milliseconds = m.number("tuned");
    r.default_milliseconds = m.number("default");
    r.best_single_milliseconds = m.number("best_single");
    r.best_single = m.string("best_single_name");
  }
  if (const Json* s = top.optional("seconds", Json::Kind::kNumber, "a number")) r.seconds = s->number;
  if (const Json* cs = top.optional("candidates", Json::Kind::kArray, "an array")) {
    for (size_t i = 0; i < cs->array.size(); ++i) {
      const Fields c(cs->array[i], name, "candidates[" + std::to_string(i) + "]");
      TuningCandidate candidate;
      candidate.name = c.string("name");
      candidate.description = c.string("description");
      candidate.milliseconds = c.number("milliseconds");
      candidate.accepted = c.get("accepted", Json::Kind::kBool, "true or false").boolean;
      if (const Json* e = c.optional("error", Json::Kind::kString, "a string")) candidate.error = e->string;
      r.candidates.push_back(std::move(candidate));
    }
  }
  const Json& placement = top.get("placement", Json::Kind::kArray, "an array");
  std::set<std::string> nodes;
  for (size_t i = 0; i < placement.array.size(); ++i) {
    const Fields p(placement.array[i], name, "placement[" + std::to_string(i) + "]");
    std::string node = p.string("node"), backend = p.string("backend");
    if (node.empty() || backend.empty()) throw_user_error("tuning record '", name, "': placement[", i, "] has an empty name");
    if (!nodes.insert(node).second) throw_user_error("tuning record '", name, "': node '", node, "' is placed twice");
    if (backend != "native" && std::find(r.backends.begin(), r.backends.end(), backend) == r.backends.end()) {
      std::string list;
      for (const std::string& b : r.backends) list += (list.empty() ? "" : ", ") + b;
      throw_user_error("tuning record '", name, "': node '", node, "' is placed on '", backend,
                       "', which is not among the record's backends (", list, ")");
    }
    r.placement.emplace_back(std::move(node), std::move(backend));
  }
  // A record tune wrote places every node it ran; an empty one would silently mean the default placement.
  if (r.placement.empty()) throw_user_error("tuning record '", name, "': its placement is empty (a record places every node)");
  return r;
}

TuningRecord read_tuning_record_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_user_error("cannot open tuning record '", path, "'");
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxRecordBytes) throw_user_error("tuning record '", path, "' is larger than ", kMaxRecordBytes, " bytes");
  }
  return read_tuning_record(text, path);
}

std::vector<std::string> apply_tuning(const TuningRecord& record, const std::string& fingerprint,
                                      const std::string& open_fingerprint, const std::string& shapes,
                                      CompileOptions& options, bool* applied) {
  std::vector<std::string> warnings;
  *applied = false;
  const bool open_plan = !record.measured_at.empty() && record.fingerprint == open_fingerprint;
  if (record.fingerprint != fingerprint && !open_plan) {
    warnings.push_back(str_cat("the tuning record '", record.source, "' was made for another model or other input shapes (fingerprint ", record.fingerprint,
                               ", this model ", fingerprint, "): not applied, the default placement is used"));
    return warnings;
  }
  std::vector<std::string> differences;
  if (record.fingerprint != fingerprint && shapes != record.measured_at) {
    differences.push_back(str_cat("input shapes ", record.measured_at, ", here ", shapes));
  }
  const std::string cpu = machine_cpu(), isa = machine_isa();
  if (record.cpu != cpu) differences.push_back(str_cat("CPU '", record.cpu, "', here '", cpu, "'"));
  if (record.isa != isa) differences.push_back(str_cat("ISA '", record.isa, "', here '", isa, "'"));
  if (record.threads != options.num_threads) differences.push_back(str_cat(record.threads, " threads, here ", options.num_threads));
  const std::string precision = precision_text(options.precision);
  if (record.precision != precision) differences.push_back(str_cat("precision ", record.precision, ", here ", precision));
  if (!differences.empty()) {
    std::string text;
    for (const std::string& d : differences) text += (text.empty() ? "" : "; ") + d;
    warnings.push_back("the tuning record '" + record.source + "' was measured elsewhere (" + text +
                       "): its placement is applied but may not be the fastest here");
  }
  if (options.backends.empty()) options.backends = record.backends;
  for (const auto& [node, backend] : record.placement) options.place.emplace_back(node, backend);
  *applied = true;
  return warnings;
}

}  // namespace tessera
