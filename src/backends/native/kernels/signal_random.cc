// Native kernels of the random generators: RandomUniform(Like),
// RandomNormal(Like) and Bernoulli. With a `seed` attribute every run gives
// the same values (the generator is reseeded per call); without one each call
// draws a fresh seed. The bits come from std::mt19937_64 and are turned into
// numbers here rather than by the std distributions, whose algorithms differ
// between standard libraries.
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "backends/native/kernels/signal_internal.h"
#include "backends/native/kernels/tensor_internal.h"

namespace tessera::native {
namespace {

std::mt19937_64 make_generator(const KernelContext& ctx) {
  if (const Attribute* seed = ctx.attrs().find("seed")) {
    uint32_t bits;
    std::memcpy(&bits, &seed->f, sizeof bits);
    return std::mt19937_64(bits);
  }
  std::random_device device;
  return std::mt19937_64((static_cast<uint64_t>(device()) << 32) ^ device());
}

/// A uniform double in [0, 1) from the top 53 bits.
double unit_uniform(std::mt19937_64& generator) { return static_cast<double>(generator() >> 11) * 0x1.0p-53; }

void store_at(const TensorView& out, int64_t i, double value) {
  store_scalar(out.dtype, value, static_cast<uint8_t*>(out.data) + i * static_cast<int64_t>(dtype_size(out.dtype)));
}

}  // namespace

void random_uniform_kernel(KernelContext& ctx) {
  std::mt19937_64 generator = make_generator(ctx);
  const double low = ctx.attrs().get_float_or("low", 0.0f), high = ctx.attrs().get_float_or("high", 1.0f);
  const TensorView& out = ctx.output(0);
  for (int64_t i = 0; i < out.numel(); ++i) store_at(out, i, low + (high - low) * unit_uniform(generator));
}

void random_normal_kernel(KernelContext& ctx) {
  std::mt19937_64 generator = make_generator(ctx);
  const double mean = ctx.attrs().get_float_or("mean", 0.0f), scale = ctx.attrs().get_float_or("scale", 1.0f);
  const TensorView& out = ctx.output(0);
  // Box-Muller: each pair of uniforms gives two independent normals.
  for (int64_t i = 0; i < out.numel(); i += 2) {
    const double u1 = 1.0 - unit_uniform(generator), u2 = unit_uniform(generator);  // u1 in (0, 1]
    const double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2 * std::numbers::pi * u2;
    store_at(out, i, mean + scale * radius * std::cos(angle));
    if (i + 1 < out.numel()) store_at(out, i + 1, mean + scale * radius * std::sin(angle));
  }
}

void bernoulli_kernel(KernelContext& ctx) {
  std::mt19937_64 generator = make_generator(ctx);
  const TensorView& p = ctx.input(0);
  const TensorView& out = ctx.output(0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double probability = view_double_at(p, i);
    if (!(probability >= 0 && probability <= 1)) ctx.fail("probability ", probability, " at ", i, " is not in [0, 1]");
    store_at(out, i, unit_uniform(generator) < probability ? 1.0 : 0.0);
  }
}

}  // namespace tessera::native
