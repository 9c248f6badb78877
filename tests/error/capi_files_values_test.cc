// The C API's file handling (the model path, external data, saving), tsr_tune
// and tsr_options_set_tuning, and tsr_value kinds: each bad argument a clear
// status, never a crash (the fixture: error_fixture.h).
#include "error/error_fixture.h"

namespace tessera_error_tests {
namespace {

// --- Files read: the model and its external data. ---

TEST_F(ErrorTest, ModelPathMustBeARegularFile) {
  fs::create_directories(dir_ / "folder.onnx");
  expect_load_error((dir_ / "folder.onnx").string(), TSR_INVALID_ARGUMENT, {"folder.onnx", "is a directory"});
  EXPECT_EQ(tsr_file_is_artifact((dir_ / "folder.onnx").c_str()), 0);
  // A FIFO with no writer: opening it for reading would block forever.
  const std::string fifo = (dir_ / "pipe.onnx").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tsr_file_is_artifact(fifo.c_str()), 0);
  expect_load_error(fifo, TSR_INVALID_ARGUMENT, {"pipe.onnx", "is a FIFO"});
}

TEST_F(ErrorTest, ExternalDataIsOnlyRegularFilesInsideTheFolder) {
  // A file outside the model's folder, of the right size, that a link could smuggle in.
  const fs::path model_dir = dir_ / "model";
  const fs::path outside = dir_ / "secret.bin";
  fs::create_directories(model_dir / "data");
  std::ofstream(outside, std::ios::binary) << std::string(24, '\x01');
  std::ofstream(model_dir / "data" / "w.bin", std::ios::binary) << std::string(24, '\0');
  fs::create_symlink(outside, model_dir / "link.bin");
  fs::create_directory_symlink(model_dir / "data", model_dir / "linked_dir");
  fs::create_directories(model_dir / "folder.bin");
  ASSERT_EQ(::mkfifo((model_dir / "pipe.bin").c_str(), 0600), 0);
  struct Case {
    std::string location;
    std::vector<const char*> expect;
  } cases[] = {
      {"link.bin", {"'w'", "link.bin", "symbolic link"}},
      {"linked_dir/w.bin", {"'w'", "linked_dir", "symbolic link"}},
      {"./link.bin", {"symbolic link"}},
      {"pipe.bin", {"'w'", "pipe.bin", "is a FIFO"}},
      {"folder.bin", {"'w'", "folder.bin", "is a folder"}},
      {"data/", {"does not name a file"}},
      {"data/../link.bin", {"leaves the model's folder"}},
      {outside.string(), {"must be relative"}},
      {std::string("data/w.bin\0../x", 15), {"NUL"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.location);
    const std::string path = (model_dir / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << external_model(c.location).SerializeAsString();
    tsr_model* m = nullptr;
    tsr_status* status = tsr_model_load(path.c_str(), nullptr, &m);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    for (const char* part : c.expect) {
      EXPECT_NE(std::string(tsr_status_message(status)).find(part), std::string::npos) << tsr_status_message(status);
    }
    tsr_status_free(status);
  }
  // The same file reached directly, through a subfolder, loads.
  const std::string path = (model_dir / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << external_model("./data/w.bin").SerializeAsString();
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(path.c_str(), nullptr, &m);
  EXPECT_EQ(status, nullptr) << tsr_status_message(status);
  tsr_model_free(m);
}

TEST_F(ErrorTest, ExternalDataNumbersAreStrict) {
  write("weights.bin", std::string(48, '\0'));
  for (const char* offset : {"12abc", "-4", " 4", "0x10", "99999999999999999999"}) {
    onnx::ModelProto model = external_model("weights.bin");
    auto* entry = model.mutable_graph()->mutable_initializer(0)->add_external_data();
    entry->set_key("offset");
    entry->set_value(offset);
    expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "offset", "not a non-negative integer"});
  }
}

// --- Files written: tsr_model_save replaces only a regular file. ---

TEST_F(ErrorTest, SaveReplacesOnlyRegularFiles) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(unary_model("Relu")).c_str(), nullptr, &m), nullptr);
  const std::string fifo = (dir_ / "fifo.tsr").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string victim = write("victim.txt", "keep me");
  const std::string link = (dir_ / "link.tsr").string();
  fs::create_symlink(victim, link);
  fs::create_directories(dir_ / "folder.tsr");
  struct Case {
    std::string path;
    const char* expect;
  } cases[] = {{fifo, "is a FIFO"}, {link, "is a symbolic link"}, {(dir_ / "folder.tsr").string(), "is a directory"},
               {(dir_ / "no_such_folder" / "m.tsr").string(), "cannot open its folder"}};
  for (const Case& c : cases) {
    tsr_status* status = tsr_model_save(m, c.path.c_str());
    ASSERT_NE(status, nullptr) << c.path;
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tsr_status_message(status)).find(c.expect), std::string::npos) << tsr_status_message(status);
    EXPECT_NE(std::string(tsr_status_message(status)).find(c.path), std::string::npos) << tsr_status_message(status);
    tsr_status_free(status);
  }
  struct stat info {};
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep me");
  // A regular file is replaced, and nothing is left beside it.
  const std::string target = write("model.tsr", "old bytes");
  ASSERT_EQ(tsr_model_save(m, target.c_str()), nullptr);
  EXPECT_EQ(tsr_file_is_artifact(target.c_str()), 1);
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) entries += entry.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_EQ(entries, 0u);
  tsr_model_free(m);
}



// tsr_tune / tsr_options_set_tuning through the C API: a real tune of a one-node model, its record
// applied, and each bad argument a clear status.
class TuneTest : public ErrorTest {};

std::string status_text(tsr_status* status) {
  std::string text = status ? tsr_status_message(status) : "";
  tsr_status_free(status);
  return text;
}

TEST_F(TuneTest, TunesAppliesAndRefusesBadArguments) {
  const std::string model = write_model(unary_model("Relu"));
  const std::string record = (dir_ / "tuning.json").string();
  int calls = 0;
  tsr_tune_config config{};
  config.struct_size = sizeof(config);
  config.budget_seconds = 5;
  config.progress = [](void* user, const char*, int64_t, int64_t) { ++*static_cast<int*>(user); };
  config.progress_user = &calls;
  char* summary = nullptr;
  ASSERT_EQ(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), &summary)), "");
  ASSERT_NE(summary, nullptr);
  EXPECT_NE(std::string(summary).find("chosen:"), std::string::npos) << summary;
  tsr_string_free(summary);
  EXPECT_GE(calls, 3);  // default, and each default backend alone, at least

  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  ASSERT_EQ(status_text(tsr_options_set_tuning(options, record.c_str())), "");
  tsr_model* m = nullptr;
  ASSERT_EQ(status_text(tsr_model_load(model.c_str(), options, &m)), "");
  EXPECT_EQ(std::string(tsr_model_warnings(m)), "");
  bool tuned = false;
  for (size_t i = 0; i < tsr_model_metadata_count(m); ++i) {
    const char* key = nullptr;
    const char* value = nullptr;
    ASSERT_EQ(tsr_model_metadata(m, i, &key, &value), nullptr);
    tuned |= std::string(key) == "tessera.tuning";
  }
  EXPECT_TRUE(tuned);
  tsr_model_free(m);
  // The same record on another model: a warning, and the default placement.
  const std::string other = write_model(unary_model("Sigmoid"), "other.onnx");
  ASSERT_EQ(status_text(tsr_model_load(other.c_str(), options, &m)), "");
  EXPECT_NE(std::string(tsr_model_warnings(m)).find("made for another model"), std::string::npos);
  tsr_model_free(m);

  EXPECT_NE(status_text(tsr_options_set_tuning(options, (dir_ / "missing.json").string().c_str())).find("cannot open"),
            std::string::npos);
  EXPECT_NE(status_text(tsr_options_set_tuning(options, nullptr)), "");
  tsr_options_free(options);
  EXPECT_NE(status_text(tsr_tune(nullptr, nullptr, nullptr, record.c_str(), nullptr)), "");
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, nullptr, nullptr, nullptr)), "");
  config.budget_seconds = -1;
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), nullptr)).find("budget_seconds"),
            std::string::npos);
  config.struct_size = 0;
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), nullptr)).find("struct_size"),
            std::string::npos);
  // A model that does not load is the loader's error, and no record is written.
  const std::string bad_record = (dir_ / "never.json").string();
  EXPECT_NE(status_text(tsr_tune(write("garbage.onnx", "not a model").c_str(), nullptr, nullptr, bad_record.c_str(), nullptr)),
            "");
  EXPECT_FALSE(fs::exists(bad_record));
}



/// x[2,3] -> s = SequenceConstruct(x, x); n = SequenceLength(s); c = ConcatFromSequence(s, axis 0); outputs s, n, c.
onnx::ModelProto sequence_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("g");
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* s = g->add_output();
  s->set_name("s");
  s->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  set_type(g->add_output(), "n", onnx::TensorProto::INT64, {});
  auto* c = g->add_output();
  c->set_name("c");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto add = [&](const char* op, std::initializer_list<const char*> in, const char* out) {
    auto* n = g->add_node();
    n->set_name(std::string(op) + "_node");
    n->set_op_type(op);
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  add("SequenceConstruct", {"x", "x"}, "s");
  add("SequenceLength", {"s"}, "n");
  auto* concat = add("ConcatFromSequence", {"s"}, "c");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  return model;
}

std::string take_message(tsr_status* status) {
  std::string message = tsr_status_message(status);
  tsr_status_free(status);
  return message;
}

}  // namespace

TEST_F(ErrorTest, ValuesRunAndRefuseWrongKinds) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(sequence_model()).c_str(), nullptr, &m), nullptr);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_output_info(m, 0, &info), nullptr);
  EXPECT_EQ(info.kind, TSR_VALUE_SEQUENCE);
  ASSERT_EQ(tsr_model_output_info(m, 1, &info), nullptr);
  EXPECT_EQ(info.kind, TSR_VALUE_TENSOR);

  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  DLTensor x{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  // The tensor-only entry points refuse the model, naming the sequence output and the entry point to use.
  DLManagedTensor* managed[3] = {};
  tsr_status* status = tsr_model_run_alloc(m, &x, 1, managed, 3);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_UNSUPPORTED);
  const std::string refusal = take_message(status);
  EXPECT_NE(refusal.find("'s'"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("tsr_model_run_values"), std::string::npos) << refusal;

  tsr_value* input = nullptr;
  ASSERT_EQ(tsr_value_create_tensor(&x, &input), nullptr);
  data[0] = 100;  // the value holds a copy
  tsr_value* out[3] = {};
  ASSERT_EQ(tsr_model_run_values(m, &input, 1, out, 3), nullptr);
  int32_t kind = -1, present = -1;
  size_t count = 0;
  ASSERT_EQ(tsr_value_describe(out[0], &kind, &present, &count), nullptr);
  EXPECT_EQ(kind, TSR_VALUE_SEQUENCE);
  EXPECT_EQ(present, 1);
  EXPECT_EQ(count, 2u);
  const DLTensor* item = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[0], 1, &item), nullptr);
  ASSERT_EQ(item->ndim, 2);
  EXPECT_EQ(static_cast<const float*>(item->data)[0], 1.0f);
  const DLTensor* n = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[1], 0, &n), nullptr);
  EXPECT_EQ(*static_cast<const int64_t*>(n->data), 2);
  const DLTensor* c = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[2], 0, &c), nullptr);
  ASSERT_EQ(c->ndim, 2);
  EXPECT_EQ(c->shape[0], 4);
  EXPECT_EQ(static_cast<const float*>(c->data)[11], 6.0f);  // x stacked twice: row 3 ends with 6
  // Out-of-range accessors are errors, not crashes.
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_tensor(out[0], 2, &item)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  const char* text = nullptr;
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_string(out[1], 0, 0, &text, nullptr)), TSR_INVALID_ARGUMENT);
  EXPECT_NE(take_message(status).find("not strings"), std::string::npos);
  for (tsr_value* v : out) tsr_value_free(v);

  // A sequence where the model wants a tensor.
  const tsr_value* items[2] = {input, input};
  tsr_value* sequence = nullptr;
  ASSERT_EQ(tsr_value_create_sequence(items, 2, &sequence), nullptr);
  status = tsr_model_run_values(m, const_cast<const tsr_value* const*>(&sequence), 1, out, 3);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
  const std::string wrong_kind = take_message(status);
  EXPECT_NE(wrong_kind.find("input 'x' is a tensor, but a sequence was given"), std::string::npos) << wrong_kind;
  for (tsr_value* v : out) EXPECT_EQ(v, nullptr);

  // Building values: mixed dtypes, an optional of an optional, bad kinds, NULLs.
  int64_t ints[2] = {1, 2};
  int64_t ishape[1] = {2};
  DLTensor xi{ints, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, ishape, nullptr, 0};
  tsr_value* int_value = nullptr;
  ASSERT_EQ(tsr_value_create_tensor(&xi, &int_value), nullptr);
  const tsr_value* mixed[2] = {input, int_value};
  tsr_value* bad = nullptr;
  EXPECT_NE(take_message(tsr_value_create_sequence(mixed, 2, &bad)).find("a sequence holds one dtype"), std::string::npos);
  EXPECT_EQ(bad, nullptr);
  tsr_value* optional = nullptr;
  ASSERT_EQ(tsr_value_create_optional(sequence, TSR_VALUE_OPTIONAL_SEQUENCE, &optional), nullptr);
  EXPECT_NE(take_message(tsr_value_create_optional(optional, TSR_VALUE_OPTIONAL_SEQUENCE, &bad)).find("already an optional"),
            std::string::npos);
  EXPECT_NE(take_message(tsr_value_create_optional(nullptr, TSR_VALUE_SEQUENCE, &bad)).find("kind must be"), std::string::npos);
  const char* words[2] = {"a", nullptr};
  EXPECT_NE(take_message(tsr_value_create_strings(words, nullptr, ishape, 1, &bad)).find("element 1 is NULL"), std::string::npos);
  int64_t negative[1] = {-1};
  EXPECT_NE(take_message(tsr_value_create_strings(words, nullptr, negative, 1, &bad)).find("negative"), std::string::npos);
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_create_tensor(nullptr, &bad)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  const char* utf8[2] = {"h\xC3\xA9", "x"};
  tsr_value* strings = nullptr;
  ASSERT_EQ(tsr_value_create_strings(utf8, nullptr, ishape, 1, &strings), nullptr);
  size_t length = 0;
  ASSERT_EQ(tsr_value_string(strings, 0, 0, &text, &length), nullptr);
  EXPECT_EQ(std::string(text, length), "h\xC3\xA9");
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_string(strings, 0, 2, &text, &length)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  for (tsr_value* v : {input, sequence, int_value, optional, strings}) tsr_value_free(v);
  tsr_model_free(m);
}

}  // namespace tessera_error_tests
