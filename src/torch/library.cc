// Registers Tessera with PyTorch (libtessera_torch.so, loaded with
// torch.ops.load_library): the TorchBind class torch.classes.tessera.Model and
// the op torch.ops.tessera.run(Model model, Tensor[] inputs) -> Tensor[].
#include <torch/custom_class.h>
#include <torch/library.h>

#include "model.h"

namespace tessera_torch {
namespace {

std::vector<at::Tensor> run(const c10::intrusive_ptr<Model>& model, at::TensorList inputs) {
  TORCH_CHECK_VALUE(model, "Tessera: the model is None");
  return model->run(inputs);
}

}  // namespace
}  // namespace tessera_torch

TORCH_LIBRARY(tessera, m) {
  using tessera_torch::Model;
  m.class_<Model>("Model")
      // Model(kind, bytes, options): kind "tsr" (a .tsr artifact, or an ONNX model compiled now for its
      // fixed shapes and kept as an artifact) or "onnx" (compiled per input shape, for dynamic axes).
      .def(torch::init<std::string, std::string, tessera_torch::OptionDict>())
      // The op's work as a method too: from eager Python it costs ~4 us a call against the op's ~12, the
      // difference being torch 1.13's Python-to-IValue conversion of an op's TorchBind argument (an op
      // taking only a Tensor[] costs ~2 us); tracing and TorchScript still see the op.
      .def("run", [](const c10::intrusive_ptr<Model>& self, std::vector<at::Tensor> inputs) { return self->run(inputs); })
      .def("kind", [](const c10::intrusive_ptr<Model>& self) { return self->kind(); })
      .def("input_names", &Model::input_names)
      .def("output_names", &Model::output_names)
      .def("options", &Model::options)
      .def("report", &Model::report)
      .def("cache_capacity", &Model::cache_capacity)
      .def("cached_variants", &Model::cached_variants)
      .def("compile_count", &Model::compile_count)
      .def("last_input_pointers", &Model::last_input_pointers)
      .def("last_output_pointers", &Model::last_output_pointers)
      .def("input_copies", &Model::input_copies)
      .def_pickle([](const c10::intrusive_ptr<Model>& self) -> Model::State { return self->state(); },
                  [](Model::State state) { return Model::from_state(std::move(state)); });
  m.def("run(__torch__.torch.classes.tessera.Model model, Tensor[] inputs) -> Tensor[]", tessera_torch::run);
}
