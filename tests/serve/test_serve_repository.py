"""tessera serve's model repository and lifecycle: control modes none / explicit / poll, load and unload
at run time (with a config given in the call), versions and version policies, warm-up before ready,
configs with errors and with Triton fields Tessera skips, SIGTERM draining, and bad flags."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import CLI, ROOT, SERVE, Mlp, Server, infer_json, write_config, write_slow_model  # noqa: E402


def mlp_output(server, model, x, version=None):
    status, out = infer_json(server, model, {"x": ("FP32", x)}, version=version)
    assert status == 200, out
    return np.array(out["outputs"][0]["data"], np.float32).reshape(x.shape[0], 3)


def wait_for(predicate, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_explicit_mode_load_unload_and_config_override(tmp_path):
    a, b = Mlp(1), Mlp(2)
    a.write(str(tmp_path / "a" / "1" / "model.onnx"))
    b.write(str(tmp_path / "b" / "1" / "model.onnx"))
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx file")
    s = Server(str(tmp_path), "--model-control-mode", "explicit", "--load-model", "a")
    try:
        x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
        np.testing.assert_allclose(mlp_output(s, "a", x), a.reference(x), rtol=1e-5, atol=1e-6)
        index = {e["name"]: e for e in s.json("POST", "/v2/repository/index", {})[1]}
        assert index["a"]["state"] == "READY" and index["b"]["state"] == "UNAVAILABLE" and index["broken"]["state"] == "UNAVAILABLE"
        assert s.json("POST", "/v2/repository/index", {"ready": True})[1] == [{"name": "a", "version": "1", "state": "READY", "reason": ""}]
        assert s.json("GET", "/v2/models/b")[0] == 404
        assert s.json("POST", "/v2/repository/models/b/load", {})[0] == 200
        np.testing.assert_allclose(mlp_output(s, "b", x), b.reference(x), rtol=1e-5, atol=1e-6)
        # a config in the call: batching with max_batch_size 2
        config = json.dumps({"max_batch_size": 2, "dynamic_batching": {}})
        assert s.json("POST", "/v2/repository/models/b/load", {"parameters": {"config": config}})[0] == 200
        assert s.json("GET", "/v2/models/b/config")[1]["max_batch_size"] == 2
        status, body = infer_json(s, "b", {"x": ("FP32", np.zeros((3, 4), np.float32))})
        assert status == 400 and "max_batch_size" in body["error"]
        status, body = s.json("POST", "/v2/repository/models/b/load", {"parameters": {"config": "{not json"}})
        assert status == 400 and "config" in body["error"]
        assert s.json("GET", "/v2/models/b/ready")[0] == 200  # a failed reload leaves the loaded version serving
        # unload: requests are refused, readiness says no, the index says why
        assert s.json("POST", "/v2/repository/models/a/unload", {})[0] == 200
        status, body = infer_json(s, "a", {"x": ("FP32", x)})
        assert status == 503 and "unloaded" in body["error"]
        assert s.json("GET", "/v2/models/a/ready")[0] == 400
        assert s.json("POST", "/v2/repository/models/a/unload", {})[0] == 404
        assert s.json("POST", "/v2/repository/models/nope/load", {})[0] == 404
        status, body = s.json("POST", "/v2/repository/models/broken/load", {})
        assert status == 400 and "broken" in body["error"], body
        index = {e["name"]: e for e in s.json("POST", "/v2/repository/index", {})[1]}
        assert index["broken"]["state"] == "UNAVAILABLE" and index["broken"]["reason"], index
        assert index["a"]["reason"] == "unloaded"
        assert s.json("GET", "/v2/health/live")[0] == 200
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_versions_and_policies(tmp_path):
    models = {v: Mlp(10 + v) for v in (1, 2, 3)}
    for v, m in models.items():
        m.write(str(tmp_path / "latest" / str(v) / "model.onnx"))
        m.write(str(tmp_path / "all" / str(v) / "model.onnx"))
        m.write(str(tmp_path / "some" / str(v) / "model.onnx"))
    (tmp_path / "latest" / "not-a-version").mkdir()
    write_config(str(tmp_path / "all"), "version_policy: { all { } }")
    write_config(str(tmp_path / "some"), "version_policy: { specific { versions: [1, 3] } }")
    s = Server(str(tmp_path))
    try:
        x = np.random.default_rng(4).standard_normal((1, 4)).astype(np.float32)
        assert s.json("GET", "/v2/models/latest")[1]["versions"] == ["3"]
        np.testing.assert_allclose(mlp_output(s, "latest", x), models[3].reference(x), rtol=1e-5, atol=1e-6)
        assert infer_json(s, "latest", {"x": ("FP32", x)}, version="2")[0] == 404
        assert s.json("GET", "/v2/models/all")[1]["versions"] == ["1", "2", "3"]
        for v in (1, 2, 3):
            np.testing.assert_allclose(mlp_output(s, "all", x, version=str(v)), models[v].reference(x), rtol=1e-5, atol=1e-6)
        assert s.json("GET", "/v2/models/some")[1]["versions"] == ["1", "3"]
        np.testing.assert_allclose(mlp_output(s, "some", x), models[3].reference(x), rtol=1e-5, atol=1e-6)
        stats = s.json("GET", "/v2/models/all/stats")[1]["model_stats"]
        assert sorted((m["version"], m["inference_count"]) for m in stats) == [("1", 1), ("2", 1), ("3", 1)]
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_poll_mode_adds_changes_and_removes(tmp_path):
    first, second = Mlp(21), Mlp(22)
    first.write(str(tmp_path / "m" / "1" / "model.onnx"))
    s = Server(str(tmp_path), "--model-control-mode", "poll", "--repository-poll-secs", "1")
    try:
        x = np.ones((1, 4), np.float32)
        np.testing.assert_allclose(mlp_output(s, "m", x), first.reference(x), rtol=1e-5, atol=1e-6)
        # a new model appears
        staging = tmp_path.parent / (tmp_path.name + "_staging")
        second.write(str(staging / "n" / "1" / "model.onnx"))
        os.rename(staging / "n", tmp_path / "n")
        assert wait_for(lambda: s.json("GET", "/v2/models/n/ready")[0] == 200), "".join(s.log)
        np.testing.assert_allclose(mlp_output(s, "n", x), second.reference(x), rtol=1e-5, atol=1e-6)
        # a new version of m: served once loaded
        second.write(str(staging / "v2" / "model.onnx"))
        os.rename(staging / "v2", tmp_path / "m" / "2")
        assert wait_for(lambda: s.json("GET", "/v2/models/m")[1].get("versions") == ["2"]), "".join(s.log)
        np.testing.assert_allclose(mlp_output(s, "m", x), second.reference(x), rtol=1e-5, atol=1e-6)
        # n removed: unloaded
        shutil.rmtree(tmp_path / "n")
        assert wait_for(lambda: infer_json(s, "n", {"x": ("FP32", x)})[0] == 503), "".join(s.log)
        assert s.json("POST", "/v2/repository/models/m/load", {})[0] == 503  # not explicit mode
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_warmup_before_ready_and_failing_warmup(tmp_path):
    write_slow_model(str(tmp_path / "slow" / "1" / "model.onnx"))
    (tmp_path / "slow" / "warmup").mkdir()
    np.full((1, 1024), 0.5, np.float32).tofile(tmp_path / "slow" / "warmup" / "x.bin")
    write_config(str(tmp_path / "slow"), """
model_warmup [
  { name: "zeros" batch_size: 1 count: 4 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [1, 1024] zero_data: true } } },
  { name: "file" count: 2 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [1, 1024] input_data_file: "x.bin" } } }
]
""")
    Mlp().write(str(tmp_path / "badwarm" / "1" / "model.onnx"))
    write_config(str(tmp_path / "badwarm"), """
model_warmup [ { name: "wrong" inputs { key: "x" value: { data_type: TYPE_FP32 dims: [1, 5] random_data: true } } } ]
""")
    s = Server(str(tmp_path), "--model-control-mode", "explicit", wait_ready=False)
    try:
        assert s.json("GET", "/v2/health/ready")[0] == 200  # explicit mode, nothing asked yet
        result = {}
        loader = threading.Thread(target=lambda: result.update(r=s.json("POST", "/v2/repository/models/slow/load", {})))
        loader.start()
        # while six warm-up runs (seconds) go on: live, not ready, the model not ready
        assert wait_for(lambda: s.json("GET", "/v2/health/ready")[0] == 400, timeout=10)
        assert s.json("GET", "/v2/health/live")[0] == 200
        assert s.json("GET", "/v2/models/slow/ready")[0] in (400, 404)
        index = {e["name"]: e for e in s.json("POST", "/v2/repository/index", {})[1]}
        assert index["slow"]["state"] == "LOADING"
        loader.join(120)
        assert result["r"][0] == 200, result
        assert s.json("GET", "/v2/health/ready")[0] == 200 and s.json("GET", "/v2/models/slow/ready")[0] == 200
        assert s.metrics() is not None
        status, body = s.json("POST", "/v2/repository/models/badwarm/load", {})
        assert status == 400 and "warm-up 'wrong'" in body["error"] and "1x5" in body["error"], body
        assert s.json("GET", "/v2/health/ready")[0] == 400  # strict readiness: a model failed to load
    finally:
        assert s.stop() == 0, "".join(s.log)


BAD_CONFIGS = [
    ("max_batch_size: 2\ninput [ { name: \"x\" data_type: TYPE_INT32 dims: [4] } ]", "data_type TYPE_INT32"),
    ("max_batch_size: 2\ninput [ { name: \"z\" data_type: TYPE_FP32 dims: [4] } ]", "no input of that name"),
    ("max_batch_size: 2\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [5] } ]", "dims [5]"),
    ("max_batch_size: -1", "max_batch_size"),
    ("instance_group [ { kind: KIND_GPU } ]", "KIND_GPU"),
    ("max_batch_size: 2\nparameters { key: \"threads\" value { string_value: \"lots\" } }", "threads"),
    ("parameters { key: \"no_such_option\" value { string_value: \"1\" } }", "no_such_option"),
    ("name: \"other\"", "differs"),
    ("max_batch_size: {", "line 1"),
    ("model_warmup [ { inputs { key: \"x\" value: { data_type: TYPE_FP32 dims: [1, 4] input_data_file: \"../../etc/passwd\" } } } ]",
     "inside the model's warmup"),
]


def test_bad_configs_name_the_problem_and_triton_extras_are_skipped(tmp_path):
    for i, (text, _) in enumerate(BAD_CONFIGS):
        Mlp().write(str(tmp_path / f"bad{i}" / "1" / "model.onnx"))
        write_config(str(tmp_path / f"bad{i}"), text)
    Mlp().write(str(tmp_path / "extras" / "1" / "model.onnx"))
    write_config(str(tmp_path / "extras"), """
name: "extras"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NONE dims: [ 4 ] } ]
optimization { execution_accelerators { cpu_execution_accelerator : [ { name : "openvino" } ] } }
dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }
""")
    # fixed batch dim with max_batch_size > 0: refused with the fix named
    os.makedirs(tmp_path / "fixed" / "1")
    shutil.copy(os.path.join(ROOT, "models", "tiny_resnet.onnx"), tmp_path / "fixed" / "1" / "model.onnx")
    write_config(str(tmp_path / "fixed"), "max_batch_size: 4")
    s = Server(str(tmp_path), "--strict-readiness", "false")
    try:
        index = {e["name"]: e for e in s.json("POST", "/v2/repository/index", {})[1]}
        for i, (_, fragment) in enumerate(BAD_CONFIGS):
            assert index[f"bad{i}"]["state"] == "UNAVAILABLE" and fragment in index[f"bad{i}"]["reason"], (i, index[f"bad{i}"])
        assert index["fixed"]["state"] == "UNAVAILABLE" and "open batch dim" in index["fixed"]["reason"]
        assert index["extras"]["state"] == "READY"
        assert any("optimization" in line and "skipped" in line for line in s.log), "".join(s.log)
        assert s.json("GET", "/v2/health/ready")[0] == 200  # --strict-readiness false
        x = np.ones((2, 4), np.float32)
        np.testing.assert_allclose(mlp_output(s, "extras", x), Mlp().reference(x), rtol=1e-5, atol=1e-6)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_sigterm_drains_queued_requests(tmp_path):
    write_slow_model(str(tmp_path / "slow" / "1" / "model.onnx"))
    s = Server(str(tmp_path), "--exit-timeout-secs", "60")
    results = []

    def client(k):
        results.append(infer_json(s, "slow", {"x": ("FP32", np.full((1, 1024), 0.1 * k, np.float32))})[0])

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    # two requests queued before SIGTERM (the third running, or still arriving)
    assert wait_for(lambda: s.metrics() and sum(v for (n, _), v in s.metrics().items()
                                                if n == "nv_inference_pending_request_count") >= 2, timeout=30)
    s.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: s.request("GET", "/v2/health/ready")[0] == 400, timeout=5)
    status, body = infer_json(s, "slow", {"x": ("FP32", np.zeros((1, 1024), np.float32))})
    assert status == 503 and "shutting down" in body["error"]
    for t in threads:
        t.join(120)
    # The two queued at the signal (and the one running, if the instance had taken it: under load the
    # third client can still be on its way when two wait in the queue, and is then refused) complete.
    assert len(results) == 3 and results.count(200) >= 2 and set(results) <= {200, 503}, results
    assert s.proc.wait(60) == 0
    assert any("draining" in line for line in s.log) and any("stopped" in line for line in s.log)


@pytest.mark.parametrize("args,code,fragment", [
    ([], 2, "--model-repository is required"),
    (["--model-repository", "/nonexistent/dir"], 1, "not a directory"),
    (["--model-repository", "/tmp", "--http-port", "70000"], 2, "--http-port"),
    (["--model-repository", "/tmp", "--model-control-mode", "sometimes"], 2, "none, poll or explicit"),
    (["--model-repository", "/tmp", "--load-model", "a"], 2, "explicit"),
    (["--model-repository", "/tmp", "--bogus", "1"], 2, "unknown flag '--bogus'"),
    (["--model-repository"], 2, "needs a value"),
])
def test_bad_flags(args, code, fragment):
    r = subprocess.run([SERVE] + args, capture_output=True, text=True, timeout=60)
    assert r.returncode == code, r.stderr
    assert fragment in r.stderr


def test_port_in_use_is_a_clear_error(tmp_path):
    s = Server(str(tmp_path))
    try:
        r = subprocess.run([SERVE, "--model-repository", str(tmp_path), "--http-address", "127.0.0.1", "--http-port",
                            str(s.http), "--grpc-port", "0", "--metrics-port", "0"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and f"cannot bind 127.0.0.1:{s.http}" in r.stderr, r.stderr
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_cli_runs_the_server():
    r = subprocess.run([CLI, "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage: tessera serve --model-repository DIR" in r.stdout
    r = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert "tessera serve" in r.stdout + r.stderr
