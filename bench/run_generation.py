#!/usr/bin/python3
"""Token generation: Tessera against ONNX Runtime 1.30 on a GPT-2-style decoder with a key/value cache
(bench/decoder.py; GPT-2 small's shape by default: 12 layers, d=768, 12 heads, vocab 50257, random
weights), greedy decoding of a prompt then one token a step, each runtime feeding the present cache back
as the past, in a process of its own (ONNX Runtime through bench/ort_generate.js, Tessera through
tessera.InferenceSession, this file's --worker). The model is compiled once with its sequence and cache
lengths open. Tessera keeps each cache in one buffer through its I/O binding (decoder.greedy_bound: a step
appends its positions in place and attention reads the cache where it is); --plain-run feeds each present
back as a new array instead, as the ONNX Runtime loop does.

Reported per thread count: session creation, prompt latency, decode step median / p99 and tokens per
second, the weights' read rate per decode step (the float32 weights' bytes over the median step, GB/s:
each step reads all of them), Tessera / ORT, and whether both produced the same tokens.

--weights-only adds weight-only int8: the file `tessera quantize --weights-only` writes from the float
model (MatMul weights int8, a scale per output column), run by Tessera, against ONNX Runtime on the float
model (the goal: at least 2x its tokens per second; ONNX Runtime folds the int8 file's DequantizeLinear at
load and runs float32). Its read rate counts the bytes as stored (int8 matrices, float32 the rest). Once,
at the first thread count: the int8 run's logits against Tessera's float32 run's at every step, both fed
the float run's tokens (the lowest cosine, and the steps whose greedy token agrees).

Usage: /usr/bin/python3 bench/run_generation.py [--threads 1,2] [--prompt 32] [--new-tokens 128]
           [--layers 12 --d 768 --heads 12 --vocab 50257] [--weights-only] [--json FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_shape_churn import percentile  # noqa: E402  (no heavy imports there)


def worker(path, threads, layers, heads, head_dim, new_tokens, prompt, bound=True):
    sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
    sys.path.insert(0, HERE)
    import numpy as np
    import tessera
    import decoder
    start = time.perf_counter()
    session = tessera.InferenceSession(path, threads=threads)
    create_ms = (time.perf_counter() - start) * 1e3
    names = decoder.input_names(layers)

    def step(ids, past):
        out = session.run(None, dict(zip(names, [ids] + list(past))))
        return out[0], out[1:]

    if bound:
        vocab = session.get_outputs()[0].shape[2]
        tokens, seconds, _, _ = decoder.greedy_bound(session, layers, heads, head_dim, vocab, prompt, new_tokens,
                                                     len(prompt) + new_tokens)
    else:
        empty = [np.zeros((1, heads, 0, head_dim), np.float32) for _ in range(2 * layers)]
        tokens, seconds = decoder.greedy(step, prompt, new_tokens, empty)
    print(json.dumps({"create_ms": create_ms, "step_ms": [s * 1e3 for s in seconds], "tokens": tokens,
                      "stats": session.stats()}))


def cosine_worker(float_path, int8_path, layers, heads, head_dim, new_tokens, prompt):
    """Both files through Tessera, the int8 one fed the float one's greedy tokens: per step, the cosine of
    the last position's logits and whether their argmax agrees."""
    sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
    sys.path.insert(0, HERE)
    import numpy as np
    import tessera
    import decoder
    names = decoder.input_names(layers)
    sessions = [tessera.InferenceSession(float_path, threads=2), tessera.InferenceSession(int8_path, threads=2)]
    pasts = [[np.zeros((1, heads, 0, head_dim), np.float32) for _ in range(2 * layers)] for _ in sessions]
    ids = np.asarray(prompt, dtype=np.int64)[None]
    cosines, agree = [], 0
    for _ in range(new_tokens + 1):
        logits = []
        for k, session in enumerate(sessions):
            out = session.run(None, dict(zip(names, [ids] + list(pasts[k]))))
            logits.append(out[0][0, -1].astype(np.float64))
            pasts[k] = out[1:]
        a, b = logits
        cosines.append(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
        agree += int(np.argmax(a) == np.argmax(b))
        ids = np.asarray([[int(np.argmax(a))]], dtype=np.int64)
    print(json.dumps({"min_cosine": min(cosines), "steps": len(cosines), "argmax_agree": agree}))


def summarise(result, weight_bytes):
    decode = result["step_ms"][1:]
    median = percentile(decode, 0.5)
    return {"create_ms": result["create_ms"], "prompt_ms": result["step_ms"][0], "decode_median_ms": median,
            "decode_p99_ms": percentile(decode, 0.99), "tokens_per_s": 1e3 / median,
            "weights_gb_per_s": weight_bytes / (median * 1e-3) / 1e9,
            "total_ms": result["create_ms"] + sum(result["step_ms"])}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--cosine":
        float_path, int8_path, layers, heads, head_dim, new_tokens = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8])
        cosine_worker(float_path, int8_path, layers, heads, head_dim, new_tokens, [int(t) for t in sys.argv[8].split(",")])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        path, threads, layers, heads, head_dim, new_tokens = sys.argv[2], *map(int, sys.argv[3:8])
        worker(path, threads, layers, heads, head_dim, new_tokens, [int(t) for t in sys.argv[8].split(",")],
               bound=sys.argv[9] == "bound")
        return
    sys.path.insert(0, HERE)
    from run_bench import add_common_arguments, ensure_onnxruntime
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--prompt", type=int, default=32, help="prompt length in tokens")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--weights-only", action="store_true", help="also run the weight-only int8 file (see above)")
    parser.add_argument("--plain-run", action="store_true",
                        help="Tessera runs session.run as ONNX Runtime does, feeding each present back as a new "
                             "array, instead of its I/O binding (the caches kept in place)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    ensure_onnxruntime()
    import decoder
    name = f"decoder_{args.layers}x{args.d}_{args.vocab}"
    path = os.path.join(args.work, "generation", name + ".onnx")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        decoder.export(decoder.make(args.layers, args.d, args.heads, args.vocab), path)
    model = decoder.make(args.layers, args.d, args.heads, args.vocab)
    weight_bytes = 4 * sum(p.numel() for p in model.parameters())
    del model
    prompt = ",".join(str((7 * i + 3) % args.vocab) for i in range(args.prompt))
    head_dim = args.d // args.heads
    int8_path, int8_bytes = None, None
    if args.weights_only:
        int8_path = os.path.join(args.work, "generation", name + ".w8.onnx")
        if not os.path.exists(int8_path):
            subprocess.run([args.tessera, "quantize", path, "-o", int8_path, "--weights-only"], check=True,
                           capture_output=True, text=True)
        import onnx
        stored = onnx.load(int8_path, load_external_data=False)
        int8_numel = sum(math.prod(t.dims) for t in stored.graph.initializer if t.data_type == onnx.TensorProto.INT8)
        int8_bytes = weight_bytes - 3 * int8_numel
        del stored
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        common = [str(threads), str(args.layers), str(args.heads), str(head_dim), str(args.new_tokens), prompt]
        ort = json.loads(subprocess.run(["node", os.path.join(HERE, "ort_generate.js"), path, *common], check=True,
                                        capture_output=True, text=True).stdout.strip().splitlines()[-1])
        mode = "plain" if args.plain_run else "bound"
        tsr = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path, *common, mode],
                                        check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        t, o = summarise(tsr, weight_bytes), summarise(ort, weight_bytes)
        same = tsr["tokens"] == ort["tokens"]
        row = {"threads": threads, "tessera": t, "ort": o, "same_tokens": same, "tessera_stats": tsr["stats"],
               "ratio_decode": t["decode_median_ms"] / o["decode_median_ms"], "ratio_prompt": t["prompt_ms"] / o["prompt_ms"],
               "ratio_total": t["total_ms"] / o["total_ms"]}
        if int8_path:
            w8 = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", int8_path, *common, mode],
                                           check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
            q = summarise(w8, int8_bytes)
            row["int8"] = q
            row["int8_speedup_over_ort"] = o["decode_median_ms"] / q["decode_median_ms"]
            row["int8_same_tokens_as_float"] = sum(a == b for a, b in zip(w8["tokens"], ort["tokens"]))
            print(f"{threads}t int8 weights: prompt {q['prompt_ms']:.1f} ms | decode {q['decode_median_ms']:.2f} ms "
                  f"({q['tokens_per_s']:.1f} tokens/s, {row['int8_speedup_over_ort']:.2f}x ONNX Runtime's float32; "
                  f"weights read at {q['weights_gb_per_s']:.1f} GB/s) | p99 {q['decode_p99_ms']:.2f} ms | create "
                  f"{q['create_ms']:.0f} ms | tokens as float32's: {row['int8_same_tokens_as_float']} of "
                  f"{len(ort['tokens'])}", flush=True)
            if len(rows) == 0:
                c = json.loads(subprocess.run([sys.executable, os.path.abspath(__file__), "--cosine", path, int8_path,
                                               *common[1:]], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
                row["int8_cosine"] = c
                print(f"int8 weights against float32 (Tessera, same tokens fed): lowest logits cosine {c['min_cosine']:.5f} "
                      f"over {c['steps']} steps; greedy token agrees at {c['argmax_agree']}", flush=True)
        rows.append(row)
        print(f"{threads}t: prompt {t['prompt_ms']:.1f} vs ORT {o['prompt_ms']:.1f} ms ({row['ratio_prompt']:.2f}x) | decode "
              f"{t['decode_median_ms']:.2f} vs {o['decode_median_ms']:.2f} ms ({row['ratio_decode']:.2f}x; "
              f"{t['tokens_per_s']:.1f} vs {o['tokens_per_s']:.1f} tokens/s; weights read at {t['weights_gb_per_s']:.1f} vs "
              f"{o['weights_gb_per_s']:.1f} GB/s) | p99 {t['decode_p99_ms']:.2f} vs {o['decode_p99_ms']:.2f} ms | whole run "
              f"{t['total_ms']:.0f} vs {o['total_ms']:.0f} ms ({row['ratio_total']:.2f}x) | same tokens: {same}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
