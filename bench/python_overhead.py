#!/usr/bin/python3
"""Per-call overhead of the Python binding over the C API, on a tiny model (one
Add of two float32[2, 3] inputs), where the run itself costs next to nothing.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--calls 20000]

Measures, as the median of 15 batches of --calls calls each:
  C API        tsr_model_run / tsr_model_run_alloc (build/bench/tessera_capi_overhead)
  Python       InferenceSession.run with numpy inputs, numpy outputs
  Python       ... with torch inputs, and with as_dlpack=True outputs
  ONNX Runtime InferenceSession.run on the same model, when onnxruntime for
               Python is importable (it is not a Debian package; skipped otherwise)
and prints each with its overhead over tsr_model_run_alloc (what run() calls).
A benchmark, not a test: nothing here is asserted.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_us(calls, fn):
    batches = []
    for _ in range(15):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t0) / calls * 1e6)
    batches.sort()
    return batches[len(batches) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import tessera

    model = helper.make_model(
        helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])]),
        opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "add.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        capi = json.loads(subprocess.check_output(
            [os.path.join(args.build, "bench", "tessera_capi_overhead"), path, str(args.calls)]))
    base = capi["run_alloc_ns"] / 1000

    session = tessera.InferenceSession(model)
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    feed = {"x": x, "y": y}
    rows = [("C API tsr_model_run (caller's outputs)", capi["run_ns"] / 1000),
            ("C API tsr_model_run_alloc", base),
            ("Python run, numpy in, numpy out", median_us(args.calls, lambda: session.run(None, feed))),
            ("Python run, numpy in, DLPack out", median_us(args.calls, lambda: session.run(None, feed, as_dlpack=True)))]
    try:
        import torch
        tfeed = {"x": torch.from_numpy(x), "y": torch.from_numpy(y)}
        rows.append(("Python run, torch in, numpy out", median_us(args.calls, lambda: session.run(None, tfeed))))
    except ImportError:
        pass
    try:
        import onnxruntime
        ort = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        rows.append(("ONNX Runtime (Python) run", median_us(args.calls, lambda: ort.run(None, feed))))
    except ImportError:
        pass
    print("per call, median of 15 x %d calls; load average %.2f" % (args.calls, os.getloadavg()[0]))
    print("%-42s %10s %14s" % ("path", "us/call", "over run_alloc"))
    for name, us in rows:
        print("%-42s %10.2f %14.2f" % (name, us, us - base))


if __name__ == "__main__":
    main()
