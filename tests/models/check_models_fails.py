#!/usr/bin/python3
"""Shows that check_models.py fails when tessera's outputs are wrong.

Usage: /usr/bin/python3 tests/models/check_models_fails.py --tessera build/tessera --work DIR

Runs check_models.py on a small model through a stand-in for tessera that
runs the real one and then spoils what it wrote: an extra output file, a
missing one, a float64 output where torch gives float32, a value off by 1e-3
relative at 2 threads only, and an output left over from an earlier run
(tessera writes nothing). The unspoilt run must pass and every spoilt one fail.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "scripted_control_flow"

# The stand-in: `run ... --output-dir D ...` runs the real tessera, then spoils D as SPOIL says.
STAND_IN = r'''#!/usr/bin/python3
import os, subprocess, sys
import numpy as np
real, spoil = os.environ["REAL_TESSERA"], os.environ["SPOIL"]
args = sys.argv[1:]
out = args[args.index("--output-dir") + 1]
threads = args[args.index("--threads") + 1]
if spoil == "stale":
    # Writes nothing: only an output left from an earlier run could make this pass.
    sys.exit(0)
code = subprocess.call([real] + args)
files = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
first = os.path.join(out, files[0])
if spoil == "extra":
    np.save(os.path.join(out, "unexpected.npy"), np.zeros(3, np.float32))
elif spoil == "missing":
    os.remove(first)
elif spoil == "dtype":
    np.save(first, np.load(first).astype(np.float64))
elif spoil == "threads2" and threads == "2":
    a = np.load(first)
    a.flat[0] *= 1 + 1e-3
    np.save(first, a)
sys.exit(code)
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tessera", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    stand_in = os.path.join(args.work, "spoiling_tessera.py")
    with open(stand_in, "w") as f:
        f.write(STAND_IN)
    os.chmod(stand_in, 0o755)
    problems = []
    for spoil, should_pass in (("none", True), ("extra", False), ("missing", False), ("dtype", False),
                               ("threads2", False), ("stale", False)):
        env = dict(os.environ, REAL_TESSERA=os.path.abspath(args.tessera), SPOIL=spoil)
        result = subprocess.run([sys.executable, os.path.join(HERE, "check_models.py"), "--tessera", stand_in,
                                 "--work", os.path.join(args.work, "models"), MODEL],
                                capture_output=True, text=True, env=env)
        passed = result.returncode == 0
        fails = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
        ok = passed == should_pass
        print("%s %s: check_models %s%s" % ("ok  " if ok else "FAIL", spoil, "passed" if passed else "failed",
                                            (" (" + fails[0] + ")") if fails else ""))
        if not ok:
            problems.append(spoil)
            print(result.stdout + result.stderr)
    if problems:
        sys.exit("check_models.py did not notice: " + ", ".join(problems))
    print("check_models.py failed on every spoilt output")


if __name__ == "__main__":
    main()
