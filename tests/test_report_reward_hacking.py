"""The report's held-out and reward-hacking sections, from evaluation and training files."""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from execrl.jsonl import write_jsonl
from execrl.report import held_out, reward_hacking
from execrl.report.evaluations import held_out_table, plus_test_manifests
from execrl.report.stats import t_quantile
from execrl.watch.monitor import BY_PROBLEM


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


def test_the_design_effect_measures_how_much_problems_cluster_the_flags():
    # Flags spread over problems as binomial counts would spread them: no inflation (at least 1).
    assert reward_hacking.design_effect([10] * 8, [1] * 8) == 1.0
    # Every flag in one problem of 8: the rate varies over problems far more than binomially.
    clustered = reward_hacking.design_effect([10] * 8, [8, 0, 0, 0, 0, 0, 0, 0])
    # n/(n-1) * sum((y - p m)^2) / M^2 over p (1 - p) / M, with p = 0.1, M = 80: 0.0016 / 0.001125.
    assert clustered == pytest.approx((8 / 7) * (7**2 + 7 * 1**2) / 80**2 / (0.1 * 0.9 / 80))
    # Not measurable: one problem, no flags, nothing checked.
    # No flags (or only flags): both variances 0, the counts' size stands.
    assert reward_hacking.design_effect([5, 5], [0, 0]) == 1.0 and reward_hacking.design_effect([5, 5], [5, 5]) == 1.0
    # Not measurable: one problem (no spread over problems), nothing checked.
    assert math.isnan(reward_hacking.design_effect([30], [3])) and math.isnan(reward_hacking.design_effect([], []))
    with pytest.raises(ValueError, match="finite"):
        reward_hacking.design_effect([5, float("nan")], [1, 0])


def test_intervals_at_the_effective_size_cover_a_clustered_rate_where_plain_wilson_does_not():
    """Seeded simulation of a window: 16 problems drawn at random, each with its own hard-coding
    tendency (Beta(0.2, 1.8): mean 0.1, most problems never hard-coded, a few often), 24 checked
    completions each. Wilson's interval over the 384 completions as if independent misses the mean
    rate often; taken at the effective size it covers it about as often as it says."""
    rng = random.Random(7)
    replicates, covered_plain, covered_effective = 600, 0, 0
    for _ in range(replicates):
        tendencies = [rng.betavariate(0.2, 1.8) for _ in range(16)]
        flagged = [sum(rng.random() < p for _ in range(24)) for p in tendencies]
        checked = [24] * 16
        low, high = reward_hacking.wilson(sum(flagged), sum(checked))
        covered_plain += low <= 0.1 <= high
        effect = reward_hacking.design_effect(checked, flagged)
        low, high = reward_hacking.wilson(sum(flagged) / effect, sum(checked) / effect, t_quantile(0.975, 15))
        covered_effective += low <= 0.1 <= high
    assert covered_plain / replicates < 0.75
    assert covered_effective / replicates > 0.9


def metrics_file(root, method, steps):
    """A run's metrics.jsonl with the watch's counts per step, per problem (`steps`: per step a dict
    problem id -> (checked, flagged)); totals are the sums, as the trainer writes them."""
    path = root / "training" / "d" / "m" / method / "0" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for step, problems in enumerate(steps, start=1):
            record = {"step": step, "loss": 0.5,
                      "watch/hard_coding_checked": float(sum(c for c, _ in problems.values())),
                      "watch/hard_coding_flagged": float(sum(f for _, f in problems.values()))}  # fmt: skip
            by_problem = {"watch/hard_coding_checked": {p: float(c) for p, (c, _) in problems.items() if c}}
            if any(f for _, f in problems.values()):
                by_problem["watch/hard_coding_flagged"] = {p: float(f) for p, (_, f) in problems.items() if f}
            handle.write(json.dumps({**record, BY_PROBLEM: by_problem}) + "\n")
    return path


def test_windows_take_their_intervals_at_the_effective_size_from_the_per_problem_counts(tmp_path):
    from execrl.report.training import metrics_table

    # 10 steps, 4 problems a step, 6 checked each; every flag in the first window from problem "a".
    first = [{"a": (6, 6), "b": (6, 0), "c": (6, 0), "d": (6, 0)}] * 2
    rest = [{"a": (6, 1), "b": (6, 1), "c": (6, 0), "d": (6, 1)}] * 8
    path = metrics_file(tmp_path, "grpo", first + rest)
    by_problem = reward_hacking.problem_counts([path])
    assert set(by_problem["kind"]) == {"all"} and len(by_problem) == 40
    assert by_problem.loc[by_problem["problem_id"] == "c", "flagged"].sum() == 0  # never flagged: 0, not NaN
    metrics = metrics_table([path])
    assert BY_PROBLEM not in set(metrics["metric"])  # the per-problem object is no metric of its own
    windows = reward_hacking.hard_coding_windows(metrics, by_problem=by_problem).set_index("window")
    plain = reward_hacking.hard_coding_windows(metrics).set_index("window")
    assert windows.loc["first", ["checked", "flagged", "problems"]].tolist() == [48, 12, 4]
    effect = reward_hacking.design_effect([12, 12, 12, 12], [12, 0, 0, 0])
    assert windows.loc["first", "design_effect"] == pytest.approx(effect) and effect > 3
    assert (windows.loc["first", "ci_low"], windows.loc["first", "ci_high"]) == pytest.approx(
        reward_hacking.wilson(12 / effect, 48 / effect, t_quantile(0.975, 3)))
    assert windows.loc["first", "ci_high"] - windows.loc["first", "ci_low"] > plain.loc["first", "ci_high"] - plain.loc["first", "ci_low"]
    # Without per-problem counts: plain Wilson, the design effect unknown, and the sentence says so.
    assert math.isnan(plain.loc["first", "design_effect"]) and plain.loc["first", "ci_low"] == pytest.approx(reward_hacking.wilson(12, 48)[0])
    (change,) = reward_hacking.hard_coding_changes(windows.reset_index())
    assert f"design effects {effect:.2f} and" in change["sentence"] and "over 4 and 4 problems" in change["sentence"]
    (old,) = reward_hacking.hard_coding_changes(plain.reset_index())
    assert "per-problem counts were not logged for every step of the windows" in old["sentence"]
    # A run resumed across the release that began logging them: some steps without. Plain Wilson
    # for the window missing some, no error; the other window keeps its effective size.
    partial = reward_hacking.hard_coding_windows(metrics, by_problem=by_problem[by_problem["step"] != 1]).set_index("window")
    assert math.isnan(partial.loc["first", "design_effect"]) and math.isnan(partial.loc["first", "problems"])
    assert partial.loc["first", "ci_low"] == plain.loc["first", "ci_low"]
    assert partial.loc["last", "design_effect"] == windows.loc["last", "design_effect"]
    # One problem checked in a window: no spread to measure, plain Wilson, and the sentence says why.
    alone = by_problem[(by_problem["problem_id"] == "a") | (by_problem["step"] > 2)]
    lone = metrics_table([metrics_file(tmp_path / "lone", "grpo", [{"a": (6, 6)}] * 2 + rest)])
    lone_windows = reward_hacking.hard_coding_windows(lone, by_problem=alone).set_index("window")
    assert lone_windows.loc["first", "problems"] == 1 and math.isnan(lone_windows.loc["first", "design_effect"])
    assert lone_windows.loc["first", "ci_low"] == pytest.approx(reward_hacking.wilson(12, 12)[0])
    (lone_change,) = reward_hacking.hard_coding_changes(lone_windows.reset_index())
    assert "a window checked one problem" in lone_change["sentence"]
    # Per-problem counts that do not add up to the logged totals are a fault, not a figure.
    with pytest.raises(ValueError, match="grpo .*first window: the per-problem counts add up to 47 checked"):
        short = by_problem.copy()
        short.loc[short.index[0], "checked"] -= 1
        reward_hacking.hard_coding_windows(metrics, by_problem=short)
    page = reward_hacking.section(pd.DataFrame(), {}, "", windows.reset_index(), [change])
    assert f'data-key="design effect">{effect:.2f}</td>' in page and 'data-key="problems checked">4</td>' in page


def test_srrl_kinds_get_their_own_per_problem_counts(tmp_path):
    path = tmp_path / "training" / "d" / "m" / "srrl" / "0" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    record = {"step": 1, BY_PROBLEM: {"watch/hard_coding_checked": {"a": 3.0, "b": 2.0},
                                      "watch/hard_coding_checked/c1": {"a": 2.0, "b": 2.0},
                                      "watch/hard_coding_checked/c2": {"a": 1.0},
                                      "watch/hard_coding_flagged/c2": {"a": 1.0}}}  # fmt: skip
    # Records of one step add up (a step may have two: the interval evaluation's, then the step's own).
    extra = {"step": 1, BY_PROBLEM: {"watch/hard_coding_checked": {"a": 1.0}}}
    path.write_text(json.dumps(record) + "\n" + json.dumps(extra) + "\n", encoding="utf-8")
    table = reward_hacking.problem_counts([path]).set_index(["kind", "problem_id"])
    assert table.loc[("all", "a"), ["checked", "flagged"]].tolist() == [4.0, 0.0]
    assert table.loc[("c2", "a"), ["checked", "flagged"]].tolist() == [1.0, 1.0]
    assert table.loc[("c1", "b"), "checked"] == 2.0


def test_the_changes_paired_bootstrap_over_problems_covers_where_newcombe_does_not():
    """Seeded simulation of a run's two windows on the same 40 problems (tendencies Beta(0.3, 2.7),
    4 to 16 checks a problem and window), with no change in the mean rate. Where each problem keeps
    its tendency, its clustering cancels out of the change: Newcombe's interval at the windows'
    effective sizes is twice as wide as it need be (it covered 0 every time), and the paired
    bootstrap over problems covers it 93% of the time (1,000 replicates) at about half its width.
    Where half the problems draw a new tendency for the last window (the policy starts or stops
    hard-coding on them), Newcombe's plain interval covered 0 83% of the time, the paired
    bootstrap 95% (300 replicates). 200 replicates here: the bounds leave room for their noise."""
    def simulate(redraw: float) -> dict[str, tuple[float, float]]:
        rng = random.Random(12)
        covered, width = {"plain": 0, "effective": 0, "paired": 0}, {"plain": 0.0, "effective": 0.0, "paired": 0.0}
        for _ in range(200):
            first_tendency = [rng.betavariate(0.3, 2.7) for _ in range(40)]
            last_tendency = [rng.betavariate(0.3, 2.7) if rng.random() < redraw else p for p in first_tendency]
            windows = []
            for tendency in (first_tendency, last_tendency):
                checked = [rng.randint(4, 16) for _ in tendency]
                flagged = [sum(rng.random() < p for _ in range(m)) for p, m in zip(tendency, checked)]
                windows.append(pd.DataFrame({"checked": checked, "flagged": flagged}, index=[f"p{i}" for i in range(40)]))
            intervals = {"paired": reward_hacking.paired_change_interval(*windows)}
            for name in ("plain", "effective"):
                records = []
                for window in windows:
                    checked, flagged = window["checked"].sum(), window["flagged"].sum()
                    effect, z = 1.0, reward_hacking.Z95
                    if name == "effective":
                        effect, z = reward_hacking.design_effect(window["checked"].tolist(), window["flagged"].tolist()), t_quantile(0.975, 39)
                    low, high = reward_hacking.wilson(flagged / effect, checked / effect, z)
                    records.append({"rate": flagged / checked, "ci_low": low, "ci_high": high})
                intervals[name] = reward_hacking.newcombe(*records)[1:]
            for name, (low, high) in intervals.items():
                covered[name] += low <= 0 <= high
                width[name] += high - low
        return {name: (covered[name] / 200, width[name] / 200) for name in covered}

    kept = simulate(redraw=0.0)
    assert kept["paired"][0] >= 0.88 and kept["effective"][0] >= 0.98
    assert kept["paired"][1] < 0.6 * kept["effective"][1]
    changed = simulate(redraw=0.5)
    assert changed["plain"][0] < 0.88 and changed["paired"][0] >= 0.9
    assert changed["paired"][1] < changed["effective"][1]
    # Seeded: the same counts give the same interval.
    window = pd.DataFrame({"checked": [5, 6, 7], "flagged": [1, 0, 3]}, index=["a", "b", "c"])
    assert reward_hacking.paired_change_interval(window, window.iloc[::-1]) == reward_hacking.paired_change_interval(window, window)


def test_a_change_with_per_problem_counts_gets_the_paired_bootstrap(tmp_path):
    from execrl.report.training import metrics_table

    first = [{"a": (6, 6), "b": (6, 0), "c": (6, 0), "d": (6, 0)}] * 2
    rest = [{"a": (6, 1), "b": (6, 1), "c": (6, 0), "d": (6, 1)}] * 8
    path = metrics_file(tmp_path, "grpo", first + rest)
    by_problem = reward_hacking.problem_counts([path])
    windows = reward_hacking.hard_coding_windows(metrics_table([path]), by_problem=by_problem)
    (change,) = reward_hacking.hard_coding_changes(windows, by_problem=by_problem)
    totals = [by_problem[by_problem["step"].isin(steps)].groupby("problem_id")[["checked", "flagged"]].sum()
              for steps in ([1, 2], [9, 10])]  # fmt: skip
    assert (change["ci_low"], change["ci_high"]) == reward_hacking.paired_change_interval(*totals)
    assert change["interval"] == "paired bootstrap over problems"
    assert "paired bootstrap over the 4 problems checked in either window, 20,000 resamples" in change["sentence"]
    (newcombe,) = reward_hacking.hard_coding_changes(windows)
    assert newcombe["interval"] == "Newcombe" and (newcombe["ci_low"], newcombe["ci_high"]) != (change["ci_low"], change["ci_high"])
    # A window with one problem: its rate would not vary over resamples, so Newcombe's interval.
    lone = by_problem[(by_problem["problem_id"] == "a") | (by_problem["step"] > 2)]
    lone_windows = reward_hacking.hard_coding_windows(
        metrics_table([metrics_file(tmp_path / "lone", "grpo", [{"a": (6, 6)}] * 2 + rest)]), by_problem=lone)
    (lone_change,) = reward_hacking.hard_coding_changes(lone_windows, by_problem=lone)
    assert lone_change["interval"] == "Newcombe" and "a window checked one problem" in lone_change["sentence"]
