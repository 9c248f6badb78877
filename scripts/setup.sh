#!/usr/bin/env bash
# Installs every Debian package Tessera needs (idempotent; as root or with sudo),
# then configures and builds into build/. Usage: scripts/setup.sh [BUILD_TYPE]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libonnx-dev libprotobuf-dev protobuf-compiler libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev libxnnpack-dev libpthreadpool-dev
  chromium
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  python3-dev pybind11-dev python3-pytest libtorch-dev
  libcpp-httplib-dev nlohmann-json3-dev libgrpc++-dev protobuf-compiler-grpc
  python3-distributed python3-pandas python3-yaml
)

scripts/install-packages.sh setup "${PACKAGES[@]}"
# Node.js and npm for the serving tests' independent clients, and kubectl (its kustomize renders the
# Kubernetes manifests in a test): Debian's, unless the machine already has them from elsewhere.
command -v npm >/dev/null || scripts/install-packages.sh setup nodejs npm
command -v kubectl >/dev/null || scripts/install-packages.sh setup kubernetes-client
# Those clients (tests/serve/package.json, pinned by its lock file), from npm without install scripts.
if [ ! -f tests/serve/node_modules/.package-lock.json ] || [ tests/serve/package-lock.json -nt tests/serve/node_modules/.package-lock.json ]; then
  (cd tests/serve && npm ci --ignore-scripts --no-audit --no-fund)
fi

# promtool lints /metrics in a serving test: unpacked from Debian's prometheus package into tests/serve/.deps
# rather than installed (installing the package would add and start a Prometheus server on this machine).
if ! command -v promtool >/dev/null && [ ! -x tests/serve/.deps/usr/bin/promtool ]; then
  scripts/unpack-deb.sh prometheus tests/serve/.deps
fi

BUILD_TYPE="${1:-Release}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
ninja -C build
