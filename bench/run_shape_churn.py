#!/usr/bin/python3
"""Shape churn: Tessera against ONNX Runtime 1.30 on traces of calls whose input
shapes change from call to call, as OCR, detection at the image's own size,
BERT at the request's length and dynamic batching bring them.

Each model is exported from torch once (random weights) with its changing dims
open (dynamic_axes) into --work/churn/. A trace draws each call's shape at
random from a realistic range (seeded, so both runtimes get the same trace).
Each runtime runs in a process of its own: ONNX Runtime through
bench/ort_trace.js, Tessera through tessera.InferenceSession (this file,
--worker). Both time the session's creation (Tessera: its one compile) and
every call, and read their resident memory after the 50th call and after the
last; the input values are the same function of the element index and the call
in both, and the per-call checksums of the first output must agree.

Reported per model and thread count:
- total: creation + every call, Tessera / ORT (the issue's goal: below 1);
- first call at an unseen shape against a call at a shape seen before (Tessera;
  median over the trace's calls of each kind; goal: within 2x);
- p50 / p99 per call; resident MB after 50 calls and at the end (goal: end
  within 1.2x of after 50).

Usage: /usr/bin/python3 bench/run_shape_churn.py [--models recogniser,bert,detector,batch,camera]
           [--threads 1,2] [--calls-scale 1.0] [--json FILE]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (calls, description)
MODELS = {
    "recogniser": (300, "text recogniser (4 convolutions, a linear head) at 32 x W, W in 32..1024"),
    "bert": (300, "transformer encoder (2 layers, d=128, 4 heads) at sequence 1..512"),
    "detector": (40, "ResNet-18 trunk (fully convolutional) at H x W multiples of 32 in 224..480"),
    "batch": (30, "ResNet-18 classifier at batch 1..8 (224 x 224)"),
    "camera": (60, "the detector's trunk, three calls in four at one size (448 x 448), the rest as the detector's"),
}
# Models whose trace runs another's file.
FILES = {"camera": "detector"}


def trace_values(count, call):
    """The values ort_trace.js's traceValue makes: the same float32 in both runtimes."""
    import numpy as np
    i = np.arange(count, dtype=np.float64)
    return ((((i * 7 + call * 13) % 101) / 101) - 0.5).astype(np.float32)


def export(name, path):
    import torch
    import torchvision
    torch.manual_seed(0)
    if name == "recogniser":
        class Recogniser(torch.nn.Module):
            def __init__(self):
                super().__init__()
                conv = lambda i, o: torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.ReLU())  # noqa: E731
                self.body = torch.nn.Sequential(conv(1, 32), torch.nn.MaxPool2d(2), conv(32, 64), torch.nn.MaxPool2d(2),
                                                conv(64, 128), torch.nn.MaxPool2d((2, 1)), conv(128, 128))
                self.head = torch.nn.Linear(128, 96)

            def forward(self, x):
                features = self.body(x).mean(dim=2)  # [1, 128, W/4]
                return self.head(features.transpose(1, 2))
        module, example, axes = Recogniser(), torch.randn(1, 1, 32, 128), {"input": {3: "width"}, "output": {1: "steps"}}
    elif name == "bert":
        layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
        module = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        example, axes = torch.randn(1, 16, 128), {"input": {1: "sequence"}, "output": {1: "sequence"}}
    elif name == "detector":
        module = torch.nn.Sequential(*list(torchvision.models.resnet18().children())[:-2])
        example, axes = torch.randn(1, 3, 224, 224), {"input": {2: "height", 3: "width"}, "output": {2: "h32", 3: "w32"}}
    else:
        module, example = torchvision.models.resnet18(), torch.randn(1, 3, 224, 224)
        axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(module.eval(), example, path, input_names=["input"], output_names=["output"],
                      dynamic_axes=axes, opset_version=17)


def make_trace(name, calls, seed):
    rng = random.Random(seed)
    shapes = []
    for _ in range(calls):
        if name == "recogniser":
            shapes.append([[1, 1, 32, rng.randint(32, 1024)]])
        elif name == "bert":
            shapes.append([[1, rng.randint(1, 512), 128]])
        elif name == "detector" or (name == "camera" and rng.random() < 0.25):
            shapes.append([[1, 3, 32 * rng.randint(7, 15), 32 * rng.randint(7, 15)]])
        elif name == "camera":
            shapes.append([[1, 3, 448, 448]])
        else:
            shapes.append([[rng.randint(1, 8), 3, 224, 224]])
    return {"inputs": [{"name": "input", "dtype": "float32"}], "calls": shapes, "rss_at": [min(50, calls), calls]}


def resident_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def worker(model, threads, trace_path):
    """Runs the trace through tessera.InferenceSession and prints ort_trace.js's JSON."""
    sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
    import numpy as np
    import tessera
    with open(trace_path) as f:
        trace = json.load(f)
    start = time.perf_counter()
    session = tessera.InferenceSession(model, threads=threads)
    create_ms = (time.perf_counter() - start) * 1e3
    call_ms, checksum, rss = [], [], {}
    for c, shapes in enumerate(trace["calls"]):
        feed = {spec["name"]: trace_values(int(np.prod(shape)), c).reshape(shape)
                for spec, shape in zip(trace["inputs"], shapes)}
        t = time.perf_counter()
        outputs = session.run(None, feed)
        call_ms.append((time.perf_counter() - t) * 1e3)
        checksum.append(float(np.abs(outputs[0].astype(np.float64)).sum()))
        if c + 1 in trace["rss_at"]:
            rss[str(c + 1)] = resident_mb()
    print(json.dumps({"create_ms": create_ms, "call_ms": call_ms, "rss_mb_after": rss, "checksum": checksum}))


def run_json(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def percentile(values, p):
    values = sorted(values)
    pos = p * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def median(values):
    return percentile(values, 0.5) if values else float("nan")


def summarise(trace, result):
    seen, first, repeat = set(), [], []
    for shapes, ms in zip(trace["calls"], result["call_ms"]):
        key = json.dumps(shapes)
        (repeat if key in seen else first).append(ms)
        seen.add(key)
    rss = result["rss_mb_after"]
    keys = sorted(rss, key=int)
    return {
        "total_ms": result["create_ms"] + sum(result["call_ms"]),
        "create_ms": result["create_ms"],
        "p50_ms": percentile(result["call_ms"], 0.5),
        "p99_ms": percentile(result["call_ms"], 0.99),
        "first_at_new_shape_ms": median(first),
        "at_seen_shape_ms": median(repeat),
        "distinct_shapes": len(seen),
        "rss_mb_after_50": rss[keys[0]],
        "rss_mb_at_end": rss[keys[-1]],
    }


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    # Imported here, not at the top: the worker's resident memory must not include torch (which
    # run_bench's model list imports).
    sys.path.insert(0, HERE)
    from run_bench import add_common_arguments, ensure_onnxruntime
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--calls-scale", type=float, default=1.0, help="multiplies each trace's number of calls")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    ensure_onnxruntime()
    folder = os.path.join(args.work, "churn")
    results = []
    for name in args.models.split(","):
        path = os.path.join(folder, FILES.get(name, name) + ".onnx")
        if not os.path.exists(path):
            export(FILES.get(name, name), path)
        calls = max(2, int(MODELS[name][0] * args.calls_scale))
        trace = make_trace(name, calls, args.seed)
        trace_path = os.path.join(folder, name + ".trace.json")
        with open(trace_path, "w") as f:
            json.dump(trace, f)
        for threads in [int(t) for t in args.threads.split(",")]:
            ort = run_json(["node", os.path.join(HERE, "ort_trace.js"), path, str(threads), trace_path])
            tsr = run_json([sys.executable, os.path.abspath(__file__), "--worker", path, str(threads), trace_path])
            worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(tsr["checksum"], ort["checksum"]))
            row = {"model": name, "threads": threads, "calls": calls, "checksum_max_rel_diff": worst,
                   "tessera": summarise(trace, tsr), "ort": summarise(trace, ort)}
            row["ratio_total"] = row["tessera"]["total_ms"] / row["ort"]["total_ms"]
            results.append(row)
            t, o = row["tessera"], row["ort"]
            print(f"{name:<11} {threads}t {calls:4d} calls ({t['distinct_shapes']} shapes): total {t['total_ms']:8.0f} ms "
                  f"vs ORT {o['total_ms']:8.0f} ms = {row['ratio_total']:.2f}x | create {t['create_ms']:.0f} vs "
                  f"{o['create_ms']:.0f} ms | p50 {t['p50_ms']:.2f} vs {o['p50_ms']:.2f}, p99 {t['p99_ms']:.2f} vs "
                  f"{o['p99_ms']:.2f} ms | new shape {t['first_at_new_shape_ms']:.2f} / seen {t['at_seen_shape_ms']:.2f} ms"
                  f" | RSS {t['rss_mb_after_50']:.0f} -> {t['rss_mb_at_end']:.0f} MB (ORT {o['rss_mb_after_50']:.0f} -> "
                  f"{o['rss_mb_at_end']:.0f}) | checksums within {worst:.1e}", flush=True)
            if worst > 1e-3:
                print(f"  {name}: outputs differ from ONNX Runtime's (relative {worst:.2e})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
