"""tessera.dask on a real Dask cluster (LocalCluster, 2 worker processes, Debian's python3-distributed):
the model loads once per worker, map_blocks and map_partitions equal a single-process run, and the second
mode sends the blocks to two `tessera serve` replicas over the Open Inference Protocol."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import Mlp, Server  # noqa: E402

import tessera  # noqa: E402
import tessera.dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

MLP = Mlp(5)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dask") / "mlp.onnx")
    MLP.write(path)
    return path


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=40)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_loads_once_per_worker_and_matches_single_process(client, model):
    tessera.dask.register(client, model, name="mlp")
    x = np.random.default_rng(0).standard_normal((1000, 4)).astype(np.float32)
    arr = da.from_array(x, chunks=(100, 4))
    y = tessera.dask.map_blocks(arr, "mlp", output_shape=(3,)).compute()
    single = tessera.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, single)
    np.testing.assert_allclose(y, MLP.reference(x), rtol=1e-5, atol=1e-6)
    # ten tasks on two workers: every worker loaded the model exactly once
    loads = client.run(lambda dask_worker: getattr(dask_worker, "_tessera_loads", {}).get("mlp", 0))
    assert sorted(loads.values()) == [1, 1], loads
    ran = client.run(lambda dask_worker: len(getattr(dask_worker, "_tessera_sessions", {})))
    assert list(ran.values()) == [1, 1]


def test_map_partitions(client, model):
    tessera.dask.register(client, model, name="mlp")
    x = np.random.default_rng(1).standard_normal((250, 4)).astype(np.float32)
    frame = dd.from_pandas(pd.DataFrame(x, columns=["a", "b", "c", "d"]), npartitions=5)
    out = tessera.dask.map_partitions(frame, "mlp", columns=["a", "b", "c", "d"], output_columns=["p", "q", "r"])
    assert list(out.columns) == ["p", "q", "r"] and out.npartitions == 5
    result = out.compute()
    np.testing.assert_allclose(result.to_numpy(), MLP.reference(x), rtol=1e-5, atol=1e-6)
    assert list(result.index) == list(range(250))


def test_unregistered_model_is_a_clear_error(client):
    arr = da.zeros((10, 4), chunks=(5, 4), dtype=np.float32)
    with pytest.raises(KeyError, match="tessera.dask.register"):
        tessera.dask.map_blocks(arr, "never-registered", output_shape=(3,)).compute()


def test_blocks_sent_to_serve_replicas(client, model, tmp_path):
    os.makedirs(tmp_path / "mlp" / "1")
    os.link(model, tmp_path / "mlp" / "1" / "model.onnx")
    servers = [Server(str(tmp_path)), Server(str(tmp_path))]
    try:
        urls = [f"http://127.0.0.1:{s.http}" for s in servers]
        x = np.random.default_rng(2).standard_normal((400, 4)).astype(np.float32)
        arr = da.from_array(x, chunks=(50, 4))
        y = tessera.dask.map_blocks_via_servers(arr, urls, "mlp", "x", output_shape=(3,)).compute()
        np.testing.assert_allclose(y, MLP.reference(x), rtol=1e-5, atol=1e-6)
        served = [s.json("GET", "/v2/models/mlp/stats")[1]["model_stats"][0]["inference_stats"]["success"]["count"]
                  for s in servers]
        assert served == [4, 4], served  # 8 blocks, round robin
    finally:
        for s in servers:
            assert s.stop() == 0
