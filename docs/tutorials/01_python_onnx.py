"""Tutorial 1: run an ONNX model from Python.

    PYTHONPATH=build/python /usr/bin/python3 docs/tutorials/01_python_onnx.py

Tessera's Python API follows ONNX Runtime's: if your code does

    session = onnxruntime.InferenceSession("model.onnx")
    outputs = session.run(None, {"input": x})

then `tessera.InferenceSession` is the one line to change. This script makes a
small ONNX model (exported from PyTorch, so that we can check the results
against PyTorch), runs it, and shows what else a session tells you. CTest runs
it; every check below fails loudly if Tessera gets a result wrong.
"""

import io
import os
import tempfile

import numpy as np
import torch

import tessera


# 1. A model. Any ONNX file works; here a small CNN exported from PyTorch with
#    an open batch dimension, so that one file serves every batch size.
class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.softmax(self.fc(self.pool(torch.relu(self.conv(x))).flatten(1)), dim=1)


torch.manual_seed(0)
net = SmallNet().eval()
folder = tempfile.mkdtemp(prefix="tessera_tutorial_")
path = os.path.join(folder, "small.onnx")
torch.onnx.export(net, (torch.randn(1, 3, 16, 16),), path, input_names=["image"], output_names=["probs"],
                  dynamic_axes={"image": {0: "batch"}, "probs": {0: "batch"}}, opset_version=13)

# 2. A session. backends= chooses who may run what ("dnnl,native" is the
#    default here); threads= the intra-op threads.
session = tessera.InferenceSession(path, threads=2)
print("inputs: ", session.get_inputs())    # [NodeArg(name='image', type='tensor(float)', shape=['batch', 3, 16, 16])]
print("outputs:", session.get_outputs())
print("backends:", session.get_backends())

# 3. Run it. Inputs are read in place (no copy); outputs are numpy arrays over
#    memory Tessera allocated (no copy either). The batch dimension is open, so
#    each new batch size compiles a variant once; later runs reuse it.
for batch in (1, 4):
    x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype(np.float32)
    (probs,) = session.run(None, {"image": x})
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-5)
    print("batch %d: probabilities %s, match PyTorch" % (batch, probs.shape))

# 4. Torch tensors go in directly, and outputs can come back as DLPack tensors
#    that torch (or numpy) adopts without copying.
x = torch.randn(2, 3, 16, 16)
(out,) = session.run(None, {"image": x}, as_dlpack=True)
probs = torch.from_dlpack(out)
assert probs.data_ptr() == out.data_ptr  # the same memory: no copy was made
with torch.no_grad():
    torch.testing.assert_close(probs, net(x), rtol=1e-4, atol=1e-5)
print("torch in, torch out, zero copies; input copies made so far:", tessera.copy_count())

# 5. Where did each node run, and why? (The report also comes as json, dot or html.)
for node in session.placement()[:4]:
    print("  %-28s %-10s on %-7s %s" % (node["node"], node["op_type"], node["backend"], node["reason"]))
profile = session.profile({"image": x.numpy()}, runs=5)
print("one run: %.3f ms over %d region(s)" % (profile["total_ms"], len(profile["regions"])))

# 6. Compile once, ship one file: a .tsr artifact holds the plan, the constants
#    and every backend's compiled code. Loading it compiles nothing.
artifact = os.path.join(folder, "small.tsr")
tessera.compile(path, artifact, input_shapes={"batch": 2})
shipped = tessera.InferenceSession(artifact)
(again,) = shipped.run(None, {"image": x.numpy()})
np.testing.assert_allclose(again, probs.numpy(), rtol=1e-5, atol=1e-6)
print("artifact: %d bytes, same results" % os.path.getsize(artifact))

# 7. Mistakes are exceptions with Tessera's message, never crashes.
try:
    session.run(None, {"image": np.zeros((1, 3, 15, 16), dtype=np.float32)})
except tessera.InvalidArgument as e:
    print("as expected:", e)
else:
    raise AssertionError("a wrong input shape was accepted")

for name in os.listdir(folder):
    os.remove(os.path.join(folder, name))
os.rmdir(folder)
print("tutorial 1: OK")
