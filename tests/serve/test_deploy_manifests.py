"""The Kubernetes and KServe manifests (deploy/kubernetes) rendered by `kubectl kustomize` (Debian's
kubernetes-client; no cluster here, so they are rendered and checked, not applied), and checked against
the server itself: the container arguments start a real tessera serve on a model repository, the probe
paths answer on it, the ports agree with the flags, and the metrics the autoscaler rule reads exist."""

import os
import re
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import ROOT, SERVE, Mlp, Server, infer_json, write_config  # noqa: E402

import numpy as np  # noqa: E402

DEPLOY = os.path.join(ROOT, "deploy", "kubernetes")


def render(folder):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(DEPLOY, folder)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(r.stdout) if d}


def flag_values(args):
    out = {}
    for a in args:
        m = re.match(r"--([a-z-]+)=(.*)", a)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def start_with(args, repo):
    """Runs tessera serve with a manifest's arguments, the repository and ports replaced by local ones."""
    assert args[0] == "serve"
    flags = flag_values(args[1:])
    extra = [f"--{k}={v}" for k, v in flags.items()
             if k not in ("model-repository", "http-port", "grpc-port", "metrics-port")]
    return Server(repo, *extra), flags


@pytest.fixture()
def repo(tmp_path):
    Mlp().write(str(tmp_path / "mlp" / "1" / "model.onnx"))
    write_config(str(tmp_path / "mlp"), "max_batch_size: 4\ndynamic_batching { }\n")
    return str(tmp_path)


def test_base_deployment_matches_the_server(repo):
    docs = render("base")
    dep = docs[("Deployment", "tessera-serve")]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    server, flags = start_with(c["args"], repo)
    try:
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"http": int(flags["http-port"]), "grpc": int(flags["grpc-port"]), "metrics": int(flags["metrics-port"])}
        assert flags["model-repository"] == c["volumeMounts"][0]["mountPath"]
        # the probes hit endpoints that answer 200 on a ready server
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            get = c[probe]["httpGet"]
            assert get["port"] == "http"
            assert server.request("GET", get["path"])[0] == 200, probe
        assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        # the drain fits in the grace period
        assert int(flags["exit-timeout-secs"]) < dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == flags["metrics-port"]
        svc = docs[("Service", "tessera-serve")]
        assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == ports
        # the autoscaler's rule reads metrics the server exports, with the labels it names
        assert infer_json(server, "mlp", {"x": ("FP32", np.ones((1, 4), np.float32))})[0] == 200
        names = {n for (n, _) in server.metrics()}
        rules = yaml.safe_load(docs[("ConfigMap", "tessera-serve-adapter-rules")]["data"]["config.yaml"])["rules"]
        used = set(re.findall(r"nv_[a-z_]+", str(rules)))
        assert used and used <= names, used - names
        hpa = docs[("HorizontalPodAutoscaler", "tessera-serve")]
        assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == rules[0]["name"]["as"]
        assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    finally:
        assert server.stop() == 0


def test_kserve_runtime_matches_the_server(repo):
    docs = render("kserve")
    runtime = docs[("ClusterServingRuntime", "kserve-tessera")]
    (c,) = runtime["spec"]["containers"]
    assert set(runtime["spec"]["protocolVersions"]) == {"v2", "grpc-v2"}
    server, flags = start_with(c["args"], repo)
    try:
        assert flags["model-repository"] == "/mnt/models"  # where KServe's storage initializer puts storageUri
        assert (flags["http-port"], flags["grpc-port"]) == ("8080", "9000")  # KServe's ports
        assert c["ports"][0]["containerPort"] == int(flags["http-port"])
        assert c["readinessProbe"]["httpGet"]["port"] == int(flags["http-port"])
        assert server.request("GET", c["readinessProbe"]["httpGet"]["path"])[0] == 200
        assert runtime["spec"]["annotations"]["prometheus.kserve.io/port"] == flags["metrics-port"]
        isvc = docs[("InferenceService", "resnet50")]
        assert isvc["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"]
        formats = {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
        assert isvc["spec"]["predictor"]["model"]["modelFormat"]["name"] in formats
    finally:
        assert server.stop() == 0


def test_every_flag_in_the_manifests_is_a_server_flag():
    usage = subprocess.run([SERVE, "--help"], capture_output=True, text=True, timeout=60).stdout
    for folder in ("base", "kserve"):
        for doc in render(folder).values():
            spec = doc.get("spec", {})
            containers = spec.get("containers") or spec.get("template", {}).get("spec", {}).get("containers", [])
            for c in containers:
                for flag in flag_values(c.get("args", [])):
                    assert f"--{flag} " in usage, flag
