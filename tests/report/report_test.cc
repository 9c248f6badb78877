// Tests of the placement report renderers on hand-built reports: the table's
// rows and totals, JSON that parses back (with a small strict parser here and
// with Python's json module) to the same names, DOT clusters and colours, and
// HTML that escapes every name. The expectations are written out by hand,
// not taken from earlier output.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ir/error.h"
#include "report/placement_report.h"
#include "report/report_internal.h"
#include "unit/expect_error.h"

namespace tessera {
namespace {

// ---- a strict little JSON parser, enough to check the output's shape ----
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  // An object's members in file order, as two lists: clang 14 with libstdc++ (the sanitizer
  // build) rejects std::vector<std::pair<std::string, Json>> inside Json, where Json is incomplete.
  std::vector<std::string> member_names;
  std::vector<Json> member_values;

  const Json& operator[](const std::string& key) const {
    for (size_t i = 0; i < member_names.size(); ++i) {
      if (member_names[i] == key) return member_values[i];
    }
    throw std::runtime_error("no key " + key);
  }
  const Json& operator[](size_t index) const { return items.at(index); }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : text_(std::move(text)) {}
  Json parse_document() {
    Json value = parse_value();
    skip_space();
    if (position_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON " + what + str_cat(" at offset ", position_));
  }
  void skip_space() {
    while (position_ < text_.size() && std::string(" \t\r\n").find(text_[position_]) != std::string::npos) ++position_;
  }
  void expect(char character) {
    skip_space();
    if (position_ >= text_.size() || text_[position_] != character) fail(std::string("expected ") + character);
    ++position_;
  }
  bool literal(const char* word) {
    const std::string_view view(word);
    if (text_.compare(position_, view.size(), view) != 0) return false;
    position_ += view.size();
    return true;
  }
  void append_utf8(uint32_t code_point, std::string& out) {
    if (code_point < 0x80) {
      out += static_cast<char>(code_point);
    } else if (code_point < 0x800) {
      out += static_cast<char>(0xC0 | (code_point >> 6));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code_point >> 12));
      out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code_point & 0x3F));
    }
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (position_ >= text_.size()) fail("unterminated string");
      const unsigned char character = static_cast<unsigned char>(text_[position_++]);
      if (character == '"') return out;
      if (character < 0x20) fail("raw control character in string");
      if (character != '\\') {
        out += static_cast<char>(character);
        continue;
      }
      if (position_ >= text_.size()) fail("dangling escape");
      const char escape = text_[position_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (position_ + 4 > text_.size()) fail("short \\u escape");
          append_utf8(static_cast<uint32_t>(std::stoul(text_.substr(position_, 4), nullptr, 16)), out);
          position_ += 4;
          break;
        }
        default: fail("bad escape");
      }
    }
  }
  Json parse_value() {
    skip_space();
    if (position_ >= text_.size()) fail("unexpected end");
    Json value;
    const char character = text_[position_];
    if (character == '{') {
      value.kind = Json::Kind::kObject;
      ++position_;
      skip_space();
      if (text_[position_] == '}') {
        ++position_;
        return value;
      }
      while (true) {
        std::string key = parse_string();
        expect(':');
        value.member_names.push_back(std::move(key));
        value.member_values.push_back(parse_value());
        skip_space();
        if (text_[position_] == ',') {
          ++position_;
          skip_space();
          continue;
        }
        expect('}');
        return value;
      }
    }
    if (character == '[') {
      value.kind = Json::Kind::kArray;
      ++position_;
      skip_space();
      if (text_[position_] == ']') {
        ++position_;
        return value;
      }
      while (true) {
        value.items.push_back(parse_value());
        skip_space();
        if (text_[position_] == ',') {
          ++position_;
          continue;
        }
        expect(']');
        return value;
      }
    }
    if (character == '"') {
      value.kind = Json::Kind::kString;
      value.text = parse_string();
      return value;
    }
    if (literal("true") || literal("false")) {
      value.kind = Json::Kind::kBool;
      value.boolean = text_[position_ - 1] == 'e' && text_[position_ - 2] == 'u';
      return value;
    }
    if (literal("null")) return value;
    size_t used = 0;
    value.kind = Json::Kind::kNumber;
    try {
      value.number = std::stod(text_.substr(position_, 40), &used);
    } catch (const std::exception&) {
      fail("bad value");
    }
    position_ += used;
    return value;
  }

  std::string text_;
  size_t position_ = 0;
};

Json parse_json(const std::string& text) { return JsonParser(text).parse_document(); }

// ---- the hand-built reports ----
const std::string kScriptName = "<script>alert(\"x\")</script>";
const std::string kWeirdName = "quote\"back\\slash\nnewline\x01";
const std::string kUnicodeName = "\xE8\x8A\x82\xE7\x82\xB9_\xC3\xA9";  // 节点_é
const std::string kInvalidUtf8Name = "bad\xFF";

int64_t add_value(PlacementReport& report, std::string name, std::string type, int64_t producer = -1) {
  report.values.push_back(ReportValue{std::move(name), std::move(type), producer});
  return static_cast<int64_t>(report.values.size() - 1);
}

/// Two backends (test claims Conv/Relu/Add, native everything), three
/// regions, a folded Shape node, a constant, names that need escaping and a
/// graph input wired straight to an output.
PlacementReport sample_report() {
  PlacementReport report;
  report.model = "tiny & <odd>.onnx";
  report.backends = {"test", "native"};
  const int64_t x = add_value(report, "x", "float32[1x3]");
  report.values[x].graph_input = true;
  const int64_t w = add_value(report, "w", "float32[3]");
  report.values[w].constant = true;
  const int64_t skip = add_value(report, "skip", "int64[2]");
  report.values[skip].graph_input = report.values[skip].graph_output = true;
  const int64_t a = add_value(report, "a", "float32[1x3]", 0);
  const int64_t b = add_value(report, "b", "float32[1x3]", 1);
  const int64_t c = add_value(report, "c", "float32[1x3]", 2);
  const int64_t d = add_value(report, "d", "float32[1x3]", 3);
  const int64_t y = add_value(report, "y", "float32[1x3]", 4);
  report.values[y].graph_output = true;
  const int64_t shape = add_value(report, "shape_of_w", "int64[1]", 7);
  const int64_t e = add_value(report, "e", "float32[1x3]", 5);
  const int64_t f = add_value(report, "f", "float32[1x3]", 6);
  report.values[f].graph_output = true;

  const std::string softmax_refusal = "not declared by backend 'test'";
  report.nodes = {
      {"conv_1", "Conv", "test", 0, "pattern ConvActivation", "", {"", ""}, {x, w}, {a}, 0.5},
      {"relu_1", "Relu", "test", 0, "pattern ConvActivation", "fused into 'conv_1' (pattern ConvActivation)",
       {"", ""}, {a}, {b}, 0.25},
      {kScriptName, "Softmax", "native", 1, "claimed", "", {softmax_refusal, ""}, {b}, {c}, 1.0},
      {"softmax_2", "Softmax", "native", 1, "claimed", "", {softmax_refusal, ""}, {c, shape}, {d}, 2.0},
      {kWeirdName, "Add", "test", 2, "claimed", "", {"", ""}, {d, x}, {y}, 0.125},
      {kUnicodeName, "Reshape", "native", 1, "placed by --place", "", {"dynamic shape in 'x'", ""}, {c}, {e}, 0.0625},
      {kInvalidUtf8Name, "Identity", "native", 1, "claimed", "", {"Identity is not worth a copy", ""}, {e}, {f}, -1},
      {"shape_fold", "Shape", "folded", -1, "constant inputs", "computed at compile time", {}, {w}, {shape}, -1},
  };
  report.regions = {
      {"test", "test", {0, 1}, {x}, {b}, {"ConvActivation: conv_1, relu_1"}, 0.75},
      {"native", "host", {2, 3, 5, 6}, {b}, {d, f}, {}, 3.0625},
      {"test", "test", {4}, {d, x}, {y}, {}, 0.125},
  };
  report.copies_per_run = 3;
  report.copy_bytes_per_run = 36;
  return report;
}

/// No nodes at all: the graph's input is its output.
PlacementReport empty_report() {
  PlacementReport report;
  report.model = "identity.onnx";
  report.backends = {"native"};
  const int64_t x = add_value(report, "x", "float32[2]");
  report.values[x].graph_input = report.values[x].graph_output = true;
  return report;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream stream(line);
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

bool has_line_with_words(const std::string& text, const std::vector<std::string>& words) {
  for (const std::string& line : lines_of(text)) {
    if (words_of(line) == words) return true;
  }
  return false;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

size_t code_points(const std::string& line) {
  size_t count = 0;
  for (char character : line) count += (static_cast<unsigned char>(character) & 0xC0) != 0x80 ? 1 : 0;
  return count;
}

// ---- table ----
TEST(ReportTable, RowsRefusalsAndTotals) {
  const std::string table = render_report_table(sample_report());
  // Region rows: index, backend, memory, nodes, inputs, outputs, time.
  EXPECT_TRUE(has_line_with_words(table, {"0", "test", "test", "2", "1", "1", "0.750", "ms"})) << table;
  EXPECT_TRUE(has_line_with_words(table, {"1", "native", "host", "4", "1", "2", "3.06", "ms"})) << table;
  EXPECT_TRUE(has_line_with_words(table, {"2", "test", "test", "1", "2", "1", "0.125", "ms"})) << table;
  EXPECT_NE(table.find("in:    d: float32[1x3], x: float32[1x3]"), std::string::npos) << table;
  EXPECT_NE(table.find("fused: ConvActivation: conv_1, relu_1"), std::string::npos) << table;
  // Identical reasons are grouped; singletons name their node.
  EXPECT_NE(table.find("\n  Softmax x2: not declared by backend 'test'"), std::string::npos) << table;
  EXPECT_NE(table.find("\n  Reshape '" + kUnicodeName + "': dynamic shape in 'x'"), std::string::npos) << table;
  EXPECT_NE(table.find("Backend 'test' refused 4 nodes:"), std::string::npos) << table;
  EXPECT_NE(table.find("Backend 'native' refused no node."), std::string::npos) << table;
  // Totals per backend: nodes, regions, time (region times summed).
  EXPECT_TRUE(has_line_with_words(table, {"test", "3", "2", "0.875", "ms"})) << table;
  EXPECT_TRUE(has_line_with_words(table, {"native", "4", "1", "3.06", "ms"})) << table;
  EXPECT_TRUE(has_line_with_words(table, {"folded", "1", "0"})) << table;
  EXPECT_NE(table.find("Copies between memory spaces: 3 per run, 36 B (36 bytes)"), std::string::npos) << table;
  EXPECT_NE(table.find("7 nodes run in 3 regions, 1 folded at compile time."), std::string::npos) << table;
  for (const std::string& line : lines_of(table)) EXPECT_LE(code_points(line), 100u) << line;
  // No byte of an invalid UTF-8 name and no control character gets through.
  EXPECT_EQ(table.find('\xFF'), std::string::npos);
  EXPECT_EQ(table.find('\x01'), std::string::npos);
}

TEST(ReportTable, LongListsAreShortenedToOneHundredColumns) {
  PlacementReport report;
  report.model = "wide.onnx";
  report.backends = {"native"};
  ReportRegion region{"native", "host"};
  ReportNode node{"concat", "Concat", "native", 0, "claimed", "", {""}};
  for (int index = 0; index < 60; ++index) {
    const int64_t value = add_value(report, str_cat("input_with_a_long_name_", index), "float32[1x64x56x56]");
    report.values[value].graph_input = true;
    region.inputs.push_back(value);
    node.inputs.push_back(value);
  }
  node.outputs.push_back(add_value(report, "out", "float32[1x3840x56x56]", 0));
  region.outputs = node.outputs;
  region.nodes = {0};
  report.nodes.push_back(node);
  report.regions.push_back(region);
  // 30 distinct refusal reasons for the one backend would overflow the list too.
  for (int index = 0; index < 30; ++index) {
    report.nodes.push_back(ReportNode{str_cat("n", index), str_cat("Op", index), "folded"});
  }
  const std::string table = render_report_table(report);
  for (const std::string& line : lines_of(table)) EXPECT_LE(code_points(line), 100u) << line;
  const size_t more = table.find(" more");
  ASSERT_NE(more, std::string::npos) << table;
  // The shown names plus "N more" account for all 60 inputs.
  const std::string in_line = table.substr(table.find("in:"), table.find('\n', table.find("in:")) - table.find("in:"));
  const size_t shown = count_of(in_line, "input_with_a_long_name_");
  EXPECT_NE(in_line.find(str_cat("... and ", 60 - shown, " more")), std::string::npos) << in_line;
  EXPECT_GE(shown, 1u);
}

TEST(ReportTable, EmptyReport) {
  const std::string table = render_report_table(empty_report());
  EXPECT_NE(table.find("0 nodes run in 0 regions, 0 folded at compile time."), std::string::npos) << table;
  EXPECT_NE(table.find("No regions"), std::string::npos) << table;
  EXPECT_TRUE(has_line_with_words(table, {"native", "0", "0"})) << table;
}

// ---- JSON ----
TEST(ReportJson, ParsesBackWithEveryName) {
  const PlacementReport report = sample_report();
  const Json json = parse_json(render_report_json(report));
  EXPECT_EQ(json["model"].text, "tiny & <odd>.onnx");
  ASSERT_EQ(json["backends"].items.size(), 2u);
  EXPECT_EQ(json["backends"][1].text, "native");
  EXPECT_EQ(json["copies"]["per_run"].number, 3);
  EXPECT_EQ(json["copies"]["bytes_per_run"].number, 36);

  const Json& nodes = json["nodes"];
  ASSERT_EQ(nodes.items.size(), 8u);
  EXPECT_EQ(nodes[2]["name"].text, kScriptName);
  EXPECT_EQ(nodes[4]["name"].text, kWeirdName);  // quote, backslash, newline and \x01 round-trip
  EXPECT_EQ(nodes[5]["name"].text, kUnicodeName);
  EXPECT_EQ(nodes[6]["name"].text, "bad\xEF\xBF\xBD");  // the invalid byte became U+FFFD
  EXPECT_EQ(nodes[2]["refusals"]["test"].text, "not declared by backend 'test'");
  EXPECT_EQ(nodes[2]["refusals"]["native"].text, "");
  EXPECT_EQ(nodes[1]["note"].text, "fused into 'conv_1' (pattern ConvActivation)");
  EXPECT_EQ(nodes[0]["inputs"][1].text, "w");
  EXPECT_EQ(nodes[0]["region"].number, 0);
  EXPECT_EQ(nodes[0]["milliseconds"].number, 0.5);
  EXPECT_EQ(nodes[7]["region"].kind, Json::Kind::kNull);
  EXPECT_EQ(nodes[7]["milliseconds"].kind, Json::Kind::kNull);
  EXPECT_TRUE(nodes[7]["refusals"].member_names.empty());

  const Json& regions = json["regions"];
  ASSERT_EQ(regions.items.size(), 3u);
  EXPECT_EQ(regions[1]["memory_space"].text, "host");
  ASSERT_EQ(regions[1]["nodes"].items.size(), 4u);
  EXPECT_EQ(regions[1]["nodes"][0].text, kScriptName);
  EXPECT_EQ(regions[2]["inputs"][0].text, "d");
  EXPECT_EQ(regions[0]["composites"][0].text, "ConvActivation: conv_1, relu_1");

  const Json& values = json["values"];
  ASSERT_EQ(values.items.size(), report.values.size());
  EXPECT_EQ(values[0]["producer"].kind, Json::Kind::kNull);
  EXPECT_TRUE(values[0]["graph_input"].boolean);
  EXPECT_FALSE(values[0]["constant"].boolean);
  EXPECT_TRUE(values[1]["constant"].boolean);
  EXPECT_EQ(values[8]["producer"].text, "shape_fold");
  EXPECT_EQ(json["totals"][0]["backend"].text, "test");
  EXPECT_EQ(json["totals"][0]["nodes"].number, 3);
  EXPECT_EQ(json["totals"][0]["regions"].number, 2);
}

TEST(ReportJson, StringEscaper) {
  using report_detail::json_string;
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(json_string(std::string("\x00\x1f", 2)), "\"\\u0000\\u001f\"");
  EXPECT_EQ(json_string("\xC3\xA9"), "\"\xC3\xA9\"");                     // é passes through
  EXPECT_EQ(json_string("\xC3"), "\"\xEF\xBF\xBD\"");                      // truncated sequence
  EXPECT_EQ(json_string("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");      // overlong '/'
  EXPECT_EQ(json_string("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // a surrogate
  EXPECT_EQ(json_string("</script>", true), "\"\\u003c/script\\u003e\"");
  EXPECT_EQ(json_string("a\xE2\x80\xA8" "b", true), "\"a\\u2028b\"");
}

TEST(ReportJson, PythonAcceptsIt) {
  if (std::system("test -x /usr/bin/python3") != 0) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  const std::string path = ::testing::TempDir() + "/placement_report.json";
  std::ofstream(path, std::ios::binary) << render_report_json(sample_report());
  const std::string command =
      "/usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1],encoding='utf-8')); "
      "assert d['nodes'][2]['name']=='<script>alert(\\\"x\\\")</script>', d['nodes'][2]['name']; "
      "assert d['nodes'][4]['name']=='quote\\\"back\\\\\\\\slash\\\\nnewline\\\\x01', repr(d['nodes'][4]['name'])\" " +
      path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  const Json empty = parse_json(render_report_json(empty_report()));
  EXPECT_TRUE(empty["nodes"].items.empty());
  EXPECT_TRUE(empty["regions"].items.empty());
  EXPECT_TRUE(empty["values"][0]["graph_output"].boolean);
}

// ---- DOT ----
// Every line's quotes must pair up once escaped quotes are skipped.
void expect_balanced_quotes(const std::string& dot) {
  for (const std::string& line : lines_of(dot)) {
    bool inside = false;
    for (size_t position = 0; position < line.size(); ++position) {
      if (inside && line[position] == '\\') {
        ++position;
      } else if (line[position] == '"') {
        inside = !inside;
      }
    }
    EXPECT_FALSE(inside) << "unbalanced quotes: " << line;
  }
}

TEST(ReportDot, ClustersColoursAndEscaping) {
  const PlacementReport report = sample_report();
  const std::string dot = render_report_dot(report);
  EXPECT_EQ(dot.rfind("digraph placement {", 0), 0u) << dot;
  EXPECT_EQ(count_of(dot, "subgraph cluster_"), 3u);
  EXPECT_NE(dot.find("label=\"region 0: test (2 nodes)\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"region 1: native (4 nodes)\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"region 2: test (1 node)\""), std::string::npos) << dot;
  // Same backend, same colour; different backends, different colours.
  const std::string test_fill = "fillcolor=\"" + report_detail::backend_colour(report, "test") + "\"";
  const std::string native_fill = "fillcolor=\"" + report_detail::backend_colour(report, "native") + "\"";
  EXPECT_NE(test_fill, native_fill);
  EXPECT_EQ(count_of(dot, test_fill), 3u);    // conv_1, relu_1, the weird Add
  EXPECT_EQ(count_of(dot, native_fill), 4u);  // the four native nodes
  // Constants and folded nodes are counted, not drawn.
  EXPECT_NE(dot.find("n0 [label=\"Conv\\nconv_1\\n+1 constant"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 [label=\"Softmax\\nsoftmax_2\\n+1 constant"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("shape_fold"), std::string::npos);
  EXPECT_EQ(dot.find("n7 "), std::string::npos);
  // Inputs and outputs have their own shapes; the pass-through input is wired to its output.
  EXPECT_NE(dot.find("in0 [shape=invhouse"), std::string::npos) << dot;
  EXPECT_NE(dot.find("out7 [shape=house"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in2 -> out2 [label=\"int64[2]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("in0 -> n0 [label=\"float32[1x3]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 -> n4"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("-> n0 [label=\"float32[3]\"]"), std::string::npos) << "constant edge drawn";
  // Names are escaped: quotes, backslashes, newlines.
  EXPECT_NE(dot.find("Add\\nquote\\\"back\\\\slash newline "), std::string::npos) << dot;
  expect_balanced_quotes(dot);
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(ReportDot, EmptyReportWiresInputToOutput) {
  const std::string dot = render_report_dot(empty_report());
  EXPECT_EQ(count_of(dot, "subgraph cluster_"), 0u);
  EXPECT_NE(dot.find("in0 -> out0"), std::string::npos) << dot;
  expect_balanced_quotes(dot);
}

// ---- HTML ----
std::string item_data_block(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"tessera-item-data\">";
  const size_t begin = html.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = html.find("</script>", begin);
  return html.substr(begin + open.size(), end - begin - open.size());
}

TEST(ReportHtml, EscapesEveryNameAndIsSelfContained) {
  const PlacementReport report = sample_report();
  const std::string html = render_report_html(report);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  // Nothing external: no URL, no src or href attribute.
  EXPECT_EQ(html.find("http:"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find(" href="), std::string::npos);
  // Exactly our two script elements: a name cannot open or close one.
  EXPECT_EQ(count_of(html, "<script"), 2u);
  EXPECT_EQ(count_of(html, "</script"), 2u);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("quote&quot;back\\slash"), std::string::npos);
  EXPECT_NE(html.find(kUnicodeName), std::string::npos);
  EXPECT_NE(html.find("tiny &amp; &lt;odd&gt;.onnx"), std::string::npos);
  EXPECT_EQ(html.find('\xFF'), std::string::npos);
  EXPECT_EQ(html.find('\x01'), std::string::npos);
  for (const char* name : {"conv_1", "relu_1", "softmax_2"}) EXPECT_NE(html.find(name), std::string::npos) << name;
  // Drawn: 7 executed nodes, 2 inputs (x, skip), 3 outputs (skip, y, f); folded and constants are not.
  EXPECT_EQ(count_of(html, "class=\"item node\""), 7u);
  EXPECT_EQ(count_of(html, "class=\"item io\""), 5u);
  EXPECT_NE(html.find("data-expected-node-count=\"7\""), std::string::npos);
  EXPECT_NE(html.find("R1</text>"), std::string::npos);  // region badge
  // Legend and boxes use the DOT palette.
  EXPECT_NE(html.find("fill=\"" + report_detail::backend_colour(report, "native") + "\""), std::string::npos);
  EXPECT_NE(html.find("background:" + report_detail::backend_colour(report, "test")), std::string::npos);
  EXPECT_NE(html.find("Softmax ×2</b>: not declared by backend &#39;test&#39;"), std::string::npos);
  EXPECT_NE(html.find("data-rendered"), std::string::npos);

  // The details data parses and keeps the exact names.
  const Json items = parse_json(item_data_block(html));
  ASSERT_EQ(items.items.size(), 12u);
  size_t found = 0;
  for (const Json& item : items.items) {
    if (item["kind"].text != "node") continue;
    if (item["name"].text == kScriptName) {
      ++found;
      EXPECT_EQ(item["refusals"][0][1].text, "not declared by backend 'test'");
      EXPECT_EQ(item["backend"].text, "native");
    }
    if (item["name"].text == kWeirdName) ++found;
  }
  EXPECT_EQ(found, 2u);
}

TEST(ReportHtml, EmptyReport) {
  const std::string html = render_report_html(empty_report());
  EXPECT_NE(html.find("data-expected-node-count=\"0\""), std::string::npos);
  EXPECT_EQ(count_of(html, "class=\"item io\""), 2u);
  EXPECT_EQ(count_of(html, "</title></path>"), 1u);  // the input-to-output edge
  EXPECT_EQ(parse_json(item_data_block(html)).items.size(), 2u);
}

// A ladder: node i reads node i-1 and node i-2, regions of 100 nodes alternate backends.
PlacementReport ladder_report(int node_count) {
  PlacementReport report;
  report.model = "ladder.onnx";
  report.backends = {"test", "native"};
  const int64_t input = add_value(report, "input", "float32[1x16]");
  report.values[input].graph_input = true;
  std::vector<int64_t> outputs;
  for (int index = 0; index < node_count; ++index) {
    const int64_t region = index / 100;
    if (static_cast<int64_t>(report.regions.size()) <= region) {
      report.regions.push_back(ReportRegion{region % 2 ? "native" : "test", "host"});
    }
    ReportNode node{str_cat("node_", index), index % 3 ? "Add" : "Mul", report.regions[region].backend,
                    region, "claimed", "", {region % 2 ? "Add is not declared" : "", ""}};
    node.inputs.push_back(index == 0 ? input : outputs[index - 1]);
    if (index >= 2) node.inputs.push_back(outputs[index - 2]);
    outputs.push_back(add_value(report, str_cat("value_", index), "float32[1x16]", index));
    node.outputs = {outputs.back()};
    report.regions[region].nodes.push_back(index);
    report.nodes.push_back(std::move(node));
  }
  report.values[outputs.back()].graph_output = true;
  return report;
}

/// The calling thread's CPU time: a busy machine that takes the CPU away from this thread does not count.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// The best of five renderings of `report` by `render`, in seconds of this thread's CPU time (the best,
/// so that another process on the machine does not decide the result).
template <typename Render>
double best_seconds(const PlacementReport& report, Render render) {
  double best = 1e9;
  for (int k = 0; k < 5; ++k) {
    const double start = thread_cpu_seconds();
    const std::string text = render(report);
    best = std::min(best, thread_cpu_seconds() - start);
    EXPECT_FALSE(text.empty());
  }
  return best;
}

/// Every renderer scales linearly: 16x the nodes take less than 64x the time (quadratic work would take
/// 256x). A ratio of two best-of-five timings in this thread's CPU time, not a wall-clock limit that a
/// slower or busier machine fails (a CI run beside other work once measured 13x by the wall clock). At
/// 4x the nodes a bound of 10x left too little room: under ASan the table took 10.1x (cache and shadow
/// memory grow with the report).
TEST(ReportHtml, TenThousandNodesRenderInLinearTime) {
  const PlacementReport report = ladder_report(10000);
  const PlacementReport sixteenth = ladder_report(625);
  const std::string html = render_report_html(report);
  EXPECT_EQ(count_of(html, "class=\"item node\""), 10000u);
  EXPECT_NE(html.find("data-expected-node-count=\"10000\""), std::string::npos);
  const std::pair<const char*, std::string (*)(const PlacementReport&)> renderers[] = {
      {"html", [](const PlacementReport& r) { return render_report_html(r); }},
      {"json", [](const PlacementReport& r) { return render_report_json(r); }},
      {"dot", [](const PlacementReport& r) { return render_report_dot(r); }},
      {"table", [](const PlacementReport& r) { return render_report_table(r); }},
  };
  for (const auto& [name, render] : renderers) {
    const double small = std::max(best_seconds(sixteenth, render), 1e-4);  // a floor: timer resolution
    const double large = best_seconds(report, render);
    EXPECT_LT(large / small, 64.0) << name << ": 625 nodes in " << small << " s, 10,000 in " << large << " s";
  }
  const std::string table = render_report_table(report);
  // Backend 'test' refuses the Adds and Muls of the odd (native) regions.
  size_t refused_adds = 0, refused_muls = 0;
  for (int index = 0; index < 10000; ++index) {
    if ((index / 100) % 2 == 1) ++(index % 3 ? refused_adds : refused_muls);
  }
  EXPECT_NE(table.find(str_cat("Add x", refused_adds, ": Add is not declared")), std::string::npos)
      << table.substr(table.find("Backend 'test'"));
  EXPECT_NE(table.find(str_cat("Mul x", refused_muls, ": Add is not declared")), std::string::npos);
}

// Writes the sample report's HTML where TESSERA_REPORT_SAMPLE_HTML says, for
// tests/report/render_html_in_chromium.sh; with TESSERA_REPORT_SAMPLE_NODES
// set, a ladder of that many nodes instead.
TEST(ReportHtml, WritesSampleForBrowserCheck) {
  const char* path = std::getenv("TESSERA_REPORT_SAMPLE_HTML");
  if (path == nullptr) GTEST_SKIP() << "set TESSERA_REPORT_SAMPLE_HTML=FILE to write a sample page";
  const char* nodes = std::getenv("TESSERA_REPORT_SAMPLE_NODES");
  const PlacementReport report = nodes ? ladder_report(std::atoi(nodes)) : sample_report();
  std::ofstream out(path, std::ios::binary);
  out << render_report_html(report);
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

// ---- broken reports ----
TEST(ReportErrors, BadIndicesAreInternalErrorsNamingTheProblem) {
  PlacementReport report = sample_report();
  report.nodes[1].region = 7;
  EXPECT_INTERNAL_ERROR(render_report_html(report), "node 'relu_1' (index 1) refers to region 7");
  report = sample_report();
  report.regions[0].inputs.push_back(99);
  EXPECT_INTERNAL_ERROR(render_report_json(report), "region 0 refers to value 99");
  report = sample_report();
  report.nodes[0].refusals = {""};
  EXPECT_INTERNAL_ERROR(render_report_table(report), "refusal entries for");
  report = sample_report();
  report.values[3].producer = -5;
  EXPECT_INTERNAL_ERROR(render_report_dot(report), "refers to node -5");
  report = sample_report();
  report.backends = {"test", "test"};
  EXPECT_INTERNAL_ERROR(render_report_dot(report), "backend 'test' is listed twice");
}

}  // namespace
}  // namespace tessera
