#!/usr/bin/python3
"""Shows that tessera_conformance fails on wrong results, so a green
conformance run means something.

Usage: /usr/bin/python3 tests/conformance/check_runner_fails.py RUNNER CASES_DIR WORK_DIR

Copies two real cases (float32 and float64) into WORK_DIR, plants wrong
expected data in copies (1e-4 relative in float32; 1e-4 and 1e-6 relative in
float64, which the old blanket rtol 1e-3 let through; a float64 dtype for a
float32 output; NaN and Inf where the values are finite), adds Bernoulli
models (one whose output leaves {0, 1}) and a model that raises a user error,
runs the runner and checks each outcome in its report. Then checks the lists:
--expect-pass and --expect-random fail on a wrong list, --write-passing
keeps a listed case that fails unless --drop names it, and a tolerance
override needs a reason. Exits 1 naming every check that did not hold.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT32_CASE = "test_add"          # float32 output, non-trivial values
FLOAT64_CASE = "test_max_float64"  # float64 output

problems = []


def expect(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        problems.append(what)


def output_pb(case_dir):
    return os.path.join(case_dir, "test_data_set_0", "output_0.pb")


def rewrite_output(case_dir, change):
    """Replaces output_0 of the case's first data set by change(array)."""
    path = output_pb(case_dir)
    tensor = onnx.load_tensor(path)
    array = change(numpy_helper.to_array(tensor).copy())
    new = numpy_helper.from_array(array, tensor.name)
    with open(path, "wb") as f:
        f.write(new.SerializeToString())


def copy_case(cases, name, work, new_name, change=None):
    target = os.path.join(work, new_name)
    shutil.copytree(os.path.join(cases, name), target)
    if change:
        rewrite_output(target, change)


def write_model(work, name, nodes, inputs, outputs, initializers, feeds, expected, opset=15):
    folder = os.path.join(work, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for i, (n, a) in enumerate(feeds):
        with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, (n, a) in enumerate(expected):
        with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def perturb(relative):
    return lambda a: (a * (1 + relative) + (a == 0) * relative).astype(a.dtype)


def set_first(value):
    def change(a):
        a.flat[0] = value
        return a
    return change


def run(runner, cases, *args):
    result = subprocess.run([runner, cases] + list(args), capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: check_runner_fails.py RUNNER CASES_DIR WORK_DIR")
    runner, cases, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    case_dir = os.path.join(work, "cases")
    os.makedirs(case_dir)

    copy_case(cases, FLOAT32_CASE, case_dir, "f32_unchanged")
    copy_case(cases, FLOAT32_CASE, case_dir, "f32_perturbed_1e-4", perturb(1e-4))
    copy_case(cases, FLOAT32_CASE, case_dir, "f32_as_float64", lambda a: a.astype(np.float64))
    copy_case(cases, FLOAT32_CASE, case_dir, "f32_nan_expected", set_first(np.nan))
    copy_case(cases, FLOAT32_CASE, case_dir, "f32_inf_expected", set_first(np.inf))
    copy_case(cases, FLOAT64_CASE, case_dir, "f64_unchanged")
    copy_case(cases, FLOAT64_CASE, case_dir, "f64_perturbed_1e-4", perturb(1e-4))
    copy_case(cases, FLOAT64_CASE, case_dir, "f64_perturbed_1e-6", perturb(1e-6))

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [10])
    p = np.full(10, 0.5, np.float32)
    write_model(case_dir, "random_bernoulli", [helper.make_node("Bernoulli", ["x"], ["y"])], [x], [y], [],
                [("x", p)], [("y", np.zeros(10, np.float32))])
    write_model(case_dir, "random_out_of_range",
                [helper.make_node("Bernoulli", ["x"], ["b"]), helper.make_node("Add", ["b", "half"], ["y"])],
                [x], [y], [numpy_helper.from_array(np.array(0.5, np.float32), "half")],
                [("x", p)], [("y", np.zeros(10, np.float32))])
    # Gather with an index past the end: the model is valid, the input is not, so Tessera raises a
    # user error, which the runner must count as failed (only "not supported" excuses a case).
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [3])
    index = helper.make_tensor_value_info("index", TensorProto.INT64, [1])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])
    write_model(case_dir, "user_error", [helper.make_node("Gather", ["data", "index"], ["out"])], [data, index], [out],
                [], [("data", np.ones(3, np.float32)), ("index", np.array([7], np.int64))],
                [("out", np.ones(1, np.float32))])

    report = os.path.join(work, "report.tsv")
    code, output = run(runner, case_dir, "--report", report)
    print(output)
    outcomes = {}
    with open(report) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            outcomes[fields[0]] = (fields[1], fields[4] if len(fields) > 4 else "")
    wanted = {
        "f32_unchanged": "passed", "f64_unchanged": "passed",
        "f32_perturbed_1e-4": "failed", "f64_perturbed_1e-4": "failed", "f64_perturbed_1e-6": "failed",
        "f32_as_float64": "failed", "f32_nan_expected": "failed", "f32_inf_expected": "failed",
        "random_bernoulli": "random", "random_out_of_range": "failed", "user_error": "failed",
    }
    for name, outcome in sorted(wanted.items()):
        got = outcomes.get(name, ("missing", ""))
        expect(got[0] == outcome, "%s is %s (%s: %s)" % (name, outcome, got[0], got[1]))
    expect("user error" in outcomes.get("user_error", ("", ""))[1], "user_error's message says it is a user error")

    def list_file(name, lines):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    passing = list_file("passing.txt", ["f32_unchanged", "f64_unchanged"])
    code, output = run(runner, case_dir, "--filter", "unchanged", "--expect-pass", passing)
    expect(code == 0, "--expect-pass holds for the unchanged copies (exit %d)" % code)
    code, output = run(runner, case_dir, "--filter", "f64", "--expect-pass",
                       list_file("wrong_passing.txt", ["f64_unchanged", "f64_perturbed_1e-6"]))
    expect(code == 1 and "regressed: f64_perturbed_1e-6" in output,
           "--expect-pass fails when a listed case fails (exit %d)" % code)
    code, output = run(runner, case_dir, "--filter", "random", "--expect-random",
                       list_file("random_missing.txt", []))
    expect(code == 1 and "unlisted: random_bernoulli" in output, "--expect-random fails on an unlisted random case")
    code, output = run(runner, case_dir, "--filter", "random", "--expect-random",
                       list_file("random_ok.txt", ["random_bernoulli"]))
    expect(code == 0, "--expect-random holds when the list is right (exit %d)" % code)

    grow = list_file("grow.txt", ["f64_perturbed_1e-6"])
    run(runner, case_dir, "--filter", "f64", "--write-passing", grow)
    with open(grow) as f:
        listed = [line.strip() for line in f if not line.startswith("#")]
    expect(listed == ["f64_perturbed_1e-6", "f64_unchanged"],
           "--write-passing adds and keeps the failing listed case (%s)" % listed)
    run(runner, case_dir, "--filter", "f64", "--write-passing", grow, "--drop", "f64_perturbed_1e-6")
    with open(grow) as f:
        listed = [line.strip() for line in f if not line.startswith("#")]
    expect(listed == ["f64_unchanged"], "--write-passing --drop removes the case (%s)" % listed)

    loose = list_file("loose.txt", ["f64_perturbed_1e-6 rtol=1e-5 atol=0  # planted by this check"])
    code, output = run(runner, case_dir, "--filter", "f64_perturbed_1e-6", "--tolerances", loose,
                       "--expect-pass", list_file("one.txt", ["f64_perturbed_1e-6"]))
    expect(code == 0, "a tolerance override applies to its case (exit %d)" % code)
    code, output = run(runner, case_dir, "--filter", "f64", "--tolerances",
                       list_file("no_reason.txt", ["f64_perturbed_1e-6 rtol=1e-5 atol=0"]))
    expect(code == 2, "an override without a reason is refused (exit %d)" % code)

    if problems:
        print("%d checks did not hold" % len(problems))
        sys.exit(1)
    print("all checks held")


if __name__ == "__main__":
    main()
