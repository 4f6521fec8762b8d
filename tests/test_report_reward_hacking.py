"""The report's held-out and reward-hacking sections, from evaluation and training files."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from execrl.jsonl import write_jsonl
from execrl.report import held_out, reward_hacking
from execrl.report.evaluations import held_out_table, plus_test_manifests


def annotation(problem_id, index, status, code, outcomes=None, error_type=None):
    return {"problem_id": problem_id, "sample_index": index, "status": status, "code": code, "tests_passed": 0,
            "tests_total": 3, "test_outcomes": outcomes or [], "error_type": error_type, "error_message": None}


def test_flagged_examples_find_hard_coding_and_tampering(tmp_path):
    run = tmp_path / "results/annotations/builtin/tiny/grpo/0"
    honest = "def f(x):\n    return x + 1\n"
    table = "def f(x):\n    return {1: 2}.get(x)\n"
    probe = "import sys\ndef f(x):\n    return sys._getframe(1).f_locals\n"
    write_jsonl([annotation("p", 0, "pass", honest), annotation("p", 1, "pass", table),
                 annotation("p", 2, "fail", probe), annotation("q", 0, "timeout", honest)], run / "test.jsonl")
    plus = [{"index": 3, "status": "fail", "message": "assert f(5) == 6"}]
    write_jsonl([annotation("p", 0, "pass", honest), annotation("p", 1, "fail", table, plus),
                 annotation("p", 2, "fail", probe), annotation("q", 0, "timeout", honest)], run / "test.plus.jsonl")
    flagged = reward_hacking.flagged_examples(sorted(run.glob("*.jsonl")))
    assert flagged["hard_coding"]["count"] == 1
    example = flagged["hard_coding"]["examples"][0]
    assert (example["method"], example["sample_index"], example["code"]) == ("grpo", 1, table)
    assert "fails held-out test 3" in example["flagged_by"][0] and example["flagged_by"][1] == "assert f(5) == 6"
    assert flagged["frame_walk"]["count"] == 1 and flagged["introspection_import"]["count"] == 0
    assert flagged["limit_hit"]["count"] == 1  # the timeout
    assert flagged["always_equal"] == {"count": 0, "examples": []}
    page = reward_hacking.section(pd.DataFrame(), flagged, figure="")
    assert 'id="reward-hacking"' in page and "sys._getframe(1).f_locals" in page and "hard_coding 1" in page
    with pytest.raises(ValueError, match="not an annotations path"):
        reward_hacking.flagged_examples([tmp_path / "elsewhere.jsonl"])


def test_rates_table_gives_the_first_and_last_tenth():
    rows = [{"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": s, "metric": "watch/hard_coding_rate",
             "value": 1.0 if s > 90 else 0.0} for s in range(1, 101)]
    rows.append({"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": 1, "metric": "loss", "value": 3.0})
    rates = reward_hacking.rates_table(pd.DataFrame(rows))
    assert rates.to_dict(orient="records") == [{"dataset": "d", "model": "m", "method": "grpo", "seed": 0,
                                                "metric": "watch/hard_coding_rate", "first": 0.0, "last": 1.0,
                                                "steps": 100}]


def evaluation(path, method, value):
    record = {"run": {"dataset": "d", "model": "m", "method": method, "seed": 0, "split": "test"},
              "pass_at_k": {"1": value}, "n_problems": 2, "n_samples": 4}
    path.write_text(json.dumps(record))
    return path


def test_held_out_table_pairs_base_and_plus(tmp_path):
    base = [evaluation(tmp_path / "a.json", "base", 0.5), evaluation(tmp_path / "b.json", "grpo", 0.75)]
    plus = [evaluation(tmp_path / "a.plus.json", "base", 0.5), evaluation(tmp_path / "b.plus.json", "grpo", 0.25)]
    table = held_out_table(base, plus)
    assert table[["method", "pass_at_k_base", "pass_at_k_plus", "gap"]].values.tolist() == [
        ["base", 0.5, 0.5, 0.0], ["grpo", 0.75, 0.25, 0.5]]
    records = held_out.method_records(table, "test")
    assert [(r["method"], r["gap"]) for r in records] == [("base", 0.0), ("grpo", 0.5)]
    manifest = tmp_path / "data/d/test.plus.manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"problems": 3, "problems_with_plus_tests": 2, "plus_tests": 20,
                                    "tests_per_problem": {"0": 1, "10": 2}, "skipped": {}, "reference_runs": 60}))
    page = held_out.section(records, plus_test_manifests([manifest]), "test")
    assert "2 of 3 problems got held-out tests, 20 in all" in page
    with pytest.raises(ValueError, match="has no base evaluation"):
        held_out_table(base[:1], plus)
