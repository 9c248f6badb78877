"""Tutorial 7: token generation with a key/value cache kept in place.

    PYTHONPATH=build/python /usr/bin/python3 docs/tutorials/07_generate.py

A decoder exported from PyTorch with a key/value cache takes, per layer, the
past keys and values (`past_k_L`, `past_v_L`: [1, heads, past, head_dim]) and
returns them with this step's appended (`present_k_L` = Concat(past, new) on
the sequence axis). Fed back naively, every step copies the whole cache. With
Tessera's I/O binding (shaped like ONNX Runtime's) each cache lives in one
buffer with room for the whole generation: the past is bound as a view of its
first positions, the present as the same view one step longer, and the run
writes only the new positions; attention reads the cache where it is.

The model here is bench/decoder.py's GPT-2-style decoder, small and with
random weights (nothing is downloaded); any torch decoder exported the same
way works. The script checks every token against PyTorch's own greedy loop
and fails loudly when one differs. CTest runs it.
"""

import os
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import decoder  # noqa: E402  (bench/decoder.py: the model and its export)

import tessera  # noqa: E402

LAYERS, HEADS, HEAD_DIM, VOCAB = 4, 4, 32, 500
PROMPT, NEW_TOKENS = [11, 42, 7, 99, 3, 250, 18, 64], 120

# 1. A decoder, exported with its sequence and cache lengths open ("seq", "past").
model = decoder.make(layers=LAYERS, d=HEADS * HEAD_DIM, heads=HEADS, vocab=VOCAB, std=0.2)
path = os.path.join(tempfile.mkdtemp(prefix="tessera_generate_"), "decoder.onnx")
decoder.export(model, path)

# 2. PyTorch's greedy loop: the tokens to match.
with torch.no_grad():
    ids, past, expected = torch.tensor([PROMPT]), model.empty_past(), []
    for _ in range(NEW_TOKENS):
        logits, *past = model(ids, *past)
        expected.append(int(logits[0, -1].argmax()))
        ids = torch.tensor([[expected[-1]]])

# 3. One session: compiled once, for every cache length.
session = tessera.InferenceSession(path)
inputs = [i.name for i in session.get_inputs()]    # ids, past_k_0, past_v_0, ...
outputs = [o.name for o in session.get_outputs()]  # logits, present_k_0, present_v_0, ...

# 4. The caches, one buffer each with room for the whole generation, and a buffer for the logits.
capacity = len(PROMPT) + NEW_TOKENS
caches = [np.zeros((1, HEADS, capacity, HEAD_DIM), np.float32) for _ in inputs[1:]]
logits_buffer = np.zeros((1, capacity, VOCAB), np.float32)
binding = session.io_binding()


def generate(count):
    """Greedy decoding through the binding; returns the tokens and the seconds per step."""
    ids, length, tokens, seconds = np.array([PROMPT], np.int64), 0, [], []
    for _ in range(count):
        start = time.perf_counter()
        seq = ids.shape[1]
        binding.bind_input("ids", ids)
        for past_name, present_name, cache in zip(inputs[1:], outputs[1:], caches):
            binding.bind_input(past_name, cache[:, :, :length])             # the positions so far
            binding.bind_output(present_name, cache[:, :, :length + seq])   # the same memory, longer
        logits = logits_buffer[:, :seq]
        binding.bind_output("logits", logits)
        session.run_with_iobinding(binding)
        tokens.append(int(logits[0, -1].argmax()))
        seconds.append(time.perf_counter() - start)
        length += seq
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens, seconds


tokens, seconds = generate(NEW_TOKENS)
assert tokens == expected, f"Tessera's tokens differ from PyTorch's at step {next(i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b)}"
print(f"{NEW_TOKENS} tokens, the same as PyTorch's; prompt {seconds[0] * 1e3:.1f} ms, "
      f"decode step median {np.median(seconds[1:]) * 1e3:.2f} ms")

# 5. What the runs did: one compile, no copy for the binding (the caches were appended to in place).
stats = session.stats()
print("compiles", stats["compiles"], "| runs", stats["runs"], "| binding copies", stats["binding_copies"],
      "| allocations", stats["allocations"], "| shape preparations", stats["shape_cache_misses"])
assert stats["compiles"] == 1 and stats["binding_copies"] == 0, stats

# 6. Once warmed up at these lengths, a second generation allocates and prepares nothing.
again, _ = generate(NEW_TOKENS)
assert again == expected
after = session.stats()
assert after["allocations"] == stats["allocations"], (stats, after)
assert after["shape_cache_misses"] == stats["shape_cache_misses"], (stats, after)
print(f"a second generation of {NEW_TOKENS} tokens: allocations +{after['allocations'] - stats['allocations']}, "
      f"shape preparations +{after['shape_cache_misses'] - stats['shape_cache_misses']}")
