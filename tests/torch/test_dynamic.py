"""Dynamic axes: per-call shape binding, the bounded cache of compiled variants, and shape errors."""

import pytest
import torch

import tessera.torch as tt
from conftest import Mlp, assert_close


def test_batch_sizes_run_on_one_compile():
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, torch.randn(1, 16), dynamic_axes={0: {0: "batch"}}, cache_size=2)
    model = compiled.tessera_model()
    assert model.kind() == "onnx" and model.cache_capacity() == 2  # accepted; a per-shape cache is not needed
    assert model.compile_count() == 1 and model.cached_variants() == 1  # compiled by compile(), batch open

    def check(batch):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            assert_close(compiled(x), mlp(x))

    for batch in (1, 3, 5, 5, 3, 1, 64, 0):
        check(batch)
    assert model.compile_count() == 1  # every batch size ran on the one compile
    assert model.cached_variants() == 1


def test_fixed_dims_are_still_checked():
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, torch.randn(2, 16), dynamic_axes={0: {0: "batch"}})
    with pytest.raises(ValueError, match=r"expected float32\[batch,16\], got float32\[2,15\]"):
        compiled(torch.randn(2, 15))
    with pytest.raises(ValueError, match="expected float32"):
        compiled(torch.randn(16))
    with pytest.raises(ValueError, match="expected float32"):
        compiled(torch.randn(2, 16, dtype=torch.float64))
    assert compiled.tessera_model().compile_count() == 1  # nothing was compiled for a bad input


def test_a_dim_shared_by_two_inputs_must_agree():
    class Pair(torch.nn.Module):
        def forward(self, a, b):
            return a * 2 + b

    compiled = tt.compile(Pair(), (torch.randn(2, 4), torch.randn(2, 4)),
                          dynamic_axes={0: {0: "batch"}, 1: {0: "batch"}})
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    assert_close(compiled(a, b), a * 2 + b)
    with pytest.raises(ValueError, match="dimension 'batch' is 3 in input 'input_0' dimension 0 but 5"):
        compiled(a, torch.randn(5, 4))


def test_several_dynamic_dims_and_outputs():
    class Stats(torch.nn.Module):
        def forward(self, x):
            return x.sum(dim=1), x.max(dim=2).values, torch.relu(x)

    module = Stats()
    compiled = tt.compile(module, torch.randn(2, 3, 4), dynamic_axes={0: {0: "n", 1: "c", 2: "w"}})
    for shape in [(2, 3, 4), (1, 5, 2), (4, 1, 7)]:
        x = torch.randn(*shape)
        actual = compiled(x)
        assert isinstance(actual, tuple) and len(actual) == 3
        for got, expected in zip(actual, module(x)):
            assert_close(got, expected)


def test_empty_batch():
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, torch.randn(2, 16), dynamic_axes={0: {0: "batch"}})
    out = compiled(torch.randn(0, 16))
    assert out.shape == (0, 8) and out.dtype == torch.float32


def test_a_failed_compile_is_reported_again_not_cached():
    class Reshape(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], 2, -1)

    compiled = tt.compile(Reshape(), torch.randn(2, 4), dynamic_axes={0: {0: "n", 1: "m"}})
    for _ in range(2):
        with pytest.raises((ValueError, NotImplementedError)):
            compiled(torch.randn(2, 5))  # 5 columns do not split into 2 equal halves
    x = torch.randn(3, 6)
    assert_close(compiled(x), x.reshape(3, 2, -1))
