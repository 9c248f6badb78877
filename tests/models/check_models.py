#!/usr/bin/python3
"""Exports PyTorch models with seeded random weights to ONNX, runs them in
PyTorch and through `tessera run`, and checks that the outputs agree.

Usage: /usr/bin/python3 tests/models/check_models.py --tessera build/tessera --work DIR
           [--backends LIST] [--backend-plugin PATH]... [--artifact] [--threads N] [--precision P]
           MODEL [MODEL ...]
       (MODEL: a name from MODELS below, or "all"; --backends is passed to tessera,
       --artifact compiles a .tsr first and runs that; without --threads each
       model runs at 1 and at 2 threads)

Agreement: tessera writes exactly the model's outputs (no missing or extra
file; the model's folder is cleared first, so nothing stale can pass), each
with torch's dtype and shape, and max |tessera - torch| <= 1e-4 * max |torch|
per float output (exact for integer and bool outputs); a reference whose
max |torch| is below 1e-3 fails as degenerate (the check could not fail), so
weights are randomised to keep outputs O(1).
With --precision bf16 (passed to tessera): at least one node must report bf16
in the placement, and each float output must have cosine similarity >= 0.999
with torch's and max |tessera - torch| <= 3e-2 * max |torch| (bfloat16 keeps
8 significant bits: about 0.4% per rounded operand).
Nothing is downloaded: torchvision models are built with weights=None.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cpu_isa  # noqa: E402  (what this CPU implies: bf16 or not)

import numpy as np
import torch
import torch.nn as nn


class AttentionEncoder(nn.Module):
    """A BERT-style encoder written out by hand: token + position embeddings,
    multi-head self-attention with a mask, LayerNorm, GELU feed-forward."""

    def __init__(self, vocab=100, dim=64, heads=4, layers=2, ff=128, max_len=32):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "qkv": nn.Linear(dim, 3 * dim), "out": nn.Linear(dim, dim),
                "ln1": nn.LayerNorm(dim), "ff1": nn.Linear(dim, ff), "ff2": nn.Linear(ff, dim),
                "ln2": nn.LayerNorm(dim)}))
        self.pool = nn.Linear(dim, dim)

    def forward(self, ids, mask):
        b, t = ids.shape
        positions = torch.arange(t, device=ids.device).unsqueeze(0).expand(b, t)
        x = self.tok(ids) + self.pos(positions)
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for blk in self.blocks:
            q, k, v = blk["qkv"](x).chunk(3, dim=-1)
            d = q.shape[-1] // self.heads
            q = q.reshape(b, t, self.heads, d).transpose(1, 2)
            k = k.reshape(b, t, self.heads, d).transpose(1, 2)
            v = v.reshape(b, t, self.heads, d).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5 + bias, dim=-1)
            h = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = blk["ln1"](x + blk["out"](h))
            x = blk["ln2"](x + blk["ff2"](nn.functional.gelu(blk["ff1"](x))))
        return x, torch.tanh(self.pool(x[:, 0]))


class RecurrentTagger(nn.Module):
    """Embedding, a 2-layer bidirectional LSTM, a GRU and a linear tagger head."""

    def __init__(self, vocab=50, dim=32, hidden=48, tags=7):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, tags)

    def forward(self, ids):
        x, _ = self.lstm(self.embed(ids))
        x, h = self.gru(x)
        return torch.log_softmax(self.head(x), dim=-1), h


class ScriptedControlFlow(nn.Module):
    """Data-dependent control flow, scripted so that it exports as ONNX Loop and If
    (a loop over the rows, a branch on the running sum, outer values read inside)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            row = self.proj(x[i])
            if bool(row.sum() > 0):
                acc = acc + torch.tanh(row)
            else:
                acc = acc - torch.sigmoid(row) * 0.5
        return acc


def scripted_control_flow():
    return torch.jit.script(ScriptedControlFlow())


def torchvision_model(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


class SegmentationOutput(nn.Module):
    """torchvision's segmentation models return a dict; export its 'out' tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def segmentation_model(name):
    import torchvision
    return SegmentationOutput(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None))


def video_model(name):
    import torchvision
    return getattr(torchvision.models.video, name)(weights=None)


def torch_encoder():
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, activation="gelu",
                                       batch_first=True, dropout=0.0)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def image(shape=(1, 3, 224, 224)):
    return lambda g: (torch.randn(*shape, generator=g),)


# name -> (constructor, example-input maker, input names, opset)
MODELS = {
    "resnet18": (lambda: torchvision_model("resnet18"), image(), ["input"], 13),
    "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), image(), ["input"], 13),
    "attention_encoder": (AttentionEncoder,
                          lambda g: (torch.randint(0, 100, (2, 16), generator=g),
                                     torch.cat([torch.ones(2, 12, dtype=torch.int64),
                                                torch.zeros(2, 4, dtype=torch.int64)], dim=1)),
                          ["ids", "mask"], 17),
    "attention_encoder_opset13": (AttentionEncoder,
                                  lambda g: (torch.randint(0, 100, (1, 16), generator=g),
                                             torch.ones(1, 16, dtype=torch.int64)),
                                  ["ids", "mask"], 13),
    "scripted_control_flow": (scripted_control_flow, lambda g: (torch.randn(6, 8, generator=g),), ["x"], 13),
    "recurrent_tagger": (RecurrentTagger, lambda g: (torch.randint(0, 50, (3, 12), generator=g),), ["ids"], 14),
    "torch_transformer_encoder": (torch_encoder, lambda g: (torch.randn(2, 10, 64, generator=g),), ["src"], 14),
    "squeezenet1_0": (lambda: torchvision_model("squeezenet1_0"), image(), ["input"], 13),
    "densenet121": (lambda: torchvision_model("densenet121"), image(), ["input"], 13),
    "efficientnet_b0": (lambda: torchvision_model("efficientnet_b0"), image(), ["input"], 13),
    "shufflenet_v2_x1_0": (lambda: torchvision_model("shufflenet_v2_x1_0"), image(), ["input"], 13),
    "vgg11": (lambda: torchvision_model("vgg11"), image(), ["input"], 13),
    "googlenet": (lambda: torchvision_model("googlenet"), image(), ["input"], 13),
    "regnet_y_400mf": (lambda: torchvision_model("regnet_y_400mf"), image(), ["input"], 13),
    "mnasnet0_5": (lambda: torchvision_model("mnasnet0_5"), image(), ["input"], 13),
    "resnet50": (lambda: torchvision_model("resnet50"), image(), ["input"], 13),
    "vit_b_16": (lambda: torchvision_model("vit_b_16"), image(), ["input"], 14),
    "convnext_tiny": (lambda: torchvision_model("convnext_tiny"), image(), ["input"], 13),
    "inception_v3": (lambda: torchvision_model("inception_v3"), image((1, 3, 299, 299)), ["input"], 13),
    "alexnet": (lambda: torchvision_model("alexnet"), image(), ["input"], 11),
    "resnext50_32x4d": (lambda: torchvision_model("resnext50_32x4d"), image(), ["input"], 13),
    "wide_resnet50_2": (lambda: torchvision_model("wide_resnet50_2"), image(), ["input"], 13),
    "mobilenet_v3_small": (lambda: torchvision_model("mobilenet_v3_small"), image(), ["input"], 14),
    "mobilenet_v3_large": (lambda: torchvision_model("mobilenet_v3_large"), image(), ["input"], 13),
    "efficientnet_v2_s": (lambda: torchvision_model("efficientnet_v2_s"), image(), ["input"], 13),
    "swin_t": (lambda: torchvision_model("swin_t"), image(), ["input"], 14),
    "regnet_x_400mf": (lambda: torchvision_model("regnet_x_400mf"), image(), ["input"], 9),
    "resnet18_opset9": (lambda: torchvision_model("resnet18"), image(), ["input"], 9),
    "fcn_resnet50": (lambda: segmentation_model("fcn_resnet50"), image((1, 3, 128, 128)), ["input"], 13),
    "deeplabv3_mobilenet_v3_large": (lambda: segmentation_model("deeplabv3_mobilenet_v3_large"),
                                     image((1, 3, 128, 128)), ["input"], 13),
    "lraspp_mobilenet_v3_large": (lambda: segmentation_model("lraspp_mobilenet_v3_large"),
                                  image((1, 3, 128, 128)), ["input"], 11),
    "r3d_18": (lambda: video_model("r3d_18"), image((1, 3, 8, 56, 56)), ["input"], 13),
}
DEFAULT = ["resnet18", "mobilenet_v2", "attention_encoder", "attention_encoder_opset13", "torch_transformer_encoder",
           "recurrent_tagger", "scripted_control_flow"]


def randomize_normalization(model):
    """Default initialisations leave normalisation layers as identities and can
    make outputs vanish (torchvision's MobileNetV2 gives ~1e-9): give them
    random affine parameters and running statistics so outputs are O(1) and
    BatchNorm folding is really exercised."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
                if getattr(m, "running_mean", None) is not None:
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 1.5)
            elif isinstance(m, nn.Linear):
                nn.init.uniform_(m.weight, -(3.0 / m.in_features) ** 0.5, (3.0 / m.in_features) ** 0.5)


def export(name, work):
    make, inputs_fn, input_names, opset = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    randomize_normalization(model)
    g = torch.Generator().manual_seed(1)
    inputs = inputs_fn(g)
    with torch.no_grad():
        expected = model(*inputs)
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    folder = os.path.join(work, name)
    shutil.rmtree(folder, ignore_errors=True)  # no stale model, artifact or outputs from an earlier run
    os.makedirs(folder)
    path = os.path.join(folder, "model.onnx")
    output_names = ["output_%d" % i for i in range(len(expected))]
    torch.onnx.export(model, inputs, path, opset_version=opset, input_names=input_names,
                      output_names=output_names, do_constant_folding=True)
    for n, t in zip(input_names, inputs):
        np.save(os.path.join(folder, n + ".npy"), t.numpy())
    return folder, path, input_names, output_names, [e.numpy() for e in expected]


def compile_artifact(tessera, folder, path, input_names, backends, plugins=(), precision=None):
    """Compiles the ONNX model to a .tsr artifact (input shapes fixed from the
    example inputs); returns its path (and keeps the compile's stderr in
    COMPILE_STDERR), or None after printing why it failed."""
    artifact = os.path.join(folder, "model.tsr")
    cmd = [tessera, "compile", path, "-o", artifact]
    for plugin in plugins:
        cmd += ["--backend-plugin", plugin]
    if backends:
        cmd += ["--backends", backends]
    if precision:
        cmd += ["--precision", precision]
    for n in input_names:
        shape = np.load(os.path.join(folder, n + ".npy")).shape
        cmd += ["--input-shape", "%s=%s" % (n, "x".join(str(d) for d in shape))]
    result = subprocess.run(cmd, capture_output=True, text=True)
    COMPILE_STDERR[0] = result.stderr
    if result.returncode != 0:
        print("FAIL %s: tessera compile exited %d: %s" % (path, result.returncode, result.stderr.strip()))
        return None
    return artifact


COMPILE_STDERR = [""]


# Per precision: (max |tessera - torch| / max |torch|, minimum cosine similarity or None).
TOLERANCES = {None: (1e-4, None), "fp32": (1e-4, None), "bf16": (3e-2, 0.999), "bf16-all": (3e-2, 0.999)}


def compare_outputs(name, out_dir, output_names, expected, precision=None):
    """Checks the files tessera wrote in out_dir against torch's outputs;
    prints one line per output (or problem) and returns whether all agree."""
    ok = True
    written = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    wanted = sorted(n + ".npy" for n in output_names)
    if written != wanted:
        print("FAIL %s: tessera wrote %s, the model's outputs are %s" % (name, written, wanted))
        ok = False
    for out_name, ref in zip(output_names, expected):
        path = os.path.join(out_dir, out_name + ".npy")
        if not os.path.exists(path):
            continue
        got = np.load(path)
        if got.dtype != ref.dtype:
            print("FAIL %s: %s has dtype %s, torch gives %s" % (name, out_name, got.dtype, ref.dtype))
            ok = False
            continue
        if got.shape != ref.shape:
            print("FAIL %s: %s has shape %s, torch gives %s" % (name, out_name, got.shape, ref.shape))
            ok = False
            continue
        if ref.dtype.kind != "f":
            mismatches = int(np.count_nonzero(got != ref))
            status = "ok" if mismatches == 0 else "FAIL"
            ok &= status == "ok"
            print("%s %s %s: %d of %d elements differ (exact)" % (status, name, out_name, mismatches, ref.size))
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
        scale = float(np.max(np.abs(ref))) if ref.size else 1.0
        if scale < 1e-3:
            print("FAIL %s: %s is degenerate (max |torch| = %.3g); the comparison would prove nothing"
                  % (name, out_name, scale))
            ok = False
            continue
        relative, min_cosine = TOLERANCES[precision]
        a = got.astype(np.float64).ravel()
        b = ref.astype(np.float64).ravel()
        cosine = float(np.dot(a, b) / np.sqrt(np.dot(a, a) * np.dot(b, b)))
        # NaN compares false, so a NaN anywhere in tessera's output fails here.
        status = "ok" if err <= relative * scale and (min_cosine is None or cosine >= min_cosine) else "FAIL"
        ok &= status == "ok"
        print("%s %s %s: max abs error %.3g (output scale %.3g, relative %.3g), cosine %.6f" %
              (status, name, out_name, err, scale, err / scale, cosine))
    return ok


def check(name, tessera, work, threads_list, backends=None, artifact=False, plugins=(), precision=None):
    t0 = time.time()
    folder, path, input_names, output_names, expected = export(name, work)
    model = path
    if artifact:
        model = compile_artifact(tessera, folder, path, input_names, backends, plugins, precision)
        if model is None:
            return False
        os.remove(path)  # the artifact must run on its own
    t1 = time.time()
    ok = True
    for threads in threads_list:
        out_dir = os.path.join(folder, "tessera_out_threads%d" % threads)
        cmd = [tessera, "run", model, "--output-dir", out_dir, "--threads", str(threads)]
        for plugin in plugins:
            cmd += ["--backend-plugin", plugin]
        if backends and not artifact:  # an artifact's backends were fixed when it was compiled
            cmd += ["--backends", backends]
        if precision and not artifact:
            cmd += ["--precision", precision]
        if backends or precision:
            cmd += ["--placement"]
        for n in input_names:
            cmd += ["--input", "%s=%s" % (n, os.path.join(folder, n + ".npy"))]
        t2 = time.time()
        result = subprocess.run(cmd, capture_output=True, text=True)
        print("  %d thread(s): tessera run %.1fs" % (threads, time.time() - t2))
        if result.returncode != 0:
            print("FAIL %s: tessera (%d threads) exited %d: %s"
                  % (name, threads, result.returncode, result.stderr.strip()))
            ok = False
            continue
        # Each named backend must really run part of the model, or the comparison says nothing about it
        # (native, the fallback, may be left with nothing when the others take every node).
        for backend in (backends or "").split(","):
            if backend and backend != "native" and "total on %s:" % backend not in result.stdout:
                print("FAIL %s: no node ran on backend '%s'" % (name, backend))
                ok = False
        compared_as = precision
        if precision and precision.startswith("bf16"):
            # The placement lists ", bf16" after each node that computes in bfloat16.
            reduced = sum(1 for line in result.stdout.splitlines() if ") -> " in line and ", bf16" in line)
            print("  %d nodes in bf16" % reduced)
            if cpu_isa.dnnl_bf16() or (backends or "").split(",")[0] not in ("", "dnnl"):
                if reduced == 0:
                    print("FAIL %s: no node computes in bf16: %s" % (name, result.stderr.strip()))
                    ok = False
            else:
                # No AVX512_BF16 here (or oneDNN capped below it): float32, one warning naming why,
                # and float32's tolerances.
                compared_as = "fp32"
                # (an artifact's precision was decided, and warned about, when it was compiled)
                warnings = COMPILE_STDERR[0] if artifact else result.stderr
                if reduced != 0 or "without AVX512_BF16" not in warnings:
                    print("FAIL %s: this CPU has no bf16, expected float32 with a warning; %d nodes in bf16, "
                          "stderr: %s" % (name, reduced, result.stderr.strip()))
                    ok = False
        ok &= compare_outputs("%s (%d threads)" % (name, threads), out_dir, output_names, expected, compared_as)
    print("  export %.1fs" % (t1 - t0))
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--threads", type=int, action="append",
                        help="intra-op threads (repeatable); default: run at 1 and at 2")
    parser.add_argument("--backends", help="passed to tessera as --backends (e.g. test,native)")
    parser.add_argument("--backend-plugin", action="append", default=[], dest="plugins",
                        help="passed to tessera as --backend-plugin (repeatable)")
    parser.add_argument("--artifact", action="store_true",
                        help="compile to a .tsr artifact first (tessera compile) and run that")
    parser.add_argument("--precision", choices=["fp32", "bf16", "bf16-all"],
                        help="passed to tessera as --precision; bf16 is compared with looser tolerances")
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    names = DEFAULT if args.models == ["all"] else args.models
    torch.set_num_threads(1)
    failed = [n for n in names
              if not check(n, os.path.abspath(args.tessera), args.work, args.threads or [1, 2], args.backends,
                           args.artifact, [os.path.abspath(p) for p in args.plugins], args.precision)]
    print("%d passed, %d failed" % (len(names) - len(failed), len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
