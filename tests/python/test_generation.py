"""Greedy decoding of a GPT-2-style decoder with a key/value cache (bench/decoder.py: written with torch,
exported with its sequence and cache lengths open) through tessera.InferenceSession, token for token and
logits against PyTorch's own greedy loop: one compile serves the prompt, the empty cache of the first step
(zero-size dims) and every cache length after it, and a second pass over the same lengths prepares and
allocates nothing (session.stats())."""
import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import decoder  # noqa: E402

import tessera  # noqa: E402


def torch_stepper(model, logits):
    """decoder.greedy's step through the torch model, keeping each step's logits in `logits`."""
    def step(ids, past):
        with torch.no_grad():
            out = model(torch.from_numpy(ids), *[torch.from_numpy(p) for p in past])
        logits.append(out[0].numpy())
        return out[0].numpy(), [o.numpy() for o in out[1:]]
    return step


def test_greedy_tokens_match_torch_on_one_compile(tmp_path):
    model = decoder.make(layers=2, d=64, heads=4, vocab=97, std=0.3)
    path = tmp_path / "decoder.onnx"
    decoder.export(model, path)
    prompt, steps = [5, 17, 42, 3, 9, 60], 24
    empty = [p.numpy() for p in model.empty_past()]

    torch_logits = []
    torch_step = torch_stepper(model, torch_logits)

    expected, _ = decoder.greedy(torch_step, prompt, steps, empty)
    assert len(set(expected)) > 3  # the tokens vary: a comparison that can fail

    session = tessera.InferenceSession(path)
    names = decoder.input_names(model.layers)
    assert session.get_inputs()[1].shape == [1, 4, "past", 16]
    tessera_logits = []

    def tessera_step(ids, past):
        out = session.run(None, dict(zip(names, [ids] + list(past))))
        tessera_logits.append(out[0])
        return out[0], out[1:]

    tokens, _ = decoder.greedy(tessera_step, prompt, steps, empty)
    assert tokens == expected
    for step, (got, want) in enumerate(zip(tessera_logits, torch_logits)):
        assert got.shape == want.shape, step
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=f"step {step}")

    first = session.stats()
    assert first["compiles"] == 1 and first["runs"] == steps
    # The same cache lengths again: everything per shape is prepared, and nothing is allocated.
    again, _ = decoder.greedy(tessera_step, prompt, steps, empty)
    assert again == expected
    second = session.stats()
    assert second["runs"] == 2 * steps
    assert second["shape_cache_misses"] == first["shape_cache_misses"], (first, second)
    assert second["allocations"] == first["allocations"], (first, second)
    assert second["shape_cache_hits"] > first["shape_cache_hits"]


def test_more_layers_map_no_more_working_memory_at_a_new_shape(tmp_path):
    """The open oneDNN regions (a layer's products each) take their workspace from the run's pool, one
    buffer for all of them: the first call at a shape allocates as often for 8 layers as for 2 (it allocated
    once more per region, each a fresh mapping whose first touches cost page faults)."""
    def first_call(layers):
        model = decoder.make(layers=layers, d=64, heads=4, vocab=97, std=0.3)
        path = tmp_path / ("decoder%d.onnx" % layers)
        decoder.export(model, path)
        session = tessera.InferenceSession(path)
        feed = {"ids": np.arange(20, dtype=np.int64)[None] % 97}
        for name in decoder.input_names(layers)[1:]:
            feed[name] = np.zeros((1, 4, 0, 16), np.float32)
        session.run(None, feed)
        allocations = session.stats()["allocations"]
        dnnl_regions = [r["backend"] for r in session.profile(feed, runs=1)["regions"]].count("dnnl")
        return allocations, dnnl_regions

    few, many = first_call(2), first_call(8)
    assert many[1] >= few[1] + 4, (few, many)  # the larger model has more oneDNN regions to share with
    assert many[0] == few[0], (few, many)


def test_weight_only_int8_decoder_tracks_the_float_logits(tmp_path):
    """`tessera quantize --weights-only` (tessera.quantize(weights_only=True)): the file holds int8
    weights with a scale per output column behind DequantizeLinear; compiled, they stay 8-bit (the
    artifact is a fraction of the float one's size) and run as native's MatMulInt8Weights; greedy
    decoding's logits stay within cosine 0.999 of PyTorch's float32 ones at every step."""
    import onnx
    from onnx import numpy_helper

    model = decoder.make(layers=2, d=128, heads=4, vocab=600, std=0.02)  # GPT-2's initialisation scale
    path, quantized = tmp_path / "decoder.onnx", tmp_path / "decoder.w8.onnx"
    decoder.export(model, path)
    summary = tessera.quantize(path, quantized, weights_only=True)
    assert "weight-only int8" in summary and "per output channel" in summary, summary

    # The file: every constant MatMul weight (2 layers x 4, and the tied head's copy) is int8 with a
    # scale per column, its values within half a step of the float weight's.
    float_model, int8_model = onnx.load(str(path)), onnx.load(str(quantized))
    floats = {t.name: numpy_helper.to_array(t) for t in float_model.graph.initializer}
    inits = {t.name: numpy_helper.to_array(t) for t in int8_model.graph.initializer}
    dequantized = [n for n in int8_model.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dequantized) == 9, [n.output for n in dequantized]
    for node in dequantized:
        q, scale = inits[node.input[0]], inits[node.input[1]]
        assert q.dtype == np.int8 and q.ndim == 2 and scale.shape == (q.shape[1],), (node.input, q.dtype, scale.shape)
        original = [w for w in floats.values() if w.shape == q.shape and np.abs(w - q * scale).max() <= scale.max() / 2 + 1e-7]
        assert original, node.input[0]

    torch_logits = []
    torch_step = torch_stepper(model, torch_logits)

    prompt, steps = [5, 17, 42, 3, 9, 60], 16
    empty = [p.numpy() for p in model.empty_past()]
    decoder.greedy(torch_step, prompt, steps, empty)

    # Matrices of 2^16 weights or more stay int8 when compiled (the 2 x 2 feed-forward ones and the
    # head's); smaller ones fold to float32. The artifact saves three bytes of four of the former.
    kept = [n for n in dequantized if inits[n.input[0]].size >= 1 << 16]
    assert len(kept) == 5, [inits[n.input[0]].shape for n in dequantized]
    tessera.compile(quantized, tmp_path / "decoder.w8.tsr")
    tessera.compile(path, tmp_path / "decoder.tsr")
    saved = 3 * sum(inits[n.input[0]].size for n in kept)
    assert os.path.getsize(tmp_path / "decoder.w8.tsr") <= os.path.getsize(tmp_path / "decoder.tsr") - 0.95 * saved

    session = tessera.InferenceSession(tmp_path / "decoder.w8.tsr")
    # Each quantized product with its DequantizeLinear (and bias) runs as one native step.
    fused = [p for p in session.placement() if "MatMulInt8Weights" in p["reason"]]
    assert len([p for p in fused if p["op_type"] == "DequantizeLinear"]) == len(kept), [p["reason"] for p in fused]
    names = decoder.input_names(model.layers)
    int8_logits = []
    # Fed PyTorch's tokens (teacher forcing), so that every step compares the same positions.
    ids = np.asarray(prompt, dtype=np.int64)[None]
    past = empty
    for step in range(steps):
        out = session.run(None, dict(zip(names, [ids] + list(past))))
        int8_logits.append(out[0])
        past = out[1:]
        ids = np.asarray([[int(np.argmax(torch_logits[step][0, -1]))]], dtype=np.int64)
    for step, (got, want) in enumerate(zip(int8_logits, torch_logits)):
        assert got.shape == want.shape, step
        a, b = got.ravel().astype(np.float64), want.ravel().astype(np.float64)
        cosine = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
        assert cosine >= 0.999, (step, cosine)
        assert not np.allclose(a, b, rtol=1e-6, atol=1e-6), step  # the weights did change
    assert session.stats()["compiles"] == 0  # an artifact: loaded, never compiled again


def test_io_binding_keeps_the_cache_in_one_buffer(tmp_path):
    """The key/value caches bound as views of one buffer each (past = its first positions, present = one step
    more): the same tokens and logits as PyTorch, every cache position torch's present holds, nothing copied for
    the binding (the Concat appends the step's positions in place, attention reads the cache where it is), and a
    second pass over the same lengths allocates nothing."""
    layers, heads, head_dim, vocab = 2, 4, 16, 97
    model = decoder.make(layers=layers, d=heads * head_dim, heads=heads, vocab=vocab, std=0.3)
    path = tmp_path / "decoder.onnx"
    decoder.export(model, path)
    prompt, steps = [5, 17, 42, 3, 9, 60], 24
    torch_logits = []
    torch_step = torch_stepper(model, torch_logits)
    torch_present = []

    def keep_present(ids, past):
        logits, present = torch_step(ids, past)
        torch_present[:] = present
        return logits, present

    expected, _ = decoder.greedy(keep_present, prompt, steps, [p.numpy() for p in model.empty_past()])
    assert len(set(expected)) > 3

    session = tessera.InferenceSession(path)
    capacity = len(prompt) + steps + 3
    tokens, _, logits, caches = decoder.greedy_bound(session, layers, heads, head_dim, vocab, prompt, steps, capacity,
                                                     keep_logits=True)
    assert tokens == expected
    for step, (got, want) in enumerate(zip(logits, torch_logits)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=f"step {step}")
    total = len(prompt) + steps - 1  # the last step's present
    for k, (cache, want) in enumerate(zip(caches, torch_present)):
        assert want.shape[2] == total
        np.testing.assert_allclose(cache[:, :, :total], want, rtol=1e-5, atol=1e-5, err_msg=f"cache {k}")
        assert np.isnan(cache[:, :, total:]).all(), k  # nothing written past the valid positions
    first = session.stats()
    assert first["binding_copies"] == 0 and first["binding_copy_bytes"] == 0, first
    again = decoder.greedy_bound(session, layers, heads, head_dim, vocab, prompt, steps, capacity)[0]
    assert again == expected
    second = session.stats()
    assert second["binding_copies"] == 0, second
    assert second["allocations"] == first["allocations"], (first, second)
    assert second["shape_cache_misses"] == first["shape_cache_misses"], (first, second)


def test_dim_bounds_size_memory_once_for_every_length(tmp_path):
    """dim_bounds={"seq": ..., "past": ...}: after the first run (the prompt), 100 decode steps at growing cache
    lengths allocate no working memory (every value takes a buffer of its size at the bounds), the tokens are
    PyTorch's, and a prompt past the bound is an error naming the input and the dim."""
    layers, heads, head_dim, vocab = 2, 4, 16, 97
    model = decoder.make(layers=layers, d=heads * head_dim, heads=heads, vocab=vocab, std=0.3)
    path = tmp_path / "decoder.onnx"
    decoder.export(model, path)
    # A one-token prompt: the attention's values grow past everything the first run needed (without the
    # bounds, the growing cache lengths allocate again and again).
    prompt, steps = [5], 101
    expected, _ = decoder.greedy(torch_stepper(model, []), prompt, steps, [p.numpy() for p in model.empty_past()])
    assert len(set(expected)) > 3
    session = tessera.InferenceSession(path, dim_bounds={"seq": (1, 8), "past": (0, 120)})
    first = {}

    def after_prompt(step):
        if step == 1:
            first.update(session.stats())

    tokens = decoder.greedy_bound(session, layers, heads, head_dim, vocab, prompt, steps, len(prompt) + steps,
                                  on_step=after_prompt)[0]
    assert tokens == expected
    last = session.stats()
    assert first["runs"] == 1 and last["runs"] == steps
    assert last["allocations"] == first["allocations"], (first, last)
    assert last["binding_copies"] == 0, last
    with pytest.raises(tessera.InvalidArgument, match=r"input 'ids' dimension 1 \('seq'\) is 9, outside its bounds 1..8"):
        session.run(None, dict(zip(decoder.input_names(layers), [np.zeros((1, 9), np.int64)] +
                                   [np.zeros((1, heads, 0, head_dim), np.float32)] * (2 * layers))))


OPEN_ROWS_WEIGHTS_SCRIPT = r"""
import sys
import numpy as np
import tessera
from onnx import TensorProto, helper, numpy_helper

def anon_mb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) / 1024
K = N = 4096
rng = np.random.default_rng(0)
w = (rng.standard_normal((K, N)) * 0.02).astype(np.float32)
b = (rng.standard_normal(N) * 0.1).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", K])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", N])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
data = model.SerializeToString()
del model, graph
before = anon_mb()
session = tessera.InferenceSession(data, threads=int(sys.argv[1]))
worst = 0.0
for seq in (1, 8, 2, 1, 3):
    x = rng.standard_normal((1, seq, K)).astype(np.float32)
    y = session.run(None, {"x": x})[0]
    expected = x.astype(np.float64) @ w.astype(np.float64) + b
    worst = max(worst, float(np.max(np.abs(y - expected)) / np.max(np.abs(expected))))  # NaN fails below
stats = session.stats()
print(anon_mb() - before, worst, stats["shape_fallbacks"], ",".join(p["backend"] for p in session.placement()))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_open_rows_product_keeps_one_packed_copy_of_its_weights(tmp_path, threads):
    """A product of open rows against a 64 MB matrix (a decoder's projection, run at its prompt's and its
    tokens' row counts) is native's, whose one packed copy serves every row count: the session holds the
    constant and that copy, 128 MB. When oneDNN took such products, its calls of one to three rows fell back
    to native, and the region held the constant, oneDNN's copy and (packed) native's: 192 MB. In a fresh
    process, so that the resident memory counts this session alone; the outputs at 1, 2, 3 and 8 rows
    against float64."""
    import subprocess
    script = tmp_path / "open_rows_weights.py"
    script.write_text(OPEN_ROWS_WEIGHTS_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(tessera.__path__[0])] + [env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, str(script), str(threads)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    grown, worst, fallbacks, placement = done.stdout.split()
    print("resident growth %s MB, worst relative error %s, %s fallback runs, regions %s" % (grown, worst, fallbacks, placement))
    assert set(placement.split(",")) == {"native"}  # every node
    assert int(fallbacks) == 0
    assert float(worst) < 1e-5  # float32 sums of 4096 products of values near 1: a few 1e-7
    weights_mb = 64.0
    assert float(grown) < 2.5 * weights_mb, "resident memory grew by %s MB for %s MB of weights" % (grown, weights_mb)
