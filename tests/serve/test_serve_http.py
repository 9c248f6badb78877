"""tessera serve over HTTP/REST with a client Tessera did not write (http.client): the protocol's
endpoints, JSON and binary tensors of every datatype against numpy references, outputs equal to
`tessera run`'s, dynamic batching under concurrent load with unique inputs, metrics, and hostile
requests (each a 4xx naming what is wrong, the server still serving)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import (CLI, DTYPES, ROOT, SERVE, Mlp, Server, binary_body, bytes_elements, infer_json,  # noqa: E402
                           metric, pack_bytes, split_binary_response, write_config, write_dtypes_model,
                           write_relu_model, write_slow_model, write_strings_model)

MLP = Mlp()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    MLP.write(str(repo / "mlp" / "1" / "model.onnx"))
    write_config(str(repo / "mlp"), """
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 20000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""")
    write_dtypes_model(str(repo / "dtypes" / "1" / "model.onnx"))
    write_strings_model(str(repo / "strings" / "1" / "model.onnx"))
    write_relu_model(str(repo / "relu" / "1" / "model.onnx"))
    write_slow_model(str(repo / "slow" / "1" / "model.onnx"))
    write_config(str(repo / "slow"), "max_batch_size: 0\ninstance_group [ { count: 1 } ]\n")
    # The same kind of model, smaller (256 rows of 8 products of 256 x 256 a request): a batch of 8 costs
    # about 8 requests, so batching does not pay and a lone request must not wait its 0.5 s delay.
    write_slow_model(str(repo / "linear" / "1" / "model.onnx"), width=256, layers=8)
    write_config(str(repo / "linear"), "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 500000 }\n")
    # tiny_resnet as an artifact, compiled by the CLI
    os.makedirs(repo / "tiny" / "1")
    subprocess.run([CLI, "compile", os.path.join(ROOT, "models", "tiny_resnet.onnx"), "-o",
                    str(repo / "tiny" / "1" / "model.tsr")], check=True, capture_output=True)
    s = Server(str(repo))
    s.repo = repo
    yield s
    assert s.stop() == 0, "".join(s.log)


def test_health_and_metadata(server):
    assert server.json("GET", "/v2/health/live") == (200, {"live": True})
    assert server.json("GET", "/v2/health/ready") == (200, {"ready": True})
    status, meta = server.json("GET", "/v2")
    assert status == 200 and meta["name"] == "tessera"
    assert {"binary_tensor_data", "model_repository", "statistics", "model_configuration"} <= set(meta["extensions"])
    status, m = server.json("GET", "/v2/models/mlp")
    assert status == 200
    assert m["name"] == "mlp" and m["versions"] == ["1"]
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    assert m["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 3]}]
    assert server.json("GET", "/v2/models/mlp/versions/1")[1] == m
    assert server.json("GET", "/v2/models/mlp/ready") == (200, {"name": "mlp", "ready": True})
    assert server.json("GET", "/v2/models/mlp/versions/1/ready")[0] == 200
    status, config = server.json("GET", "/v2/models/mlp/config")
    assert status == 200 and config["max_batch_size"] == 8
    assert config["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": ["4"]}]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == "20000"
    status, index = server.json("POST", "/v2/repository/index", {})
    assert status == 200
    assert {(e["name"], e.get("version"), e["state"]) for e in index} == {
        (n, "1", "READY") for n in ("mlp", "dtypes", "strings", "relu", "slow", "linear", "tiny")}


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_json_infer_matches_numpy(server, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    status, out = infer_json(server, "mlp", {"x": ("FP32", x)}, request_id=f"req-{batch}")
    assert status == 200, out
    assert out["id"] == f"req-{batch}" and out["model_name"] == "mlp" and out["model_version"] == "1"
    (y,) = out["outputs"]
    assert y["name"] == "y" and y["datatype"] == "FP32" and y["shape"] == [batch, 3]
    np.testing.assert_allclose(np.array(y["data"], np.float32).reshape(batch, 3), MLP.reference(x), rtol=1e-5, atol=1e-6)


def test_json_accepts_nested_and_flat_data(server):
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    flat = server.json("POST", "/v2/models/mlp/infer", {"inputs": [
        {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": x.ravel().tolist()}]})
    nested = infer_json(server, "mlp", {"x": ("FP32", x)})
    assert flat[0] == nested[0] == 200
    assert flat[1]["outputs"] == nested[1]["outputs"]
    np.testing.assert_allclose(np.array(flat[1]["outputs"][0]["data"]).reshape(2, 3), MLP.reference(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pad", [0, 1, 3])
def test_binary_infer_matches_numpy(server, pad):
    # pad moves the binary data off 4-byte alignment in the body
    x = np.random.default_rng(pad + 10).standard_normal((5, 4)).astype(np.float32)
    body, header_len = binary_body({"x": ("FP32", x, x.shape)}, pad_json=pad)
    status, headers, data = server.request("POST", "/v2/models/mlp/infer", body, {
        "Inference-Header-Content-Length": str(header_len), "Content-Type": "application/octet-stream"})
    assert status == 200, data
    header, raw = split_binary_response(headers, data)
    assert header["outputs"][0]["parameters"]["binary_data_size"] == 5 * 3 * 4
    y = np.frombuffer(raw["y"], np.float32).reshape(header["outputs"][0]["shape"])
    np.testing.assert_allclose(y, MLP.reference(x), rtol=1e-5, atol=1e-6)


def test_binary_output_per_output_parameter(server):
    x = np.ones((1, 4), np.float32)
    status, headers, data = server.request("POST", "/v2/models/mlp/infer", json.dumps({
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 1, 1, 1]}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode())
    assert status == 200
    header, raw = split_binary_response(headers, data)
    np.testing.assert_allclose(np.frombuffer(raw["y"], np.float32).reshape(1, 3), MLP.reference(x), rtol=1e-5, atol=1e-6)


def _dtype_values(name, np_type, n=7):
    rng = np.random.default_rng(len(name))
    if name == "BOOL":
        return rng.integers(0, 2, n).astype(np.bool_)
    if name == "BF16":  # raw bfloat16 bits of float32 values
        return (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        return np.concatenate([np.array([info.min, info.max], np_type), rng.integers(info.min // 2, info.max // 2, n - 2, dtype=np_type)])
    v = rng.standard_normal(n).astype(np_type)
    v[0] = -0.0
    return v


def test_every_datatype_round_trips_binary(server):
    values = {name: _dtype_values(name, t) for name, _, t in DTYPES}
    body, header_len = binary_body({f"in_{n}": (n, v, v.shape) for n, v in values.items()})
    status, headers, data = server.request("POST", "/v2/models/dtypes/infer", body,
                                           {"Inference-Header-Content-Length": str(header_len)})
    assert status == 200, data
    header, raw = split_binary_response(headers, data)
    by_name = {o["name"]: o for o in header["outputs"]}
    for n, v in values.items():
        o = by_name[f"out_{n}"]
        assert o["datatype"] == n and o["shape"] == [7]
        assert raw[f"out_{n}"] == v.tobytes(), n  # bit for bit, -0.0 included


def test_every_datatype_round_trips_json(server):
    json_types = [(n, t) for n, _, t in DTYPES if n not in ("FP16", "BF16")]
    inputs = {f"in_{n}": (n, _dtype_values(n, t)) for n, t in json_types}
    # the 16-bit floats have no JSON form: send them as binary in the same request
    half = _dtype_values("FP16", np.float16)
    bf = _dtype_values("BF16", None)
    header = {"inputs": [{"name": k, "datatype": dt, "shape": list(a.shape), "data": a.tolist()} for k, (dt, a) in inputs.items()]
              + [{"name": "in_FP16", "datatype": "FP16", "shape": [7], "parameters": {"binary_data_size": 14}},
                 {"name": "in_BF16", "datatype": "BF16", "shape": [7], "parameters": {"binary_data_size": 14}}]}
    text = json.dumps(header).encode()
    status, headers, data = server.request("POST", "/v2/models/dtypes/infer", text + half.tobytes() + bf.tobytes(),
                                           {"Inference-Header-Content-Length": str(len(text))})
    assert status == 200, data
    out = {o["name"]: o for o in json.loads(data)["outputs"]}
    for k, (dt, a) in inputs.items():
        got = np.array(out["out_" + k[3:]]["data"], dtype=a.dtype)
        assert got.tobytes() == a.tobytes(), dt
    # FP16 / BF16 as JSON numbers: the values widened to float
    np.testing.assert_array_equal(np.array(out["out_FP16"]["data"], np.float32), half.astype(np.float32))
    np.testing.assert_array_equal(np.array(out["out_BF16"]["data"], np.float32),
                                  (bf.astype(np.uint32) << 16).view(np.float32))


def test_bytes_tensors(server):
    words = ["héllo", "", "a\u0000b", "日本語", "x" * 1000]
    status, out = server.json("POST", "/v2/models/strings/infer", {"inputs": [
        {"name": "s", "datatype": "BYTES", "shape": [5], "data": words},
        {"name": "k", "datatype": "INT64", "shape": [2], "data": [3, -2**63 + 1]}]})
    assert status == 200, out
    o = {x["name"]: x for x in out["outputs"]}
    assert o["t"]["datatype"] == "BYTES" and o["t"]["data"] == words
    assert o["negated"] == {"name": "negated", "datatype": "INT64", "shape": [2], "data": [-3, 2**63 - 1]}
    raw_words = [w.encode() for w in words] + [b"\xff\xfe not utf-8"]
    body, header_len = binary_body({"s": ("BYTES", pack_bytes(raw_words), [6]),
                                    "k": ("INT64", np.array([7], np.int64), [1])})
    status, headers, data = server.request("POST", "/v2/models/strings/infer", body,
                                           {"Inference-Header-Content-Length": str(header_len)})
    assert status == 200, data
    header, raw = split_binary_response(headers, data)
    assert bytes_elements(raw["t"]) == raw_words
    assert np.frombuffer(raw["negated"], np.int64).tolist() == [-7]


def test_artifact_outputs_equal_tessera_run(server, tmp_path):
    status, meta = server.json("GET", "/v2/models/tiny")
    assert status == 200
    (inp,) = meta["inputs"]
    x = np.random.default_rng(3).standard_normal(inp["shape"]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([CLI, "run", str(server.repo / "tiny" / "1" / "model.tsr"), "--input", f"{inp['name']}={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out")],
                   check=True, capture_output=True)
    body, header_len = binary_body({inp["name"]: ("FP32", x, x.shape)})
    status, headers, data = server.request("POST", "/v2/models/tiny/infer", body,
                                           {"Inference-Header-Content-Length": str(header_len)})
    assert status == 200, data
    header, raw = split_binary_response(headers, data)
    for o in header["outputs"]:
        expected = np.load(tmp_path / "out" / f"{o['name']}.npy")
        got = np.frombuffer(raw[o["name"]], np.float32).reshape(o["shape"])
        np.testing.assert_array_equal(got, expected)


def test_a_client_that_pauses_inside_its_request_is_served(server):
    """A request whose body comes 6 s after its headers (a client on a loaded machine: Python's http.client
    sends the two with separate calls; a slow link between a large body's pieces) is served: httplib's
    default read timeout closed the connection after 5 s, and the client then read "connection reset by
    peer" (once in the sanitized CI, one of 16 concurrent clients)."""
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, -2, 3, -4]}]})
    raw = socket.create_connection(("127.0.0.1", server.http), timeout=60)
    try:
        raw.sendall(("POST /v2/models/relu/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode())
        time.sleep(6)
        raw.sendall(body.encode())
        reply = b""
        while True:
            chunk = raw.recv(65536)
            if not chunk:
                break
            reply += chunk
    finally:
        raw.close()
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 200"), reply[:300]
    outputs = json.loads(rest.split(b"\r\n\r\n", 1)[1])["outputs"]
    assert outputs[0]["data"] == [1, 0, 3, 0]


def test_large_message(server):
    x = np.random.default_rng(5).standard_normal((64, 65536)).astype(np.float32)  # 16 MiB
    body, header_len = binary_body({"x": ("FP32", x, x.shape)})
    status, headers, data = server.request("POST", "/v2/models/relu/infer", body,
                                           {"Inference-Header-Content-Length": str(header_len)})
    assert status == 200, data[:200]
    header, raw = split_binary_response(headers, data)
    np.testing.assert_array_equal(np.frombuffer(raw["y"], np.float32).reshape(x.shape), np.maximum(x, 0))


def test_concurrent_requests_are_batched_and_each_gets_its_own_rows(server):
    before = server.metrics()
    results, errors = {}, []

    def client(k):
        try:
            for j in range(6):
                rows = 1 + (k + j) % 3
                x = (np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) + 1000 * k + 10 * j) / 997.0
                body, header_len = binary_body({"x": ("FP32", x, x.shape)}, request_id=f"{k}-{j}")
                status, headers, data = server.request("POST", "/v2/models/mlp/infer", body,
                                                       {"Inference-Header-Content-Length": str(header_len)})
                assert status == 200, data
                header, raw = split_binary_response(headers, data)
                assert header["id"] == f"{k}-{j}"
                results[(k, j)] = (x, np.frombuffer(raw["y"], np.float32).reshape(header["outputs"][0]["shape"]))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 96
    for x, y in results.values():
        np.testing.assert_allclose(y, MLP.reference(x), rtol=1e-5, atol=1e-6)
    after = server.metrics()
    labels = dict(model="mlp", version="1")
    requests = metric(after, "nv_inference_request_success", **labels) - metric(before, "nv_inference_request_success", **labels)
    count = metric(after, "nv_inference_count", **labels) - metric(before, "nv_inference_count", **labels)
    execs = metric(after, "nv_inference_exec_count", **labels) - metric(before, "nv_inference_exec_count", **labels)
    assert requests == 96
    assert count == sum(x.shape[0] for x, _ in results.values())
    assert count / execs > 1.5, (count, execs)  # batching happened
    assert metric(after, "nv_inference_pending_request_count", **labels) == 0
    status, stats = server.json("GET", "/v2/models/mlp/stats")
    (s,) = stats["model_stats"]
    assert s["inference_count"] == metric(after, "nv_inference_count", **labels)
    assert s["execution_count"] == metric(after, "nv_inference_exec_count", **labels)
    assert sum(b["compute_infer"]["count"] for b in s["batch_stats"]) == s["execution_count"]
    assert max(b["batch_size"] for b in s["batch_stats"]) > 1
    # Tessera's own counters: every execution is one model run (plus the load's runs), and a
    # model compiled once prepares per-shape state at most once per batch size seen
    runs = metric(after, "tessera_model_runs_total", **labels)
    assert s["tessera"]["load_runs"] == 9, s["tessera"]  # the warm-up, 4 + 4 measuring batching
    assert runs == metric(after, "nv_inference_exec_count", **labels) + 9, runs
    assert metric(after, "tessera_shape_cache_misses_total", **labels) <= 9
    assert metric(after, "tessera_shape_fallbacks_total", **labels) == 0
    # every run timed by region, each region named by its backend, within the runs' own time
    regions = {dict(ls)["region"]: (dict(ls)["backend"], v) for (n, ls), v in after.items()
               if n == "tessera_region_seconds_total" and dict(ls)["model"] == "mlp"}
    assert regions and all(b in ("dnnl", "native") for b, _ in regions.values()), regions
    region_us = sum(v for _, v in regions.values()) * 1e6
    runs_us = sum(b["compute_infer"]["ns"] for b in s["batch_stats"]) / 1000
    assert 0 < region_us <= runs_us + len(regions), (region_us, runs_us)


def lone_request_seconds(server, model, x):
    body, header_len = binary_body({"x": ("FP32", x, x.shape)})
    start = time.monotonic()
    status, _, data = server.request("POST", f"/v2/models/{model}/infer", body, {"Inference-Header-Content-Length": str(header_len)})
    assert status == 200, data
    return time.monotonic() - start


def test_requests_are_batched_only_where_batching_pays(server):
    # Measured at load: the MLP's batch of 8 costs little more than one request, so requests are batched
    # and a lone one waits its 20 ms max_queue_delay for others (Triton's behaviour); the linear model's
    # batch costs 8 requests, so its requests run one at a time: a lone one does not wait its 0.5 s, and
    # concurrent ones run as separate executions.
    notes = {}
    for model in ("mlp", "linear"):
        status, stats = server.json("GET", f"/v2/models/{model}/stats")
        (s,) = stats["model_stats"]
        notes[model] = s["tessera"]["batching"]
        assert f"model '{model}' version 1: {notes[model]}" in "".join(server.log), server.log
    assert notes["mlp"].startswith("requests are batched (a batch pays)"), notes
    assert notes["linear"].startswith("requests run one at a time (batching does not pay here)"), notes
    assert lone_request_seconds(server, "mlp", np.ones((1, 4), np.float32)) >= 0.02
    assert lone_request_seconds(server, "linear", np.ones((1, 256), np.float32)) < 0.25
    before = server.metrics()
    threads = [threading.Thread(target=lone_request_seconds, args=(server, "linear", np.full((1, 256), k, np.float32)))
               for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = server.metrics()
    labels = dict(model="linear", version="1")
    assert metric(after, "nv_inference_count", **labels) - metric(before, "nv_inference_count", **labels) == 6
    assert metric(after, "nv_inference_exec_count", **labels) - metric(before, "nv_inference_exec_count", **labels) == 6


def promtool():
    """Prometheus's own linter (Debian's prometheus package: on PATH, or unpacked by scripts/setup.sh)."""
    found = shutil.which("promtool") or os.path.join(ROOT, "tests", "serve", ".deps", "usr", "bin", "promtool")
    assert os.access(found, os.X_OK), "promtool is missing: scripts/setup.sh unpacks it from Debian's prometheus"
    return found


def test_metrics_pass_promtool(server):
    """`promtool check metrics` (a parser and linter we did not write) reads /metrics after traffic that
    fills every family, a failure included: it parses (exit 1 would be a syntax error), and its only
    findings are the naming lints of Triton's own metric names (`nv_...` without `_total`, in
    microseconds), which dashboards written for Triton need as they are; Tessera's own families and
    the process's draw none."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert infer_json(server, "mlp", {"x": ("FP32", x)})[0] == 200
    assert infer_json(server, "mlp", {"x": ("FP32", x[:, :3])})[0] == 400
    status, _, data = server.request("GET", "/metrics", port=server.metrics_port)
    assert status == 200
    tool = promtool()
    r = subprocess.run([tool, "check", "metrics"], input=data, capture_output=True, timeout=60)
    findings = [line for line in (r.stdout + r.stderr).decode().splitlines() if line.strip()]
    assert r.returncode in (0, 3), findings  # 3: lint findings only
    assert findings, "Triton's names draw promtool's naming lints: none found, so promtool read nothing"
    for line in findings:
        assert line.split()[0].startswith("nv_inference_"), line
    for family in ("tessera_model_runs_total", "tessera_region_seconds_total", "process_resident_memory_bytes"):
        assert family.encode() in data, family
    # The check can fail: the same text with one label value left unclosed is a syntax error.
    broken = data.replace(b'version="1"}', b'version="1}', 1)
    assert broken != data
    r = subprocess.run([tool, "check", "metrics"], input=broken, capture_output=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)


BAD_REQUESTS = [
    ("not json", b"{inputs: nope", "not valid JSON"),
    ("not an object", b"[1, 2]", "JSON object"),
    ("no inputs", b'{"id": "x"}', "'inputs'"),
    ("unknown datatype", b'{"inputs":[{"name":"x","datatype":"FP33","shape":[1,4],"data":[1,2,3,4]}]}', "FP33"),
    ("wrong datatype", b'{"inputs":[{"name":"x","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]}]}', "INT32"),
    ("wrong element count", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3]}]}', "3 elements"),
    ("wrong inner dim", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,5],"data":[1,2,3,4,5]}]}', "[1,5]"),
    ("batch too large", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[9,4],"data":' +
     json.dumps([0] * 36).encode() + b'}]}', "max_batch_size"),
    ("negative dim", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[-1,4],"data":[1,2,3,4]}]}', "shape"),
    ("huge shape", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[4294967296,4294967296],"data":[]}]}', "too large"),
    ("string for a number", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,"2",3,4]}]}', "element 1"),
    ("unknown input", b'{"inputs":[{"name":"z","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}', "'z'"),
    ("missing input", b'{"inputs":[]}', "'x' is missing"),
    ("input twice", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},'
     b'{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}', "twice"),
    ("unknown output", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],'
     b'"outputs":[{"name":"nope"}]}', "'nope'"),
    ("invalid utf-8", b'{"id":"\xff\xfe","inputs":[]}', "JSON"),
    ("deep nesting", b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":' + b"[" * 100 + b"1" + b"]" * 100 + b'}]}',
     "nested"),
]


@pytest.mark.parametrize("name,body,fragment", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_bad_json_requests_are_400_naming_the_problem(server, name, body, fragment):
    status, headers, data = server.request("POST", "/v2/models/mlp/infer", body)
    assert status == 400, (status, data)
    error = json.loads(data)["error"]
    assert fragment in error, error


def test_bad_binary_requests(server):
    x = np.zeros((1, 4), np.float32)
    body, n = binary_body({"x": ("FP32", x, x.shape)})
    cases = [
        (body, {"Inference-Header-Content-Length": str(len(body) + 1)}, 400, "Inference-Header-Content-Length"),
        (body, {"Inference-Header-Content-Length": "12abc"}, 400, "not a number"),
        (body[:-1], {"Inference-Header-Content-Length": str(n)}, 400, "past the body's end"),
        (body + b"xx", {"Inference-Header-Content-Length": str(n)}, 400, "after the JSON header"),
        (body, {}, 400, "Inference-Header-Content-Length"),  # binary data without the header
    ]
    wrong_size, n2 = binary_body({"x": ("FP32", b"\0" * 12, [1, 4])})
    cases.append((wrong_size, {"Inference-Header-Content-Length": str(n2)}, 400, "needs 16"))
    cut, n3 = binary_body({"s": ("BYTES", b"\x05\0\0\0abc", [1])})
    for body_, headers, want_status, fragment in cases:
        status, _, data = server.request("POST", "/v2/models/mlp/infer", body_, headers)
        assert status == want_status, (fragment, status, data)
        assert fragment in json.loads(data)["error"], data
    status, _, data = server.request("POST", "/v2/models/strings/infer", cut, {"Inference-Header-Content-Length": str(n3)})
    assert status == 400 and "BYTES" in json.loads(data)["error"], data
    status, _, data = server.request("POST", "/v2/models/dtypes/infer", json.dumps({"inputs": [
        {"name": "in_FP16", "datatype": "FP16", "shape": [1], "data": [1.0]}]}).encode())
    assert status == 400 and "no JSON form" in json.loads(data)["error"]


def test_not_found_and_bad_paths(server):
    for path in ["/v2/models/nope", "/v2/models/nope/ready", "/v2/models/mlp/versions/7", "/v2/models/mlp/versions/x/ready",
                 "/v2/models/" + urllib.parse.quote("mlp\0") + "/config", "/v2/models/" + urllib.parse.quote("../mlp")]:
        status, body = server.json("GET", path)
        assert status == 404, (path, status, body)
        assert "error" in body
    status, _, data = server.request("POST", "/v2/models/nope/infer", b"{}")
    assert status == 404 and "nope" in json.loads(data)["error"]
    status, _, data = server.request("GET", "/v3/whatever")
    assert status == 404 and "error" in json.loads(data)
    status, body = server.json("POST", "/v2/repository/models/mlp/unload", {})
    assert status == 503 and "explicit" in body["error"]  # control mode none


def test_failures_are_counted_by_reason(server):
    before = server.metrics()
    server.request("POST", "/v2/models/mlp/infer", b"{bad")
    after = server.metrics()
    labels = dict(model="mlp", version="1", reason="OTHER")
    assert metric(after, "nv_inference_request_failure", **labels) == metric(before, "nv_inference_request_failure", **labels) + 1
    assert metric(after, "process_resident_memory_bytes") > 0


def test_still_serving_after_hostile_requests(server):
    x = np.ones((2, 4), np.float32)
    status, out = infer_json(server, "mlp", {"x": ("FP32", x)})
    assert status == 200
    np.testing.assert_allclose(np.array(out["outputs"][0]["data"]).reshape(2, 3), MLP.reference(x), rtol=1e-5, atol=1e-6)


def test_ten_thousand_requests_from_autocannon_keep_memory_flat(server, tmp_path):
    """Load from autocannon (npm; HTTP/1.1 keep-alive, 8 connections): 10k requests all answered 200,
    the counters agree, nothing stays queued, and resident memory does not grow after the first 2k."""
    node_modules = os.environ.get("TESSERA_NODE_MODULES", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                       "node_modules"))
    cannon = os.path.join(node_modules, "autocannon", "autocannon.js")
    assert os.path.exists(cannon), "npm clients missing: run scripts/setup.sh"
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]})

    def blast(n):
        r = subprocess.run(["node", cannon, "-a", str(n), "-c", "8", "-m", "POST", "-H", "content-type=application/json",
                            "-b", body, "-j", f"http://127.0.0.1:{server.http}/v2/models/mlp/infer"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["errors"] == 0 and out["timeouts"] == 0 and out["non2xx"] == 0, out
        assert out["2xx"] == n, out
        return out

    labels = dict(model="mlp", version="1")
    blast(2000)
    warm = server.metrics()
    blast(10000)
    after = server.metrics()
    assert metric(after, "nv_inference_request_success", **labels) - metric(warm, "nv_inference_request_success", **labels) == 10000
    assert metric(after, "nv_inference_count", **labels) - metric(warm, "nv_inference_count", **labels) == 20000
    assert metric(after, "nv_inference_pending_request_count", **labels) == 0
    grown = metric(after, "process_resident_memory_bytes") - metric(warm, "process_resident_memory_bytes")
    # Under AddressSanitizer (scripts/sanitize.sh) freed memory waits in its quarantine (256 MiB by default)
    # before reuse, and the quarantined chunks keep their shadow (1/8) and redzones resident: resident memory
    # grows by up to ~1.25x the quarantine by design (measured: 288-290 MiB).
    with open(SERVE, "rb") as f:
        quarantine = 320 * 2**20 if b"__asan_init" in f.read() else 0
    assert grown < 8 * 2**20 + quarantine, f"resident memory grew {grown / 2**20:.1f} MiB over 10k requests"
    # the answers are still right
    x = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    status, out = infer_json(server, "mlp", {"x": ("FP32", x)})
    np.testing.assert_allclose(np.array(out["outputs"][0]["data"]).reshape(2, 3), MLP.reference(x), rtol=1e-5, atol=1e-6)


def test_a_client_that_hangs_up_leaves_the_queue(server):
    # "run" takes the slow model's one instance (over 150 ms). At 50 ms, when it has surely left the queue,
    # a client on a raw socket sends a whole request, which waits behind it, and hangs up at 80 ms. The
    # server sees the closed connection and takes that request out of the queue: counted as cancelled,
    # never run. Then a client that stays gets its answer as usual.
    x = np.full((1, 1024), 0.01, np.float32)
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1024], "data": x.ravel().tolist()}]})
    labels = dict(model="slow", version="1")
    before = server.metrics()
    done = {}

    def run():
        start = time.monotonic()
        done["status"] = server.request("POST", "/v2/models/slow/infer", body, {"Content-Type": "application/json"})[0]
        done["ms"] = (time.monotonic() - start) * 1000
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.05)
    raw = socket.create_connection(("127.0.0.1", server.http))
    raw.sendall(("POST /v2/models/slow/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    time.sleep(0.03)
    raw.close()
    t.join()
    assert done["status"] == 200
    assert done["ms"] > 150, "the slow model ran too fast for this timeline: " + str(done["ms"])
    deadline = time.monotonic() + 30
    while metric(server.metrics(), "nv_inference_pending_request_count", **labels) and time.monotonic() < deadline:
        time.sleep(0.05)
    after = server.metrics()

    def delta(name, **extra):
        return metric(after, name, **labels, **extra) - metric(before, name, **labels, **extra)
    assert delta("nv_inference_request_failure", reason="CANCELED") == 1
    assert delta("nv_inference_request_success") == 1
    assert delta("nv_inference_exec_count") == 1  # the hung-up request never ran
    status, _, data = server.request("POST", "/v2/models/slow/infer", body, {"Content-Type": "application/json"})
    assert status == 200, data
    assert np.asarray(json.loads(data)["outputs"][0]["shape"]).tolist() == [256, 1024]
