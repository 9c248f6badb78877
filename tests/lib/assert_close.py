"""One closeness check for the PyTorch tests (tests/torch/, tests/torch_partition/, and the fresh
processes tests/torch/test_save.py starts), so that they all treat NaN and Inf the same way:

- dtype and shape must match exactly;
- integer and bool tensors must be equal;
- floating point: NaN in `actual` only where `expected` has NaN (and the reverse), +-Inf only where
  `expected` has the same infinity, and elsewhere |actual - expected| <= atol + rtol * |expected| with
  atol = atol_scale * max|expected| over expected's finite values (at least atol_scale * 1e-6), so a NaN
  or Inf in expected can never widen the tolerance.

    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
    from assert_close import assert_close
"""

import torch


def assert_close(actual, expected, rtol=1e-4, atol_scale=1e-4):
    assert isinstance(actual, torch.Tensor), type(actual)
    assert isinstance(expected, torch.Tensor), type(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if not expected.is_floating_point() and not expected.is_complex():
        assert torch.equal(actual, expected), (actual, expected)
        return
    actual, expected = actual.detach().cpu(), expected.detach().cpu()
    # NaN exactly where expected has NaN: torch.testing's equal_nan=True compares the NaN masks,
    # spelled out here too so that the message names the first misplaced NaN.
    nan_actual, nan_expected = torch.isnan(actual), torch.isnan(expected)
    if not torch.equal(nan_actual, nan_expected):
        where = (nan_actual != nan_expected).nonzero()[0].tolist()
        raise AssertionError(f"NaN mismatch at {where}: actual {actual[tuple(where)].item()}, "
                             f"expected {expected[tuple(where)].item()} "
                             f"({int(nan_actual.sum())} NaN in actual, {int(nan_expected.sum())} in expected)")
    finite = expected[torch.isfinite(expected)]
    scale = finite.abs().max().item() if finite.numel() else 0.0
    # isclose: an infinity matches only the same infinity, never a finite value.
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol_scale * max(scale, 1e-6), equal_nan=True)
