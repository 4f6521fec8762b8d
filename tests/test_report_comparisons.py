"""Methods compared pairwise (SRRL against GRPO and configured pairs): the paired interval, the
problems fixed and broken, the seed-noise rule, the config key, and the report's section."""

import copy

import numpy as np
import pandas as pd
import pytest

from execrl.config import ConfigError, check_references, merged_config
from execrl.report import stats

N = 4


def runs(passing: dict[tuple[str, int], list[int]]) -> pd.DataFrame:
    """A per-problem table from passing samples (of N) per (method, seed), one entry per problem."""
    return pd.DataFrame(
        [
            {"dataset": "d", "model": "m", "method": method, "seed": seed, "split": "test", "problem_id": f"p{i:02d}",
             "n": N, "c": c}
            for (method, seed), counts in passing.items()
            for i, c in enumerate(counts)
        ]
    )


def first(comparison: pd.DataFrame, method="srrl", baseline="grpo", k=1) -> pd.Series:
    rows = comparison.query("method == @method and baseline == @baseline and k == @k")
    assert len(rows) == 1
    return rows.iloc[0]


def test_srrl_clearly_better_has_an_interval_above_zero():
    rng = np.random.default_rng(3)
    passing = {}
    for seed in range(3):
        passing[("grpo", seed)] = list(rng.integers(0, 2, 40))  # 0 or 1 of 4
        passing[("srrl", seed)] = [c + 2 for c in passing[("grpo", seed)]]  # two more on every problem
    comparison = stats.compare_methods(runs(passing), [("srrl", "grpo")], n_boot=400)
    row = first(comparison)
    assert row["delta"] == pytest.approx(0.5) and row["ci_low"] > 0 and row["ci_high"] >= row["delta"]
    assert row["n_seeds"] == 3 and row["n_problems"] == 40
    assert row["seeds_ahead"] == 3 and row["seeds_behind"] == 0
    assert row["sd_seeds"] == pytest.approx(0.0) and not row["within_seed_noise"]
    # The reverse pair is the mirror image.
    reverse = first(stats.compare_methods(runs(passing), [("grpo", "srrl")], n_boot=400), "grpo", "srrl")
    assert reverse["delta"] == pytest.approx(-0.5) and reverse["ci_high"] < 0


def test_identical_methods_differ_by_nothing():
    rng = np.random.default_rng(4)
    passing = {}
    for seed in range(2):
        counts = list(rng.integers(0, N + 1, 25))
        passing[("grpo", seed)] = counts
        passing[("srrl", seed)] = counts
    comparison = stats.compare_methods(runs(passing), [("srrl", "grpo")], n_boot=300)
    for k in range(1, N + 1):
        row = first(comparison, k=k)
        assert row["delta"] == 0 and row["ci_low"] <= 0 <= row["ci_high"]
        assert row["fixed"] == row["broken"] == row["improved"] == row["worse"] == 0
        assert row["seeds_ahead"] == row["seeds_behind"] == 0


def test_the_interval_is_paired_over_problems():
    # SRRL is one sample better on every problem while problems differ wildly in difficulty: an
    # unpaired interval would straddle zero, the paired one does not.
    grpo = [0, 4, 1, 3, 0, 4, 2, 0, 3, 1] * 3
    srrl = [min(c + 1, N) if c < N else c for c in grpo]
    row = first(stats.compare_methods(runs({("grpo", 0): grpo, ("srrl", 0): srrl}), [("srrl", "grpo")], n_boot=500))
    assert row["ci_low"] > 0
    unpaired = stats.pass_at_k_curves(runs({("grpo", 0): grpo, ("srrl", 0): srrl}), n_boot=500).query("k == 1")
    by_method = unpaired.set_index("method")
    assert by_method.loc["srrl", "ci_low"] < by_method.loc["grpo", "ci_high"]  # the per-method intervals overlap


def test_fixed_and_broken_against_another_method():
    grpo = {("grpo", 0): [0, 0, 2, 3, 1, 0], ("grpo", 1): [0, 1, 1, 3, 0, 0]}
    srrl = {("srrl", 0): [1, 0, 0, 4, 1, 0], ("srrl", 1): [0, 0, 0, 3, 2, 0]}
    # Pooled over seeds: grpo [0, 1, 3, 6, 1, 0], srrl [1, 0, 0, 7, 3, 0].
    table = runs({**grpo, **srrl})
    row = first(stats.compare_methods(table, [("srrl", "grpo")], n_boot=200))
    assert (row["fixed"], row["broken"], row["improved"], row["worse"]) == (1, 2, 3, 2)
    assert (row["solved"], row["baseline_solved"]) == (3, 4)
    changes = stats.changed_problems(table, [("srrl", "grpo")])
    assert set(changes.query("change == 'fixed'")["problem_id"]) == {"p00"}
    assert set(changes.query("change == 'broken'")["problem_id"]) == {"p01", "p02"}
    assert set(changes["baseline"]) == {"grpo"}


def test_seed_noise_rule():
    # Per-seed differences +0.25, -0.25, +0.25 (whole samples of four on every problem): the mean,
    # +0.083, is smaller than their sd (0.289), so it is inside seed-to-seed noise.
    base = [1] * 20
    passing = {("grpo", s): base for s in range(3)}
    passing.update({("srrl", 0): [2] * 20, ("srrl", 1): [0] * 20, ("srrl", 2): [2] * 20})
    row = first(stats.compare_methods(runs(passing), [("srrl", "grpo")], n_boot=300))
    assert row["delta"] == pytest.approx(0.25 / 3)
    assert row["sd_seeds"] == pytest.approx(np.std([0.25, -0.25, 0.25], ddof=1))
    assert row["within_seed_noise"] and (row["seeds_ahead"], row["seeds_behind"]) == (2, 1)
    # Every seed ahead by 0.25 ± 0.05: |Δ| far above the sd, outside the noise.
    passing.update({("srrl", 0): [2] * 20, ("srrl", 1): [2] * 18 + [1, 3], ("srrl", 2): [2] * 19 + [3]})
    row = first(stats.compare_methods(runs(passing), [("srrl", "grpo")], n_boot=300))
    assert not row["within_seed_noise"] and row["sd_seeds"] < abs(row["delta"])
    # One seed: the noise is not measured.
    one = first(stats.compare_methods(runs({("grpo", 0): base, ("srrl", 0): [2] * 20}), [("srrl", "grpo")], n_boot=100))
    assert np.isnan(one["sd_seeds"]) and one["within_seed_noise"] is None


def test_comparisons_use_the_seeds_and_problems_both_have():
    passing = {("grpo", 0): [1, 1, 1], ("grpo", 1): [1, 1, 1], ("srrl", 1): [3, 3, 3], ("srrl", 2): [0, 0, 0]}
    table = runs(passing)
    table = table[~((table["method"] == "srrl") & (table["problem_id"] == "p02"))]
    row = first(stats.compare_methods(table, [("srrl", "grpo")], n_boot=100))
    assert row["n_seeds"] == 1 and row["n_problems"] == 2 and row["delta"] == pytest.approx(0.5)


def test_pairs_srrl_against_grpo_then_the_configured_ones():
    assert stats.comparison_pairs(["base", "grpo", "srrl"]) == [("srrl", "grpo")]
    assert stats.comparison_pairs(["base", "grpo", "dpo"]) == []
    assert stats.comparison_pairs(["base", "dpo", "grpo", "srrl"], [["srrl", "grpo"], ["dpo", "grpo"]]) == [
        ("srrl", "grpo"), ("dpo", "grpo"),
    ]
    assert stats.base_pairs(["srrl", "base", "dpo"]) == [("dpo", "base"), ("srrl", "base")]
    table = runs({("base", 0): [0, 1], ("grpo", 0): [1, 1], ("srrl", 0): [2, 2]})
    assert stats.compare_to_baseline(table, n_boot=100).equals(
        stats.compare_methods(table, [("grpo", "base"), ("srrl", "base")], n_boot=100)
    )
    assert stats.compare_methods(table, [("dpo", "base")], n_boot=100).empty  # dpo did not run


def test_config_rejects_a_comparison_the_experiment_does_not_run():
    config = merged_config()
    assert config["report"]["comparisons"] == []
    bad = copy.deepcopy(config)
    bad["experiment"]["methods"] = ["base", "grpo"]
    bad["report"]["comparisons"] = [["srrl", "grpo"]]
    with pytest.raises(ConfigError, match=r"report\.comparisons names 'srrl'"):
        check_references(bad)
    bad["report"]["comparisons"] = [["grpo", "grpo"]]
    with pytest.raises(ConfigError, match="report.comparisons"):
        check_references(bad)
    good = copy.deepcopy(config)
    good["report"]["comparisons"] = [[m, "base"] for m in good["experiment"]["methods"] if m != "base"]
    check_references(good)
