"""Tutorial 6: quantize a model to int8 and check what it costs in accuracy.

    PYTHONPATH=build/python /usr/bin/python3 docs/tutorials/06_quantize.py

`tessera.quantize` (or `tessera quantize` on the command line) calibrates a
float ONNX model on sample inputs and writes a standard QDQ ONNX file:
QuantizeLinear / DequantizeLinear pairs around the convolutions, matmuls,
residual adds and pools. Tessera runs that file with int8 kernels (oneDNN's
VNNI convolutions and matmuls); ONNX Runtime runs the same file too. This
script quantizes torchvision's ResNet-18 (random weights, so nothing is
downloaded), checks the int8 model against the float one on inputs the
calibration never saw, and asks Tessera where the int8 regions are and how
far each is from the QDQ file's exact meaning. CTest runs it; every check
fails loudly when a result is wrong.
"""

import os
import shutil
import tempfile
import time

import numpy as np
import torch
import torchvision

import tessera

folder = tempfile.mkdtemp(prefix="tessera_quantize_")

# 1. A float model. BatchNorm statistics are made non-trivial (random weights
#    alone would leave every layer's output near zero).
torch.manual_seed(0)
net = torchvision.models.resnet18(weights=None).eval()
with torch.no_grad():
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.2, 0.2)
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
float_path = os.path.join(folder, "resnet18.onnx")
torch.onnx.export(net, torch.randn(1, 3, 224, 224), float_path, opset_version=13, input_names=["image"],
                  output_names=["logits"])

# 2. Calibration: a few inputs like the ones the model will see. Real images are
#    best; here, as for the export, random ones. The progress callback is optional.
rng = np.random.default_rng(0)
calibration = [{"image": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(8)]
int8_path = os.path.join(folder, "resnet18.qdq.onnx")
summary = tessera.quantize(float_path, int8_path, calibration=calibration, per_channel=True,
                           progress=lambda phase, done, total: print("\r%s %d/%d" % (phase, done, total), end=""))
print()
print(summary)
assert "Conv 20" in summary, summary  # every convolution of ResNet-18 is quantized

# 3. Run both and compare on inputs calibration did not see.
float_session = tessera.InferenceSession(float_path)
int8_session = tessera.InferenceSession(int8_path)
agree, cosines = 0, []
tests = 20
for k in range(tests):
    x = np.random.default_rng(100 + k).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        reference = net(torch.from_numpy(x)).numpy()  # PyTorch's float32 result
    a = float_session.run(None, {"image": x})[0]
    b = int8_session.run(None, {"image": x})[0]
    np.testing.assert_allclose(a, reference, rtol=1e-3, atol=1e-3 * np.abs(reference).max())
    agree += int(a.argmax() == b.argmax())
    cosines.append(float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b)))
print("int8 against float32: top-1 agreement %d/%d, lowest cosine %.5f" % (agree, tests, min(cosines)))
assert agree >= tests - 1 and min(cosines) > 0.999

# 4. Where it ran: the convolutions became QLinearConv nodes, on oneDNN (int8 primitives) where the
#    CPU has VNNI. Without VNNI oneDNN's int8 kernels add pairs of 8-bit products in a saturating
#    int16, so oneDNN refuses a convolution whose weights could overflow it and native's exact
#    integer kernels run it; the placement's reason says so.
placement = int8_session.placement()
int8_convs = [p for p in placement if p["op_type"] == "QLinearConv"]
on = {backend: sum(p["backend"] == backend for p in int8_convs) for backend in ("dnnl", "native")}
print("QLinearConv nodes:", len(int8_convs), "on oneDNN:", on["dnnl"], "on native:", on["native"])
assert len(int8_convs) == 20 and on["dnnl"] + on["native"] == 20
for p in int8_convs:
    if p["backend"] == "native":
        assert "without VNNI" in p["reason"], p["reason"]
        print("  e.g.", p["node"], "->", p["reason"])
        break

# 5. Accuracy region by region: each region's outputs against the QDQ file's exact meaning
#    computed on native. A wrong kernel would be flagged here, by region.
print(int8_session.check({"image": calibration[0]["image"]}, format="table"))

# 6. How long each takes (a rough look; bench/run_int8_bench.py compares with ONNX Runtime).
for name, session in (("float32", float_session), ("int8", int8_session)):
    x = calibration[0]
    session.run(None, x)
    start = time.perf_counter()
    for _ in range(10):
        session.run(None, x)
    print("%-7s %.1f ms per run" % (name, (time.perf_counter() - start) * 100))

shutil.rmtree(folder)
