"""tessera serve over gRPC with a client Tessera did not write: @grpc/grpc-js + @grpc/proto-loader (pure
JavaScript, loading our .proto), driven by grpc_client.js. Every RPC, typed and raw tensor contents
against numpy, NOT_FOUND / INVALID_ARGUMENT / UNAVAILABLE / DEADLINE_EXCEEDED where due, a message over
gRPC's 4 MiB default, cancelled and timed-out calls leaving the queue, the standard health service, and
the wire bytes of the messages (field numbers) pinned by a protobuf encoder written here."""

import base64
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import (DTYPES, HERE, Mlp, Server, metric, pack_bytes, write_config, write_dtypes_model,  # noqa: E402
                           write_relu_model, write_slow_model, write_strings_model)

MLP = Mlp()
NODE_MODULES = os.environ.get("TESSERA_NODE_MODULES", os.path.join(HERE, "node_modules"))


def b64(data):
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    assert os.path.isdir(os.path.join(NODE_MODULES, "@grpc", "grpc-js")), \
        "npm clients missing: run scripts/setup.sh (npm ci --ignore-scripts in tests/serve)"
    repo = tmp_path_factory.mktemp("grpc_repo")
    MLP.write(str(repo / "mlp" / "1" / "model.onnx"))
    write_config(str(repo / "mlp"), "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1000 }\n")
    write_dtypes_model(str(repo / "dtypes" / "1" / "model.onnx"))
    write_strings_model(str(repo / "strings" / "1" / "model.onnx"))
    write_relu_model(str(repo / "relu" / "1" / "model.onnx"))
    write_slow_model(str(repo / "slow" / "1" / "model.onnx"))
    write_config(str(repo / "slow"), """
max_batch_size: 0
instance_group [ { count: 1 } ]
dynamic_batching { default_queue_policy { max_queue_size: 3 } }
""")
    s = Server(str(repo))
    s.tmp = tmp_path_factory.mktemp("grpc_steps")
    yield s
    assert s.stop() == 0, "".join(s.log)


def run_steps(server, steps):
    steps_path, results_path = server.tmp / "steps.json", server.tmp / "results.json"
    steps_path.write_text(json.dumps(steps))
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    r = subprocess.run(["node", os.path.join(HERE, "grpc_client.js"), f"127.0.0.1:{server.grpc}", str(steps_path),
                        str(results_path)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(results_path.read_text())


def test_server_and_model_rpcs(server):
    r = run_steps(server, [
        {"rpc": "ServerLive"}, {"rpc": "ServerReady"},
        {"rpc": "ModelReady", "request": {"name": "mlp"}},
        {"rpc": "ModelReady", "request": {"name": "mlp", "version": "1"}},
        {"rpc": "ModelReady", "request": {"name": "nope"}},
        {"rpc": "ServerMetadata"},
        {"rpc": "ModelMetadata", "request": {"name": "mlp"}},
        {"rpc": "ModelMetadata", "request": {"name": "mlp", "version": "9"}},
        {"rpc": "ModelConfig", "request": {"name": "mlp"}},
        {"rpc": "RepositoryIndex", "request": {}},
        {"rpc": "RepositoryModelUnload", "request": {"model_name": "mlp"}},
        {"rpc": "Check", "service": "health", "request": {"service": ""}},
    ])
    assert r[0] == {"ok": True, "response": {"live": True}, "ms": r[0]["ms"]}
    assert r[1]["response"] == {"ready": True}
    assert r[2]["response"] == {"ready": True} and r[3]["response"] == {"ready": True}
    assert r[4]["code"] == "NOT_FOUND" and "nope" in r[4]["details"]
    assert r[5]["response"]["name"] == "tessera" and "binary_tensor_data" in r[5]["response"]["extensions"]
    meta = r[6]["response"]
    assert meta["name"] == "mlp" and meta["versions"] == ["1"]
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["-1", "4"]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": ["-1", "3"]}]
    assert r[7]["code"] == "NOT_FOUND"
    config = r[8]["response"]["config"]
    assert config["name"] == "mlp" and config["max_batch_size"] == 8
    assert config["input"][0]["data_type"] == "TYPE_FP32" and config["input"][0]["dims"] == ["4"]
    assert {(m["name"], m["state"]) for m in r[9]["response"]["models"]} == {
        (n, "READY") for n in ("mlp", "dtypes", "strings", "relu", "slow")}
    assert r[10]["code"] == "UNAVAILABLE" and "explicit" in r[10]["details"]
    assert r[11]["response"] == {"status": "SERVING"}


def test_infer_typed_and_raw_match_numpy(server):
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    typed = {"model_name": "mlp", "id": "typed-1",
             "inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4], "contents": {"fp32_contents": x.ravel().tolist()}}]}
    raw = {"model_name": "mlp", "model_version": "1", "id": "raw-1",
           "inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4]}], "raw_input_contents": [b64(x.tobytes())],
           "outputs": [{"name": "y"}]}
    r = run_steps(server, [{"rpc": "ModelInfer", "request": typed}, {"rpc": "ModelInfer", "request": raw},
                           {"rpc": "ModelStatistics", "request": {"name": "mlp"}}])
    t = r[0]["response"]
    assert t["id"] == "typed-1" and t["model_name"] == "mlp" and t["model_version"] == "1"
    (o,) = t["outputs"]
    assert o["name"] == "y" and o["datatype"] == "FP32" and o["shape"] == ["3", "3"] and t["raw_output_contents"] == []
    np.testing.assert_allclose(np.array(o["contents"]["fp32_contents"], np.float32).reshape(3, 3), MLP.reference(x),
                               rtol=1e-5, atol=1e-6)
    w = r[1]["response"]
    assert w["id"] == "raw-1" and not (w["outputs"][0]["contents"] or {}).get("fp32_contents")
    np.testing.assert_allclose(np.frombuffer(unb64(w["raw_output_contents"][0]), np.float32).reshape(3, 3),
                               MLP.reference(x), rtol=1e-5, atol=1e-6)
    (stats,) = r[2]["response"]["model_stats"]
    assert stats["name"] == "mlp" and int(stats["inference_count"]) >= 6
    assert int(stats["inference_stats"]["success"]["count"]) >= 2


TYPED_FIELD = {"BOOL": "bool_contents", "UINT8": "uint_contents", "INT8": "int_contents", "UINT16": "uint_contents",
               "INT16": "int_contents", "UINT32": "uint_contents", "INT32": "int_contents", "UINT64": "uint64_contents",
               "INT64": "int64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


def test_every_datatype_typed_and_raw(server):
    rng = np.random.default_rng(11)
    values = {}
    for name, _, t in DTYPES:
        if name == "BOOL":
            values[name] = np.array([True, False, True], np.bool_)
        elif name == "BF16":
            values[name] = np.array([0x3F80, 0xC000, 0x7F80], np.uint16)  # 1, -2, +inf
        elif np.issubdtype(t, np.integer):
            info = np.iinfo(t)
            values[name] = np.array([info.min, info.max, 1], t)
        else:
            values[name] = rng.standard_normal(3).astype(t)
    typed_inputs, raw_inputs, raw_contents = [], [], []
    for name, v in values.items():
        raw_inputs.append({"name": f"in_{name}", "datatype": name, "shape": [3]})
        raw_contents.append(b64(v.tobytes()))
        if name in TYPED_FIELD:
            data = [str(x) for x in v.tolist()] if name in ("INT64", "UINT64") else v.tolist()
            typed_inputs.append({"name": f"in_{name}", "datatype": name, "shape": [3], "contents": {TYPED_FIELD[name]: data}})
    typed_only = [n for n in values if n in TYPED_FIELD]
    r = run_steps(server, [
        {"rpc": "ModelInfer", "request": {"model_name": "dtypes", "inputs": raw_inputs, "raw_input_contents": raw_contents}},
        {"rpc": "ModelInfer", "request": {"model_name": "dtypes", "inputs": typed_inputs,
                                          "outputs": [{"name": f"out_{n}"} for n in typed_only]}},
    ])
    assert r[0]["ok"], r[0]
    assert r[1]["ok"] is False and r[1]["code"] == "INVALID_ARGUMENT" and "in_FP16" in r[1]["details"]  # inputs missing
    outputs = r[0]["response"]["outputs"]
    raw = r[0]["response"]["raw_output_contents"]
    assert len(raw) == len(outputs) == len(values)
    for o, data in zip(outputs, raw):
        assert unb64(data) == values[o["name"][4:]].tobytes(), o["name"]
    # typed, for a model whose inputs all have typed forms: only those outputs' inputs, via a sliced model
    typed_model = [i for i in typed_inputs]
    r = run_steps(server, [{"rpc": "ModelInfer", "request": {
        "model_name": "dtypes", "inputs": typed_model + [
            {"name": "in_FP16", "datatype": "FP16", "shape": [0], "contents": {}},
            {"name": "in_BF16", "datatype": "BF16", "shape": [0], "contents": {}}]}}])
    # 16-bit floats have no typed form, but empty ones have nothing to send: accepted
    assert r[0]["ok"], r[0]
    resp = r[0]["response"]
    assert resp["raw_output_contents"], "an FP16 output makes every output raw"
    by_name = {o["name"]: unb64(d) for o, d in zip(resp["outputs"], resp["raw_output_contents"])}
    for name in typed_only:
        assert by_name[f"out_{name}"] == values[name].tobytes(), name


def test_bytes_typed_and_raw(server):
    words = [b"alpha", b"", b"\x00\xff", "日本".encode()]
    typed = {"model_name": "strings", "inputs": [
        {"name": "s", "datatype": "BYTES", "shape": [4], "contents": {"bytes_contents": [b64(w) for w in words]}},
        {"name": "k", "datatype": "INT64", "shape": [1], "contents": {"int64_contents": ["5"]}}]}
    raw = {"model_name": "strings", "inputs": [{"name": "s", "datatype": "BYTES", "shape": [4]},
                                               {"name": "k", "datatype": "INT64", "shape": [1]}],
           "raw_input_contents": [b64(pack_bytes(words)), b64(np.array([5], np.int64).tobytes())]}
    r = run_steps(server, [{"rpc": "ModelInfer", "request": typed}, {"rpc": "ModelInfer", "request": raw}])
    out = {o["name"]: o for o in r[0]["response"]["outputs"]}
    assert [unb64(w) for w in out["t"]["contents"]["bytes_contents"]] == words
    assert out["negated"]["contents"]["int64_contents"] == ["-5"]
    resp = r[1]["response"]
    by_name = {o["name"]: unb64(d) for o, d in zip(resp["outputs"], resp["raw_output_contents"])}
    assert by_name["t"] == pack_bytes(words)
    assert np.frombuffer(by_name["negated"], np.int64).tolist() == [-5]


def test_bad_requests(server):
    x = np.zeros((1, 4), np.float32)
    good_input = {"name": "x", "datatype": "FP32", "shape": [1, 4]}
    r = run_steps(server, [
        {"rpc": "ModelInfer", "request": {"model_name": "nope", "inputs": []}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [dict(good_input, datatype="INT32")],
                                          "raw_input_contents": [b64(x.tobytes())]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [good_input], "raw_input_contents": []}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [good_input],
                                          "raw_input_contents": [b64(x.tobytes()), b64(b"")]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [good_input], "raw_input_contents": [b64(b"abc")]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [dict(good_input, contents={"fp32_contents": [1, 2]})]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [dict(good_input, contents={"fp64_contents": [1, 2, 3, 4]})]}},
        {"rpc": "ModelInfer", "request": {"model_name": "dtypes", "inputs": [
            {"name": "in_INT8", "datatype": "INT8", "shape": [1], "contents": {"int_contents": [300]}}]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [dict(good_input, shape=[1, -4])],
                                          "raw_input_contents": [b64(x.tobytes())]}},
        {"rpc": "ModelInfer", "request": {"model_name": "mlp", "inputs": [dict(good_input, contents={"fp32_contents": [0] * 4})],
                                          "raw_input_contents": [b64(x.tobytes())]}},
    ])
    codes = [(s.get("code"), s.get("details", "")) for s in r]
    assert codes[0][0] == "NOT_FOUND" and "nope" in codes[0][1]
    assert codes[1][0] == "INVALID_ARGUMENT" and "INT32" in codes[1][1]
    assert codes[2][0] == "INVALID_ARGUMENT" and "'x' is missing" in codes[2][1] or "fp32_contents" in codes[2][1]
    assert codes[3][0] == "INVALID_ARGUMENT" and "one per input" in codes[3][1]
    assert codes[4][0] == "INVALID_ARGUMENT" and "needs 16" in codes[4][1]
    assert codes[5][0] == "INVALID_ARGUMENT" and "fp32_contents has 2" in codes[5][1]
    assert codes[6][0] == "INVALID_ARGUMENT" and "fp32_contents" in codes[6][1]
    assert codes[7][0] == "INVALID_ARGUMENT" and "out of range" in codes[7][1]
    assert codes[8][0] == "INVALID_ARGUMENT" and "0 or more" in codes[8][1]
    assert codes[9][0] == "INVALID_ARGUMENT" and "both" in codes[9][1]


def test_message_over_four_mib(server):
    x = np.random.default_rng(2).standard_normal((4, 400000)).astype(np.float32)  # 6.4 MB each way
    r = run_steps(server, [{"rpc": "ModelInfer", "request": {
        "model_name": "relu", "inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape)}],
        "raw_input_contents": [b64(x.tobytes())]}}])
    assert r[0]["ok"], r[0]
    np.testing.assert_array_equal(np.frombuffer(unb64(r[0]["response"]["raw_output_contents"][0]), np.float32).reshape(x.shape),
                                  np.maximum(x, 0))


def slow_request(tag, **extra):
    x = np.full((1, 1024), 0.01, np.float32)
    return dict({"rpc": "ModelInfer", "request": {"model_name": "slow", "id": tag, "inputs": [
        {"name": "x", "datatype": "FP32", "shape": [1, 1024]}], "raw_input_contents": [b64(x.tobytes())]}}, **extra)


def test_cancel_deadline_timeout_and_full_queue(server):
    before = server.metrics()
    # "run" runs (over 150 ms: 26 GFLOP); at 50 ms, once it has surely left the queue (at 15 ms an ASan
    # build had not always dequeued it, and the third of these was turned away), three more wait,
    # filling the queue (max_queue_size 3), one of them cancelled by the client at 95 ms. Meanwhile
    # "full" comes at 80 ms and is turned away; "deadline" comes at 200 ms (the cancelled call's place,
    # free once the server has seen the cancellation: a loaded machine took over 35 ms to) with a 30 ms
    # deadline; "timeout" at 260 ms with a 20 ms `timeout` parameter. Each of these two waits behind
    # "wait-2", which cannot start before 300 ms. The channel is connected first (ServerLive), so that
    # the delays count from a ready connection.
    timeout_req = slow_request("timeout", delay_ms=260)
    timeout_req["request"]["parameters"] = {"timeout": {"int64_param": "20000"}}
    steps = [slow_request("run"), slow_request("wait-1", delay_ms=50), slow_request("wait-2", delay_ms=50),
             slow_request("cancelled", delay_ms=50, cancel_after_ms=45), slow_request("full", delay_ms=80),
             slow_request("deadline", delay_ms=200, deadline_ms=30), timeout_req]
    r = run_steps(server, [{"rpc": "ServerLive"}, {"parallel": steps}])[1]
    by_id = {s["request"]["id"]: res for s, res in zip(steps, r)}
    for ok in ("run", "wait-1", "wait-2"):
        assert by_id[ok]["ok"], by_id[ok]
    assert by_id["cancelled"]["code"] == "CANCELLED", by_id["cancelled"]
    assert by_id["full"]["code"] == "UNAVAILABLE" and "maximum queue size" in by_id["full"]["details"], by_id["full"]
    assert by_id["full"]["ms"] < 100, "a full queue must answer at once"
    assert by_id["deadline"]["code"] == "DEADLINE_EXCEEDED", by_id["deadline"]
    assert by_id["timeout"]["code"] == "DEADLINE_EXCEEDED" and "timeout" in by_id["timeout"]["details"], by_id["timeout"]
    assert by_id["run"]["ms"] > 150, "the slow model ran too fast for this timeline: " + str(by_id["run"]["ms"])
    after = server.metrics()
    labels = dict(model="slow", version="1")

    def delta(reason):
        return metric(after, "nv_inference_request_failure", reason=reason, **labels) - \
            metric(before, "nv_inference_request_failure", reason=reason, **labels)
    assert delta("CANCELED") == 2, r  # the cancelled call and the one past its deadline left the queue
    assert delta("REJECTED") == 2, r  # the full queue's and the `timeout` one
    assert metric(after, "nv_inference_request_success", **labels) - metric(before, "nv_inference_request_success", **labels) == 3
    assert metric(after, "nv_inference_pending_request_count", **labels) == 0


# --- the wire: a protobuf encoder written here pins every field number the protocol fixes ---

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(number, payload):  # length-delimited
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def test_wire_field_numbers():
    # ModelInferRequest: model_name=1, model_version=2, id=3, parameters=4, inputs=5, outputs=6, raw_input_contents=7;
    # InferInputTensor: name=1, datatype=2, shape=3 (packed), parameters=4, contents=5; contents.fp32_contents=6 (packed);
    # InferParameter.int64_param=2; InferRequestedOutputTensor: name=1.
    contents = field(6, struct.pack("<f", 1.5))
    tensor = field(1, b"x") + field(2, b"FP32") + field(3, varint(2) + varint(4)) + field(5, contents)
    param = field(1, b"timeout") + field(2, field_varint(2, 7))
    expected = (field(1, b"m") + field(2, b"2") + field(3, b"i") + field(4, param) + field(5, tensor) +
                field(6, field(1, b"y")) + field(7, b"\x01\x02"))
    steps = [{"encode": "ModelInferRequest", "request": {
        "model_name": "m", "model_version": "2", "id": "i", "parameters": {"timeout": {"int64_param": "7"}},
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "contents": {"fp32_contents": [1.5]}}],
        "outputs": [{"name": "y"}], "raw_input_contents": [b64(b"\x01\x02")]}},
        # ModelInferResponse: model_name=1, model_version=2, id=3, outputs=5, raw_output_contents=6
        {"encode": "ModelInferResponse", "request": {
            "model_name": "m", "model_version": "2", "id": "i",
            "outputs": [{"name": "y", "datatype": "INT64", "shape": [1], "contents": {"int64_contents": ["-1"]}}],
            "raw_output_contents": [b64(b"\x05")]}},
        # ModelMetadataResponse: name=1, versions=2, platform=3, inputs=4, outputs=5
        {"encode": "ModelMetadataResponse", "request": {"name": "m", "versions": ["1"], "platform": "p",
                                                        "inputs": [{"name": "a", "datatype": "FP32", "shape": [-1]}],
                                                        "outputs": [{"name": "b"}]}},
        {"encode": "RepositoryIndexResponse", "request": {"models": [{"name": "m", "version": "1", "state": "READY",
                                                                      "reason": "r"}]}},
    ]
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tessera_wire_{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "steps.json"), "w") as f:
        json.dump(steps, f)
    r = subprocess.run(["node", os.path.join(HERE, "grpc_client.js"), "127.0.0.1:1", os.path.join(tmp, "steps.json"),
                        os.path.join(tmp, "results.json")], env=dict(os.environ, NODE_PATH=NODE_MODULES),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(tmp, "results.json")) as f:
        got = [bytes.fromhex(x["hex"]) for x in json.load(f)]
    assert got[0] == expected
    out_tensor = field(1, b"y") + field(2, b"INT64") + field(3, varint(1)) + field(5, field(3, varint(2**64 - 1)))
    assert got[1] == field(1, b"m") + field(2, b"2") + field(3, b"i") + field(5, out_tensor) + field(6, b"\x05")
    meta_in = field(1, b"a") + field(2, b"FP32") + field(3, varint(2**64 - 1))
    assert got[2] == field(1, b"m") + field(2, b"1") + field(3, b"p") + field(4, meta_in) + field(5, field(1, b"b"))
    assert got[3] == field(1, field(1, b"m") + field(2, b"1") + field(3, b"READY") + field(4, b"r"))
