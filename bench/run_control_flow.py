#!/usr/bin/python3
"""Control flow against ONNX Runtime 1.30: models whose work sits in Loop and If bodies, scripted with
torch (seeded random weights, nothing downloaded), timed with Tessera (default backends) and ONNX
Runtime side by side on the same file and inputs at each thread count; prints the medians in ms, the
ratio (below 1: Tessera is faster) and the geometric mean.

  vad_16k / vad_8k   tests/python/vad_model.py: a voice-activity detector whose sample-rate input picks one of
                     two If branches at run time (STFT as a Conv1d, four conv blocks, an LSTM cell, a sigmoid
                     head; 512 / 256 samples a call, batch 1): the branches run compiled (oneDNN + native)
  ssdlite320         torchvision's SSDlite-320 (MobileNetV3-Large; seeded random weights), exported by torch
                     with its post-processing (an If around batched non-max suppression, TopK, GatherND)
  frcnn_mnv3_320     torchvision's Faster R-CNN MobileNetV3-Large 320 FPN (random weights): region proposals,
                     RoI Align over the pyramid levels (ScatterElements), the box head
  rnn_loop_N         tests/python/test_compiled_bodies.py's Loop of a run-time trip count N carrying h[2, 8]:
                     h = Tanh(h @ W + bias), every h stacked
  scripted_rows      tests/models' scripted module: a Loop over x's 6 rows (Linear 8x8, an If on the row's
                     sum); its trip count is a constant at the file's fixed shapes, so Tessera unrolls it
  stack_rows_N       torch.stack of a list appended in a Loop over N rows (Linear, Relu, + i), N open
  cat_rows_N         torch.cat of a list of x[i] * i over N rows
  keep_positive_N    appends Linear(x[i]) * (i + 1) for rows with a positive sum (an If in the Loop), then
                     len(), kept[-1] and kept[0] (tests/python/test_torch_sequence.py's modules)

Set TESSERA_COMPILE_BODIES=0 to time Tessera's subgraph interpreter instead of compiled bodies.

Usage: /usr/bin/python3 bench/run_control_flow.py [--threads 1,2] [--iterations 50] [--rows 16,256,2048]
"""
import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))  # test_torch_sequence imports tessera
from run_bench import add_common_arguments, ensure_onnxruntime, model_files, ort_median, tessera_median  # noqa: E402


def list_models(work, rows):
    """(name, ONNX path, [(input, .npy)]) for each list-building module at each row count."""
    import pathlib
    import test_torch_sequence as seq
    folder = pathlib.Path(work) / "control_flow"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for label, module in (("stack_rows", seq.StackRows), ("cat_rows", seq.CatRows),
                          ("keep_positive", seq.KeepPositiveRows)):
        _, path = seq.export(module, 17, folder)
        for n in rows:
            x = np.random.default_rng(n).standard_normal((n, seq.FEATURES)).astype(np.float32)
            npy = str(folder / ("x%d.npy" % n))
            np.save(npy, x)
            out.append(("%s_%d" % (label, n), path, [("x", npy)]))
    return out


def vad_models(work):
    """The voice-activity detector at both sample rates, batch 1."""
    import pathlib
    import vad_model
    folder = pathlib.Path(work) / "control_flow"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vad.onnx"
    vad_model.export(path)
    out = []
    for sr in (16000, 8000):
        files = []
        for name, value in vad_model.inputs(1, sr).items():
            npy = str(folder / ("vad_%d_%s.npy" % (sr, name)))
            np.save(npy, value)
            files.append((name, npy))
        out.append(("vad_%dk" % (sr // 1000), str(path), files))
    return out


def detection_models(work):
    """SSDlite-320 and Faster R-CNN MobileNetV3 320 with random weights, one 320x320 image (exported once)."""
    import pathlib
    folder = pathlib.Path(work) / "control_flow"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in ("ssdlite320", "frcnn_mnv3_320"):
        path, npy = folder / (name + ".onnx"), folder / (name + "_image.npy")
        if not path.exists() or not npy.exists():
            import warnings
            import torch
            import torchvision
            torch.manual_seed(0)
            detection = torchvision.models.detection
            model = (detection.ssdlite320_mobilenet_v3_large if name == "ssdlite320"
                     else detection.fasterrcnn_mobilenet_v3_large_320_fpn)(weights=None, weights_backbone=None).eval()
            image = torch.rand(3, 320, 320)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, ([image],), str(path), opset_version=16, input_names=["image"])
            np.save(npy, image.numpy())
        out.append((name, str(path), [("image", str(npy))]))
    return out


def rnn_loop_models(work, trips):
    import pathlib
    import onnx
    import test_compiled_bodies as bodies
    folder = pathlib.Path(work) / "control_flow"
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / "rnn_loop.onnx")
    onnx.save(bodies.rnn_loop_model(), path)
    rng = np.random.default_rng(7)
    common = []
    for name, value in (("h0", rng.standard_normal((2, 8)).astype(np.float32)), ("bias", rng.standard_normal(8).astype(np.float32))):
        npy = str(folder / ("rnn_%s.npy" % name))
        np.save(npy, value)
        common.append((name, npy))
    out = []
    for n in trips:
        npy = str(folder / ("rnn_n%d.npy" % n))
        np.save(npy, np.array(n, np.int64))
        out.append(("rnn_loop_%d" % n, path, [("n", npy)] + common))
    return out


def main():
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    parser.add_argument("--rows", default="16,256,2048", help="row counts of the list-building loops")
    args = parser.parse_args()
    ensure_onnxruntime()
    tessera = os.path.abspath(args.tessera)
    _, path, inputs = model_files(args.work, "scripted_control_flow")
    rows = [int(r) for r in args.rows.split(",")]
    models = vad_models(args.work) + detection_models(args.work) + rnn_loop_models(args.work, rows) + [("scripted_rows", path, inputs)] + \
        list_models(args.work, rows)
    print("%-20s %7s %12s %12s %7s" % ("model", "threads", "Tessera ms", "ORT ms", "ratio"))
    for threads in [int(t) for t in args.threads.split(",")]:
        logs = []
        for name, path, inputs in models:
            small = "2048" not in name and "320" not in name
            iterations = args.iterations if small else max(3, args.iterations // 10)
            ours = tessera_median(tessera, path, inputs, threads, args.warmup, iterations, None)
            theirs = ort_median(path, inputs, threads, args.warmup, iterations)
            logs.append(math.log(ours / theirs))
            print("%-20s %7d %12.3f %12.3f %7.2f" % (name, threads, ours, theirs, ours / theirs), flush=True)
        print("geometric mean of Tessera / ONNX Runtime at %d thread%s: %.3f over %d models" %
              (threads, "" if threads == 1 else "s", math.exp(sum(logs) / len(logs)), len(logs)))


if __name__ == "__main__":
    main()
