"""A voice-activity detector shaped like the widely used ones (issue 26's first model), written with torch and
scripted so that its choice of sample rate stays an ONNX If: each branch is an STFT as a Conv1d (real and
imaginary filters; magnitude), four Conv1d + ReLU blocks, a mean over time, an LSTM cell carrying (h, c), and
a 1x1 Conv1d + Sigmoid head. Seeded random weights; nothing is downloaded. Used by
tests/python/test_compiled_bodies.py and bench/run_control_flow.py."""
import warnings
from typing import Tuple

import numpy as np
import torch
from torch import nn


class Branch(nn.Module):
    def __init__(self, n_fft: int, width: int):
        super().__init__()
        self.n_fft = n_fft
        self.bins = n_fft // 2 + 1
        self.stft = nn.Conv1d(1, 2 * self.bins, n_fft, stride=n_fft // 2, bias=False)
        chans = [self.bins, width, width // 2, width // 2, width]
        strides = [1, 2, 2, 1]
        self.encoder = nn.ModuleList([nn.Sequential(nn.Conv1d(chans[i], chans[i + 1], 3, stride=strides[i], padding=1),
                                                    nn.ReLU()) for i in range(4)])
        self.lstm = nn.LSTMCell(width, width)
        self.decoder = nn.Conv1d(width, 1, 1)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = nn.functional.pad(x.unsqueeze(1), (self.n_fft // 4, self.n_fft // 4), mode="reflect")
        s = self.stft(x)
        re = s[:, :self.bins]
        im = s[:, self.bins:]
        y = torch.sqrt(re * re + im * im)
        for block in self.encoder:
            y = block(y)
        h, c = self.lstm(y.mean(dim=2), (h, c))
        out = torch.sigmoid(self.decoder(torch.relu(h).unsqueeze(2))).squeeze(2)
        return out, h, c


class VAD(nn.Module):
    """prob, h, c = VAD(x[batch, samples], sr, h, c): 16 kHz frames through one branch, 8 kHz through the other."""
    def __init__(self, width: int = 128):
        super().__init__()
        self.b16 = Branch(256, width)
        self.b8 = Branch(128, width)

    def forward(self, x: torch.Tensor, sr: torch.Tensor, h: torch.Tensor,
                c: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if bool(sr == 16000):
            return self.b16(x, h, c)
        else:
            return self.b8(x, h, c)


def export(path, width=128, seed=0):
    """Writes the scripted VAD (batch and samples open) to `path`; returns the scripted module (the reference)."""
    torch.manual_seed(seed)
    scripted = torch.jit.script(VAD(width).eval())
    x, h, c = torch.randn(1, 512), torch.zeros(1, width), torch.zeros(1, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(scripted, (x, torch.tensor(16000), h, c), str(path), opset_version=16,
                          input_names=["x", "sr", "h", "c"], output_names=["prob", "hn", "cn"],
                          dynamic_axes={"x": {0: "batch", 1: "samples"}, "h": {0: "batch"}, "c": {0: "batch"}})
    return scripted


def inputs(batch, sr, width=128, seed=1):
    """One call's inputs: a frame of 512 samples at 16 kHz or 256 at 8 kHz, and a nonzero state."""
    rng = np.random.default_rng(seed)
    samples = 512 if sr == 16000 else 256
    return {"x": rng.standard_normal((batch, samples)).astype(np.float32), "sr": np.array(sr, np.int64),
            "h": (0.1 * rng.standard_normal((batch, width))).astype(np.float32),
            "c": (0.1 * rng.standard_normal((batch, width))).astype(np.float32)}


def reference(scripted, feeds):
    with torch.no_grad():
        out = scripted(*(torch.from_numpy(np.asarray(feeds[k])) for k in ("x", "sr", "h", "c")))
    return [t.numpy() for t in out]
