"""Several Python threads calling one compiled module at once (the op runs without the GIL)."""

import threading
import time

import torch
import torchvision

import tessera.torch as tt
from conftest import Mlp, assert_close, randomize_batch_norm


def run_in_threads(count, work):
    errors = []

    def guarded(index):
        try:
            work(index)
        except BaseException as error:  # noqa: BLE001  (reported below, in the main thread)
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_threads_share_one_static_module():
    torch.manual_seed(0)
    model = randomize_batch_norm(torchvision.models.resnet18(weights=None).eval())
    compiled = tt.compile(model, torch.randn(1, 3, 32, 32))
    inputs = [torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]

    def work(index):
        with torch.no_grad():
            for round_ in range(5):
                i = (index + round_) % len(inputs)
                assert_close(compiled(inputs[i]), expected[i], rtol=1e-3, atol_scale=1e-3)

    run_in_threads(4, work)


def test_threads_share_one_dynamic_module_with_different_shapes():
    mlp = Mlp().eval()
    compiled = tt.compile(mlp, torch.randn(1, 16), dynamic_axes={0: {0: "batch"}}, cache_size=3)
    batches = [1, 2, 3, 4, 5, 6]

    def work(index):
        for round_ in range(20):
            x = torch.randn(batches[(index + round_) % len(batches)], 16)
            with torch.no_grad():
                assert_close(compiled(x), mlp(x))

    run_in_threads(6, work)
    model = compiled.tessera_model()
    assert model.compile_count() == 1 and model.cached_variants() == 1  # six shapes, one compile
    # Errors in one thread do not disturb the others.

    def mixed(index):
        for round_ in range(10):
            if (index + round_) % 3 == 0:
                try:
                    compiled(torch.randn(2, 15))
                except ValueError:
                    continue
                raise AssertionError("a bad input was accepted")
            x = torch.randn(2, 16)
            with torch.no_grad():
                assert_close(compiled(x), mlp(x))

    run_in_threads(4, mixed)


def test_scripted_module_from_threads():
    mlp = Mlp().eval()
    scripted = torch.jit.script(tt.compile(mlp, torch.randn(8, 16), threads=2))
    x = torch.randn(8, 16)
    with torch.no_grad():
        expected = mlp(x)

    def work(index):
        for _ in range(50):
            assert_close(scripted(x), expected)

    run_in_threads(4, work)


def test_the_gil_is_released_while_a_model_runs():
    """A Python thread keeps ticking while another runs the model: through the eager module (the
    model's run method), the op, and the scripted module. Holding the GIL would stop the ticks for a
    whole run; a loaded machine may stall them briefly, so each path gets three tries."""
    layers = [torch.nn.Linear(1024, 1024) for _ in range(4)]
    model = torch.nn.Sequential(*layers).eval()
    x = torch.randn(512, 1024)
    compiled = tt.compile(model, x)
    scripted = torch.jit.script(compiled)
    paths = {"module": lambda: compiled(x), "op": lambda: torch.ops.tessera.run(compiled.tessera_model(), [x]),
             "scripted": lambda: scripted(x)}
    for name, call in paths.items():
        gaps = []
        for _ in range(3):
            call()
            start = time.perf_counter()
            call()
            run_seconds = time.perf_counter() - start
            done = threading.Event()

            def work():
                call()
                done.set()

            thread = threading.Thread(target=work)
            last, gap = time.perf_counter(), 0.0
            thread.start()
            while not done.is_set():
                now = time.perf_counter()
                gap, last = max(gap, now - last), now
            thread.join()
            gaps.append(gap / run_seconds)
            if gaps[-1] < 0.5:
                break
        assert min(gaps) < 0.5, f"{name}: the ticking thread stalled for {min(gaps):.0%} of a run"
