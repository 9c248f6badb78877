"""Shared pieces of the `tessera serve` tests: model repositories built from ONNX graphs written here
(each with a numpy reference), a server process on free loopback ports, and an HTTP client that is not
Tessera's (Python's http.client). Environment: TESSERA_SERVE (the tessera-serve binary), TESSERA_CLI."""

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SERVE = os.environ.get("TESSERA_SERVE", "build/tessera-serve")
CLI = os.environ.get("TESSERA_CLI", "build/tessera")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def save(model_graph, path, opset=17):
    model = helper.make_model(model_graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def write_config(model_dir, text):
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(text)


class Mlp:
    """y = relu(x @ W + b), x [batch, 4] float32, batch open."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.W = rng.standard_normal((4, 3)).astype(np.float32)
        self.b = rng.standard_normal(3).astype(np.float32)

    def write(self, path):
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])],
            "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
            [numpy_helper.from_array(self.W, "W"), numpy_helper.from_array(self.b, "b")])
        save(g, path)

    def reference(self, x):
        # float64 then rounded: independent of the order Tessera sums in
        return np.maximum(x.astype(np.float64) @ self.W.astype(np.float64) + self.b, 0).astype(np.float32)


# Every protocol datatype an Identity model round-trips (ONNX element types).
DTYPES = [("BOOL", TensorProto.BOOL, np.bool_), ("UINT8", TensorProto.UINT8, np.uint8),
          ("INT8", TensorProto.INT8, np.int8), ("UINT16", TensorProto.UINT16, np.uint16),
          ("INT16", TensorProto.INT16, np.int16), ("UINT32", TensorProto.UINT32, np.uint32),
          ("INT32", TensorProto.INT32, np.int32), ("UINT64", TensorProto.UINT64, np.uint64),
          ("INT64", TensorProto.INT64, np.int64), ("FP16", TensorProto.FLOAT16, np.float16),
          ("FP32", TensorProto.FLOAT, np.float32), ("FP64", TensorProto.DOUBLE, np.float64),
          ("BF16", TensorProto.BFLOAT16, None)]


def write_dtypes_model(path, dtypes=DTYPES):
    """in_T [n] -> Identity -> out_T [n] for every datatype (n open)."""
    nodes, inputs, outputs = [], [], []
    for name, onnx_type, _ in dtypes:
        nodes.append(helper.make_node("Identity", [f"in_{name}"], [f"out_{name}"]))
        inputs.append(helper.make_tensor_value_info(f"in_{name}", onnx_type, [f"n_{name}"]))
        outputs.append(helper.make_tensor_value_info(f"out_{name}", onnx_type, [f"n_{name}"]))
    save(helper.make_graph(nodes, "dtypes", inputs, outputs), path)


def write_strings_model(path):
    """s [n] string -> Identity -> t, beside k [m] int64 -> Neg -> negated."""
    g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"]), helper.make_node("Neg", ["k"], ["negated"])],
                          "strings", [helper.make_tensor_value_info("s", TensorProto.STRING, ["n"]),
                                      helper.make_tensor_value_info("k", TensorProto.INT64, ["m"])],
                          [helper.make_tensor_value_info("t", TensorProto.STRING, ["n"]),
                           helper.make_tensor_value_info("negated", TensorProto.INT64, ["m"])])
    save(g, path)


def write_slow_model(path, width=1024, layers=48):
    """x [batch, width] -> Tile to 256 x batch rows -> (MatMul W, Tanh) x layers -> y [256 x batch, width]:
    hundreds of milliseconds a run from a small request, for queue tests."""
    rng = np.random.default_rng(1)
    W = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    nodes, prev = [helper.make_node("Tile", ["x", "repeats"], ["tiled"])], "tiled"
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [prev, "W"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    g = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array([256, 1], np.int64), "repeats")])
    save(g, path)


def write_relu_model(path):
    """x [rows, cols] -> Relu -> y (both open): for large messages."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", "cols"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", "cols"])])
    save(g, path)


class Server:
    """tessera-serve on free loopback ports; `start` waits for the ports line and (optionally) readiness."""

    def __init__(self, repositories, *extra, wait_ready=True, env=None):
        args = [SERVE, "--http-address", "127.0.0.1", "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
        for r in repositories if isinstance(repositories, list) else [repositories]:
            args += ["--model-repository", r]
        args += list(extra)
        self.log = []
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        self._ports = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self._ports.wait(60), "no 'listening' line: " + "".join(self.log)
        if wait_ready:
            self.wait_ready()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening:(.*)", line)
            if m:
                ports = dict(p.split("=") for p in m.group(1).split())
                self.http, self.grpc, self.metrics_port = (int(ports.get(k, 0)) for k in ("http", "grpc", "metrics"))
                self._ports.set()

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, "server exited: " + "".join(self.log)
            if self.request("GET", "/v2/health/ready")[0] == 200:
                return
            if any("not ready" in line for line in self.log):
                break
            time.sleep(0.05)
        raise AssertionError("server not ready: " + "".join(self.log))

    def request(self, method, path, body=None, headers=None, port=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", port or self.http, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def json(self, method, path, body=None):
        status, _, data = self.request(method, path, None if body is None else json.dumps(body).encode())
        return status, json.loads(data) if data else None

    def metrics(self):
        status, _, data = self.request("GET", "/metrics", port=self.metrics_port)
        assert status == 200
        return parse_metrics(data.decode())

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text exposition -> {(name, frozenset(labels)): value}; checks each line's syntax and
    that every sample's family has HELP and TYPE lines."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            assert len(parts) == 4, line
            if parts[1] == "TYPE":
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
                typed.add(parts[2])
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), m.group(3) or "", float(m.group(4))
        assert name in typed, f"{name} has no TYPE line"
        pairs = _LABEL.findall(labels)
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == labels, f"bad labels: {labels!r}"
        samples[(name, frozenset(pairs))] = value
    return samples


def metric(samples, name, **labels):
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]
    assert found, f"no sample {name} {labels}"
    return sum(found)


def infer_json(server, model, inputs, outputs=None, version=None, params=None, request_id=None):
    """inputs: {name: (datatype, np.ndarray)} -> (status, body dict)."""
    body = {"inputs": [{"name": n, "datatype": dt, "shape": list(a.shape), "data": a.tolist()}
                       for n, (dt, a) in inputs.items()]}
    if outputs is not None:
        body["outputs"] = [{"name": o} for o in outputs]
    if params:
        body["parameters"] = params
    if request_id is not None:
        body["id"] = request_id
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    return server.json("POST", path, body)


def binary_body(inputs, binary_outputs=True, request_id=None, pad_json=0):
    """The binary tensor extension: JSON header then raw bytes. inputs: {name: (datatype, array or
    raw bytes, shape)}. pad_json adds spaces to the header (moving where binary data starts)."""
    header = {"inputs": [], "parameters": {"binary_data_output": binary_outputs}}
    if request_id is not None:
        header["id"] = request_id
    blobs = []
    for name, (dt, data, shape) in inputs.items():
        raw = data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()
        header["inputs"].append({"name": name, "datatype": dt, "shape": list(shape),
                                 "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    text = json.dumps(header).encode() + b" " * pad_json
    return text + b"".join(blobs), len(text)


def split_binary_response(headers, data):
    """-> (header dict, {output name: raw bytes})."""
    length = int(headers.get("Inference-Header-Content-Length", len(data)))
    header = json.loads(data[:length])
    raw, at = {}, length
    for o in header["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            raw[o["name"]] = data[at:at + size]
            at += size
    assert at == len(data), "bytes after the last binary output"
    return header, raw


def bytes_elements(raw):
    out, at = [], 0
    while at < len(raw):
        n = int.from_bytes(raw[at:at + 4], "little")
        out.append(raw[at + 4:at + 4 + n])
        at += 4 + n
    return out


def pack_bytes(elements):
    return b"".join(len(e).to_bytes(4, "little") + e for e in elements)
