"""Greedy decoding of a GPT-2-style decoder with a key/value cache (bench/decoder.py: written with torch,
exported with its sequence and cache lengths open) through tessera.InferenceSession, token for token and
logits against PyTorch's own greedy loop: one compile serves the prompt, the empty cache of the first step
(zero-size dims) and every cache length after it, and a second pass over the same lengths prepares and
allocates nothing (session.stats())."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import decoder  # noqa: E402

import tessera  # noqa: E402


def test_greedy_tokens_match_torch_on_one_compile(tmp_path):
    model = decoder.make(layers=2, d=64, heads=4, vocab=97, std=0.3)
    path = tmp_path / "decoder.onnx"
    decoder.export(model, path)
    prompt, steps = [5, 17, 42, 3, 9, 60], 24
    empty = [p.numpy() for p in model.empty_past()]

    torch_logits = []

    def torch_step(ids, past):
        with torch.no_grad():
            out = model(torch.from_numpy(ids), *[torch.from_numpy(p) for p in past])
        torch_logits.append(out[0].numpy())
        return out[0].numpy(), [o.numpy() for o in out[1:]]

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
