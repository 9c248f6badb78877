"""Shared helpers for the PyTorch bridge's tests (tests/torch/): small modules and comparisons.

Every check compares Tessera's outputs with PyTorch eager on the same module, never with Tessera itself.
"""

import os
import subprocess
import sys

import pytest
import torch

import tessera.torch as tt

PYTHON = "/usr/bin/python3"  # the Debian interpreter, which has torch


@pytest.fixture(autouse=True, scope="session")
def _library():
    tt.load_library()
    torch.set_num_threads(1)  # 2 cores: keep eager PyTorch from fighting Tessera's threads


class AddCompare(torch.nn.Module):
    """Two outputs of different dtypes: a + b (float32) and a > b (bool)."""

    def forward(self, a, b):
        return a + b, a > b


class Mlp(torch.nn.Module):
    def __init__(self, features=16, hidden=32, out=8):
        super().__init__()
        self.fc1 = torch.nn.Linear(features, hidden)
        self.fc2 = torch.nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def assert_close(actual, expected, rtol=1e-4, atol_scale=1e-4):
    """fp32 agreement: |actual - expected| <= atol_scale * max|expected| + rtol * |expected| elementwise."""
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype == torch.bool or not actual.is_floating_point():
        assert torch.equal(actual, expected)
        return
    scale = expected.abs().max().item() if expected.numel() else 0.0
    assert torch.isfinite(actual).all()
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol_scale * max(scale, 1e-6))


def randomize_batch_norm(module, seed=0):
    """Gives every BatchNorm non-trivial statistics and affine parameters, so folding them is tested
    and activations keep a useful scale through a randomly initialised network."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, torch.nn.BatchNorm2d):
                n = layer.num_features
                layer.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                layer.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                layer.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                layer.bias.copy_(torch.randn(n, generator=generator) * 0.1)
    return module


def run_fresh_python(code, timeout=300):
    """Runs code in a new /usr/bin/python3 process with the build tree's package path; returns stdout."""
    env = dict(os.environ)
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def run_fresh_python_status(code, timeout=300):
    env = dict(os.environ)
    return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)


__all__ = ["AddCompare", "Mlp", "assert_close", "randomize_batch_norm", "run_fresh_python",
           "run_fresh_python_status", "PYTHON", "sys"]
