"""torch.jit.script / trace + torch.jit.save, then torch.jit.load in a fresh process: same results.

The fresh process has never seen the module's Python class nor compiled anything: the compiled model
travels inside the file (the TorchBind pickle: format version, kind, artifact or ONNX bytes, options).
"""

import textwrap
import zipfile

import pytest
import torch
import torchvision

import tessera.torch as tt
from conftest import LIB_DIR, assert_close, randomize_batch_norm, run_fresh_python, run_fresh_python_status

CHECK_IN_FRESH_PROCESS = textwrap.dedent("""
    import sys
    import torch
    import tessera.torch
    sys.path.insert(0, {lib!r})
    from assert_close import assert_close  # the same NaN-aware check as in this process (tests/lib)
    tessera.torch.load_library()
    module = torch.jit.load({path!r})
    cases = torch.load({cases!r})
    with torch.no_grad():
        for inputs, expected in cases:
            actual = module(*inputs)
            if isinstance(expected, torch.Tensor):
                actual, expected = (actual,), (expected,)
            assert len(actual) == len(expected), (len(actual), len(expected))
            for a, e in zip(actual, expected):
                assert_close(a, e, rtol=0, atol_scale=1e-4)  # |a - e| <= 1e-4 * max|e|
    print("CHECKED", len(cases))
""")


def check_saved(tmp_path, script_module, cases):
    """Saves script_module, and checks in a fresh process that it gives `cases`' eager outputs."""
    path = str(tmp_path / "model.pt")
    cases_path = str(tmp_path / "cases.pt")
    torch.jit.save(script_module, path)
    torch.save(cases, cases_path)
    out = run_fresh_python(CHECK_IN_FRESH_PROCESS.format(lib=LIB_DIR, path=path, cases=cases_path))
    assert out.split() == ["CHECKED", str(len(cases))], out  # every case compared
    return path


def test_scripted_torchvision_model_round_trips(tmp_path):
    torch.manual_seed(0)
    model = randomize_batch_norm(torchvision.models.mobilenet_v2(weights=None).eval())
    compiled = tt.compile(model, torch.randn(1, 3, 64, 64), threads=2)
    scripted = torch.jit.script(compiled)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        cases = [((x,), model(x))]
    path = check_saved(tmp_path, scripted, cases)
    # And in this process, after load: the options (threads) came back too.
    loaded = torch.jit.load(path)
    assert loaded.model.options()["threads"] == "2"
    assert loaded.model.kind() == "tsr"


def test_traced_module_with_two_outputs_round_trips(tmp_path):
    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Linear(8, 8)

        def forward(self, x, mask):
            y = torch.relu(self.body(x))
            return y * mask, y.sum(dim=1) > 0

    module = Heads().eval()
    x, mask = torch.randn(3, 8), torch.rand(3, 8)
    compiled = tt.compile(module, (x, mask))
    traced = torch.jit.trace(compiled, (x, mask))
    with torch.no_grad():
        cases = [((x, mask), module(x, mask))]
    check_saved(tmp_path, traced, cases)


def test_dynamic_model_round_trips_at_several_shapes(tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=1).eval()
    compiled = tt.compile(encoder, torch.randn(2, 5, 16), dynamic_axes={0: {0: "batch", 1: "sequence"}},
                          cache_size=3)
    scripted = torch.jit.script(compiled)
    cases = []
    for batch, sequence in [(1, 3), (4, 9), (2, 5)]:
        x = torch.randn(batch, sequence, 16)
        cases.append(((x,), encoder(x).detach()))
    path = check_saved(tmp_path, scripted, cases)
    loaded = torch.jit.load(path)
    assert loaded.model.kind() == "onnx" and loaded.model.cache_capacity() == 3


def test_loading_without_the_library_fails_cleanly(tmp_path):
    compiled = tt.compile(torch.nn.Linear(4, 4), torch.randn(2, 4))
    path = str(tmp_path / "model.pt")
    torch.jit.save(torch.jit.script(compiled), path)
    result = run_fresh_python_status(f"import torch\ntorch.jit.load({path!r})")
    assert result.returncode == 1, result  # a Python exception, not a crash
    assert "tessera" in result.stderr and "Traceback" in result.stderr


def test_a_newer_format_version_is_refused(tmp_path):
    compiled = tt.compile(torch.nn.Linear(4, 4), torch.randn(2, 4))
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(compiled), str(path))
    # Rewrite the pickled state's version (BININT1 2, then the kind "tsr") to 99.
    newer = tmp_path / "newer.pt"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(newer, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("/data.pkl"):
                marker = b"K\x02X\x03\x00\x00\x00tsr"
                assert data.count(marker) == 1
                data = data.replace(marker, b"K\x63X\x03\x00\x00\x00tsr")
            target.writestr(info.filename, data)
    with pytest.raises(Exception, match="format version 99"):
        torch.jit.load(str(newer))


@pytest.mark.parametrize("dynamic", [True, False], ids=["onnx-bytes", "artifact"])
def test_a_flipped_bit_in_the_saved_model_is_refused(tmp_path, dynamic):
    """The ONNX bytes of a module compiled with dynamic_axes have no checksum of their own: the pickle's
    (format version 2) catches a flipped weight bit, which once loaded and ran with errors of 0.9."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 8).eval()
    compiled = tt.compile(linear, torch.randn(2, 8), dynamic_axes={0: {0: "batch"}} if dynamic else None)
    path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(compiled), str(path))
    weights = linear.weight.detach().numpy().tobytes()[:16]
    flipped = tmp_path / "flipped.pt"
    found = 0
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(flipped, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            at = data.find(weights)
            if at >= 0:
                found += 1
                data = data[:at + 3] + bytes([data[at + 3] ^ 0x01]) + data[at + 4:]
            target.writestr(info.filename, data)
    assert found == 1, found  # the weights are in the file, once
    with pytest.raises(Exception, match="do not match their checksum|checksum"):
        module = torch.jit.load(str(flipped))
        module(torch.randn(2, 8))
    # The untouched file loads and runs.
    x = torch.randn(2, 8)
    assert_close(torch.jit.load(str(path))(x), linear(x).detach(), rtol=0, atol_scale=1e-5)


def test_deepcopy_of_a_scripted_module():
    import copy

    compiled = torch.jit.script(tt.compile(torch.nn.Linear(4, 4), torch.randn(2, 4)))
    duplicate = copy.deepcopy(compiled)
    x = torch.randn(2, 4)
    assert_close(duplicate(x), compiled(x), rtol=0, atol_scale=0)


def test_the_shared_closeness_check_fails_where_it_must():
    """tests/lib/assert_close.py, which the round trips above (in their fresh processes) and
    tests/torch_partition/ rely on: NaN, Inf, dtype and shape are never let through."""
    e = torch.tensor([1.0, -2.0, 3.0])
    assert_close(e.clone(), e)
    assert_close(e + 1e-5, e)  # within 1e-4 of the range
    bad = [
        (torch.tensor([float("nan"), -2.0, 3.0]), e),  # NaN where expected is finite
        (e.clone(), torch.tensor([float("nan"), -2.0, 3.0])),  # a finite value where expected has NaN
        (torch.tensor([float("inf"), -2.0, 3.0]), e),  # Inf where expected is finite
        (torch.tensor([float("-inf"), -2.0, 3.0]), torch.tensor([float("inf"), -2.0, 3.0])),  # the other infinity
        (torch.tensor([1.0, -2.0, 3.01]), e),  # 1e-2 off
        (e.double(), e),  # dtype
        (e.reshape(1, 3), e),  # shape
        (torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3])),  # integers: exact
        # An Inf in expected does not widen the tolerance of its finite neighbours.
        (torch.tensor([float("inf"), -2.0, 3.5]), torch.tensor([float("inf"), -2.0, 3.0])),
    ]
    for actual, expected in bad:
        with pytest.raises(AssertionError):
            assert_close(actual, expected)
    # NaN and Inf where expected has the same may pass.
    same = torch.tensor([float("nan"), float("-inf"), 3.0])
    assert_close(same.clone(), same)


def test_torch_save_of_a_compiled_module_says_how_to_save_it(tmp_path):
    """torch.save pickles the module, which once failed on the generated class ("attribute lookup
    TesseraModule0 on tessera.torch failed"), pointing nowhere useful; the message now says what works."""
    import io
    import pickle

    compiled = tt.compile(torch.nn.Linear(4, 4), torch.randn(2, 4))
    expected = (r"cannot be pickled.*torch\.jit\.save\(torch\.jit\.script\(module\), path\)"
                r".*tessera\.torch\.load\(path\)")
    for save in (lambda: torch.save(compiled, io.BytesIO()), lambda: pickle.dumps(compiled),
                 lambda: torch.save(torch.nn.Sequential(compiled, torch.nn.ReLU()), str(tmp_path / "held.pt"))):
        with pytest.raises(pickle.PicklingError, match=expected):
            save()
    # What the message says works (and copies, which nn.Module makes through the same protocol, still do).
    import copy

    x = torch.randn(2, 4)
    path = str(tmp_path / "model.pt")
    torch.jit.save(torch.jit.script(compiled), path)
    for other in (tt.load(path), copy.copy(compiled), copy.deepcopy(compiled)):
        assert_close(other(x), compiled(x), rtol=0, atol_scale=0)
    torch.save(compiled.state_dict(), str(tmp_path / "state.pt"))  # an empty state dict: nothing to pickle


def test_a_module_that_updates_its_input_round_trips(tmp_path):
    """The copy back into the updated input is part of the scripted forward: it survives torch.jit.save."""
    class AddsOne(torch.nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    path = str(tmp_path / "model.pt")
    torch.jit.save(torch.jit.script(tt.compile(AddsOne(), torch.randn(3))), path)
    loaded = tt.load(path)
    x = torch.tensor([1.0, 2.0, 3.0])
    with torch.no_grad():
        assert_close(loaded(x), torch.tensor([4.0, 6.0, 8.0]))
    assert_close(x, torch.tensor([2.0, 3.0, 4.0]))
