"""Tutorial 3: partition a PyTorch model that has an op Tessera lacks.

    PYTHONPATH=build/python /usr/bin/python3 docs/tutorials/03_partition.py

`tessera.torch.compile` needs the whole model to export to ONNX and compile. When one op in the middle
cannot (here `torch.special.erfinv`, which torch 1.13 cannot export to ONNX, and a custom autograd
Function whose ONNX op Tessera does not have), `tessera.torch.partition` traces the model with torch.fx,
asks Tessera about every node, and gives Tessera the parts it supports. The rest stays in PyTorch, and
a report says which node ran where and why. CTest runs this script; it fails loudly if the partitioned
model disagrees with PyTorch.
"""

import time

import torch
import torch.fx

import tessera.torch


# 1. An op with no ONNX export at all: erfinv maps features back to a Gaussian scale.
#    And a custom op: it exports to ONNX as "custom::Gelu2", which Tessera does not know.
class Gelu2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * torch.sigmoid(1.702 * x)

    @staticmethod
    def symbolic(g, x):
        return g.op("custom::Gelu2", x)


@torch.fx.wrap  # torch.fx keeps this call as one node instead of tracing into it
def gelu2(x):
    return Gelu2.apply(x)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                        torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1))
        self.body = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
                                        torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = torch.sigmoid(self.stem(x)) * 1.8 - 0.9
        y = torch.special.erfinv(y)       # ONNX cannot export it: stays in PyTorch
        y = self.body(y).flatten(1)
        return self.head(gelu2(y))        # Tessera has no custom::Gelu2: stays in PyTorch


torch.manual_seed(0)
torch.set_num_threads(1)
model = Net().eval()
x = torch.randn(4, 3, 32, 32)

# 2. Partition. Tessera compiles each partition for the example inputs' shapes.
#    min_size=2: a lone supported node between two PyTorch ops is not worth a call into Tessera.
start = time.perf_counter()
fast = tessera.torch.partition(model, x, min_size=2)
print("partitioned in %.1f s" % (time.perf_counter() - start))

# 3. The report: each fx node, where it ran (partition and Tessera backend, or PyTorch) and why.
fast.print_report()
report = fast.tessera_report
assert report["special_erfinv"].where == "pytorch" and "ONNX export failed" in report["special_erfinv"].reason
assert report["gelu2"].where == "pytorch" and "Gelu2" in report["gelu2"].reason
assert len(report.partitions) == 2  # stem | body (the head is a single Linear: under min_size)

# 4. The result is a torch.fx.GraphModule: its code calls the partitions and the PyTorch ops in turn.
print(fast.code)

# 5. Same results as PyTorch (inference: run under no_grad).
with torch.no_grad():
    expected = model(x)
    actual = fast(x)
difference = (actual - expected).abs().max().item()
print("max abs difference from PyTorch: %.2e" % difference)
assert torch.allclose(actual, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item()), difference

# 6. Other batch sizes and image sizes: name the dims that change (as torch.onnx.export takes them).
#    partition() runs the model once more with those dims at other sizes to see which dims of every
#    value follow them; each partition is compiled once, with them open, and runs every size.
flexible = tessera.torch.partition(model, x, min_size=2, dynamic_axes={0: {0: "batch", 2: "height", 3: "width"}})
with torch.no_grad():
    for shape in [(1, 3, 32, 32), (7, 3, 48, 40), (2, 3, 17, 23)]:
        image = torch.randn(shape)
        difference = (flexible(image) - model(image)).abs().max().item()
        print("%s: max abs difference from PyTorch %.2e" % (list(shape), difference))
        assert difference < 1e-4, difference
compiles = {name: sub.tessera_model().compile_count() for name, sub in flexible.named_children()
            if name.startswith("tessera_partition_")}
print("compiles per partition:", compiles)
assert compiles and set(compiles.values()) == {1}
print("OK")
