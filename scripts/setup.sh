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
)

scripts/install-packages.sh setup "${PACKAGES[@]}"

BUILD_TYPE="${1:-Release}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
ninja -C build
