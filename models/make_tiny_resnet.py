#!/usr/bin/python3
"""Makes models/tiny_resnet.onnx, the bundled default model: a small residual
CNN (conv, batch norm, relu, residual adds, pooling, a linear head) with seeded
random weights, input 1x3x64x64. Run from the repository root to regenerate."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.skip is None else self.skip(x)))


class TinyResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return torch.softmax(self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)), dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyResNet().eval()
    for m in model.modules():  # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    torch.onnx.export(model, torch.randn(1, 3, 64, 64), "models/tiny_resnet.onnx", opset_version=13,
                      input_names=["image"], output_names=["probabilities"])
