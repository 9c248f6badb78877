#!/usr/bin/env python3
"""NaN and Inf through whole CNNs: one NaN (or +Inf, or -Inf) pixel in the
input must give NaN and Inf outputs exactly where PyTorch gives them, with
the default backends (oneDNN first, then native) and with native alone.

Two models, exported from PyTorch with seeded random weights:
  - a small CNN whose output is still a feature map (Conv+BatchNorm+ReLU,
    max pooling, a residual block, ReLU6, a 1x1 Conv), so the positions of
    NaN and Inf in the output say where each op let them through;
  - torchvision's ResNet-18, where one NaN pixel makes every logit NaN
    (the issue: it used to give finite, normal-looking logits by default).
Finite outputs are compared with PyTorch's within 1e-4 of the output scale.

With the default backends every op of both models runs on oneDNN (max
pooling and ReLU6 included; ResNet-18's classifier at batch 1 is placed on
native): oneDNN's max-based kernels are exact only for
finite inputs, so the runtime's guard must run the region on native for the
special pixel (the profile says so), and must not for the clean input.

Usage: nan_propagation.py --tessera build/tessera --work DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        self.conv1 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Sequential(nn.Conv2d(16, 24, 1), nn.ReLU6(), nn.Conv2d(24, 8, 1))

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(y)) + x)
        return self.head(x)


def randomize_normalization(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


def make_model(name):
    torch.manual_seed(0)
    if name == "small_cnn":
        model, shape = SmallCnn(), (1, 3, 32, 40)
    else:
        import torchvision
        model, shape = torchvision.models.resnet18(weights=None), (1, 3, 224, 224)
    model.eval()
    randomize_normalization(model)
    return model, shape


def kinds(a):
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf per element."""
    k = np.zeros(a.shape, dtype=np.int8)
    k[np.isnan(a)] = 1
    k[np.isposinf(a)] = 2
    k[np.isneginf(a)] = 3
    return k


def run_tessera(tessera, model_path, input_path, out_dir, backends):
    cmd = [tessera, "run", model_path, "--input", "input=" + input_path, "--output-dir", out_dir, "--placement",
           "--profile"]
    if backends:
        cmd += ["--backends", backends]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        return None, "tessera exited %d: %s" % (result.returncode, result.stderr.strip())
    return np.load(os.path.join(out_dir, "output.npy")), result.stdout


def check(name, tessera, work):
    model, shape = make_model(name)
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    g = torch.Generator().manual_seed(1)
    clean = torch.randn(*shape, generator=g)
    torch.onnx.export(model, (clean,), path, opset_version=13, input_names=["input"], output_names=["output"],
                      do_constant_folding=True)
    h, w = shape[2], shape[3]
    # One special pixel per case (one channel), away from and at the border.
    cases = [("nan", float("nan"), (1, h // 3, w // 2)), ("nan_corner", float("nan"), (0, 0, w - 1)),
             ("posinf", float("inf"), (2, h // 2, w // 3)), ("neginf", float("-inf"), (0, h - 5, 4))]
    if name == "resnet18":
        cases = cases[:1]
    ok = True
    # The clean input: every region on dnnl, no guard fallback, values as PyTorch's.
    with torch.no_grad():
        expected = model(clean).numpy()
    input_path = os.path.join(folder, "clean.npy")
    np.save(input_path, clean.numpy())
    got, stdout = run_tessera(tessera, path, input_path, os.path.join(folder, "out_clean"), "")
    scale = float(np.max(np.abs(expected)))
    if got is None or got.shape != expected.shape:
        print("FAIL %s clean: %s" % (name, stdout if got is None else "output shape %s" % (got.shape,)))
        ok = False
    elif "ran on native" in stdout or [line for line in stdout.splitlines()
                                       if " -> native" in line and not line.strip().startswith("/fc/Gemm (Gemm) ")]:
        # (ResNet-18's classifier at batch 1 is placed on native: a product of one row against 512 x 1000
        # weights, which native's one-row kernel streams faster. Nothing else may run there.)
        print("FAIL %s clean: something ran on native:\n%s" % (name, stdout))
        ok = False
    elif float(np.max(np.abs(got.astype(np.float64) - expected))) > 1e-4 * max(scale, 1e-3):
        print("FAIL %s clean: outputs differ by %.3g" % (name, float(np.max(np.abs(got - expected)))))
        ok = False
    else:
        print("ok %s clean: all on dnnl, no fallback, as PyTorch" % name)
    for case, value, (c, i, j) in cases:
        x = clean.clone()
        x[0, c, i, j] = value
        with torch.no_grad():
            expected = model(x).numpy()
        input_path = os.path.join(folder, case + ".npy")
        np.save(input_path, x.numpy())
        expected_kinds = kinds(expected)
        if not (expected_kinds != 0).any():
            print("FAIL %s %s: PyTorch's output has no NaN or Inf; the case proves nothing" % (name, case))
            ok = False
            continue
        for backends in ["", "native"]:
            label = "%s %s (%s)" % (name, case, backends or "default backends")
            out_dir = os.path.join(folder, "out_" + case + "_" + (backends or "default"))
            got, stdout = run_tessera(tessera, path, input_path, out_dir, backends)
            if got is None:
                print("FAIL %s: %s" % (label, stdout))
                ok = False
                continue
            if not backends and "total on dnnl:" not in stdout:
                print("FAIL %s: nothing ran on dnnl, so the default backends were not tested" % label)
                ok = False
            if not backends and ("(MaxPool) -> dnnl" not in stdout or "non-finite input, ran on native" not in stdout):
                print("FAIL %s: MaxPool should be placed on dnnl and the guard should run it on native:\n%s" % (label, stdout))
                ok = False
            if got.shape != expected.shape:
                print("FAIL %s: output shape %s, PyTorch gives %s" % (label, got.shape, expected.shape))
                ok = False
                continue
            got_kinds = kinds(got)
            wrong = np.argwhere(got_kinds != expected_kinds)
            finite = expected_kinds == 0
            scale = float(np.max(np.abs(expected[finite]))) if finite.any() else 1.0
            both_finite = finite & (got_kinds == 0)
            err = float(np.max(np.abs(got[both_finite].astype(np.float64) - expected[both_finite]))) if both_finite.any() else 0.0
            names = ["finite", "NaN", "+Inf", "-Inf"]
            counts = ", ".join("%d %s" % ((expected_kinds == k).sum(), names[k]) for k in range(1, 4))
            if len(wrong):
                first = tuple(int(v) for v in wrong[0])
                print("FAIL %s: %d elements differ in kind from PyTorch (PyTorch: %s); first at %s: %s, PyTorch %s"
                      % (label, len(wrong), counts, first, names[got_kinds[first]], names[expected_kinds[first]]))
                ok = False
            elif err > 1e-4 * max(scale, 1e-3):
                print("FAIL %s: finite outputs differ by %.3g (scale %.3g)" % (label, err, scale))
                ok = False
            else:
                print("ok %s: NaN/Inf where PyTorch has them (%s), finite max abs error %.3g"
                      % (label, counts, err))
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("models", nargs="*", default=["small_cnn", "resnet18"])
    args = parser.parse_args()
    ok = True
    for name in args.models:
        ok &= check(name, args.tessera, args.work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
