"""Whole models through tessera.torch.compile match PyTorch eager within fp32 tolerance."""

import pytest
import torch
import torchvision

import tessera.torch as tt
from conftest import assert_close, randomize_batch_norm


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_model_matches_eager(name):
    torch.manual_seed(0)
    model = randomize_batch_norm(getattr(torchvision.models, name)(weights=None).eval())
    compiled = tt.compile(model, torch.randn(1, 3, 64, 64))
    for seed in (1, 2):
        x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            expected = model(x)
            actual = compiled(x)
        assert expected.abs().max() > 1e-2  # a meaningful scale, so the tolerance means something
        assert_close(actual, expected, rtol=1e-3, atol_scale=1e-3)
        assert actual.argmax() == expected.argmax() or torch.topk(expected, 2).values.diff().abs() < 1e-3
    # Scripted, it still runs the same op and gives the same numbers.
    scripted = torch.jit.script(compiled)
    with torch.no_grad():
        assert_close(scripted(x), compiled(x), rtol=0, atol_scale=0)


def transformer_encoder():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2).eval()


def test_transformer_encoder_matches_eager():
    encoder = transformer_encoder()
    compiled = tt.compile(encoder, torch.randn(2, 10, 32))
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        # Eager under no_grad takes torch's fused fast path; with grad it takes the plain one: check both.
        fast = encoder(x)
        actual = compiled(x)
    plain = encoder(x).detach()
    assert_close(actual, plain, rtol=1e-4, atol_scale=1e-5)
    assert_close(actual, fast, rtol=1e-4, atol_scale=1e-5)


def test_transformer_encoder_dynamic_batch_and_sequence():
    encoder = transformer_encoder()
    compiled = tt.compile(encoder, torch.randn(2, 10, 32), dynamic_axes={0: {0: "batch", 1: "sequence"}})
    shapes = [(2, 10), (1, 7), (3, 5), (1, 1), (2, 10)]
    for batch, sequence in shapes:
        x = torch.randn(batch, sequence, 32)
        with torch.no_grad():
            actual = compiled(x)
        assert_close(actual, encoder(x).detach(), rtol=1e-4, atol_scale=1e-5)
    assert compiled.tessera_model().compile_count() == 1  # compiled once, batch and sequence open
