"""Shared helpers for the PyTorch bridge's tests (tests/torch/): small modules and comparisons.

Every check compares Tessera's outputs with PyTorch eager on the same module, never with Tessera itself.
"""

import os
import subprocess
import sys

import pytest
import torch

import tessera.torch as tt

LIB_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, LIB_DIR)
from assert_close import assert_close  # noqa: E402  (the one NaN-aware check, shared with tests/torch_partition/)

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


__all__ = ["AddCompare", "Mlp", "assert_close", "LIB_DIR", "randomize_batch_norm", "run_fresh_python",
           "run_fresh_python_status", "PYTHON", "sys"]
