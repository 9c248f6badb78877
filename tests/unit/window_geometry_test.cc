// The ir's shared window geometry (src/ir/window_geometry.h), against values
// worked out by hand from ONNX's definitions of auto_pad and ceil_mode.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/window_geometry.h"

namespace tessera {
namespace {

Node window_node(const std::string& auto_pad, std::vector<int64_t> strides, std::vector<int64_t> dilations = {}) {
  Node node;
  node.name = "w";
  node.op_type = "MaxPool";
  node.attrs.set("auto_pad", Attribute::of_string(auto_pad));
  node.attrs.set("strides", Attribute::of_ints(std::move(strides)));
  if (!dilations.empty()) node.attrs.set("dilations", Attribute::of_ints(std::move(dilations)));
  return node;
}

TEST(WindowGeometry, AxisHelpers) {
  EXPECT_EQ(parse_auto_pad(""), AutoPad::kNotSet);
  EXPECT_EQ(parse_auto_pad("NOTSET"), AutoPad::kNotSet);
  EXPECT_EQ(parse_auto_pad("SAME_UPPER"), AutoPad::kSameUpper);
  EXPECT_EQ(parse_auto_pad("SAME_LOWER"), AutoPad::kSameLower);
  EXPECT_EQ(parse_auto_pad("VALID"), AutoPad::kValid);
  EXPECT_FALSE(parse_auto_pad("same_upper").has_value());
  EXPECT_EQ(window_extent(3, 1), 3);
  EXPECT_EQ(window_extent(3, 2), 5);
  EXPECT_EQ(same_output_size(7, 2), 4);
  EXPECT_EQ(same_output_size(8, 2), 4);
  // 7 wide, 4 windows of 3, 2 apart: (4 - 1) * 2 + 3 - 7 = 2, split 1 + 1.
  EXPECT_EQ(same_padding(7, 4, 2, 3, true).begin, 1);
  EXPECT_EQ(same_padding(7, 4, 2, 3, true).end, 1);
  // 8 wide: a total of 1, at the end for SAME_UPPER, at the beginning for SAME_LOWER.
  EXPECT_EQ(same_padding(8, 4, 2, 3, true).begin, 0);
  EXPECT_EQ(same_padding(8, 4, 2, 3, true).end, 1);
  EXPECT_EQ(same_padding(8, 4, 2, 3, false).begin, 1);
  EXPECT_EQ(same_padding(8, 4, 2, 3, false).end, 0);
  // Never negative: a stride past the kernel leaves input unread instead.
  EXPECT_EQ(same_padding(9, 3, 4, 1, true).begin + same_padding(9, 3, 4, 1, true).end, 0);
}

TEST(WindowGeometry, SamePadsAndCeilMode) {
  const WindowGeometry upper = window_geometry(window_node("SAME_UPPER", {2, 1}, {1, 2}), {8, 5}, {3, 3}, false);
  EXPECT_EQ(upper.output, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(upper.pad_begin, (std::vector<int64_t>{0, 2}));  // dim 1: extent 5, total 4
  EXPECT_EQ(upper.pad_end, (std::vector<int64_t>{1, 2}));
  const WindowGeometry lower = window_geometry(window_node("SAME_LOWER", {2, 1}), {8, 5}, {3, 2}, false);
  EXPECT_EQ(lower.pad_begin, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(lower.pad_end, (std::vector<int64_t>{0, 0}));

  Node ceil = window_node("NOTSET", {2});
  ceil.attrs.set("ceil_mode", Attribute::of_int(1));
  EXPECT_EQ(window_geometry(ceil, {6}, {3}, true).output, (std::vector<int64_t>{3}));   // windows at 0, 2, 4 (partial)
  EXPECT_EQ(window_geometry(ceil, {6}, {3}, false).output, (std::vector<int64_t>{2}));  // floor: 0, 2
  EXPECT_EQ(window_geometry(window_node("VALID", {1}), {5}, {2}, false).output, (std::vector<int64_t>{4}));
  EXPECT_THROW(window_geometry(window_node("SAME", {1}), {5}, {2}, false), Error);
}

}  // namespace
}  // namespace tessera
