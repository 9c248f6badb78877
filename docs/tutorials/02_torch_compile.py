"""Tutorial 2: accelerate a torchvision model with tessera.torch.compile.

    PYTHONPATH=build/python /usr/bin/python3 docs/tutorials/02_torch_compile.py

`tessera.torch.compile(module, example_inputs)` exports a PyTorch module to
ONNX in memory, compiles it with Tessera, and gives back an `nn.Module` whose
forward is one call of the op `torch.ops.tessera.run`. Tensors cross without
copies: your (contiguous, CPU) inputs are read in place, and the outputs are
Tessera's own buffers, handed to torch through DLPack. The result scripts,
traces, saves with `torch.jit.save` and loads in another process.

CTest runs this script; every check below fails loudly if Tessera gets a
result wrong.
"""

import os
import subprocess
import tempfile
import time

import torch
import torchvision

import tessera.torch

torch.manual_seed(0)
torch.set_num_threads(2)

# 1. A model in eval mode. Weights are random here (nothing to download);
#    use weights="DEFAULT" for the pretrained ones.
model = torchvision.models.mobilenet_v2(weights=None).eval()
example = torch.randn(1, 3, 224, 224)

# 2. Compile. threads= are Tessera's intra-op threads; backends= chooses who may
#    run what (default: every built-in backend, highest priority first).
#    Without dynamic_axes the model is compiled for the example's shape only.
fast = tessera.torch.compile(model, example, threads=2)
print(fast)

# 3. Run it like the original, for inference: Tessera computes no gradients,
#    so call it under torch.no_grad() (an input that requires grad raises
#    ValueError in grad mode instead of silently losing its gradient).
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    expected = model(x)
    actual = fast(x)
error = (actual - expected).abs().max().item() / expected.abs().max().item()
print(f"largest difference from PyTorch eager, relative to the largest output: {error:.2e}")
assert actual.shape == expected.shape and error < 1e-4
assert actual.argmax() == expected.argmax()


def milliseconds(function, runs=10):
    with torch.no_grad():
        function()  # warm up
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            function()
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


print(f"PyTorch eager: {milliseconds(lambda: model(x)):.1f} ms, Tessera: {milliseconds(lambda: fast(x)):.1f} ms "
      "(medians of 10 runs)")

# 4. Where each node ran: Tessera's placement report, the same one the CLI prints.
print("\n".join(fast.report("table").splitlines()[:9]), "\n...")

# 5. Zero copy: the tensor torch returned sits where Tessera allocated it, and a
#    contiguous input was read where it lies.
with torch.no_grad():
    actual = fast(x)
model_object = fast.tessera_model()  # the torch.classes.tessera.Model inside
assert actual.data_ptr() == model_object.last_output_pointers()[0]
assert x.data_ptr() == model_object.last_input_pointers()[0]

# 6. Dynamic shapes: name the dims that change. Each new shape is compiled on
#    first use and kept (the cache_size most recently used shapes).
flexible = tessera.torch.compile(model, example, dynamic_axes={0: {0: "batch"}}, cache_size=4)
for batch in (1, 3):
    xb = torch.randn(batch, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(flexible(xb), model(xb), atol=1e-4 * model(xb).abs().max().item(), rtol=1e-4)
print("dynamic batch: compiled", flexible.tessera_model().compile_count(), "shapes")

# 7. Script, save, and load in a fresh process. The compiled model travels inside
#    the file; the other process needs only tessera.torch.load_library() (or
#    tessera.torch.load(path)) before torch.jit.load.
folder = tempfile.mkdtemp(prefix="tessera_tutorial_")
path = os.path.join(folder, "mobilenet_v2_tessera.pt")
torch.jit.save(torch.jit.script(fast), path)
torch.save((x, expected), os.path.join(folder, "check.pt"))
check = f"""
import torch, tessera.torch
tessera.torch.load_library()
module = torch.jit.load({path!r})
x, expected = torch.load({os.path.join(folder, "check.pt")!r})
with torch.no_grad():
    error = (module(x) - expected).abs().max().item() / expected.abs().max().item()
assert error < 1e-4, error
print("fresh process: same result, relative error", error)
"""
subprocess.run(["/usr/bin/python3", "-c", check], check=True)
print("tutorial 2 done")
