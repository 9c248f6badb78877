"""torch.ops.tessera.run and torch.classes.tessera.Model: results, zero copy, dtypes, errors."""

import gc
import json

import pytest
import torch

import tessera.torch as tt
from conftest import AddCompare, Mlp, assert_close


@pytest.fixture(scope="module")
def add_module():
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    return tt.compile(AddCompare(), (a, b))


def test_multiple_outputs_and_bool_output_match_eager(add_module):
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    total, greater = add_module(a, b)
    expected_total, expected_greater = AddCompare()(a, b)
    assert_close(total, expected_total)
    assert greater.dtype == torch.bool
    assert torch.equal(greater, expected_greater)
    assert isinstance(add_module(a, b), tuple)


def test_single_output_is_a_tensor():
    x = torch.randn(3, 16)
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, x)
    out = compiled(x)
    assert isinstance(out, torch.Tensor)
    with torch.no_grad():
        assert_close(out, mlp(x))


def test_outputs_are_tessera_buffers_not_copies(add_module):
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    outputs = add_module(a, b)
    model = add_module.tessera_model()
    # The tensors torch holds sit exactly where Tessera allocated its outputs (the bool one too).
    assert [t.data_ptr() for t in outputs] == model.last_output_pointers()
    assert all(t.is_contiguous() for t in outputs)


def test_contiguous_inputs_are_read_in_place(add_module):
    model = add_module.tessera_model()
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    copies = model.input_copies()
    add_module(a, b)
    assert model.last_input_pointers() == [a.data_ptr(), b.data_ptr()]
    assert model.input_copies() == copies
    # A contiguous view at an offset into a bigger tensor is read in place too.
    big = torch.randn(10, 5)
    view = big[3:7]
    total, _ = add_module(view, b)
    assert model.last_input_pointers()[0] == view.data_ptr()
    assert model.input_copies() == copies
    assert_close(total, view + b)


def test_non_contiguous_inputs_are_copied_and_counted(add_module):
    model = add_module.tessera_model()
    a = torch.randn(5, 4).t()  # 4x5, transposed strides
    b = torch.randn(4, 10)[:, ::2]  # 4x5, stride 2
    assert not a.is_contiguous() and not b.is_contiguous()
    copies = model.input_copies()
    total, greater = add_module(a, b)
    assert model.input_copies() == copies + 2
    assert model.last_input_pointers()[0] != a.data_ptr()
    assert_close(total, a + b)
    assert torch.equal(greater, a > b)


def test_outputs_outlive_the_model():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    compiled = tt.compile(AddCompare(), (a, b))
    total, greater = compiled(a, b)
    del compiled
    gc.collect()
    # The storage is Tessera's buffer, freed by the DLPack deleter only when torch drops it.
    assert_close(total.clone(), a + b)
    assert torch.equal(greater.clone(), a > b)


class Dtypes(torch.nn.Module):
    def forward(self, f64, i64, i32, u8, flag):
        return f64 * 2, i64 + 3, i32 * i32, u8 + u8, ~flag


def test_dtypes_cross_both_ways():
    inputs = (torch.randn(2, 3, dtype=torch.float64), torch.arange(6).reshape(2, 3),
              torch.arange(6, dtype=torch.int32).reshape(2, 3), torch.arange(6, dtype=torch.uint8).reshape(2, 3),
              torch.tensor([[True, False, True], [False, False, True]]))
    compiled = tt.compile(Dtypes(), inputs)
    fresh = (torch.randn(2, 3, dtype=torch.float64), torch.randint(-100, 100, (2, 3)),
             torch.randint(-100, 100, (2, 3), dtype=torch.int32), torch.randint(0, 100, (2, 3), dtype=torch.uint8),
             torch.rand(2, 3) > 0.5)
    for actual, expected in zip(compiled(*fresh), Dtypes()(*fresh)):
        assert_close(actual, expected)


def test_bool_input_is_read_in_place():
    class Select(torch.nn.Module):
        def forward(self, condition, x, y):
            return torch.where(condition, x, y)

    condition = torch.rand(3, 4) > 0.5
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    compiled = tt.compile(Select(), (condition, x, y))
    out = compiled(condition, x, y)
    assert torch.equal(out, torch.where(condition, x, y))
    assert compiled.tessera_model().last_input_pointers()[0] == condition.data_ptr()


# --- inference only -----------------------------------------------------------------------------

def test_requires_grad_input_raises_under_grad_mode():
    x = torch.randn(2, 16)
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, x)
    with pytest.raises(ValueError, match="requires grad"):
        compiled(x.clone().requires_grad_())
    # An input that requires grad because a trainable torch layer made it: never a silent missing gradient.
    head = torch.nn.Linear(16, 16)
    with pytest.raises(ValueError, match="inference only"):
        compiled(head(x))


def test_requires_grad_input_runs_under_no_grad_and_inference_mode():
    x = torch.randn(2, 16)
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, x)
    leaf = x.clone().requires_grad_()
    with torch.no_grad():
        expected = mlp(x)
        out = compiled(leaf)
    assert not out.requires_grad
    assert_close(out, expected)
    with torch.inference_mode():
        out = compiled(leaf)
    assert_close(out, expected)
    # Outputs never require grad, even in grad mode with plain inputs.
    assert not compiled(x).requires_grad


# --- bad inputs raise, never crash ------------------------------------------------------------------

def test_wrong_number_of_inputs(add_module):
    a = torch.randn(4, 5)
    with pytest.raises(TypeError):
        add_module(a)
    with pytest.raises(TypeError):
        add_module(a, a, a)
    model = add_module.tessera_model()
    with pytest.raises(ValueError, match="2 inputs but 1 were given"):
        torch.ops.tessera.run(model, [a])
    with pytest.raises(ValueError, match="2 inputs but 3 were given"):
        torch.ops.tessera.run(model, [a, a, a])
    with pytest.raises(ValueError, match="2 inputs but 0 were given"):
        torch.ops.tessera.run(model, [])


def test_wrong_dtype(add_module):
    a = torch.randn(4, 5)
    with pytest.raises(ValueError, match=r"expected float32\[4,5\], got int64\[4,5\]"):
        add_module(a, torch.ones(4, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="expected float32"):
        add_module(a.double(), a)
    with pytest.raises(ValueError, match=r"expected float32\[4,5\], got ComplexFloat\[4,5\]"):
        add_module(torch.ones(4, 5, dtype=torch.complex64), a)


def test_wrong_shape(add_module):
    a = torch.randn(4, 5)
    for bad in (torch.randn(4, 6), torch.randn(5, 4), torch.randn(4, 5, 1), torch.randn(20), torch.tensor(1.0),
                torch.randn(0, 5)):
        with pytest.raises(ValueError, match=r"expected float32\[4,5\]"):
            add_module(a, bad)


def test_non_cpu_and_non_dense_tensors(add_module):
    a = torch.randn(4, 5)
    with pytest.raises(ValueError, match="only CPU tensors"):
        add_module(a, torch.empty(4, 5, device="meta"))
    with pytest.raises(ValueError, match="dense"):
        add_module(a, a.to_sparse())
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="only CPU tensors"):
            add_module(a, a.cuda())


def test_none_and_non_tensors(add_module):
    a = torch.randn(4, 5)
    with pytest.raises((TypeError, RuntimeError)):
        add_module(a, None)
    with pytest.raises((TypeError, RuntimeError)):
        torch.ops.tessera.run(add_module.tessera_model(), [a, None])
    with pytest.raises((TypeError, RuntimeError)):
        torch.ops.tessera.run(add_module.tessera_model(), None)
    with pytest.raises((TypeError, RuntimeError)):
        torch.ops.tessera.run(None, [a, a])
    with pytest.raises((TypeError, RuntimeError)):
        add_module(a, [[1.0] * 5] * 4)
    # Still works after all that.
    total, _ = add_module(a, a)
    assert_close(total, a + a)


def test_bad_model_bytes_and_options():
    with pytest.raises(ValueError, match="Tessera"):
        tt.make_model(b"not a model", kind="onnx")
    with pytest.raises(ValueError, match="Tessera"):
        tt.make_model(b"TSRARTF\0" + b"\0" * 100, kind="tsr")
    with pytest.raises(ValueError, match="Tessera"):
        tt.make_model(b"", kind="tsr")
    with pytest.raises(ValueError, match="kind must be"):
        torch.classes.tessera.Model("pt", b"", {})
    with pytest.raises(ValueError, match="unknown option 'thread'"):
        torch.classes.tessera.Model("onnx", b"", {"thread": "2"})
    x = torch.randn(2, 16)
    with pytest.raises(ValueError, match="threads"):
        tt.compile(Mlp(), x, threads=0)
    with pytest.raises(ValueError, match="unknown backend"):
        tt.compile(Mlp(), x, backends="no_such_backend")
    with pytest.raises(ValueError, match="cache_size"):
        tt.compile(Mlp(), x, cache_size=0)


def test_options_threads_and_backends():
    x = torch.randn(8, 16)
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, x, threads=2, backends=["native"])
    options = compiled.tessera_model().options()
    assert options["threads"] == "2" and options["backends"] == "native"
    with torch.no_grad():
        assert_close(compiled(x), mlp(x))
    assert "native" in compiled.report("table")


def test_place_and_deny_as_dicts_read_as_the_package_reads_them():
    """deny={backend: selector} (and place={selector: backend}) as tessera.InferenceSession takes them."""
    x = torch.randn(8, 16)
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, x, backends=["dnnl", "native"], deny={"dnnl": "op:Relu"}, place={"op:Gemm": "native"})
    options = compiled.tessera_model().options()
    assert options["deny"] == "dnnl:op:Relu" and options["place"] == "op:Gemm=native", options
    report = compiled.report("table")
    with torch.no_grad():
        assert_close(compiled(x), mlp(x))
    assert "denied by --deny dnnl:op:Relu" in report, report


def test_load_library_is_idempotent():
    tt.load_library()
    tt.load_library()
    assert hasattr(torch.ops.tessera, "run")


def test_export_failure_is_an_error_and_later_compiles_still_work():
    class Unexportable(torch.nn.Module):
        def forward(self, flag):
            return torch.logical_not(flag)  # aten::logical_not has no ONNX export in torch 1.13

    with pytest.raises(tt.ExportError, match="logical_not") as caught:
        tt.compile(Unexportable(), (torch.rand(2, 3) > 0.5,))
    # What it must say: which step failed, torch's own error type and the op, on one line.
    message = str(caught.value)
    assert message.startswith("tessera.torch.compile: torch.onnx.export failed: UnsupportedOperatorError: "), message
    assert "'aten::logical_not'" in message and "\n" not in message, message
    assert isinstance(caught.value, RuntimeError)
    # Only the message is kept: no chained exception holding torch's half-built export graph alive
    # (while it lives every later export fails), even though `caught` itself stays alive below, as a
    # user's handler might keep it.
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    x = torch.randn(2, 16)
    for _ in range(2):
        mlp = Mlp().eval()
        with torch.no_grad():
            assert_close(tt.compile(mlp, x)(x), mlp(x))
    with pytest.raises(TypeError, match="not a tensor"):
        tt.compile(torch.nn.Identity(), ([x],))

    class ReturnsDict(torch.nn.Module):
        def forward(self, x):
            return {"y": x * 2}

    with pytest.raises(TypeError, match="tensor or a tuple"):
        tt.compile(ReturnsDict(), (x,))


def test_input_names_become_parameter_names_where_they_can():
    class Three(torch.nn.Module):
        def forward(self, a, b, c):
            return a * b - c

    inputs = (torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2))
    compiled = tt.compile(Three(), inputs, input_names=["image", "torch", "not valid"])
    assert compiled.input_names == ["image", "torch", "not valid"]
    assert_close(compiled(*inputs), Three()(*inputs))
    assert_close(compiled(image=inputs[0], input_1=inputs[1], input_2=inputs[2]), Three()(*inputs))
    assert_close(torch.jit.script(compiled)(*inputs), Three()(*inputs))


def test_op_and_method_paths_agree_and_share_no_copies(add_module):
    """The module's eager forward calls Model.run; TorchScript and tracing call torch.ops.tessera.run."""
    model = add_module.tessera_model()
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    scripted, traced = torch.jit.script(add_module), torch.jit.trace(add_module, (a, b))
    for call in (lambda: torch.ops.tessera.run(model, [a, b]), lambda: model.run([a, b]), lambda: scripted(a, b),
                 lambda: traced(a, b)):
        outputs = call()
        assert_close(outputs[0], a + b)
        assert torch.equal(outputs[1], a > b)
        assert [t.data_ptr() for t in outputs] == model.last_output_pointers()
        assert model.last_input_pointers() == [a.data_ptr(), b.data_ptr()]


# ---------------------------------------------------------------------- inputs updated in place --

class AddsOneInPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class UpdatesThree(torch.nn.Module):
    """A float input updated through a view, an int one in place, one returned after its update."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y, k):
        y[0] = 5.0
        k.add_(2)
        x.relu_()
        return self.fc(x), y.sum() + k.float().sum(), x


def eager_and_compiled(module, compiled, inputs):
    """(eager outputs, compiled outputs, eager's inputs after, compiled's inputs after), on copies."""
    eager_inputs = [x.clone() for x in inputs]
    compiled_inputs = [x.clone() for x in inputs]
    with torch.no_grad():
        expected = module(*eager_inputs)
        actual = compiled(*compiled_inputs)
    return expected, actual, eager_inputs, compiled_inputs


def test_a_forward_that_updates_its_input_in_place_runs_as_eager_does():
    """Once an ExportError of Tessera's own making ("a leaf Variable that requires grad is being used in an
    in-place operation": the export's inputs were made to require grad). The compiled module returns what
    eager returns and updates the caller's tensors as eager does; compiling leaves the examples alone."""
    torch.manual_seed(0)
    example = torch.randn(3)
    before = example.clone()
    compiled = tt.compile(AddsOneInPlace(), example)
    assert torch.equal(example, before)  # compile ran the forward on copies only
    assert compiled.updated_inputs == ["input_0"] and compiled.output_names == ["output_0"]
    for x in (torch.randn(3), torch.tensor([1.0, float("nan"), -2.0])):
        expected, actual, eager_after, compiled_after = eager_and_compiled(AddsOneInPlace(), compiled, [x])
        assert_close(actual, expected)
        assert_close(compiled_after[0], eager_after[0])
        assert_close(compiled_after[0], x + 1)  # updated, as eager updates it

    module = UpdatesThree().eval()
    examples = (torch.randn(2, 4), torch.randn(2, 2), torch.arange(3))
    copies = [x.clone() for x in examples]
    for dynamic in (None, {0: {0: "n"}}):
        compiled = tt.compile(module, examples, dynamic_axes=dynamic)
        assert all(torch.equal(a, b) for a, b in zip(examples, copies))
        assert compiled.updated_inputs == ["input_0", "input_1", "input_2"]
        for n in ((2, 5) if dynamic else (2,)):
            inputs = [torch.randn(n, 4), torch.randn(2, 2), torch.arange(3)]
            for run in (compiled, torch.jit.script(compiled)):
                expected, actual, eager_after, compiled_after = eager_and_compiled(module, run, inputs)
                for a, e in zip(actual, expected):
                    assert_close(a, e)
                for a, e in zip(compiled_after, eager_after):
                    assert_close(a, e)
    # The node names are the module's own, not a wrapper's (place= and deny= select by them).
    names = [node["name"] for node in json.loads(compiled.report("json"))["nodes"]]
    assert "/fc/Gemm" in names and not any(name.startswith("/module/") for name in names), names


def test_a_forward_that_does_not_update_inputs_leaves_them_alone():
    compiled = tt.compile(Mlp().eval(), torch.randn(2, 16))
    assert compiled.updated_inputs == []
    x = torch.randn(2, 16)
    before = x.clone()
    with torch.no_grad():
        compiled(x)
    assert torch.equal(x, before)


def test_in_place_updates_that_cannot_be_exported_are_refused_saying_why():
    class ThroughData(torch.nn.Module):
        def forward(self, x):
            x.data.add_(1)  # autograd (and so the ONNX trace) does not see it
            return x * 2

    x = torch.randn(3)
    before = x.clone()
    with pytest.raises(ValueError, match="changes input 0 in place without autograd seeing it"):
        tt.compile(ThroughData(), x)
    with pytest.raises(ValueError, match="the ScriptModule updates input.* in place.*compile the Python module"):
        tt.compile(torch.jit.script(AddsOneInPlace()), x)
    assert torch.equal(x, before)


def test_a_tuning_record_is_applied(tmp_path):
    """tuning= takes a record made by tessera.tune on the model as tessera.torch.compile exports it."""
    import json
    import tessera

    x = torch.randn(4, 16)
    mlp = Mlp().eval()
    path = str(tmp_path / "mlp.onnx")
    with torch.enable_grad():
        torch.onnx.export(mlp, (x.detach().requires_grad_(True),), path, input_names=["input_0"],
                          output_names=["output_0"], opset_version=14, do_constant_folding=True)
    record_path = str(tmp_path / "tuning.json")
    tessera.tune(path, record_path, backends="test,native", budget=5)
    # Whatever the measurement chose, the record is made to say: every node on native.
    record = json.load(open(record_path))
    for entry in record["placement"]:
        entry["backend"] = "native"
    json.dump(record, open(record_path, "w"))

    def backends(compiled):
        return {n["backend"] for n in json.loads(compiled.report("json"))["nodes"] if n["backend"] != "folded"}

    assert "test" in backends(tt.compile(mlp, x, backends="test,native"))  # the priority order
    compiled = tt.compile(mlp, x, backends="test,native", tuning=record_path)
    assert backends(compiled) == {"native"}
    assert compiled.tessera_model().options()["tuning"] == record_path
    with torch.no_grad():
        assert_close(compiled(x), mlp(x))
    with pytest.raises(ValueError, match="no_such.json"):
        tt.compile(mlp, x, tuning=str(tmp_path / "no_such.json"))
