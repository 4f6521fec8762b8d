"""The generated ``builtin`` suite: determinism, disjoint splits, shape, and references that pass."""

from __future__ import annotations

import ast
import collections
import json
import re
import subprocess
import sys

import pytest

from execrl.datasets import DatasetError, builtin, load_split


@pytest.fixture(scope="module")
def default_splits():
    train = load_split("builtin", "train")
    test = load_split("builtin", "test")
    return train.problems, test.problems


def dicts(problems):
    return [p.to_dict() for p in problems]


def test_default_counts_and_ids(default_splits):
    train, test = default_splits
    assert len(train) == 1000 and len(test) == 200
    assert [p.id for p in train[:2]] == ["builtin/train/0000", "builtin/train/0001"]
    assert train[-1].id == "builtin/train/0999" and test[-1].id == "builtin/test/0199"
    assert len({p.id for p in train + test}) == 1200


def test_same_seed_same_problems(default_splits):
    train, test = default_splits
    assert dicts(load_split("builtin", "train", options={"seed": 0}).problems) == dicts(train)
    assert dicts(builtin.generate("test", seed=0, n=200)) == dicts(test)


def test_different_seed_different_problems(default_splits):
    train, _ = default_splits
    other = load_split("builtin", "train", options={"seed": 1}).problems
    assert len(other) == 1000
    assert [p.prompt for p in other] != [p.prompt for p in train]
    overlap = {p.prompt for p in other} & {p.prompt for p in train}
    assert len(overlap) < 200


def test_splits_are_disjoint_combinations(default_splits):
    train, test = default_splits
    train_keys = {builtin.task_key(p) for p in train}
    test_keys = {builtin.task_key(p) for p in test}
    assert len(train_keys) == len(train) and len(test_keys) == len(test)  # no duplicates within a split
    assert train_keys.isdisjoint(test_keys)
    # Every key lands in the split its hash assigns.
    assert all(builtin.split_of_key(k, 0) == "train" for k in train_keys)
    assert all(builtin.split_of_key(k, 0) == "test" for k in test_keys)


def test_holdout_task_keeps_renamed_tasks_out_of_test():
    def task(problem):
        m = problem.metadata
        return json.dumps([m["family"], m["template"], m["params"]], sort_keys=True)

    options = {"holdout": "task", "n_train": 400, "n_test": 100}
    train = load_split("builtin", "train", options=options).problems
    test = load_split("builtin", "test", options=options).problems
    assert len(test) == 100
    assert {task(p) for p in train}.isdisjoint({task(p) for p in test})


def test_test_split_does_not_depend_on_train_size():
    small = load_split("builtin", "test", options={"n_train": 10, "n_test": 50}).problems
    large = load_split("builtin", "test", options={"n_train": 5000, "n_test": 50}).problems
    assert dicts(small) == dicts(large)
    # A longer split extends a shorter one.
    assert dicts(builtin.generate("test", n=80)[:50]) == dicts(small)


def test_families_and_difficulties(default_splits):
    train, test = default_splits
    seen = collections.Counter((p.metadata["family"], p.metadata["difficulty"]) for p in train)
    assert set(seen) == {(f, d) for f in builtin.FAMILIES for d in (1, 2, 3)}
    assert min(seen.values()) >= 20
    assert {p.metadata["family"] for p in test} == set(builtin.FAMILIES)

    some = load_split("builtin", "train", options={"families": ["string", "loop"], "max_difficulty": 1, "n_train": 60})
    assert {p.metadata["family"] for p in some.problems} == {"string", "loop"}
    assert {p.metadata["difficulty"] for p in some.problems} == {1}
    assert some.manifest["options"]["families"] == ["string", "loop"]


def test_problem_shape(default_splits):
    train, test = default_splits
    names = set()
    for problem in train + test:
        name, arg = problem.metadata["function"], problem.metadata["arg"]
        names.add(name)
        assert problem.entry_point == name
        assert problem.test_type == "assert" and problem.setup_code == ""
        assert problem.prompt.startswith(f"Write a function {name}({arg}) that ") and problem.prompt.endswith(".")
        assert "{" not in problem.prompt and "{" not in problem.reference
        assert 3 <= len(problem.tests) <= 5
        assert all(re.match(rf"assert {re.escape(name)}\(.*\) == .+", t) for t in problem.tests)
        lines = problem.reference.splitlines()
        assert lines[0] == f"def {name}({arg}):" and 1 <= len(lines) - 1 <= 4
        assert all(line.startswith("    ") for line in lines[1:])
        ast.parse(problem.reference)
        assert set(problem.metadata) == {"family", "difficulty", "template", "params", "function", "arg"}
        # Short enough for a small context: prompt + reference + tests.
        assert len(problem.prompt) + len(problem.reference) + sum(map(len, problem.tests)) < 700
    assert len(names) >= 10  # names vary, so the model has to read them


def test_prompts_examples():
    problems = builtin.generate("train", seed=0, n=300)
    by_template = {p.metadata["template"]: p for p in problems}
    arith = by_template["arith_op"]
    assert re.match(r"Write a function \w+\(\w+\) that returns ", arith.prompt)
    assert by_template["list_filter_aggregate"].prompt.split(" that ")[1].startswith("returns ")


def _expected_value(test: str):
    compare = ast.parse(test).body[0].test
    return ast.literal_eval(compare.comparators[0])


HARNESS = r"""
import json, sys
problems = json.load(open(sys.argv[1]))
failures, uninformative = [], []
for p in problems:
    ns = {}
    exec(p["setup_code"] + "\n" + p["reference"], ns)
    for t in p["tests"]:
        try:
            exec(t, ns)
        except Exception as e:
            failures.append([p["id"], t, repr(e)])
    # A function returning a constant (the first expected value) must fail some test.
    stub = {}
    exec(p["stub"], stub)
    passed = 0
    for t in p["tests"]:
        try:
            exec(t, stub)
            passed += 1
        except AssertionError:
            pass
    if passed == len(p["tests"]):
        uninformative.append(p["id"])
print(json.dumps({"n": len(problems), "failures": failures, "uninformative": uninformative}))
"""


def test_every_reference_passes_its_own_tests(default_splits, tmp_path):
    train, test = default_splits
    records = []
    for problem in train + test:
        record = problem.to_dict()
        constant = _expected_value(problem.tests[0])
        record["stub"] = f"def {problem.entry_point}(*args):\n    return {constant!r}\n"
        records.append(record)
    data = tmp_path / "builtin.json"
    data.write_text(json.dumps(records))
    run = subprocess.run([sys.executable, "-c", HARNESS, str(data)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["n"] == 1200
    assert report["failures"] == []
    assert report["uninformative"] == []


def test_too_many_requested_is_a_clear_error():
    with pytest.raises(DatasetError, match="found only"):
        builtin.generate("test", n=3000, families=["loop"], max_difficulty=1)


def test_manifest():
    result = load_split("builtin", "train", options={"n_train": 5, "seed": 7})
    manifest = result.manifest
    assert manifest["adapter"] == "builtin" and manifest["split"] == "train"
    assert manifest["options"] == {
        "seed": 7,
        "n_train": 5,
        "n_test": 200,
        "families": list(builtin.FAMILIES),
        "max_difficulty": 3,
        "holdout": "combo",
    }
    assert manifest["n_problems"] == 5 and manifest["skipped"] == []
    assert manifest["generator_version"] == builtin.GENERATOR_VERSION
    assert json.loads(json.dumps(manifest)) == manifest
    assert all(json.loads(json.dumps(p.to_dict())) == p.to_dict() for p in result.problems)
