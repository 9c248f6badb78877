#!/usr/bin/env bash
# cmake --install puts `import tessera` where /usr/bin/python3 finds it: installs
# the Runtime and Python components into a temporary DESTDIR, then imports the
# package from there (not from the build tree) and runs a model with it.
# Usage: install_check.sh BUILD_DIR MODEL.onnx
set -euo pipefail
build="$1"
model=$(realpath "$2")
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
for component in Runtime Python; do
  DESTDIR="$dest" cmake --install "$build" --component "$component" >/dev/null
done
site=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
package="$dest$site/tessera"
[ -f "$package/__init__.py" ] || { echo "FAIL: no $package/__init__.py (installed: $(cd "$dest" && find . -type f | head -20))"; exit 1; }
ls "$package"/_tessera*.so >/dev/null || { echo "FAIL: no extension module in $package"; exit 1; }
lib=$(dirname "$(find "$dest" -name libtessera.so | head -1)")
[ -n "$lib" ] || { echo "FAIL: libtessera.so was not installed"; exit 1; }
cd "$dest"  # not the source tree, so nothing else named tessera is importable
PYTHONPATH="$dest$site" LD_LIBRARY_PATH="$lib" /usr/bin/python3 - "$model" "$package" <<'PY'
import os, sys
import numpy as np
import tessera
model, package = sys.argv[1], sys.argv[2]
assert os.path.dirname(os.path.abspath(tessera.__file__)) == os.path.abspath(package), tessera.__file__
session = tessera.InferenceSession(model)
arg = session.get_inputs()[0]
(y,) = session.run(None, {arg.name: np.zeros([d for d in arg.shape], dtype=np.float32)})
assert np.isfinite(y).all() and y.shape == tuple(session.get_outputs()[0].shape)
print("installed package at", package, "runs", os.path.basename(model))
PY
