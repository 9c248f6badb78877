"""Offline scoring on Dask (Debian's python3-distributed): a model loaded once per worker process, mapped
over dask arrays block by block or dask dataframes partition by partition.

    from dask.distributed import Client, LocalCluster
    import tessera.dask

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    tessera.dask.register(client, "model.tsr", name="resnet")        # loads on every worker, once
    scores = tessera.dask.map_blocks(images, "resnet")                 # dask array -> dask array
    frame = tessera.dask.map_partitions(df, "resnet", columns=["f0", "f1"], output_columns=["p0", "p1"])

A worker plugin (``TesseraModel``) loads the model when a worker starts (and on workers that join later),
with ``threads`` intra-op threads each run (default 1: Dask already runs ``threads_per_worker`` tasks at
once in each of its workers, so workers x threads_per_worker x threads should not exceed the cores; with
one task per worker and cores to spare, pass threads=). Tasks fetch the session from their worker (never
a closure over it, which would ship the model in every task).

A second mode sends the blocks to ``tessera serve`` replicas over the Open Inference Protocol (HTTP,
binary tensors), round robin: ``map_blocks_via_servers(array, ["http://host:8000", ...], "resnet")``.
"""

import json
import os
import urllib.error
import urllib.request

import numpy as np

import tessera

try:
    from distributed import WorkerPlugin, get_worker
except ImportError as e:  # pragma: no cover - the error names the package to install
    raise ImportError("tessera.dask needs Dask's distributed scheduler: apt-get install python3-distributed") from e

_ATTRIBUTE = "_tessera_sessions"


class TesseraModel(WorkerPlugin):
    """Loads one model on each worker it is registered with, once; ``sessions(worker)[name]`` holds it."""

    def __init__(self, path, name, threads=None, **options):
        self.path = os.path.abspath(path) if isinstance(path, str) else path
        self.name = name
        self.threads = threads
        self.options = options

    def setup(self, worker):
        threads = self.threads if self.threads is not None else 1
        sessions = getattr(worker, _ATTRIBUTE, None)
        if sessions is None:
            sessions = {}
            setattr(worker, _ATTRIBUTE, sessions)
        sessions[self.name] = tessera.InferenceSession(self.path, threads=threads, **self.options)
        loads = getattr(worker, "_tessera_loads", {})
        loads[self.name] = loads.get(self.name, 0) + 1
        worker._tessera_loads = loads

    def teardown(self, worker):
        sessions = getattr(worker, _ATTRIBUTE, {})
        sessions.pop(self.name, None)


def register(client, path, name="model", threads=None, **options):
    """Registers the model on every worker of ``client`` (and workers that join later); returns ``name``."""
    client.register_worker_plugin(TesseraModel(path, name, threads, **options), name="tessera-" + name)
    return name


def session(name="model"):
    """The worker's session for ``name`` (inside a task)."""
    sessions = getattr(get_worker(), _ATTRIBUTE, {})
    if name not in sessions:
        raise KeyError("no Tessera model named %r on this worker: call tessera.dask.register(client, path, %r) first"
                       % (name, name))
    return sessions[name]


def _run_block(block, name, input_name, output_name):
    s = session(name)
    feed = {input_name or s.get_inputs()[0].name: np.ascontiguousarray(block)}
    (out,) = s.run([output_name] if output_name else [s.get_outputs()[0].name], feed)
    return out


def _output_blocks(array, output_shape, dtype, caller):
    """map_blocks' keyword arguments for blocks of rows in, blocks of [rows, *output_shape] out."""
    if any(len(c) > 1 for c in array.chunks[1:]):
        raise ValueError(caller + ": chunk the array along axis 0 only (rechunk({0: n, 1: -1, ...}))")
    if output_shape is None:
        raise ValueError(caller + ": give output_shape (the output's dims after the batch dim)")
    rank = 1 + len(output_shape)
    return dict(chunks=(array.chunks[0],) + tuple((d,) for d in output_shape), dtype=dtype,
                drop_axis=list(range(1, array.ndim)) if array.ndim > rank else None,
                new_axis=list(range(array.ndim, rank)) if rank > array.ndim else None,
                meta=np.empty((0,) * rank, dtype))


def map_blocks(array, name="model", input_name=None, output_name=None, output_shape=None, dtype=np.float32):
    """Runs the model on each block of ``array`` (chunked along axis 0 only; the other axes whole) and
    returns the output blocks as a dask array. ``output_shape``: the output's dims after the batch dim."""
    return array.map_blocks(_run_block, name, input_name, output_name,
                            **_output_blocks(array, output_shape, dtype, "map_blocks"))


def _run_partition(frame, name, columns, output_columns, input_name, output_name, dtype):
    import pandas as pd
    x = frame[columns].to_numpy(dtype=dtype)
    out = _run_block(x, name, input_name, output_name) if len(frame) else np.empty((0, len(output_columns)), dtype)
    return pd.DataFrame(np.asarray(out).reshape(len(frame), len(output_columns)), columns=output_columns, index=frame.index)


def map_partitions(frame, name="model", columns=None, output_columns=None, input_name=None, output_name=None,
                   dtype=np.float32):
    """Runs the model on each partition of a dask dataframe: ``columns`` (in order) form the input
    [rows, len(columns)], and the output [rows, k] becomes ``output_columns`` (with the partition's index)."""
    import pandas as pd
    if not columns or not output_columns:
        raise ValueError("map_partitions: give columns (the input's) and output_columns (the output's)")
    meta = pd.DataFrame({c: np.empty(0, dtype) for c in output_columns})
    return frame.map_partitions(_run_partition, name, list(columns), list(output_columns), input_name, output_name,
                                dtype, meta=meta)


_DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64", np.dtype(np.int64): "INT64",
              np.dtype(np.int32): "INT32", np.dtype(np.uint8): "UINT8", np.dtype(np.bool_): "BOOL"}
_NUMPY = {v: k for k, v in _DATATYPES.items()}


def infer_over_http(url, model, inputs, output_name=None, timeout=600):
    """One Open Inference Protocol request (binary tensors): ``inputs`` {name: array} -> the first output
    (or ``output_name``) as a numpy array. Raises RuntimeError with the server's error message."""
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    blobs = []
    for n, a in inputs.items():
        a = np.ascontiguousarray(a)
        header["inputs"].append({"name": n, "datatype": _DATATYPES[a.dtype], "shape": list(a.shape),
                                 "parameters": {"binary_data_size": a.nbytes}})
        blobs.append(a.tobytes())
    if output_name:
        header["outputs"] = [{"name": output_name, "parameters": {"binary_data": True}}]
    text = json.dumps(header).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v2/models/%s/infer" % model, data=text + b"".join(blobs),
                                     headers={"Inference-Header-Content-Length": str(len(text)),
                                              "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            body, length = r.read(), int(r.headers.get("Inference-Header-Content-Length", 0))
    except urllib.error.HTTPError as e:
        raise RuntimeError("%s: %s" % (url, e.read().decode(errors="replace"))) from None
    response = json.loads(body[:length])
    at = length
    for o in response["outputs"]:
        size = o["parameters"]["binary_data_size"]
        if output_name in (None, o["name"]):
            return np.frombuffer(body[at:at + size], _NUMPY[o["datatype"]]).reshape(o["shape"])
        at += size
    raise RuntimeError("%s: no output in the response" % url)


def _run_block_remote(block, urls, model, input_name, output_name, block_info=None):
    index = block_info[0]["chunk-location"][0] if block_info else 0
    url = urls[index % len(urls)]
    return infer_over_http(url, model, {input_name: block}, output_name)


def map_blocks_via_servers(array, urls, model, input_name, output_shape, output_name=None, dtype=np.float32):
    """Like map_blocks, but each block is sent to one of the ``tessera serve`` replicas at ``urls``
    (block i to urls[i % len(urls)]) instead of running in the worker."""
    return array.map_blocks(_run_block_remote, list(urls), model, input_name, output_name,
                            **_output_blocks(array, output_shape, dtype, "map_blocks_via_servers"))
