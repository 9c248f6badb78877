#!/usr/bin/env bash
# Quick start, step 1: install, build, and run the bundled default model
# (prints each output and where every node ran).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
./build/tessera info models/tiny_resnet.onnx
./build/tessera run models/tiny_resnet.onnx --output-dir build/quickstart-outputs --placement
