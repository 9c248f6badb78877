"""A GPT-2-style decoder with a key/value cache, written with torch and exported to ONNX with its
sequence and cache lengths open: the model the generation benchmark (bench/run_generation.py) and the
greedy-decoding test (tests/python/test_generation.py) run.

Inputs: ids int64[1, seq], then past_k_L and past_v_L float32[1, heads, past, head_dim] per layer.
Outputs: logits float32[1, seq, vocab], then present_k_L and present_v_L [1, heads, past + seq,
head_dim] (the past with this step's keys and values appended), which the next step takes as its past.
Random weights (seeded); nothing is downloaded."""
import torch


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.d = heads, d  # python ints: sizes traced from x.shape would export as float64 math
        self.scale = 1.0 / (d // heads) ** 0.5
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x, past_k, past_v, mask):
        b, s, d = x.shape[0], x.shape[1], self.d
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        split = lambda t: t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        k = torch.cat([past_k, split(k)], dim=2)
        v = torch.cat([past_v, split(v)], dim=2)
        scores = split(q) @ k.transpose(2, 3) * self.scale + mask
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(attended)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x)))), k, v


class Decoder(torch.nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=50257, context=1024):
        super().__init__()
        self.layers, self.d, self.heads, self.vocab = layers, d, heads, vocab
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Embedding(context, d)
        self.blocks = torch.nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, ids, *past):
        s = ids.shape[1]
        p = past[0].shape[2]
        positions = torch.arange(p, p + s, dtype=torch.int64)
        x = self.tokens(ids) + self.positions(positions)[None]
        # Query i (at position p + i) sees keys 0 .. p + i.
        keys = torch.arange(p + s, dtype=torch.int64)
        # (float32 operands: torch.where on python floats exports as float64 and makes the graph invalid)
        mask = torch.zeros(s, p + s).masked_fill(keys[None, :] > positions[:, None], float("-inf"))[None, None]
        present = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past[2 * i], past[2 * i + 1], mask)
            present += [k, v]
        logits = self.ln(x) @ self.tokens.weight.t()  # tied to the token embedding, as GPT-2's
        return (logits, *present)

    def empty_past(self):
        shape = (1, self.heads, 0, self.d // self.heads)
        return [torch.zeros(shape) for _ in range(2 * self.layers)]


def input_names(layers):
    return ["ids"] + [f"past_{kv}_{i}" for i in range(layers) for kv in "kv"]


def output_names(layers):
    return ["logits"] + [f"present_{kv}_{i}" for i in range(layers) for kv in "kv"]


def make(layers=12, d=768, heads=12, vocab=50257, seed=0, std=0.02):
    """Weights normal with `std` (GPT-2's initialisation scale by default; a small model needs a larger
    one for its greedy tokens to vary)."""
    torch.manual_seed(seed)
    model = Decoder(layers, d, heads, vocab).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std)
    return model


def export(model, path):
    """Writes `model` to ONNX with seq and past open."""
    names_in, names_out = input_names(model.layers), output_names(model.layers)
    axes = {"ids": {1: "seq"}, "logits": {1: "seq"}}
    for name in names_in[1:]:
        axes[name] = {2: "past"}
    for name in names_out[1:]:
        axes[name] = {2: "total"}
    ids = torch.zeros((1, 4), dtype=torch.int64)
    past = [torch.zeros((1, model.heads, 3, model.d // model.heads)) for _ in range(2 * model.layers)]
    with torch.no_grad():
        torch.onnx.export(model, (ids, *past), str(path), input_names=names_in, output_names=names_out,
                          dynamic_axes=axes, opset_version=17)


def greedy(step, prompt, new_tokens, empty_past):
    """Greedy decoding: `step(ids, past) -> (logits, present)` on numpy arrays. Returns the new tokens
    and the seconds each step took (the first is the prompt)."""
    import time
    import numpy as np
    ids = np.asarray(prompt, dtype=np.int64)[None]
    past = empty_past
    tokens, seconds = [], []
    for _ in range(new_tokens):
        start = time.perf_counter()
        logits, past = step(ids, past)
        seconds.append(time.perf_counter() - start)
        token = int(np.argmax(logits[0, -1]))
        tokens.append(token)
        ids = np.array([[token]], dtype=np.int64)
    return tokens, seconds


def greedy_bound(session, layers, heads, head_dim, vocab, prompt, new_tokens, capacity, keep_logits=False,
                 on_step=None):
    """greedy() through a tessera.InferenceSession's I/O binding: each key/value cache is one buffer of
    `capacity` positions (NaN where nothing was written), its first positions bound as the past and one step
    more as the present, so a step appends to the cache in place; the logits go into a buffer of their own.
    Returns the tokens, the seconds each step took, each step's logits (copies, when keep_logits) and the
    caches. on_step(k), when given, is called before step k (0 the prompt)."""
    import time
    import numpy as np
    names_in, names_out = input_names(layers), output_names(layers)
    caches = [np.full((1, heads, capacity, head_dim), np.nan, np.float32) for _ in range(2 * layers)]
    logits_buffer = np.full((1, capacity, vocab), np.nan, np.float32)
    binding = session.io_binding()
    ids = np.asarray(prompt, dtype=np.int64)[None]
    past, tokens, seconds, logits = 0, [], [], []
    for k in range(new_tokens):
        if on_step:
            on_step(k)
        start = time.perf_counter()
        seq = ids.shape[1]
        binding.bind_input("ids", ids)
        for name_in, name_out, cache in zip(names_in[1:], names_out[1:], caches):
            binding.bind_input(name_in, cache[:, :, :past])
            binding.bind_output(name_out, cache[:, :, :past + seq])
        step_logits = logits_buffer[:, :seq]
        binding.bind_output("logits", step_logits)
        session.run_with_iobinding(binding)
        token = int(np.argmax(step_logits[0, -1]))
        seconds.append(time.perf_counter() - start)
        if keep_logits:
            assert binding.get_outputs()[0] is step_logits  # the caller's buffers, not copies
            logits.append(step_logits.copy())
        past += seq
        tokens.append(token)
        ids = np.array([[token]], dtype=np.int64)
    return tokens, seconds, logits, caches
