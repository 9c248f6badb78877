#!/usr/bin/python3
"""tessera serve under load: throughput, p50 and p99 at several concurrencies, over HTTP (binary tensors)
and gRPC (raw contents), with dynamic batching on and off, against two ceilings measured in the same run:
Tessera's in-process Python API (the server's overhead is the difference) and ONNX Runtime 1.30 in-process
(onnxruntime-node, the peer's single-request latency on the same file and threads).

Models (random weights, exported here with an open batch dim, cached in --work): ResNet-50 (torchvision,
1x3x224x224 a request) and a BERT-base-shaped encoder (12 layers, d=768, sequence 128, a request 1x128).
The server gets one model at a time, instance count 1, --threads threads (default: the cores but one, which
the load generator needs: on a 2-core machine a client sharing the model's cores makes every figure
noise), batching
config "max_batch_size: B, max_queue_delay_microseconds: D" or none. Load: bench/serve_load.js, a closed
loop of C clients for --seconds each (after 1 s of warm-up), every request the same input; then, with
--rates F,..., an open loop: Poisson arrivals at F times the in-process batch-1 rate (1000 / its median ms),
latency counted from each arrival. For those rows the serving issue's bound is printed beside p99:
max_queue_delay + 2x the mean compute time of a batch the server ran (`compute_infer` per request, from
the statistics extension), and whether p99 is within it.

Each throughput is also given as a fraction of the machine's FMA peak (build/bench/tessera_peak at that
thread count): model FLOPs x requests/s / peak.

Usage: /usr/bin/python3 bench/run_serve_bench.py [--models resnet50,bert_base] [--concurrency 1,8,32]
           [--protocols http,grpc] [--seconds 10] [--threads N] [--max-batch 8] [--delay-us 2000]
           [--rates 0.5,0.8] [--json FILE]
Needs tests/serve/node_modules (scripts/setup.sh) and bench/node_modules (onnxruntime-node; installed here
when missing).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import check_models  # noqa: E402


def export(name, folder):
    path = os.path.join(folder, "model.onnx")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50().eval()
        inputs = (torch.randn(1, 3, 224, 224),)
        names, axes = ["input"], {"input": {0: "batch"}, "output": {0: "batch"}}
    else:
        model = check_models.AttentionEncoder(vocab=30522, dim=768, heads=12, layers=12, ff=3072, max_len=512).eval()
        g = torch.Generator().manual_seed(1)
        inputs = (torch.randint(0, 30522, (1, 128), generator=g), torch.ones(1, 128, dtype=torch.int64))
        names, axes = ["ids", "mask"], {"ids": {0: "batch"}, "mask": {0: "batch"}, "output": {0: "batch"}}
    check_models.randomize_normalization(model)
    with torch.no_grad():
        torch.onnx.export(model, inputs, path, opset_version=17, input_names=names, output_names=["output"],
                          dynamic_axes=axes, do_constant_folding=True)
    for n, t in zip(names, inputs):
        np.save(os.path.join(folder, n + ".npy"), t.numpy())
    return path


DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}


def request_inputs(folder, work):
    """serve_load.js's inputs file: each .npy's raw bytes beside it."""
    out = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".npy"):
            a = np.load(os.path.join(folder, f))
            raw = os.path.join(work, f[:-4] + ".bin")
            a.tofile(raw)
            out.append({"name": f[:-4], "datatype": DATATYPES[a.dtype], "shape": list(a.shape), "file": raw})
    spec = os.path.join(work, "inputs.json")
    with open(spec, "w") as fh:
        json.dump(out, fh)
    return spec


def in_process_ms(path, folder, threads, seconds):
    """Median latency of Tessera's Python API on the request's inputs (the server's ceiling)."""
    code = f"""
import json, os, sys, time, numpy as np, tessera
s = tessera.InferenceSession({path!r}, threads={threads})
feed = {{f[:-4]: np.load(os.path.join({folder!r}, f)) for f in os.listdir({folder!r}) if f.endswith('.npy')}}
for _ in range(3): s.run(None, feed)
t = []
end = time.time() + {seconds}
while time.time() < end or len(t) < 10:
    t0 = time.perf_counter(); s.run(None, feed); t.append((time.perf_counter() - t0) * 1e3)
t.sort(); print(json.dumps({{"p50_ms": t[len(t) // 2], "runs": len(t)}}))
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
    out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["p50_ms"]


def ort_ms(path, folder, threads):
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=HERE, check=True)
    cmd = ["node", os.path.join(HERE, "ort_bench.js"), path, str(threads), "3", "20"]
    cmd += [f"{f[:-4]}={os.path.join(folder, f)}" for f in sorted(os.listdir(folder)) if f.endswith(".npy")]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def start_server(serve, repo, threads):
    proc = subprocess.Popen([serve, "--model-repository", repo, "--http-address", "127.0.0.1", "--http-port", "0",
                             "--grpc-port", "0", "--metrics-port", "0"], stderr=subprocess.PIPE, text=True)
    ports = None
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("tessera serve exited")
        m = re.search(r"listening:(.*)", line)
        if m:
            ports = dict(p.split("=") for p in m.group(1).split())
        if "ready" in line and ports:
            if "not ready" in line:
                raise RuntimeError(line)
            return proc, ports


def load(protocol, port, model, concurrency, seconds, inputs):
    """concurrency: a client count (closed loop) or "rate=R" (open loop, R requests a second)."""
    env = dict(os.environ, NODE_PATH=os.path.join(ROOT, "tests", "serve", "node_modules"))
    out = subprocess.run(["node", os.path.join(HERE, "serve_load.js"), protocol, f"127.0.0.1:{port}", model,
                          str(concurrency), str(seconds), inputs], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def counts(port, model):
    """(inference_count, execution_count, successes, their ns, compute_infer ns) from the server's
    statistics extension."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/stats") as r:
        s = json.load(r)["model_stats"][0]
    i = s["inference_stats"]
    return (s["inference_count"], s["execution_count"], i["success"]["count"], i["success"]["ns"],
            i["compute_infer"]["ns"])


def peak_gflops(threads):
    """The float32 FMA peak at `threads` (AVX-512 where the CPU has it), as run_bench.py reads it."""
    import run_bench

    class Args:
        peak = os.path.join(ROOT, "build", "bench", "tessera_peak")
        peak_gflops = None
    return run_bench.measured_peaks(Args, [threads])[threads]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", default=os.path.join(ROOT, "build", "tessera-serve"))
    p.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "serve"))
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--protocols", default="http,grpc")
    p.add_argument("--seconds", type=float, default=10)
    # Default: one thread fewer than the cores, so that the load generator (on this machine) has a core.
    p.add_argument("--threads", type=int, default=max(1, os.cpu_count() - 1))
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--delay-us", type=int, default=2000)
    p.add_argument("--rates", default="", help="open-loop arrival rates, as fractions of the in-process batch-1 rate")
    p.add_argument("--json")
    args = p.parse_args()
    import run_bench
    peak = peak_gflops(args.threads)
    rows = []
    for name in args.models.split(","):
        folder = os.path.join(args.work, name)
        path = export(name, folder)
        flops = run_bench.model_flops(path, [(f[:-4], os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".npy")])
        inputs = request_inputs(folder, folder)
        ceiling = in_process_ms(path, folder, args.threads, 5)
        ort = ort_ms(path, folder, args.threads)
        print(f"{name}: in-process Tessera {ceiling:.2f} ms, ONNX Runtime {ort:.2f} ms ({args.threads} threads, batch 1); "
              f"{flops / 1e9:.2f} GFLOP a request; peak {peak:.0f} GFLOP/s", flush=True)
        for batching in (True, False):
            repo = os.path.join(args.work, "repo_" + name)
            shutil.rmtree(repo, ignore_errors=True)
            os.makedirs(os.path.join(repo, name, "1"))
            os.symlink(path, os.path.join(repo, name, "1", "model.onnx"))
            config = f'max_batch_size: {args.max_batch}\nparameters {{ key: "threads" value {{ string_value: "{args.threads}" }} }}\n'
            if batching:
                config += f"dynamic_batching {{ max_queue_delay_microseconds: {args.delay_us} }}\n"
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as fh:
                fh.write(config)
            proc, ports = start_server(args.serve, repo, args.threads)
            try:
                loads = [int(c) for c in args.concurrency.split(",") if c]
                loads += [f"rate={float(f) * 1000 / ceiling:.2f}" for f in args.rates.split(",") if f]
                for protocol in args.protocols.split(","):
                    for c in loads:
                        before = counts(ports["http"], name)
                        r = load(protocol, ports[protocol], name, c, args.seconds, inputs)
                        after = counts(ports["http"], name)
                        d = [a - b for a, b in zip(after, before)]
                        r["mean_batch"] = d[0] / max(1, d[1])
                        # Inside the server, per request: from arrival at the model to the response, less
                        # the model runs (queueing, batching, thread hand-offs, splitting outputs).
                        # (compute_infer is counted per request: its batch's run time)
                        r["server_overhead_ms"] = (d[3] - d[4]) / max(1, d[2]) / 1e6
                        r["batch_compute_ms"] = d[4] / max(1, d[2]) / 1e6
                        r.update(model=name, protocol=protocol, concurrency=c, batching=batching, in_process_ms=ceiling,
                                 ort_ms=ort, threads=args.threads, peak_fraction=flops * r["throughput"] / (peak * 1e9))
                        extra = ""
                        if c == 1:
                            extra = (f"  (c=1: p50 - in-process {r['p50_ms'] - ceiling:+.2f} ms, in the server "
                                     f"{r['server_overhead_ms']:.2f} ms; p50 / ORT {r['p50_ms'] / ort:.2f})")
                        elif isinstance(c, str):
                            # The serving issue's p99 bound: the queue delay plus two batches' compute.
                            r["p99_bound_ms"] = (args.delay_us / 1000 if batching else 0) + 2 * r["batch_compute_ms"]
                            extra = (f"  open loop at {c.split('=')[1]} req/s ({float(c.split('=')[1]) * ceiling / 1000:.2f} of "
                                     f"batch-1 capacity; {r['arrival_rate']:.2f} arrived a second): "
                                     f"p99 bound {r['p99_bound_ms']:.1f} ms "
                                     f"({'within' if r['p99_ms'] is not None and r['p99_ms'] <= r['p99_bound_ms'] else 'over'}), "
                                     f"at most {r['max_outstanding']} outstanding")
                        label = f"c={c}" if isinstance(c, int) else "open"
                        print(f"  {protocol:4} {label:<6} batching={'on ' if batching else 'off'} {r['throughput']:8.1f} req/s  "
                              f"p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  batch {r['mean_batch']:4.1f}  errors {r['errors']}  "
                              f"peak {100 * r['peak_fraction']:.0f}%" + extra, flush=True)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(120)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
