"""Methods compared pairwise (SRRL against GRPO and configured pairs): the paired interval, the
problems fixed and broken, the seed-noise rule, the config key, and the report's section."""

import copy
import json

import numpy as np
import pandas as pd
import pytest

from execrl.config import ConfigError, check_references, merged_config
from execrl.methods import METHODS, Method
from execrl.report import budget, comparisons, stats

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


def test_pairs_srrl_against_grpo_then_variants_then_the_configured_ones():
    assert stats.comparison_pairs(["base", "grpo", "srrl"]) == [("srrl", "grpo")]
    assert stats.comparison_pairs(["base", "grpo", "dpo"]) == []
    assert stats.comparison_pairs(["base", "dpo", "grpo", "srrl"], [["srrl", "grpo"], ["dpo", "grpo"]]) == [
        ("srrl", "grpo"), ("dpo", "grpo"),
    ]
    # a method variant against the method it varies, whenever both run, before the configured pairs
    variants = {"srrl_separate": "srrl", "grpo_long": "grpo"}
    assert stats.comparison_pairs(["base", "grpo", "srrl", "srrl_separate"], [["srrl_separate", "grpo"]], variants) == [
        ("srrl", "grpo"), ("srrl_separate", "srrl"), ("srrl_separate", "grpo"),
    ]
    assert stats.comparison_pairs(["base", "srrl_separate", "grpo_long"], [], variants) == []
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


GRPO_SETTINGS = {"prompts_per_step": 2, "num_generations": 8, "gradient_accumulation_steps": 1, "num_iterations": 1}
PER_STEP = 16  # 2 prompts × 8 generations


def write_token_metrics(root, method, seed, prompt_length, completion_length, steps=4, generated=True):
    """A metrics file as execrl's GRPOTrainer logs it: cumulative num_tokens and (unless not
    `generated`, as before execrl counted them) num_generated_tokens, the batch's mean completion
    length, an interval-evaluation record at step 2 and the end-of-training summary."""
    records = []
    for step in range(1, steps + 1):
        if step == 2:
            records.append({"step": step, "interval_eval/pass_at_1": 0.5})
        records.append({"step": step, "loss": 0.1, "completions/mean_length": completion_length,
                        "num_tokens": float(step * PER_STEP * (prompt_length + completion_length))})
        if generated:
            records[-1]["num_generated_tokens"] = float(step * PER_STEP * completion_length)
    records.append({"step": steps, "train_runtime": 3.0, "train_loss": 0.1})
    path = root / "results" / "training" / "toy" / "m" / method / str(seed) / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_token_budget_from_trl_logs(tmp_path):
    paths = [
        write_token_metrics(tmp_path, "grpo", 0, prompt_length=40, completion_length=22.5),
        write_token_metrics(tmp_path, "grpo", 1, prompt_length=40, completion_length=27.5),
        write_token_metrics(tmp_path, "srrl", 0, prompt_length=75, completion_length=25),
    ]
    dpo = tmp_path / "results/training/toy/m/dpo/0/metrics.jsonl"
    dpo.parent.mkdir(parents=True)
    dpo.write_text(json.dumps({"step": 1, "loss": 0.5, "num_tokens": 99.0}) + "\n")
    untracked = tmp_path / "results/training/toy/m/srrl/1/metrics.jsonl"
    untracked.parent.mkdir(parents=True)
    untracked.write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n")  # no num_tokens logged

    runs_ = budget.token_budget([*paths, dpo, untracked], GRPO_SETTINGS).set_index(["method", "seed"])
    assert set(runs_.index) == {("grpo", 0), ("grpo", 1), ("srrl", 0)}  # DPO samples nothing online
    grpo = runs_.loc[("grpo", 0)]
    assert grpo["steps"] == 4 and grpo["completions"] == 4 * PER_STEP
    assert grpo["tokens"] == 4 * PER_STEP * 62.5
    assert grpo["completion_tokens"] == pytest.approx(4 * PER_STEP * 22.5)
    assert grpo["prompt_tokens"] == pytest.approx(4 * PER_STEP * 40) and grpo["mean_prompt_length"] == pytest.approx(40)
    assert budget.token_budget(paths, None).empty  # without the GRPO settings, no per-completion figures

    methods = budget.per_method(budget.token_budget(paths, GRPO_SETTINGS)).set_index("method")
    assert methods.loc["grpo", "seeds"] == 2 and methods.loc["srrl", "seeds"] == 1
    assert methods.loc["grpo", "tokens"] == pytest.approx(4 * PER_STEP * 65)  # mean of the two seeds
    assert methods.loc["grpo", "tokens_per_step"] == pytest.approx(PER_STEP * 65)
    assert methods.loc["srrl", "prompt_tokens_per_step"] == pytest.approx(PER_STEP * 75)
    assert methods.loc["srrl", "completion_tokens_per_step"] == pytest.approx(PER_STEP * 25)

    pair = budget.pair_budget(methods.reset_index(), "toy", "m", "srrl", "grpo")
    assert pair["budget"] == "equal completions per step (16)"
    assert pair["tokens"] == {"srrl": 4 * PER_STEP * 100, "grpo": 4 * PER_STEP * 65}
    assert pair["token_ratio"] == pytest.approx(100 / 65)
    assert budget.pair_budget(methods.reset_index(), "toy", "m", "srrl", "base") is None
    record = {"method": "srrl", "baseline": "grpo", "budget": pair}
    assert comparisons.budget_sentence(record) == (
        "Budget: equal completions per step (16); tokens in training: generated SRRL 1,600, GRPO 1,600 (1.00×); "
        "prompt SRRL 4,800, GRPO 2,560 (1.88×)."
    )


def test_generated_tokens_are_read_where_logged_and_estimated_where_not(tmp_path):
    """A run that logged num_generated_tokens gets exact generated and prompt counts, whatever TRL's
    mean lengths say; one trained before execrl logged it gets the estimate from the mean length."""
    logged = write_token_metrics(tmp_path, "grpo", 0, prompt_length=40, completion_length=20)
    (grpo,) = budget.token_budget([logged], GRPO_SETTINGS).to_dict("records")
    lines = [json.loads(line) for line in logged.read_text().splitlines()]
    for line in lines:
        if "completions/mean_length" in line:
            line["completions/mean_length"] = 99.0  # not read when the count is logged
    logged.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (exact,) = budget.token_budget([logged], GRPO_SETTINGS).to_dict("records")
    assert exact["completion_tokens"] == grpo["completion_tokens"] == 4 * PER_STEP * 20
    assert exact["prompt_tokens"] == 4 * PER_STEP * 40
    old = write_token_metrics(tmp_path, "srrl", 0, prompt_length=40, completion_length=30, generated=False)
    (estimated,) = budget.token_budget([old], GRPO_SETTINGS).to_dict("records")
    assert estimated["completion_tokens"] == pytest.approx(4 * PER_STEP * 30)


def test_the_budget_a_comparison_used_is_named_with_both_token_totals(tmp_path):
    """Under srrl.budget: generated_tokens SRRL stopped at GRPO's generated tokens: its comparison
    with GRPO says so (and no other pair does), with generated and prompt tokens of both sides; by
    default it says equal completions."""
    paths = [
        write_token_metrics(tmp_path, "grpo", 0, prompt_length=40, completion_length=25, steps=6),
        write_token_metrics(tmp_path, "srrl", 0, prompt_length=75, completion_length=25, steps=6),
    ]
    methods = budget.per_method(budget.token_budget(paths, GRPO_SETTINGS))
    tokens = budget.pair_budget(methods, "toy", "m", "srrl", "grpo", srrl_budget="generated_tokens")
    assert tokens["budget"] == "equal generated tokens (steps: srrl 6, grpo 6)" and tokens["matched"] == "generated_tokens"
    assert tokens["completion_tokens"] == {"srrl": 6 * PER_STEP * 25, "grpo": 6 * PER_STEP * 25}
    assert tokens["prompt_tokens"] == {"srrl": 6 * PER_STEP * 75, "grpo": 6 * PER_STEP * 40}
    sentence = comparisons.budget_sentence({"method": "srrl", "baseline": "grpo", "budget": tokens})
    assert sentence == (
        "Budget: equal generated tokens (steps: srrl 6, grpo 6); tokens in training: generated SRRL 2,400, "
        "GRPO 2,400 (1.00×); prompt SRRL 7,200, GRPO 3,840 (1.88×)."
    )
    assert "sampled" not in sentence
    total = budget.pair_budget(methods, "toy", "m", "srrl", "grpo", srrl_budget="total_tokens")
    assert total["budget"].startswith("equal total tokens (prompt and generated)") and total["matched"] == "total_tokens"
    # Held to total tokens SRRL stops early (its prompts are longer): short of GRPO's total, it says so.
    early = write_token_metrics(tmp_path, "srrl", 1, prompt_length=75, completion_length=25, steps=3)
    short_total = budget.pair_budget(budget.per_method(budget.token_budget([paths[0], early], GRPO_SETTINGS)),
                                     "toy", "m", "srrl", "grpo", srrl_budget="total_tokens")
    assert short_total["matched"] is None and short_total["budget"] == (
        "a budget of GRPO's total tokens set, not reached: srrl reached its max_steps (3) at 0.77× grpo's total tokens "
        "(num_tokens) (steps: srrl 3, grpo 6)"
    )
    assert "set, not reached" in comparisons.budget_sentence({"method": "srrl", "baseline": "grpo", "budget": short_total})
    # The same runs compared at the default budget: equal completions per step, and it shows in the sentence.
    fewer = [paths[0], write_token_metrics(tmp_path, "srrl", 2, prompt_length=75, completion_length=25, steps=4)]
    default = budget.pair_budget(budget.per_method(budget.token_budget(fewer, GRPO_SETTINGS)), "toy", "m", "srrl",
                                 "grpo", srrl_budget="completions")
    assert default["matched"] == "completions"
    assert default["budget"] == "equal completions per step (16) for different steps (srrl 4, grpo 6)"
    assert "so equal completions are not equal generated tokens" in comparisons.budget_sentence(
        {"method": "srrl", "baseline": "grpo", "budget": default}
    )
    # srrl.budget concerns SRRL against GRPO only: another pair of online methods stays at equal completions.
    assert budget.matched_on("grpo", "srrl", "generated_tokens") == "generated_tokens"
    assert budget.matched_on("exec", "grpo", "generated_tokens") == budget.matched_on("srrl", "grpo", "completions") == "completions"
    # Short of GRPO's generated tokens (max_steps came first): the sentence says the budget was not reached.
    short = budget.pair_budget(
        budget.per_method(budget.token_budget([paths[0], write_token_metrics(
            tmp_path, "srrl", 3, prompt_length=30, completion_length=25, steps=4)], GRPO_SETTINGS)),
        "toy", "m", "srrl", "grpo", srrl_budget="generated_tokens",
    )
    # Nothing says "equal generated tokens", in the README's column (the rule) or in the finding.
    assert short["matched"] is None and not short["budget"].startswith("equal")
    assert short["budget"].startswith("a budget of GRPO's generated tokens set, not reached: srrl reached its max_steps (4)")
    sentence = comparisons.budget_sentence({"method": "srrl", "baseline": "grpo", "budget": short})
    assert "equal generated tokens" not in sentence and "not reached" in sentence
    # From the GRPO side of the pair (grpo against srrl) the same shortfall is named.
    reverse = budget.pair_budget(budget.per_method(budget.token_budget([paths[0], write_token_metrics(
        tmp_path, "srrl", 4, prompt_length=30, completion_length=25, steps=4)], GRPO_SETTINGS)),
        "toy", "m", "grpo", "srrl", srrl_budget="generated_tokens")
    assert reverse["matched"] is None and "srrl reached its max_steps (4)" in reverse["budget"]


def test_comparison_records_carry_the_runs_srrl_budget(tmp_path):
    paths = [
        write_token_metrics(tmp_path, "grpo", 0, prompt_length=40, completion_length=25),
        write_token_metrics(tmp_path, "srrl", 0, prompt_length=75, completion_length=25, steps=3),
    ]
    table = runs({("grpo", 0): [1, 2, 3], ("srrl", 0): [2, 2, 3]}).assign(dataset="toy")
    pairwise = stats.compare_methods(table, [("srrl", "grpo")], n_boot=100)
    curves = stats.pass_at_k_curves(table, n_boot=100)
    methods = budget.per_method(budget.token_budget(paths, GRPO_SETTINGS))
    # SRRL's 3 steps drew fewer tokens than GRPO's 4: the budget it ran under is named, not reached.
    budgets = (("generated_tokens", "a budget of GRPO's generated tokens set, not reached"),
               ("completions", "equal completions"), (None, "equal completions"))
    for srrl_budget, label in budgets:
        (record,) = comparisons.comparison_records(pairwise, curves, [1], token_methods=methods, srrl_budget=srrl_budget)
        assert record["budget"]["budget"].startswith(label)
        assert f"Budget: {label}" in comparisons.finding(record)


def test_verdicts_in_plain_language():
    value = {"delta": 0.02, "ci_low": -0.01, "ci_high": 0.05, "within_seed_noise": None}
    assert comparisons.verdict("srrl", "grpo", value) == (
        "0 inside the interval: no difference resolved (one seed: seed-to-seed noise not measured)"
    )
    value.update(ci_low=0.01, within_seed_noise=False)
    assert comparisons.verdict("srrl", "grpo", value) == "SRRL ahead of GRPO: the interval excludes 0 and |Δ| exceeds the sd over seeds"
    value.update(within_seed_noise=True)
    assert comparisons.verdict("srrl", "grpo", value).endswith("inside seed-to-seed noise (|Δ| ≤ sd over seeds): no difference resolved")
    value.update(delta=-0.03, ci_low=-0.05, ci_high=-0.01, within_seed_noise=False)
    assert comparisons.verdict("srrl", "grpo", value).startswith("SRRL behind GRPO")
    assert comparisons.title("srrl", "base") == "SRRL against base"


def test_a_variant_of_srrl_is_compared_at_its_own_budget(monkeypatch):
    """A method variant (`method_variants`) is SRRL for the budget: srrl_tokens (srrl.budget: generated_tokens)
    against GRPO is matched on tokens, SRRL itself on completions, and two SRRLs on completions."""
    from execrl.report.budget import matched_on
    from execrl.report.build import srrl_budgets

    monkeypatch.setitem(METHODS, "srrl_tokens", Method(**{**METHODS["srrl"].__dict__, "name": "srrl_tokens", "variant_of": "srrl"}))
    config = {
        "srrl": {"budget": "completions"},
        "method_variants": {"srrl_tokens": {"method": "srrl", "overrides": {"srrl": {"budget": "generated_tokens"}}}},
    }
    budgets = srrl_budgets(config, ["base", "grpo", "srrl", "srrl_tokens"])
    assert budgets == {"srrl": "completions", "srrl_tokens": "generated_tokens"}
    assert matched_on("srrl_tokens", "grpo", budgets) == "generated_tokens"
    assert matched_on("grpo", "srrl_tokens", budgets) == "generated_tokens"
    assert matched_on("srrl", "grpo", budgets) == "completions"
    assert matched_on("srrl_tokens", "srrl", budgets) == "completions"
    assert matched_on("srrl", "grpo", "total_tokens") == "total_tokens"  # one budget for the run, as before


def test_a_comparison_over_problems_that_share_tasks_says_so():
    rng = np.random.default_rng(5)
    passing = {(method, seed): list(rng.integers(0, N + 1, 12)) for method in ("grpo", "srrl") for seed in range(2)}
    table = runs(passing)
    table["task"] = table["problem_id"].map(lambda p: f"t{int(p[1:]) // 3}")  # four tasks of three problems
    compared = stats.compare_methods(table, [("srrl", "grpo")], n_boot=200)
    curves = stats.pass_at_k_curves(table, n_boot=200)
    record = comparisons.comparison_records(compared, curves, [1])[0]
    assert (record["n_problems"], record["n_tasks"]) == (12, 4)
    assert "2 seeds, 12 problems of 4 tasks, resampled by task)" in comparisons.finding(record)
    # a table written before tasks were read: each problem its own task, and the sentence as before
    record = comparisons.comparison_records(compared.drop(columns="n_tasks"), curves, [1])[0]
    assert record["n_tasks"] == 12 and "(d · m, test split, 2 seeds): pass@1" in comparisons.finding(record)
