#include "backends/native/kernel.h"

namespace tessera::native {

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    register_elementwise_kernels(*r);
    register_nn_kernels(*r);
    register_tensor_kernels(*r);
    register_reduction_kernels(*r);
    register_misc_kernels(*r);
    register_recurrent_kernels(*r);
    register_quantization_kernels(*r);
    register_signal_kernels(*r);
    register_controlflow_kernels(*r);
    register_sequence_kernels(*r);
    register_text_kernels(*r);
    return r;
  }();
  return *registry;
}

void KernelRegistry::add(KernelDef def) {
  if (find(def.domain, def.op_type)) throw_internal_error("kernel ", def.op_type, " registered twice");
  defs_.push_back(std::move(def));
}

const KernelDef* KernelRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  for (const KernelDef& k : defs_) {
    if (k.op_type == op_type && k.domain == d) return &k;
  }
  return nullptr;
}

}  // namespace tessera::native
