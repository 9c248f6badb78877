// Tests of tools/npy.cc, the CLI's .npy reader and writer, on numpy's unicode
// string arrays ('<U{n}'): files numpy wrote are read as the UTF-8 strings,
// files written here load in numpy as the same array (both against
// /usr/bin/python3's numpy), and hostile headers and data give clear errors
// that name the file (and the element), never a crash or a huge allocation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "npy.h"

namespace tessera::tools {
namespace {

namespace fs = std::filesystem;

const char* const kPython = "/usr/bin/python3";

/// A fresh folder, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tessera_npy_test_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// Runs a Python script (with numpy) on `dir`; its exit status, 0 on success.
int run_python(const TempDir& dir, const std::string& script) {
  const std::string script_path = dir.file("script.py");
  std::ofstream(script_path) << "import sys, numpy as np\nd = sys.argv[1]\n" << script;
  const std::string command = std::string(kPython) + " " + script_path + " " + dir.path().string();
  return std::system(command.c_str());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A version-1 .npy file with this header dict and data (the header is padded as numpy pads it).
std::string npy_file(std::string header, const std::string& data) {
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

std::string dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

/// Little-endian UTF-32 code units.
std::string utf32(const std::vector<uint32_t>& units) {
  std::string bytes;
  for (uint32_t u : units) {
    for (int i = 0; i < 4; ++i) bytes += static_cast<char>((u >> (8 * i)) & 0xFF);
  }
  return bytes;
}

/// The message `statement` throws as std::runtime_error; a test failure (and "") if it throws nothing.
std::string error_of(const std::function<void()>& statement) {
  try {
    statement();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no std::runtime_error was thrown";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

const std::vector<std::string> kMixed = {"a", "héllo", "日本", "", "\U0001F600"};

TEST(NpyStrings, ReadsWhatNumpyWrites) {
  TempDir dir;
  ASSERT_EQ(run_python(dir, R"(
np.save(d + "/mixed.npy", np.array(['a', 'héllo', '日本', '', '\U0001F600'], dtype=str))
np.save(d + "/grid.npy", np.array([['x', 'yy', 'zzz'], ['ü', '', '€uro']], dtype=str))
np.save(d + "/all_empty.npy", np.array(['', '', ''], dtype=str))
np.save(d + "/none.npy", np.array([], dtype=str))
np.save(d + "/none_2d.npy", np.zeros((0, 3), dtype='<U4'))
np.save(d + "/scalar.npy", np.array('schön'))
np.save(d + "/big_endian.npy", np.array(['ab', 'ç'], dtype='>U3'))
np.save(d + "/inner_nul.npy", np.array(['a\x00b', '\x00']))
)"),
            0);

  const NpyArray mixed = read_npy(dir.file("mixed.npy"));
  EXPECT_TRUE(mixed.is_string);
  EXPECT_TRUE(mixed.data.empty());
  EXPECT_EQ(dl_dtype_name(mixed.dtype), "str");
  EXPECT_EQ(mixed.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(mixed.strings, kMixed);
  EXPECT_EQ(mixed.strings[4], "\xF0\x9F\x98\x80");

  const NpyArray grid = read_npy(dir.file("grid.npy"));
  EXPECT_EQ(grid.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(grid.strings, (std::vector<std::string>{"x", "yy", "zzz", "ü", "", "€uro"}));

  const NpyArray all_empty = read_npy(dir.file("all_empty.npy"));
  EXPECT_EQ(all_empty.strings, (std::vector<std::string>{"", "", ""}));

  for (const char* name : {"none.npy", "none_2d.npy"}) {
    const NpyArray none = read_npy(dir.file(name));
    EXPECT_TRUE(none.is_string) << name;
    EXPECT_TRUE(none.strings.empty()) << name;
  }
  EXPECT_EQ(read_npy(dir.file("none_2d.npy")).shape, (std::vector<int64_t>{0, 3}));

  const NpyArray scalar = read_npy(dir.file("scalar.npy"));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.strings, (std::vector<std::string>{"schön"}));

  EXPECT_EQ(read_npy(dir.file("big_endian.npy")).strings, (std::vector<std::string>{"ab", "ç"}));
  // numpy drops trailing NULs only: 'a\0b' keeps its NUL, '\0' is the empty string.
  EXPECT_EQ(read_npy(dir.file("inner_nul.npy")).strings, (std::vector<std::string>{std::string("a\0b", 3), ""}));

  // parse_npy reads the same bytes the same way.
  EXPECT_EQ(parse_npy(read_file(dir.file("grid.npy")), "grid.npy").strings, grid.strings);
}

TEST(NpyStrings, NumpyLoadsWhatIsWritten) {
  TempDir dir;
  write_file(dir.file("mixed.npy"), encode_npy(make_string_array({5}, kMixed), "mixed.npy"));
  write_file(dir.file("grid.npy"), encode_npy(make_string_array({2, 2}, {"ü", "", "€uro", "x"}), "grid.npy"));
  write_file(dir.file("all_empty.npy"), encode_npy(make_string_array({3}, {"", "", ""}), "all_empty.npy"));
  write_file(dir.file("none.npy"), encode_npy(make_string_array({0, 2}, {}), "none.npy"));
  write_file(dir.file("scalar.npy"), encode_npy(make_string_array({}, {"schön"}), "scalar.npy"));
  ASSERT_EQ(run_python(dir, R"(
def check(name, expected):
    a = np.load(d + "/" + name)
    assert a.dtype == expected.dtype, (name, a.dtype, expected.dtype)
    assert a.shape == expected.shape, (name, a.shape, expected.shape)
    assert (a == expected).all(), (name, a, expected)
check("mixed.npy", np.array(['a', 'héllo', '日本', '', '\U0001F600'], dtype=str))
check("grid.npy", np.array([['ü', ''], ['€uro', 'x']], dtype=str))
check("all_empty.npy", np.array(['', '', ''], dtype=str))
assert np.load(d + "/all_empty.npy").dtype == np.dtype('<U1')
check("none.npy", np.zeros((0, 2), dtype='<U1'))
check("scalar.npy", np.array('schön'))
)"),
            0);
  // And the bytes are numpy's own: the same file numpy writes for the same array.
  ASSERT_EQ(run_python(dir, R"(
np.save(d + "/numpy_mixed.npy", np.array(['a', 'héllo', '日本', '', '\U0001F600'], dtype=str))
)"),
            0);
  EXPECT_EQ(read_file(dir.file("mixed.npy")), read_file(dir.file("numpy_mixed.npy")));
}

TEST(NpyStrings, RoundTrips) {
  const NpyArray array = make_string_array({5}, kMixed);
  const NpyArray back = parse_npy(encode_npy(array, "x.npy"), "x.npy");
  EXPECT_TRUE(back.is_string);
  EXPECT_EQ(back.shape, array.shape);
  EXPECT_EQ(back.strings, array.strings);
  // Numeric arrays are untouched by all this.
  NpyArray numbers;
  numbers.dtype = DLDataType{kDLInt, 32, 1};
  numbers.shape = {2};
  numbers.data = {1, 0, 0, 0, 2, 0, 0, 0};
  const NpyArray numbers_back = parse_npy(encode_npy(numbers, "n.npy"), "n.npy");
  EXPECT_FALSE(numbers_back.is_string);
  EXPECT_EQ(numbers_back.data, numbers.data);
}

TEST(NpyStrings, HostileFilesGiveClearErrors) {
  const auto parse = [](const std::string& bytes) { return [bytes] { parse_npy(bytes, "evil.npy"); }; };
  // A width whose data would be far past any file: refused before anything is allocated.
  std::string e = error_of(parse(npy_file(dict("<U999999999999", "(3,)"), "")));
  EXPECT_CONTAINS(e, "evil.npy");
  EXPECT_CONTAINS(e, "'<U999999999999' is too wide");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U99999999999", "(3,)"), ""))), "evil.npy: npy shape is too large");
  // Wide but within the cap: the data length is checked before anything is allocated.
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U99999999999", "(1,)"), utf32({'a'})))),
                  "evil.npy: truncated npy data: 4 bytes, the shape needs 399999999996");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U999999999999999999999999999", "(3,)"), ""))), "too wide");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U1000000", "(1000000000,)"), ""))), "npy shape is too large");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U0", "(1000000000000,)"), ""))), "no room for characters");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U", "(1,)"), ""))), "unsupported npy dtype '<U'");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U-1", "(1,)"), ""))), "unsupported npy dtype '<U-1'");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("=U1", "(1,)"), ""))), "unsupported npy dtype '=U1'");
  // The element count itself must be a size, even when a zero size makes the array empty.
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U1", "(0, 999999999999999999, 999999999999999999)"), ""))),
                  "npy shape is too large");
  // The data must be exactly elements * 4 * n bytes.
  e = error_of(parse(npy_file(dict("<U2", "(3,)"), utf32({'a', 0, 'b', 0, 'c'}))));
  EXPECT_CONTAINS(e, "evil.npy: truncated npy data: 20 bytes, the shape needs 24");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U1", "(1,)"), utf32({'a', 'b'})))), "longer than its shape needs");
  // Code points that are not characters, named with the element.
  e = error_of(parse(npy_file(dict("<U2", "(2,)"), utf32({'a', 0, 'b', 0xD800}))));
  EXPECT_CONTAINS(e, "evil.npy");
  EXPECT_CONTAINS(e, "element 1");
  EXPECT_CONTAINS(e, "U+D800");
  EXPECT_CONTAINS(e, "surrogate");
  e = error_of(parse(npy_file(dict("<U1", "(2, 2)"), utf32({'a', 'b', 'c', 0x110000}))));
  EXPECT_CONTAINS(e, "element 3 (index [1, 1])");
  EXPECT_CONTAINS(e, "0x110000");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("<U1", "()"), utf32({0xFFFFFFFF})))), "0xFFFFFFFF");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict(">U1", "(1,)"), utf32({'a'})))), "0x61000000");  // 'a' read big-endian
  // Object and byte-string arrays: say how to save strings instead.
  e = error_of(parse(npy_file(dict("|O", "(2,)"), "\x80\x04junk")));
  EXPECT_CONTAINS(e, "evil.npy");
  EXPECT_CONTAINS(e, "object array");
  EXPECT_CONTAINS(e, "dtype=str");
  EXPECT_CONTAINS(error_of(parse(npy_file(dict("|S3", "(1,)"), "abc"))), "dtype=str");
}

TEST(NpyStrings, HostileFilesGiveClearErrorsFromReadNpy) {
  TempDir dir;
  write_file(dir.file("wide.npy"), npy_file(dict("<U99999999999", "(1,)"), utf32({'a'})));
  EXPECT_CONTAINS(error_of([&] { read_npy(dir.file("wide.npy")); }),
                  dir.file("wide.npy") + ": truncated npy data: 4 bytes, the shape needs 399999999996");
  write_file(dir.file("surrogate.npy"), npy_file(dict("<U2", "(1, 2)"), utf32({'a', 'b', 0xDFFF, 'c'})));
  const std::string e = error_of([&] { read_npy(dir.file("surrogate.npy")); });
  EXPECT_CONTAINS(e, dir.file("surrogate.npy") + ": npy string element 1 (index [0, 1]) holds U+DFFF at character 0");
}

TEST(NpyStrings, NumpyObjectArraysAreRefusedWithAHint) {
  TempDir dir;
  ASSERT_EQ(run_python(dir, "np.save(d + '/objects.npy', np.array(['a', None], dtype=object), allow_pickle=True)\n"), 0);
  const std::string e = error_of([&] { read_npy(dir.file("objects.npy")); });
  EXPECT_CONTAINS(e, dir.file("objects.npy"));
  EXPECT_CONTAINS(e, "np.array(values, dtype=str)");
}

TEST(NpyStrings, WritingChecksTheStrings) {
  const auto encode = [](std::vector<int64_t> shape, std::vector<std::string> strings) {
    return [shape, strings] {
      NpyArray array;
      array.is_string = true;
      array.shape = shape;
      array.strings = strings;
      encode_npy(array, "out.npy");
    };
  };
  for (const std::string bad : {"\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xFF"}) {
    const std::string e = error_of(encode({2}, {"fine", "ok" + bad}));
    EXPECT_CONTAINS(e, "out.npy: string element 1 is not valid UTF-8 (at byte 2)");
  }
  EXPECT_CONTAINS(error_of(encode({2, 2}, {"a", "b", "c", "\xE6\x97"})), "element 3 (index [1, 1])");
  EXPECT_CONTAINS(error_of(encode({2, 2}, {"a", "b", "c"})), "out.npy: a string array of shape 2x2 needs 4 strings, it holds 3");
  EXPECT_CONTAINS(error_of(encode({-1}, {})), "negative size");
  EXPECT_CONTAINS(error_of([] { make_string_array({3}, {"a"}); }), "shape 3 holds 3 elements, 1 strings given");
}

}  // namespace
}  // namespace tessera::tools
