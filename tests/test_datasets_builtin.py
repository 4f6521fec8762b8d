"""The generated ``builtin`` suite: determinism, three splits that share no task, shape, and references that pass."""

from __future__ import annotations

import ast
import collections
import json
import re
import subprocess
import sys

import pytest

from conftest import EMBEDDED, REPO
from execrl.config import SCHEMA as SCHEMA_PATH, merged_config
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


def test_splits_are_keyed_on_the_reference_up_to_renaming(default_splits):
    train, test = default_splits
    warmup = builtin.generate("warmup", seed=0, n=300)
    for split, problems in (("warmup", warmup), ("train", train), ("test", test)):
        # One naming per task: n problems are n tasks.
        assert len({builtin.reference_key(p) for p in problems}) == len(problems)
        # Every problem lands in the split its reference's hash assigns.
        assert {builtin.split_of_key(builtin.reference_key(p), 0) for p in problems} == {split}


def test_names_per_task_lets_a_task_come_back_under_other_names():
    problems = builtin.generate("test", seed=0, n=200, names_per_task=3)
    assert len({builtin.problem_key(p) for p in problems}) == len(problems)  # no duplicates within a split
    tasks = collections.Counter(builtin.reference_key(p) for p in problems)
    # The key really leaves the names out, and no task exceeds its namings.
    assert len(tasks) < len(problems) and max(tasks.values()) <= 3


def test_canonical_reference_is_the_reference_up_to_renaming():
    canonical = builtin.canonical_reference
    keep = "def g(nums):\n    return [n for n in nums if n > 3]"
    assert canonical("def f(xs):\n    return [x for x in xs if x > 3]") == canonical(keep)
    assert canonical("def f(xs):\n    return [x for x in xs if x > 4]") != canonical(keep)
    assert canonical("def f(s):\n    return len(s)") != canonical("def f(s):\n    return sum(s)")
    loop = "def {}({}):\n    result = 1\n    for {} in {}:\n        result *= {}\n    return result"
    renamed = canonical(loop.format("h", "values", "v", "values", "v"))
    assert canonical(loop.format("f", "xs", "x", "xs", "x")) == renamed


# ------------------------------------------------------------------ the shipped configs' splits


def renamed_away(problem):
    """The reference with its function, argument and loop names replaced by placeholders (written
    here from the problem's own metadata, apart from the generator's key)."""
    names = [problem.metadata["function"], problem.metadata["arg"], *re.findall(r"for (\w+) in", problem.reference)]
    text = problem.reference
    for i, name in enumerate(dict.fromkeys(names)):
        text = re.sub(rf"\b{re.escape(name)}\b", f"NAME{i}", text)
    return text


def family_template_params(problem):
    m = problem.metadata
    return json.dumps([m["family"], m["template"], m["params"]], sort_keys=True)


def shipped_configs():
    """Every shipped config, as a run merges it: config/*.yaml over the analysis, the embedded
    default over it, and each CPU overlay over the embedded default."""
    base = REPO / "config" / "config.yaml"
    runs = {"config/config.yaml": []}
    runs.update({f"config/{p.name}": [p] for p in sorted((REPO / "config").glob("*.yaml")) if p.name != "config.yaml"})
    runs[EMBEDDED] = [REPO / EMBEDDED]
    overlays = sorted(p for p in (REPO / ".test" / "config").glob("*.yaml") if p.name != "config.yaml")
    runs.update({f".test/config/{p.name}": [REPO / EMBEDDED, p] for p in overlays})
    return {name: merged_config(files, base=base) for name, files in runs.items()}


SHIPPED_BUILTIN = {
    f"{name}:{dataset}": settings.get("options", {})
    for name, config in shipped_configs().items()
    for dataset, settings in config["datasets"].items()
    if settings["adapter"] == "builtin"
}


def test_the_shipped_builtin_datasets_are_the_ones_checked_below():
    assert f"{EMBEDDED}:builtin" in SHIPPED_BUILTIN and ".test/config/seed-002.yaml:builtin" in SHIPPED_BUILTIN
    assert all(options["holdout"] == "task" for options in SHIPPED_BUILTIN.values())


_SPLITS: dict[str, tuple] = {}


def splits_of(options):
    key = json.dumps(options, sort_keys=True)
    if key not in _SPLITS:
        _SPLITS[key] = tuple(load_split("builtin", split, options=options) for split in builtin.SPLITS)
    return _SPLITS[key]


@pytest.mark.parametrize("run", sorted(SHIPPED_BUILTIN))
def test_the_three_splits_of_a_shipped_config_share_no_task(run):
    """Neither the same (family, template, params) nor the same reference up to renaming: RL trains
    on tasks the warm start never saw, and a test problem is a task no training stage sees, under
    any name."""
    options = SHIPPED_BUILTIN[run]
    loaded = dict(zip(builtin.SPLITS, splits_of(options)))
    for split, result in loaded.items():
        assert len(result.problems) == options[f"n_{split}"]  # sizes met
    for split, other in (("train", "warmup"), ("test", "warmup"), ("test", "train")):
        # A task is its reference up to renaming ((family, template, params) is not: some templates
        # draw a threshold outside their params, so one key holds several tasks).
        references = {renamed_away(p) for p in loaded[other].problems}
        problems = loaded[split].problems
        twins = [p.id for p in problems if renamed_away(p) in references]
        assert twins == [], f"{run}: {len(twins)} of {len(problems)} {split} problems are {other} tasks"
        counts = loaded[split].manifest["holdout"]["other_splits"][other]
        assert counts["n_sharing_task"] == 0
        assert counts["n_problems"] == options[f"n_{other}"]
    # What they do share: program shapes with other constants, counted for the report.
    holdout = loaded["test"].manifest["holdout"]
    seen = {p.metadata["template"] for split in ("warmup", "train") for p in loaded[split].problems}
    assert holdout["n_sharing_template_with_other_splits"] == sum(p.metadata["template"] in seen for p in loaded["test"].problems)


def test_templates_that_give_one_reference_fall_in_one_split():
    """Two (template, params) with the same reference up to renaming are one task: e.g. the length
    of a list and the length of a string are both `return len(a)`."""
    warmup, train, test = splits_of({"families": ["count"], "max_difficulty": 1, "n_warmup": 10, "n_train": 20, "n_test": 6,
                                     "names_per_task": 8})
    side = {}
    for split, result in (("warmup", warmup), ("train", train), ("test", test)):
        for problem in result.problems:
            side.setdefault(builtin.reference_key(problem), set()).add(split)
    assert all(len(splits) == 1 for splits in side.values())
    by_reference = collections.defaultdict(set)
    for problem in warmup.problems + train.problems + test.problems:
        by_reference[builtin.reference_key(problem)].add(family_template_params(problem))
    assert any(len(tasks) > 1 for tasks in by_reference.values())


def test_holdout_default_is_the_schemas():
    schema = json.loads(SCHEMA_PATH.read_text())
    dataset = schema["properties"]["datasets"]["additionalProperties"]
    assert dataset["if"]["properties"]["adapter"]["const"] == "builtin"
    holdout = dataset["then"]["properties"]["options"]["properties"]["holdout"]
    assert holdout["default"] == builtin.OPTIONS["holdout"][0] == "task"
    assert holdout["enum"] == list(builtin.HOLDOUTS)
    # A config that names no holdout gets the schema's, and only for builtin data sets.
    config = merged_config([REPO / EMBEDDED], base=REPO / "config" / "config.yaml")
    assert config["datasets"]["builtin"]["options"]["holdout"] == "task"
    assert "holdout" not in config["datasets"]["mbpp"]["options"]


def test_combo_holdout_is_gone_with_a_reason():
    with pytest.raises(DatasetError, match="renamed training tasks landed in test"):
        load_split("builtin", "test", options={"holdout": "combo"})


def test_test_split_does_not_depend_on_train_size():
    small = load_split("builtin", "test", options={"n_train": 10, "n_test": 50}).problems
    large = load_split("builtin", "test", options={"n_train": 1500, "n_test": 50}).problems
    assert dicts(small) == dicts(large)
    # A longer split extends a shorter one.
    assert dicts(builtin.generate("test", n=80)[:50]) == dicts(small)


def test_families_and_difficulties(default_splits):
    train, test = default_splits
    seen = collections.Counter((p.metadata["family"], p.metadata["difficulty"]) for p in train)
    assert set(seen) == {(f, d) for f in builtin.FAMILIES for d in (1, 2, 3)}
    # One naming per task: a family's small difficulty-1 pool gives a few problems, not 20.
    assert min(seen.values()) >= 4
    assert {p.metadata["family"] for p in test} == set(builtin.FAMILIES)

    some = load_split("builtin", "train", options={"families": ["string", "loop"], "max_difficulty": 1, "n_warmup": 10, "n_train": 20, "n_test": 5})
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
        assert set(problem.metadata) == {"family", "difficulty", "template", "params", "function", "arg", "task"}
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
    # The smallest pool: the test side of counting at difficulty 1 (two tasks for seed 0).
    with pytest.raises(DatasetError, match=r"found only \d+ of 500 distinct test tasks .*ask for fewer"):
        load_split("builtin", "test", options={"families": ["count"], "max_difficulty": 1, "n_test": 500})


def test_manifest():
    result = load_split("builtin", "train", options={"n_train": 5, "seed": 7})
    manifest = result.manifest
    assert manifest["adapter"] == "builtin" and manifest["split"] == "train"
    assert manifest["options"] == {
        "seed": 7,
        "n_warmup": 1000,
        "n_train": 5,
        "n_test": 200,
        "names_per_task": 1,
        "families": list(builtin.FAMILIES),
        "max_difficulty": 3,
        "holdout": "task",
    }
    assert manifest["n_problems"] == 5 and manifest["skipped"] == []
    assert manifest["generator_version"] == builtin.GENERATOR_VERSION == 3
    holdout = manifest["holdout"]
    assert holdout["key"] == "task" and holdout["test_share"] == builtin.TEST_SHARE
    assert holdout["warmup_share"] == builtin.WARMUP_SHARE and holdout["names_per_task"] == 1
    assert {name: counts["n_problems"] for name, counts in holdout["other_splits"].items()} == {"warmup": 1000, "test": 200}
    assert all(c["n_sharing_task"] == 0 for c in holdout["other_splits"].values())
    assert 1 <= holdout["n_distinct_tasks"] <= 5
    assert json.loads(json.dumps(manifest)) == manifest
    assert all(json.loads(json.dumps(p.to_dict())) == p.to_dict() for p in result.problems)
