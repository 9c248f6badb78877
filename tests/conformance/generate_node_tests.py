#!/usr/bin/python3
"""Generates the ONNX node conformance cases from Debian's python3-onnx.

Usage: /usr/bin/python3 tests/conformance/generate_node_tests.py OUT_DIR

Writes OUT_DIR/node/<case>/{model.onnx,test_data_set_0/*.pb}. onnx 1.12's
generator still uses numpy aliases that numpy 1.24 removed, so they are put
back before it runs.
"""
import os
import sys

import numpy as np

for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if not hasattr(np, alias):
        setattr(np, alias, builtin)

from onnx.backend.test.cmd_tools import main  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: generate_node_tests.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    sys.argv = ["cmd_tools", "generate-data", "-o", out]
    main()
