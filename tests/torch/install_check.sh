#!/usr/bin/env bash
# cmake --install puts libtessera_torch.so beside the installed tessera package:
# installs the Runtime and Python components into a temporary DESTDIR, then, from
# there (not the build tree), compiles a module with tessera.torch, checks it
# against PyTorch, and saves and reloads it with torch.jit.
# Usage: install_check.sh BUILD_DIR
set -euo pipefail
build="$1"
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
for component in Runtime Python; do
  DESTDIR="$dest" cmake --install "$build" --component "$component" >/dev/null
done
site=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
package="$dest$site/tessera"
[ -f "$package/libtessera_torch.so" ] || { echo "FAIL: no $package/libtessera_torch.so"; exit 1; }
[ -f "$package/torch.py" ] || { echo "FAIL: no $package/torch.py"; exit 1; }
lib=$(dirname "$(find "$dest" -name libtessera.so | head -1)")
cd "$dest"  # not the source tree, so nothing else named tessera is importable
PYTHONPATH="$dest$site" LD_LIBRARY_PATH="$lib" /usr/bin/python3 - "$package" <<'PY'
import os, sys
import torch
import tessera.torch
package = sys.argv[1]
assert os.path.dirname(tessera.torch.library_path()) == os.path.abspath(package), tessera.torch.library_path()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
x = torch.randn(3, 8)
compiled = tessera.torch.compile(model, x)
with torch.no_grad():
    expected = model(x)
    assert torch.allclose(compiled(x), expected, rtol=1e-4, atol=1e-5)
path = os.path.join(os.getcwd(), "model.pt")
torch.jit.save(torch.jit.script(compiled), path)
assert torch.allclose(tessera.torch.load(path)(x), expected, rtol=1e-4, atol=1e-5)
print("installed tessera.torch at", package, "compiles, runs, saves and loads")
PY
