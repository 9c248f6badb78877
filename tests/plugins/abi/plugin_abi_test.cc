// The plug-in ABI from the host's side, through the C API: version
// negotiation (an older table still loads, another major version is refused,
// a plug-in may decline), malformed plug-ins, the registry, and a model
// partitioned between the ABI probe (abi_probe_plugin.c, float32 Relu and
// the pattern Relu(Relu(x))) and native, compared with values computed here;
// then injected failures in every step: a clear status naming the plug-in,
// nothing left alive in the plug-in, and the host still usable.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/tessera.h"

#ifndef PROBE_DIR
#error "PROBE_DIR: the folder holding the probe plug-ins"
#endif

namespace {

struct Status {
  tsr_status* s;
  explicit Status(tsr_status* status) : s(status) {}
  ~Status() { tsr_status_free(s); }
  bool ok() const { return s == nullptr; }
  tsr_status_code code() const { return s ? tsr_status_code_of(s) : TSR_OK; }
  std::string message() const { return s ? tsr_status_message(s) : ""; }
};

std::string probe(const std::string& variant) { return std::string(PROBE_DIR) + "/libabi_probe" + variant + ".so"; }

void add_value(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_node(onnx::GraphProto* g, const std::string& name, const std::string& op, const std::string& in,
              const std::string& out) {
  auto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  n->add_input(in);
  n->add_output(out);
}

/// x[2,5] -> r1 = Relu -> r2 = Relu -> s = Sigmoid -> r3 = Relu(s) ... outputs r2 and y = Neg(r3).
/// r1,r2 match DoubleRelu; r3 is a lone Relu; r2 is a region output and a graph output.
std::string model_bytes() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("relus");
  add_value(g->add_input(), "x", {2, 5});
  add_node(g, "r1", "Relu", "x", "a");
  add_node(g, "r2", "Relu", "a", "b");
  add_node(g, "s", "Sigmoid", "b", "c");
  add_node(g, "r3", "Relu", "c", "d");
  add_node(g, "neg", "Neg", "d", "y");
  add_value(g->add_output(), "b", {2, 5});
  add_value(g->add_output(), "y", {2, 5});
  return model.SerializeAsString();
}

DLTensor tensor(std::vector<float>& data, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape.data();
  return t;
}

/// Loads the model with the given backends; null and the status on failure.
tsr_model* load(const std::string& bytes, const char* backends, tsr_status** status) {
  tsr_options* options = nullptr;
  EXPECT_EQ(tsr_options_create(&options), nullptr);
  EXPECT_EQ(tsr_options_set_backends(options, backends), nullptr);
  tsr_model* model = nullptr;
  *status = tsr_model_load_from_memory(bytes.data(), bytes.size(), "relus", options, &model);
  tsr_options_free(options);
  return model;
}

/// Runs the model on a fixed input and checks both outputs against values computed here.
tsr_status* run_and_check(const tsr_model* model) {
  std::vector<float> x(10), b(10), y(10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i) - 1.6f;
  std::vector<int64_t> shape = {2, 5};
  DLTensor in = tensor(x, shape);
  DLTensor out[2] = {tensor(b, shape), tensor(y, shape)};
  tsr_status* status = tsr_model_run(model, &in, 1, out, 2);
  if (status) return status;
  for (size_t i = 0; i < x.size(); ++i) {
    const float relu = x[i] > 0 ? x[i] : 0.0f;
    EXPECT_EQ(b[i], relu) << i;
    EXPECT_NEAR(y[i], -1.0f / (1.0f + std::exp(-relu)), 1e-6f) << i;
  }
  return nullptr;
}

long live_objects(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr);
  auto fn = reinterpret_cast<long (*)()>(dlsym(handle, "abi_probe_live_objects"));
  EXPECT_NE(fn, nullptr);
  long n = fn ? fn() : -1;
  dlclose(handle);
  return n;
}

void expect_refused(const std::string& path, const std::string& part1, const std::string& part2 = "") {
  Status s(tsr_load_backend_plugin(path.c_str(), nullptr));
  EXPECT_EQ(s.code(), TSR_INVALID_ARGUMENT) << path;
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(part1), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(part2), std::string::npos) << s.message();
}

TEST(PluginAbi, RefusesWhatItCannotUse) {
  expect_refused(probe("_major2"), "was built for plug-in ABI 2.0", "this Tessera implements ABI 1.0");
  expect_refused(probe("_decline"), "declined to load");
  expect_refused(probe("_no_entry"), "exports no function 'tessera_backend_plugin'");
  expect_refused(probe("_no_run"), "lacks 'run'");
  expect_refused(probe("_bad_name"), "is not of the form");
  expect_refused(std::string(PROBE_DIR) + "/no_such_plugin.so", "cannot be loaded");
  // None of them was registered.
  for (size_t i = 0; i < tsr_backend_count(); ++i) {
    tsr_backend_details d{};
    d.struct_size = sizeof(d);
    ASSERT_EQ(tsr_backend_get_details(i, &d), nullptr);
    EXPECT_EQ(std::string(d.plugin_path).find("_major2"), std::string::npos);
  }
}

TEST(PluginAbi, LoadsListsAndRunsAPlugin) {
  const size_t before = tsr_backend_count();
  const char* name = nullptr;
  ASSERT_EQ(tsr_load_backend_plugin(probe("").c_str(), &name), nullptr);
  EXPECT_STREQ(name, "abi_probe");
  ASSERT_EQ(tsr_load_backend_plugin(probe("").c_str(), nullptr), nullptr);  // again: nothing new
  bool listed = false;
  for (size_t i = 0; i < tsr_backend_count(); ++i) {
    tsr_backend_details d{};
    d.struct_size = sizeof(d);
    ASSERT_EQ(tsr_backend_get_details(i, &d), nullptr);
    if (std::string(d.name) != "abi_probe") continue;
    listed = true;
    EXPECT_STREQ(d.version, "1");
    EXPECT_STREQ(d.plugin_abi, "1.0");
    EXPECT_EQ(std::string(d.plugin_path), probe(""));
    EXPECT_EQ(d.is_fallback, 0);
  }
  EXPECT_TRUE(listed);
  EXPECT_LE(tsr_backend_count(), before + 1);

  const std::string bytes = model_bytes();
  tsr_status* status = nullptr;
  tsr_model* model = load(bytes, "abi_probe,native", &status);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  // Placement: r1 and r2 as the pattern, r3 alone on the plug-in, the rest on native (the
  // refusal reasons are checked through `tessera partition` in plugin_artifacts.sh).
  std::vector<std::string> backend(tsr_model_node_count(model));
  for (size_t i = 0; i < backend.size(); ++i) {
    const char *node, *op, *where;
    ASSERT_EQ(tsr_model_node_placement(model, i, &node, &op, &where), nullptr);
    backend[i] = std::string(node) + "=" + where;
    if (std::string(node) == "r1") {
      const char* note;
      ASSERT_EQ(tsr_model_node_note(model, i, &note), nullptr);
      EXPECT_NE(std::string(note).find("DoubleRelu"), std::string::npos) << note;
    }
  }
  EXPECT_EQ(backend, (std::vector<std::string>{"r1=abi_probe", "r2=abi_probe", "s=native", "r3=abi_probe", "neg=native"}));
  ASSERT_EQ(run_and_check(model), nullptr);

  // Through an artifact: saved, loaded from memory, run again.
  void* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(tsr_model_save_to_memory(model, &data, &size), nullptr);
  tsr_model* reloaded = nullptr;
  ASSERT_EQ(tsr_model_load_from_memory(data, size, "relus.tsr", nullptr, &reloaded), nullptr);
  tsr_buffer_free(data);
  ASSERT_EQ(run_and_check(reloaded), nullptr);
  tsr_model_free(reloaded);
  tsr_model_free(model);
  EXPECT_EQ(live_objects(probe("")), 0);
}

TEST(PluginAbi, AnOlderTableWithoutLaterMembersStillLoads) {
  const char* name = nullptr;
  ASSERT_EQ(tsr_load_backend_plugin(probe("_old").c_str(), &name), nullptr);
  EXPECT_STREQ(name, "abi_probe_old");
  tsr_status* status = nullptr;
  tsr_model* model = load(model_bytes(), "abi_probe_old,native", &status);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  ASSERT_EQ(run_and_check(model), nullptr);
  tsr_model_free(model);
}

/// Structs cut short, with the bytes past their struct_size poisoned (abi_probe_plugin.c): the host
/// reads each only as far as its size says, refusing what is too short to use and running the rest.
TEST(PluginAbi, TruncatedStructsAreReadOnlyAsFarAsTheirSize) {
  // A table that cannot even say its minor version.
  expect_refused(probe("_tiny"), "bytes, too small to hold a version");
  // A pattern without its root, and an op entry without its flags: the plug-in loads, and a model
  // that would use it is refused naming the pattern and entry.
  for (const auto& [variant, message] : {std::pair<std::string, std::string>{"_short_pattern", "pattern 0 is missing, too small"},
                                         {"_short_entry", "op entry 1 has no op types"}}) {
    SCOPED_TRACE(variant);
    const char* name = nullptr;
    ASSERT_EQ(tsr_load_backend_plugin(probe(variant).c_str(), &name), nullptr);
    tsr_status* status = nullptr;
    tsr_model* model = load(model_bytes(), (std::string(name) + ",native").c_str(), &status);
    Status s(status);
    EXPECT_EQ(model, nullptr);
    EXPECT_EQ(s.code(), TSR_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find(std::string("backend plug-in '") + name + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
    tsr_model_free(model);
  }
  // A memory space without copy_to_host cannot be used ...
  {
    const char* name = nullptr;
    ASSERT_EQ(tsr_load_backend_plugin(probe("_space_short").c_str(), &name), nullptr);
    tsr_status* status = nullptr;
    tsr_model* model = load(model_bytes(), "abi_probe_space_short,native", &status);
    Status s(status);
    EXPECT_EQ(model, nullptr);
    EXPECT_NE(s.message().find("its memory space lacks allocate, deallocate or a copy function"), std::string::npos)
        << s.message();
    tsr_model_free(model);
  }
  // ... one without synchronize (an older minor version's) runs, copying through the space, and its
  // poisoned synchronize is never called; the full one's is.
  for (const std::string variant : {"_space_old", "_space"}) {
    SCOPED_TRACE(variant);
    const char* name = nullptr;
    ASSERT_EQ(tsr_load_backend_plugin(probe(variant).c_str(), &name), nullptr);
    tsr_status* status = nullptr;
    tsr_model* model = load(model_bytes(), (std::string(name) + ",native").c_str(), &status);
    ASSERT_EQ(status, nullptr) << tsr_status_message(status);
    const char *node, *op, *where;
    ASSERT_EQ(tsr_model_node_placement(model, 0, &node, &op, &where), nullptr);
    EXPECT_EQ(std::string(where), name);
    ASSERT_EQ(run_and_check(model), nullptr);
    tsr_model_free(model);
    void* handle = dlopen(probe(variant).c_str(), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(handle, nullptr);
    auto calls = reinterpret_cast<long (*)()>(dlsym(handle, "abi_probe_synchronize_calls"));
    ASSERT_NE(calls, nullptr);
    if (variant == "_space") {
      EXPECT_GT(calls(), 0);
    } else {
      EXPECT_EQ(calls(), 0);
    }
    dlclose(handle);
  }
}

/// A plug-in path names a file: "" is not the main program, a bare name is a file in the current
/// folder (not a search of the library path), and the same file under another spelling is the same
/// plug-in (not a second one with a clashing name).
TEST(PluginAbi, PluginPathsNameFiles) {
  {
    Status s(tsr_load_backend_plugin("", nullptr));
    EXPECT_EQ(s.code(), TSR_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("a backend plug-in path is empty"), std::string::npos) << s.message();
  }
  // libdnnl.so.2 is on the library path (this build links it), but not in the current folder.
  {
    Status s(tsr_load_backend_plugin("libdnnl.so.2", nullptr));
    EXPECT_EQ(s.code(), TSR_INVALID_ARGUMENT);
    EXPECT_NE(s.message().find("backend plug-in 'libdnnl.so.2': cannot be loaded: no such file"), std::string::npos)
        << s.message();
  }
  const char* name = nullptr;
  ASSERT_EQ(tsr_load_backend_plugin(probe("").c_str(), &name), nullptr);
  EXPECT_STREQ(name, "abi_probe");
  const size_t count = tsr_backend_count();
  // Other spellings of the same file: relative with a bare name, with ./ and ../, and a symbolic link.
  char* cwd = getcwd(nullptr, 0);
  ASSERT_EQ(chdir(PROBE_DIR), 0);
  const std::string link = std::string(PROBE_DIR) + "/link_to_probe.so";
  unlink(link.c_str());
  ASSERT_EQ(symlink("libabi_probe.so", link.c_str()), 0);
  for (const std::string& spelling : std::vector<std::string>{"libabi_probe.so", "./libabi_probe.so", "../abi/libabi_probe.so", link}) {
    SCOPED_TRACE(spelling);
    const char* again = nullptr;
    Status s(tsr_load_backend_plugin(spelling.c_str(), &again));
    EXPECT_TRUE(s.ok()) << s.message();
    if (again) EXPECT_STREQ(again, "abi_probe");
  }
  EXPECT_EQ(tsr_backend_count(), count) << "one file, one plug-in";
  // A folder is not a plug-in.
  {
    Status s(tsr_load_backend_plugin(".", nullptr));
    EXPECT_NE(s.message().find("it is not a regular file"), std::string::npos) << s.message();
  }
  unlink(link.c_str());
  ASSERT_EQ(chdir(cwd), 0);
  free(cwd);
}

TEST(PluginAbi, FailuresInEveryStepAreClearAndLeaveNothingBehind) {
  ASSERT_EQ(tsr_load_backend_plugin(probe("").c_str(), nullptr), nullptr);
  const std::string bytes = model_bytes();
  for (const char* step : {"create", "support", "compile", "load"}) {
    setenv("PROBE_FAIL", step, 1);
    tsr_status* raw = nullptr;
    tsr_model* model = load(bytes, "abi_probe,native", &raw);
    Status s(raw);
    unsetenv("PROBE_FAIL");
    EXPECT_EQ(model, nullptr) << step;
    EXPECT_EQ(s.code(), TSR_INTERNAL) << step;
    EXPECT_NE(s.message().find("backend plug-in 'abi_probe'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(std::string("injected failure in ") + step), std::string::npos) << s.message();
    EXPECT_EQ(live_objects(probe("")), 0) << step;
  }
  // A failing run: a status, then the same model runs once the failure is gone.
  tsr_status* raw = nullptr;
  tsr_model* model = load(bytes, "abi_probe,native", &raw);
  ASSERT_EQ(raw, nullptr);
  setenv("PROBE_FAIL", "run", 1);
  {
    Status s(run_and_check(model));
    EXPECT_EQ(s.code(), TSR_INTERNAL);
    EXPECT_NE(s.message().find("backend plug-in 'abi_probe': run: injected failure in run"), std::string::npos)
        << s.message();
  }
  unsetenv("PROBE_FAIL");
  ASSERT_EQ(run_and_check(model), nullptr);
  tsr_model_free(model);
  EXPECT_EQ(live_objects(probe("")), 0);
}

/// x[6, 5], keep[6] -> Compress(axis 0) on native -> Relu on the plug-in -> y: the rows kept depend on the
/// data, so y's shape is known only when the model runs, and the plug-in allocates y through allocate_output.
TEST(PluginAbi, OutputsOfShapesKnownOnlyAtRunTimeAreAllocatedThroughTheHost) {
  ASSERT_EQ(tsr_load_backend_plugin(probe("_dynamic").c_str(), nullptr), nullptr);
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  add_value(g->add_input(), "x", {6, 5});
  auto* keep = g->add_input();
  keep->set_name("keep");
  keep->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  keep->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(6);
  auto* compress = g->add_node();
  compress->set_name("compress");
  compress->set_op_type("Compress");
  compress->add_input("x");
  compress->add_input("keep");
  compress->add_output("rows");
  auto* axis = compress->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  add_node(g, "r", "Relu", "rows", "y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  const std::string bytes = model.SerializeAsString();
  tsr_status* status = nullptr;
  tsr_model* m = load(bytes, "abi_probe_dynamic,native", &status);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  std::vector<std::string> placed;
  for (size_t i = 0; i < tsr_model_node_count(m); ++i) {
    const char *node, *op, *where;
    ASSERT_EQ(tsr_model_node_placement(m, i, &node, &op, &where), nullptr);
    placed.push_back(std::string(node) + "=" + where);
  }
  EXPECT_EQ(placed, (std::vector<std::string>{"compress=native", "r=abi_probe_dynamic"}));
  std::vector<float> in(30);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) - 12.5f;
  std::vector<int64_t> x_shape = {6, 5}, keep_shape = {6};
  for (std::vector<uint8_t> rows : {std::vector<uint8_t>{1, 0, 1, 1, 0, 0}, std::vector<uint8_t>{0, 0, 0, 0, 0, 1},
                                    std::vector<uint8_t>(6, 0)}) {
    DLTensor inputs[2] = {tensor(in, x_shape), {}};
    inputs[1].data = rows.data();
    inputs[1].device = {kDLCPU, 0};
    inputs[1].ndim = 1;
    inputs[1].dtype = {TSR_DL_BOOL_CODE, 8, 1};
    inputs[1].shape = keep_shape.data();
    DLManagedTensor* out = nullptr;
    ASSERT_EQ(tsr_model_run_alloc(m, inputs, 2, &out, 1), nullptr);
    std::vector<float> want;
    for (size_t r = 0; r < 6; ++r) {
      for (size_t c = 0; r < 6 && rows[r] && c < 5; ++c) want.push_back(std::max(in[r * 5 + c], 0.0f));
    }
    ASSERT_EQ(out->dl_tensor.ndim, 2);
    EXPECT_EQ(out->dl_tensor.shape[0], static_cast<int64_t>(want.size() / 5));
    EXPECT_EQ(out->dl_tensor.shape[1], 5);
    const float* y = static_cast<const float*>(out->dl_tensor.data);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y[i], want[i]) << i;
    out->deleter(out);
  }
  tsr_model_free(m);
}

TEST(PluginAbi, UnknownBackendNamesSayHowToLoadAPlugin) {
  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  Status s(tsr_options_set_backends(options, "nosuch,native"));
  tsr_options_free(options);
  EXPECT_EQ(s.code(), TSR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("--backend-plugin"), std::string::npos) << s.message();
}

}  // namespace
