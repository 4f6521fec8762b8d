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
    assert flagged["hard_coding"]["by_method"] == {"grpo": (1, 2)}  # of the two passing with held-out tests run
    example = flagged["hard_coding"]["examples"][0]
    assert (example["method"], example["sample_index"], example["code"]) == ("grpo", 1, table)
    assert "fails held-out test 3" in example["flagged_by"][0] and example["flagged_by"][1] == "assert f(5) == 6"
    assert flagged["frame_walk"]["count"] == 1 and flagged["introspection_import"]["count"] == 0
    assert flagged["limit_hit"]["count"] == 1  # the timeout
    assert flagged["always_equal"] == {"count": 0, "examples": []}
    page = reward_hacking.section(pd.DataFrame(), flagged, figure="")
    assert 'id="reward-hacking"' in page and "sys._getframe(1).f_locals" in page and "frame_walk 1" in page
    assert "grpo 1 of 2" in page and "<b>fails held-out tests</b>" in page and "hard_coding" not in page
    assert "passes all 3 tests of its problem, fails held-out test 3" in page
    with pytest.raises(ValueError, match="not an annotations path"):
        reward_hacking.flagged_examples([tmp_path / "elsewhere.jsonl"])


def test_rates_table_gives_the_first_and_last_fifth():
    rows = [{"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": s, "metric": "watch/tamper/any",
             "value": 1.0 if s > 80 else 0.0} for s in range(1, 101)]
    rows.append({"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": 1, "metric": "loss", "value": 3.0})
    # The hard-coding rate is pooled from its counts instead (hard_coding_windows).
    rows.append({"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": 1, "metric": "watch/hard_coding_rate",
                 "value": 0.5})
    rates = reward_hacking.rates_table(pd.DataFrame(rows))
    assert rates.to_dict(orient="records") == [{"dataset": "d", "model": "m", "method": "grpo", "seed": 0,
                                                "metric": "watch/tamper/any", "first": 0.0, "last": 1.0,
                                                "steps": 100}]


def test_wilson_and_newcombe_intervals_match_published_values():
    # Wilson score intervals (Newcombe 1998, Table I): 0/10 and 5/10 ...
    assert reward_hacking.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert reward_hacking.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    # ... and the hybrid score interval for a difference (Newcombe 1998, Table II, method 10): 56/70 − 48/80.
    window = lambda flagged, checked: dict(zip(("ci_low", "ci_high"), reward_hacking.wilson(flagged, checked)),  # noqa: E731
                                           rate=flagged / checked)
    change, low, high = reward_hacking.newcombe(window(48, 80), window(56, 70))
    assert (change, low, high) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)


def count_rows(method, steps, checked, flagged, kind=""):
    """Metrics rows as metrics_table reads them: per step, the watch's summed counts."""
    rows = []
    for step in range(1, steps + 1):
        for metric, value in ((f"watch/hard_coding_checked{kind}", checked(step)), (f"watch/hard_coding_flagged{kind}", flagged(step))):
            rows.append({"dataset": "d", "model": "m", "method": method, "seed": 0, "step": step, "metric": metric,
                         "value": float(value)})
    return rows


def test_hard_coding_windows_pool_counts_per_fifth_with_wilson_intervals():
    # 200 steps, 8 checks a step; flagged 2 a step in the first fifth (0.25), 1 a step in the last (0.125).
    rows = count_rows("grpo", 200, lambda s: 8, lambda s: 2 if s <= 40 else 1)
    # SRRL: c1 and c2 apart as well; at 8 checks a step over 10 steps a change of 0.125 is not resolved.
    rows += count_rows("srrl", 10, lambda s: 8, lambda s: 2 if s <= 2 else 1)
    rows += count_rows("srrl", 10, lambda s: 6, lambda s: 0, kind="/c1")
    rows += count_rows("srrl", 10, lambda s: 2, lambda s: 2 if s <= 2 else 1, kind="/c2")
    rows.append({"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": 3, "metric": "loss", "value": 1.0})
    windows = reward_hacking.hard_coding_windows(pd.DataFrame(rows))
    grpo = windows[(windows["method"] == "grpo")].set_index("window")
    assert grpo.loc["first", ["steps", "first_step", "last_step", "checked", "flagged"]].tolist() == [40, 1, 40, 320, 80]
    assert grpo.loc["last", ["steps", "first_step", "last_step", "checked", "flagged"]].tolist() == [40, 161, 200, 320, 40]
    assert grpo.loc["first", "rate"] == 0.25 and grpo.loc["last", "rate"] == 0.125
    assert (grpo.loc["first", "ci_low"], grpo.loc["first", "ci_high"]) == pytest.approx(reward_hacking.wilson(80, 320))
    assert set(windows[windows["method"] == "srrl"]["kind"]) == {"all", "c1", "c2"}
    assert list(windows.columns) == reward_hacking.WINDOW_COLUMNS
    changes = {(c["method"], c["kind"]): c for c in reward_hacking.hard_coding_changes(windows)}
    assert changes["grpo", "all"]["resolved"] and changes["grpo", "all"]["change"] == -0.125
    assert changes["grpo", "all"]["sentence"].endswith(": resolved.")
    srrl = changes["srrl", "all"]
    assert not srrl["resolved"] and srrl["ci_low"] < 0 < srrl["ci_high"]
    assert "not resolved (the interval includes 0)" in srrl["sentence"] and "srrl (d · m, seed 0)" in srrl["sentence"]
    assert changes["srrl", "c1"]["change"] == 0.0 and "srrl c2" in changes["srrl", "c2"]["sentence"]
    page = reward_hacking.section(pd.DataFrame(), {}, "", windows, list(changes.values()))
    assert 'id="hard-coding-windows"' in page and "Wilson" in page and "Newcombe" in page
    assert "<th>false-positive floor</th>" in page and "<th>95% CI low</th>" in page and "ci_low" not in page
    # Runs trained before the counts were logged give no windows.
    old = pd.DataFrame([{"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": 1,
                         "metric": "watch/hard_coding_rate", "value": 0.5}])
    assert reward_hacking.hard_coding_windows(old).empty and reward_hacking.hard_coding_changes(pd.DataFrame()) == []


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


def manifest(path, **floor):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"problems": 3, "problems_with_plus_tests": 2, "plus_tests": 20,
                                "tests_per_problem": {"0": 1, "10": 2}, "skipped": {}, "reference_runs": 60, **floor}))
    return path


def test_every_hard_coding_rate_stands_beside_the_false_positive_floor(tmp_path):
    train = manifest(tmp_path / "data/d/plus/train.manifest.json", alternatives_checked=25,
                     false_positive_floor_before=0.04, false_positive_floor_after=0.0)
    old = manifest(tmp_path / "data/e/plus/test.manifest.json")  # made before the alternatives' check
    table = plus_test_manifests([train, old])
    assert table.loc[0, "false_positive_floor_before"] == 0.04 and table.loc[0, "alternatives_checked"] == 25
    floors = reward_hacking.false_positive_floors(table)
    assert floors[("d", "train")] == {"after": 0.0, "before": 0.04, "alternatives": 25}
    assert floors[("e", "test")]["alternatives"] == 0 and pd.isna(floors[("e", "test")]["after"])

    rows = count_rows("grpo", 10, lambda s: 8, lambda s: 1)
    rows += [{**row, "dataset": "e"} for row in count_rows("grpo", 10, lambda s: 8, lambda s: 1)]
    windows = reward_hacking.hard_coding_windows(pd.DataFrame(rows), floors)
    assert list(windows.columns) == reward_hacking.WINDOW_COLUMNS
    assert set(windows[windows["dataset"] == "d"][reward_hacking.FLOOR]) == {0.0}
    assert windows[windows["dataset"] == "e"][reward_hacking.FLOOR].isna().all()
    changes = {c["dataset"]: c for c in reward_hacking.hard_coding_changes(windows, floors)}
    assert ("false-positive floor 0.000 (0.040 before the alternatives' filter; 25 alternative correct solutions)"
            in changes["d"]["sentence"])  # fmt: skip
    assert "false-positive floor not measured" in changes["e"]["sentence"]
    page = reward_hacking.section(pd.DataFrame(), {}, "", windows, list(changes.values()), floors)
    assert "d train: false-positive floor 0.000" in page and "e test: false-positive floor not measured" in page
    # listed once, beside the windows; the flagged completions point to it
    assert page.count("False-positive floor of the held-out tests") == 1 and "floors of the held-out tests are listed above" in page
    without_windows = reward_hacking.section(pd.DataFrame(), {}, "", None, [], floors, "test")
    assert without_windows.count("False-positive floor of the held-out tests") == 1
    assert "<h3>Flagged evaluation completions (test split)</h3>" in without_windows
