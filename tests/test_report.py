"""The report's computations on small synthetic runs: statistics, tables, summary, cost, training
curves, refinement examples, figures, and the HTML (every number it shows comes from summary.json)."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from execrl.evaluation.scores import evaluate_annotations
from execrl.generation import GenerationSettings
from execrl.evaluation.passk import pass_at_k
from execrl.evaluation import refinement_samples
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.report import cost, figures, readme_results, refinements, reward_hacking, stats, summary, tables, training
from execrl.report import html as report_html
from execrl.report.build import ReportInputs, build
from execrl.report.evaluations import outcome_table, per_problem_table, read_tsv
from execrl.training.srrl import SRRLSettings

N = 4
PROBLEMS = [
    Problem(id=f"toy/{i}", prompt=f"Write f{i}(x).", test_type="assert", tests=[f"assert f{i}(1) == 1"], entry_point=f"f{i}")
    for i in range(6)
]
# Passing samples per problem (out of N), per method and seed.
PASSING = {
    ("base", 0): [0, 0, 1, 2, 4, 0],
    ("base", 1): [0, 1, 1, 2, 3, 0],
    ("grpo", 0): [2, 0, 3, 4, 4, 0],
    ("grpo", 1): [1, 0, 2, 4, 4, 0],
    ("srrl", 0): [3, 1, 4, 4, 0, 0],
    ("srrl", 1): [4, 2, 4, 3, 0, 0],
}


def annotations_for(passing):
    records = []
    for problem, c in zip(PROBLEMS, passing, strict=True):
        for index in range(N):
            status = "pass" if index < c else ("syntax_error" if index % 2 else "fail")
            records.append(
                {
                    "problem_id": problem.id, "sample_index": index, "code": f"def {problem.entry_point}(x):\n    return {index}",
                    "status": status, "tests_passed": int(status == "pass"), "tests_total": 1,
                    "error_type": None if status == "pass" else "AssertionError", "error_message": None,
                    "test_outcomes": [{"index": 0, "status": "pass" if status == "pass" else "fail"}], "trace": "",
                }
            )
    return records


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    paths = []
    for (method, seed), passing in PASSING.items():
        for split in ("train", "test"):
            evaluation = evaluate_annotations(PROBLEMS, annotations_for(passing), ks=[1, 2, 4])
            evaluation["run"] = {"dataset": "toy", "model": "m", "method": method, "seed": str(seed), "split": split}
            path = root / f"{method}-{seed}-{split}.json"
            path.write_text(json.dumps(evaluation))
            paths.append(path)
    return paths


@pytest.fixture(scope="module")
def per_problem(evaluations):
    return per_problem_table(evaluations)


def test_pass_at_k_table_is_the_estimator():
    table = stats.pass_at_k_table(5)
    for c in range(6):
        for k in range(1, 6):
            assert table[c, k - 1] == pytest.approx(pass_at_k(5, c, k))


def test_curves_match_the_evaluation_files(evaluations, per_problem):
    curves = stats.pass_at_k_curves(per_problem, n_boot=300)
    assert set(curves["k"]) == {1, 2, 3, 4}  # every k up to n, not only the configured ones
    for path in evaluations:
        evaluation = json.loads(Path(path).read_text())
        run = evaluation["run"]
        row = curves[(curves["method"] == run["method"]) & (curves["split"] == run["split"]) & (curves["k"] == 1)].iloc[0]
        seeds = [json.loads(Path(p).read_text()) for p in evaluations]
        same = [e["pass_at_k"]["1"] for e in seeds if e["run"]["method"] == run["method"] and e["run"]["split"] == run["split"]]
        assert row["mean"] == pytest.approx(np.mean(same))
        assert row["n_seeds"] == 2 and row["n_problems"] == len(PROBLEMS) and row["n_samples"] == N
        assert row["sd_seeds"] == pytest.approx(np.std(same, ddof=1))
    assert (curves["ci_low"] <= curves["mean"] + 1e-12).all() and (curves["mean"] <= curves["ci_high"] + 1e-12).all()


def test_intervals_are_degenerate_when_every_problem_agrees():
    frame = pd.DataFrame(
        [{"dataset": "d", "model": "m", "method": "base", "seed": 0, "split": "test", "problem_id": f"p{i}", "n": 4, "c": 2}
         for i in range(10)]
    )
    row = stats.pass_at_k_curves(frame, n_boot=200).query("k == 1").iloc[0]
    assert row["mean"] == pytest.approx(0.5) and row["ci_low"] == pytest.approx(0.5) and row["ci_high"] == pytest.approx(0.5)
    assert np.isnan(row["sd_seeds"])


def test_intervals_are_reproducible_and_narrow_with_more_problems():
    rng = np.random.default_rng(1)

    def frame(problems):
        return pd.DataFrame(
            [{"dataset": "d", "model": "m", "method": "base", "seed": 0, "split": "test", "problem_id": f"p{i}", "n": 4,
              "c": int(c)} for i, c in enumerate(rng.integers(0, 5, problems))]
        )

    small, large = frame(20), frame(400)
    width = lambda f: (lambda r: r["ci_high"] - r["ci_low"])(stats.pass_at_k_curves(f, n_boot=500).query("k == 1").iloc[0])  # noqa: E731
    assert width(large) < width(small)
    assert stats.pass_at_k_curves(small, n_boot=200).equals(stats.pass_at_k_curves(small, n_boot=200))


def test_comparison_counts_fixed_and_broken_problems(per_problem):
    comparison = stats.compare_to_baseline(per_problem, n_boot=300)
    test = comparison[(comparison["split"] == "test") & (comparison["k"] == 1)].set_index("method")
    # base pooled over seeds: [0, 1, 2, 4, 7, 0] passes of 8; grpo [3, 0, 5, 8, 8, 0]; srrl [7, 3, 8, 7, 0, 0].
    assert test.loc["grpo", "fixed"] == 1 and test.loc["grpo", "broken"] == 1
    assert test.loc["srrl", "fixed"] == 1 and test.loc["srrl", "broken"] == 1
    assert test.loc["grpo", "improved"] == 4 and test.loc["grpo", "worse"] == 1
    assert test.loc["grpo", "baseline_solved"] == 4 and test.loc["grpo", "solved"] == 4
    base = per_problem.query("method == 'base' and split == 'test'")["c"].mean() / N
    grpo = per_problem.query("method == 'grpo' and split == 'test'")["c"].mean() / N
    assert test.loc["grpo", "delta"] == pytest.approx(grpo - base)
    assert test.loc["grpo", "ci_low"] <= test.loc["grpo", "delta"] <= test.loc["grpo", "ci_high"]


def test_changed_problems_name_what_was_fixed_and_broken(per_problem):
    changes = stats.changed_problems(per_problem, stats.base_pairs(per_problem["method"])).query("split == 'test'")
    # base never passed toy/0 (grpo did) and toy/1 passed under base but never under grpo.
    assert set(changes.query("method == 'grpo'").itertuples(index=False, name=None)) == {
        ("toy", "m", "test", "grpo", "base", "fixed", "toy/0"), ("toy", "m", "test", "grpo", "base", "broken", "toy/1"),
    }
    assert set(changes.query("method == 'srrl'")["problem_id"]) == {"toy/0", "toy/4"}


def test_a_method_better_on_every_problem_has_an_interval_above_zero():
    rows = []
    for method, c in (("base", 1), ("dpo", 3)):
        for i in range(30):
            rows.append({"dataset": "d", "model": "m", "method": method, "seed": 0, "split": "test",
                         "problem_id": f"p{i}", "n": 4, "c": c + (i % 2)})
    comparison = stats.compare_to_baseline(pd.DataFrame(rows), n_boot=300).query("k == 1").iloc[0]
    assert comparison["delta"] == pytest.approx(0.5) and comparison["ci_low"] > 0
    assert summary.verdict(comparison["ci_low"], comparison["ci_high"]) == "helped"
    assert summary.verdict(-0.2, -0.1) == "hurt" and summary.verdict(-0.1, 0.1) == "no clear difference"


def test_outcome_table_counts_every_status(evaluations):
    outcomes = outcome_table(evaluations)
    per_run = outcomes.groupby(["method", "seed", "split"])["count"].sum()
    assert (per_run == len(PROBLEMS) * N).all()
    assert set(outcomes["status"]) == {"pass", "fail", "error", "timeout", "syntax_error"}


def test_summary_table_has_one_row_per_method_and_formats_once(evaluations, per_problem):
    curves = stats.pass_at_k_curves(per_problem, n_boot=200)
    comparison = stats.compare_to_baseline(per_problem, n_boot=200)
    records = tables.summary_records(
        curves, comparison, outcome_table(evaluations), ks=[1, 2, 4],
        changes=stats.changed_problems(per_problem, stats.base_pairs(per_problem["method"])),
    )
    columns, rows = tables.main_table_rows(records, "test", [1, 2, 4])
    assert [r["attrs"]["method"] for r in rows] == ["base", "grpo", "srrl"]
    base = next(r for r in records if r["method"] == "base" and r["split"] == "test")
    first = base["pass_at_k"]["1"]
    assert rows[0]["cells"]["pass@1"] == f"{first['mean']:.3f} ± {first['sd']:.3f}"
    assert rows[0]["cells"]["Δ pass@1 vs base"] == tables.MISSING
    assert rows[1]["cells"]["fixed / broke"] == "1 / 1"
    grpo = next(r for r in records if r["method"] == "grpo" and r["split"] == "test")["vs_baseline"]
    assert grpo["fixed_problems"] == ["toy/0"] and grpo["broken_problems"] == ["toy/1"]
    assert list(tables.changes_frame(records, "test")["fixed"]) == ["toy/0", "toy/0"]
    assert sum(base["outcomes"].values()) == pytest.approx(1.0)


def test_a_k_above_the_samples_drawn_is_named_not_dropped_silently():
    value = {"mean": 0.5, "sd": float("nan"), "ci_low": 0.4, "ci_high": 0.6}
    records = [{"dataset": "d", "model": "m", "split": "test", "method": m, "n_seeds": 1, "n_samples": 4,
                "pass_at_k": {"1": value, "2": value, "4": value}} for m in ("base", "grpo")]  # fmt: skip
    sentence = tables.unestimated_ks(records, "test", [1, 2, 4, 8, 16])
    assert sentence == ("Not shown: pass@8, pass@16 (evaluation.k), which need more samples per problem than were "
                        "drawn (4: generation.num_samples).")  # fmt: skip
    columns, _ = tables.main_table_rows(records, "test", [1, 2, 4, 8, 16])
    assert "pass@8" not in columns and "pass@4" in columns
    assert tables.unestimated_ks(records, "test", [1, 4]) == ""


def test_formatting_helpers():
    assert tables.fmt(float("nan")) == tables.MISSING and tables.fmt(None) == tables.MISSING
    assert tables.fmt_mean_sd(0.5, float("nan")) == "0.500" and tables.fmt_mean_sd(0.5, 0.01) == "0.500 ± 0.010"
    assert tables.fmt_interval(-0.1, 0.2, signed=True) == "[-0.100, +0.200]"
    assert tables.fmt_count(1, "problem") == "1 problem" and tables.fmt_count(0, "problem") == "0 problems"
    assert tables.markdown_table(["a|b"], [["x"]]).splitlines()[0] == "| a\\|b |"


def write_benchmark(path, seconds, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
        f"{seconds}\t0:00:01\t100.0\t200\t50\t60\t0\t0\t50\t{cpu}\n"
    )


def test_cost_tables_attribute_jobs_to_rules_and_methods(tmp_path):
    root = tmp_path / "benchmarks"
    # path segments carry a digest of their settings (execrl.run_paths); the tables name them
    write_benchmark(root / "train/d-0a1b2c/big-3f2a9c/grpo-5b7c11/0.tsv", 3600, 7200)
    write_benchmark(root / "train/d/big/dpo/0.tsv", 1800, 1800)
    write_benchmark(root / "train_grpo/d/big/0.tsv", 99, 99)  # a rule of an older workflow: left out
    write_benchmark(root / "build_rl_dataset/d/big/pairs-81d0e4/0.tsv", 36, 36)
    write_benchmark(root / "generate_candidates/d/big/grpo/0/test.tsv", 360, 360)
    write_benchmark(root / "generate_candidates/d/big/base/0/test.tsv", 180, 180)
    write_benchmark(root / "prepare_dataset/d/test.tsv", 10, 5)
    write_benchmark(root / "summarize_evaluations.tsv", 1, 1)  # a report job: not counted
    write_benchmark(root / "analyze_diversity/d/big/grpo/0/test.tsv", 2, 2)  # a report job with wildcards: not counted
    (root / "annotate_candidates/d/big/base/0").mkdir(parents=True)
    (root / "annotate_candidates/d/big/base/0/test.tsv").write_text("s\tcpu_time\tmax_rss\nNA\t-\tNA\n")
    write_benchmark(root / "train/d-0a1b2c/big-3f2a9c/grpo-999999/0.tsv", 7200, 7200)  # another experiment's
    jobs = cost.job_table(root, {"big": 7.0}, segments={"d-0a1b2c", "big-3f2a9c", "grpo-5b7c11", "pairs-81d0e4"})
    assert sorted(jobs[jobs["rule"] == "train"]["wall_s"]) == [1800, 3600]  # not the other experiment's 7200
    by_job = jobs.set_index(["rule", "method"])
    assert by_job.loc[("build_rl_dataset", "dpo"), "model"] == "big"
    assert by_job.loc[("train", "grpo"), "dataset"] == "d" and by_job.loc[("train", "grpo"), "model"] == "big"
    assert by_job.loc[("generate_candidates", "grpo"), "model"] == "big"
    assert by_job.loc[("train", "grpo"), "gpus"] == 1 and by_job.loc[("train", "grpo"), "gpu_h"] == pytest.approx(1.0)
    by_rule = jobs.set_index("rule")
    assert "train_grpo" not in by_rule.index
    assert by_rule.loc["prepare_dataset", "gpus"] == 0 and "report" not in set(jobs["phase"])
    assert np.isnan(by_rule.loc["annotate_candidates", "wall_s"])
    rules = cost.per_rule(jobs).set_index("rule")
    assert rules.loc["train", "cpu_h"] == pytest.approx(2.5) and rules.index[0] == "train"
    methods = cost.per_method(jobs).set_index("method")
    assert methods.loc["dpo", "training_wall_h"] == pytest.approx(0.51)
    assert methods.loc["grpo", "evaluation_wall_h"] == pytest.approx(0.1)
    # base trains nothing: its training cost is missing (shown as –), not 0
    assert methods.loc["base", "evaluation_wall_h"] == pytest.approx(0.05) and methods.loc["base"].isna().sum() == 3
    assert cost.totals(jobs)["jobs"] == 7
    assert cost.job_table(tmp_path / "missing", {}).empty


def test_a_tiny_model_bills_no_gpu_hours(tmp_path):
    write_benchmark(tmp_path / "train/d/tiny/srrl/0.tsv", 100, 150)
    jobs = cost.job_table(tmp_path, {"tiny": 0.003})
    assert jobs.iloc[0]["gpus"] == 0 and jobs.iloc[0]["gpu_h"] == 0


def write_metrics(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def metrics_files(tmp_path):
    # num_tokens: 32 completions per step (GRPO below), each with a 40-token prompt (SRRL: 100).
    grpo = [{"step": s, "elapsed_s": s * 2.0, "loss": 0.1 / s, "reward": s / 10, "rewards/binary/mean": s / 10,
             "execution/pass_rate": s / 10, "completions/mean_length": 20 + s,
             "num_tokens": 32.0 * sum(40 + 20 + t for t in range(1, s + 1)),
             "watch/hard_coding_checked": 8.0, "watch/hard_coding_flagged": float(s % 2),
             "watch/hard_coding_by_problem": {"watch/hard_coding_checked": {"p1": 5.0, "p2": 3.0},
                                              **({"watch/hard_coding_flagged": {"p1": 1.0}} if s % 2 else {})}}
            for s in range(1, 9)]
    grpo.append({"step": 4, "elapsed_s": 8.5, "interval_eval/pass_at_1": 0.25})
    grpo.append({"step": 8, "elapsed_s": 17.0, "train_runtime": 17.0, "train_loss": 0.05})
    srrl = [{**r, "srrl/c1_pass_rate": 0.1 * s, "srrl/c2_pass_rate": 0.05 * s, "num_tokens": r["num_tokens"] + 32.0 * 60 * s}
            for s, r in enumerate(grpo[:8], start=1)]
    dpo = [{"step": s, "elapsed_s": float(s), "loss": 0.7 - 0.05 * s, "rewards/margins": 0.1 * s, "rewards/accuracies": 0.5 + 0.05 * s}
           for s in range(1, 5)]
    sft = [{"step": 10 * s, "elapsed_s": float(s), "loss": 3.0 / s, "mean_token_accuracy": 0.2 * s} for s in range(1, 4)]
    root = tmp_path / "results" / "training" / "toy" / "m"
    manifest = tmp_path / "results" / "rl_data" / "toy" / "m" / "0" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"n_candidates": 96, "n_problems": 12, "n_duplicate_candidates": 3, "n_pairs": 20,
                                    "pairs_by_kind": {"pass_vs_fail": 20}, "n_problems_with_pairs": 7,
                                    "problems_without_pairs": {"all_pass": {"count": 2, "examples": []},
                                                               "none_pass": {"count": 3, "examples": []}}}))
    return {
        "metrics": [write_metrics(root / "grpo/0/metrics.jsonl", grpo), write_metrics(root / "srrl/0/metrics.jsonl", srrl),
                    write_metrics(root / "dpo/0/metrics.jsonl", dpo)],
        "sft": write_metrics(root / "sft/metrics.jsonl", sft),
        "manifest": manifest,
    }


GRPO = {"prompts_per_step": 4, "num_generations": 8, "gradient_accumulation_steps": 2, "num_iterations": 2}


def test_training_metrics_in_long_format(metrics_files):
    assert training.parse_run("results/training/d/m/srrl/3/metrics.jsonl") == {"dataset": "d", "model": "m", "method": "srrl", "seed": 3}
    assert training.parse_run("x/results/training/d/m/sft/metrics.jsonl")["method"] == "sft"
    with pytest.raises(ValueError):
        training.parse_run("results/eval/d/m/grpo/0/test.json")
    offline = training.offline_samples([metrics_files["manifest"]])
    assert offline == {("toy", "m", 0): 96.0}
    metrics = training.metrics_table([*metrics_files["metrics"], metrics_files["sft"]], GRPO, offline)
    grpo = metrics.query("method == 'grpo' and metric == 'reward'")
    assert list(grpo["samples"]) == [32.0 * s for s in range(1, 9)]  # 4 × 8 × 2 / 2 per step
    assert set(metrics.query("method == 'dpo'")["samples"]) == {96.0}
    assert metrics.query("method == 'sft'")["samples"].isna().all()
    assert metrics.query("metric == 'interval_eval/pass_at_1'")["step"].tolist() == [4]
    panels = [key for key, _ in training.panels_for(metrics[metrics["method"] != "sft"])]
    assert panels[:2] == ["reward", "execution/pass_rate"]  # one component: the total is its copy, not shown twice
    two = pd.concat([metrics, metrics[metrics["metric"] == "rewards/binary/mean"].assign(metric="rewards/format/mean")])
    assert [key for key, _ in training.panels_for(two[two["method"] != "sft"])][:3] == [
        "reward", "rewards/binary/mean", "rewards/format/mean"]
    assert "rewards/margins" in panels and "rewards/chosen" not in panels
    assert training.metrics_table(metrics_files["metrics"][:1])["samples"].isna().all()  # without GRPO settings

    summary_frame = training.training_summary(metrics).set_index("method")
    assert summary_frame.loc["grpo", "steps"] == 8 and summary_frame.loc["grpo", "samples_drawn"] == 256
    assert summary_frame.loc["srrl", "final_c2_pass_rate"] == pytest.approx(0.4)
    assert summary_frame.loc["dpo", "final_preference_accuracy"] == pytest.approx(0.7)
    # the table's "final" values are the last window of the training windows: one definition of the end
    windows = training.training_windows(metrics)
    for method, metric, column in (("grpo", "execution/pass_rate", "final_pass_rate"), ("srrl", "srrl/c2_pass_rate", "final_c2_pass_rate")):
        last = windows[(windows["method"] == method) & (windows["metric"] == metric)]["last"].item()
        assert summary_frame.loc[method, column] == pytest.approx(last)
    twenty = pd.DataFrame({"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": range(1, 21),
                           "metric": "execution/pass_rate", "value": [float(v) for v in range(20)], "elapsed_s": 1.0,
                           "samples": 1.0})  # fmt: skip
    assert training.training_summary(twenty)["final_pass_rate"].item() == 17.5  # steps 17-20, not the last tenth's 18.5
    assert training.smoothing_window(7) == 1 and training.smoothing_window(200) == 10


def test_every_figure_renders(tmp_path, evaluations, per_problem, metrics_files):
    curves = stats.pass_at_k_curves(per_problem, n_boot=100)
    metrics = training.metrics_table([*metrics_files["metrics"], metrics_files["sft"]], GRPO, {("toy", "m", 0): 96.0})
    diversity = pd.DataFrame(
        [{"dataset": "toy", "model": "m", "method": m, "seed": 0, "split": "test", "problem_id": f"p{i}", "n": 4,
          "distinct_programs": 1 + i % 4, "distinct_passing": 1, "mean_similarity": 0.5, "mean_jaccard": 0.4, "n_pairs": 6}
         for m in ("base", "grpo") for i in range(5)]
    )
    write_benchmark(tmp_path / "bench/train/toy/m/grpo/0.tsv", 60, 100)
    jobs = cost.job_table(tmp_path / "bench", {"m": 7.0})
    made = {
        "pass_at_k": figures.pass_at_k_figure(curves),
        "per_problem": figures.per_problem_figure(stats.problem_rates(per_problem)),
        "per_problem_without_base": figures.per_problem_figure(stats.problem_rates(per_problem.query("method != 'base'"))),
        "outcomes": figures.outcomes_figure(outcome_table(evaluations)),
        "training_steps": figures.training_figure(metrics, x="step"),
        "training_samples": figures.training_figure(metrics, x="samples"),
        "training_none": figures.training_figure(metrics.query("method == 'sft'")),
        "srrl": figures.srrl_figure(metrics),
        "srrl_none": figures.srrl_figure(metrics.query("method != 'srrl'")),
        "warm_start": figures.warm_start_figure(metrics),
        "diversity": figures.diversity_figure(diversity),
        "cost": figures.cost_figure(cost.per_rule(jobs)),
        "cost_none": figures.cost_figure(cost.per_rule(jobs.iloc[:0])),
    }
    for name, figure in made.items():
        path = tmp_path / f"{name}.png"
        figures.save(figure, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_figures_draw_method_variants_in_colours_of_their_own(tmp_path, per_problem, metrics_files):
    """A config's method variants (e.g. srrl_separate) are names outside the registry: every figure
    that colours by method draws them, each in a colour no other method has."""
    variant = per_problem[per_problem["method"] == "srrl"].assign(method="srrl_separate")
    with_variant = pd.concat([per_problem, variant], ignore_index=True)
    metrics = training.metrics_table(metrics_files["metrics"], GRPO, {("toy", "m", 0): 96.0})
    watch = pd.DataFrame(
        [{"dataset": "toy", "model": "m", "method": m, "seed": 0, "step": s, "metric": key, "value": 0.1 * s, "samples": np.nan}
         for m in ("grpo", "srrl", "srrl_separate", "srrl_tokens") for s in range(1, 5) for key, _ in training.WATCH_PANELS]
    )
    metrics = pd.concat([metrics, metrics[metrics["method"] == "srrl"].assign(method="srrl_separate")], ignore_index=True)
    diversity = pd.DataFrame(
        [{"dataset": "toy", "model": "m", "method": m, "seed": 0, "split": "test", "problem_id": f"p{i}", "n": 4,
          "distinct_programs": 2, "distinct_passing": 1, "mean_similarity": 0.5, "mean_jaccard": 0.4, "n_pairs": 6}
         for m in ("base", "srrl", "srrl_separate") for i in range(3)]
    )
    made = {
        "pass_at_k": figures.pass_at_k_figure(stats.pass_at_k_curves(with_variant, n_boot=50)),
        "training_steps": figures.training_figure(metrics, x="step"),
        "watch": figures.watch_figure(watch),
        "diversity": figures.diversity_figure(diversity),
        "srrl": figures.srrl_figure(metrics, ("srrl", "srrl_separate")),
    }
    labels = {text.get_text() for legend in made["srrl"].legends for text in legend.get_texts()}
    assert {"srrl c1 (first attempt)", "srrl_separate c2 (refinement)", "grpo (all samples)"} <= labels
    for name, figure in made.items():
        figures.save(figure, tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 0, name
    colors = figures.method_colors(["base", "dpo", "grpo", "srrl", "srrl_separate", "srrl_tokens"])
    assert len(set(colors.values())) == len(colors)
    assert colors["srrl"] == figures.METHOD_COLORS["srrl"] and colors["srrl_separate"] not in figures.METHOD_COLORS.values()


class FakeBackend:
    name = "fake"
    tokenizer = None

    def __init__(self):
        self.prompts = None

    def generate(self, prompts, settings):
        self.prompts = prompts
        return [[f"def f{i}(x):\n    return {s}" for s in range(settings.num_samples)] for i in range(len(prompts))]


class FakeResult:
    def __init__(self, passed):
        self.passed = passed

    def to_dict(self):
        status = "pass" if self.passed else "fail"
        return {"status": status, "tests_passed": int(self.passed), "tests_total": 1, "error_type": None, "error_message": None}


class FakeExecutor:
    def run_batch(self, items):
        return [FakeResult(code.endswith("return 1")) for _, code in items]


def test_refinement_examples_take_failure_kinds_in_turn_and_sample_c2():
    problems = [Problem(id=f"p/{i}", prompt=f"Write f{i}(x).", test_type="assert", tests=[f"assert f{i}(1) == 1"], entry_point=f"f{i}")
                for i in range(6)]
    statuses = ["fail", "fail", "syntax_error", "pass", "error", "fail"]
    annotations = [
        {"problem_id": p.id, "sample_index": 0, "code": "x", "status": s, "tests_passed": 0, "tests_total": 1,
         "error_type": "E", "error_message": "m", "trace": "", "test_outcomes": [{"index": 0, "status": "fail"}]}
        for p, s in zip(problems, statuses, strict=True)
    ]
    chosen = refinement_samples.select_failed_attempts(problems, annotations, 3)
    assert [p.id for p, _ in chosen] == ["p/0", "p/4", "p/2"]  # wrong answer, runtime error, syntax error
    assert refinement_samples.select_failed_attempts(problems, annotations, 10)[-1][0].id == "p/5"
    assert len(refinement_samples.select_failed_attempts(problems, annotations, 10)) == 5

    backend = FakeBackend()
    records = refinement_samples.sample_refinements(
        chosen, backend, GenerationSettings(num_samples=2), PromptConfig(template="{prompt}\n{tests}\n", num_tests_shown=1),
        SRRLSettings(), FakeExecutor(),
    )
    assert len(records) == 3 and all(len(r["c2"]) == 2 for r in records)
    assert "A previous attempt" in records[0]["refinement_message"] and records[0]["refinement_prompt"] == backend.prompts[0]
    assert records[0]["c1"]["status"] == "fail" and records[0]["c2"][1]["status"] == "pass"
    row = refinements.refinement_summary(records, {"method": "srrl"})
    assert row["c2_pass_rate"] == pytest.approx(0.5) and row["prompts_fixed"] == 3 and row["prompts"] == 3
    assert refinement_samples.sample_refinements([], backend, GenerationSettings(), PromptConfig(), SRRLSettings(), FakeExecutor()) == []


class TableParser(HTMLParser):
    """Rows of one table (by id) as lists of cell texts, with each row's data-* attributes."""

    def __init__(self, table_id):
        super().__init__()
        self.table_id, self.inside, self.rows, self.cell = table_id, False, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append(({k[5:]: v for k, v in attrs.items() if k.startswith("data-")}, []))
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1][1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def parse_table(page, table_id):
    parser = TableParser(table_id)
    parser.feed(page)
    header, *rows = parser.rows
    return header[1], rows


def test_report_page_shows_summary_json_numbers(tmp_path, evaluations, per_problem, metrics_files):
    from execrl.evaluation.scores import summary_table

    (tmp_path / "t").mkdir()
    paths = {name: tmp_path / "t" / f"{name}.tsv"
             for name in ("pass_at_k", "curves", "comparison", "comparisons", "outcomes", "training", "cost", "per_problem")}
    summary_table(evaluations).to_csv(paths["pass_at_k"], sep="\t", index=False)
    stats.pass_at_k_curves(per_problem, n_boot=100).to_csv(paths["curves"], sep="\t", index=False)
    stats.compare_to_baseline(per_problem, n_boot=100).to_csv(paths["comparison"], sep="\t", index=False)
    pairs = stats.comparison_pairs(per_problem["method"].unique(), [["grpo", "base"]])
    stats.compare_methods(per_problem, pairs, n_boot=100).to_csv(paths["comparisons"], sep="\t", index=False)
    outcome_table(evaluations).to_csv(paths["outcomes"], sep="\t", index=False)
    per_problem.to_csv(paths["per_problem"], sep="\t", index=False)
    metrics = training.metrics_table(metrics_files["metrics"], GRPO)
    training.training_summary(metrics).to_csv(paths["training"], sep="\t", index=False)
    write_benchmark(tmp_path / "bench/train/toy/m/grpo/0.tsv", 60, 100)
    cost.job_table(tmp_path / "bench", {"m": 0.5}).to_csv(paths["cost"], sep="\t", index=False)
    figure = tmp_path / "fig.png"
    figures.save(figures.message_figure("a figure"), figure)
    refinement = tmp_path / "results/analysis/refinements/toy/m/srrl/0.jsonl"
    refinement.parent.mkdir(parents=True)
    refinement.write_text(json.dumps({
        "problem_id": "toy/0", "problem": "Write f0(x).", "c1": {"code": "<script>x</script>", "status": "fail"},
        "refinement_message": "fix it", "refinement_prompt": "fix it", "c2": [{"code": "ok", "status": "pass", "tests_passed": 1, "tests_total": 1}],
    }) + "\n")
    page, record, markdown = build(
        ReportInputs(pass_at_k=str(paths["pass_at_k"]), curves=str(paths["curves"]), comparison=str(paths["comparison"]),
                     outcomes=str(paths["outcomes"]), training=str(paths["training"]), cost_jobs=str(paths["cost"]),
                     per_problem=str(paths["per_problem"]), comparisons=str(paths["comparisons"]),
                     figures={"pass_at_k": str(figure), "cost": str(figure)}, refinements=[str(refinement)],
                     manifests=[str(metrics_files["manifest"])], metrics=[str(p) for p in metrics_files["metrics"]]),
        title="A <title>", experiment={"name": "toy", "eval_splits": ["train", "test"]},
        config={"k": 1, "report": {"method_notes": "Run on Python, not <q>."}}, ks=[1, 2, 4], n_boot=100,
        grpo=GRPO,
    )
    json.dumps(record, allow_nan=False)  # strict JSON as written
    assert summary.json_safe({"a": [float("nan"), np.float64(1.5), np.int64(2)]}) == {"a": [None, 1.5, 2]}
    assert record["main_split"] == "test" and len(record["findings"]) == 6  # dataset, 2 against base, 2 pairwise, refinements
    assert record["findings"][-1] == (
        "toy · m: c2 pass rate on refinements of failed base attempts (1 prompts per seed): srrl 1.000 (1 samples). "
        "The prompts are built from train-split problems, which SRRL trained on, so its rate mixes using the feedback "
        "with having learned the task."
    )
    assert page.count('src="data:image/png;base64,') == 2 and not re.search(r"https?://", page)
    # A table wider than the page scrolls in its own box, never the whole page sideways.
    assert page.count("<table") > 5 and page.count("<table") == page.count('<div class="table-scroll"><table')
    assert "A &lt;title&gt;" in page and "<script>x</script>" not in page
    assert "Method notes" in page and "Run on Python, not &lt;q&gt;." in page
    assert "## Method notes\n\nRun on Python, not <q>." in markdown and record["method_notes"] == "Run on Python, not <q>."
    header, rows = parse_table(page, "summary-table")
    assert [attrs["method"] for attrs, _ in rows] == ["base", "grpo", "srrl"]
    for attrs, cells in rows:
        shown = dict(zip(header, cells, strict=True))
        mine = next(r for r in record["summary"] if r["method"] == attrs["method"] and r["split"] == "test")
        for k in ("1", "2", "4"):
            value = mine["pass_at_k"][k]
            assert shown[f"pass@{k}"] == tables.fmt_mean_sd(value["mean"], value["sd"])
            assert shown[f"pass@{k}"] in markdown
        if attrs["method"] != "base":
            assert shown["Δ pass@1 vs base"] == tables.fmt_signed(mine["vs_baseline"]["delta_pass_at_1"])
    for sentence in record["findings"]:
        assert sentence.replace("'", "&#x27;") in page and sentence in markdown
    # the difference to base at every k on both splits: summary.json, the page and summary.md
    assert {(r["method"], r["split"], r["k"]) for r in record["vs_base"]} == {
        (m, s, k) for m in ("grpo", "srrl") for s in ("train", "test") for k in (1, 2, 4)}
    header, rows = parse_table(page, "vs-base-every-k")
    assert header == ["dataset", "model", "split", "method", "k", "Δ pass@k vs base", "Δ 95% CI", "seeds"]
    for row in record["vs_base"]:
        cells = [row["dataset"], row["model"], row["split"], row["method"], str(row["k"]), tables.fmt_signed(row["delta"]),
                 tables.fmt_interval(row["ci_low"], row["ci_high"], signed=True), str(row["n_seeds"])]  # fmt: skip
        assert cells in [c for _, c in rows]
        assert "| " + " | ".join(cells) + " |" in markdown
    at_one = next(r for r in record["vs_base"] if (r["method"], r["split"], r["k"]) == ("grpo", "test", 1))
    grpo_test = next(r for r in record["summary"] if (r["method"], r["split"]) == ("grpo", "test"))
    assert at_one["delta"] == grpo_test["vs_baseline"]["delta_pass_at_1"]  # the Summary's Δ is its k = 1 row
    assert record["rl_data"][0]["pairs"] == 20
    assert 'id="changed-problems"' in page and "toy/0" in page
    assert record["refinements"][0]["c2_pass_rate"] == 1.0
    # SRRL's two c2 rates are told apart: its rollouts' in training, the trained model's re-sampled
    header, _ = parse_table(page, "training-summary")
    assert {"seconds to the last step", "c1 pass rate in training", "c2 pass rate in training"} <= set(header)
    header, _ = parse_table(page, "refinement-rates")
    assert "c2 pass rate, re-sampled" in header
    assert record["cost"]["total"]["jobs"] == 1
    assert "Jobs that compute results (the report's own left out): 1 jobs" in page

    # Pairwise comparisons: SRRL against GRPO first, then the configured pair, each per split.
    assert [(c["method"], c["baseline"], c["split"]) for c in record["comparisons"]] == [
        ("srrl", "grpo", "test"), ("grpo", "base", "test"), ("srrl", "grpo", "train"), ("grpo", "base", "train"),
    ]
    versus = record["comparisons"][0]
    assert versus["title"] == "SRRL against GRPO" and set(versus["delta_pass_at_k"]) == {"1", "2", "4"}
    assert versus["n_seeds"] == 2 and isinstance(versus["delta_pass_at_k"]["1"]["within_seed_noise"], bool)
    # Pooled over seeds, grpo passes [3, 0, 5, 8, 8, 0] of 8 and srrl [7, 3, 8, 7, 0, 0].
    assert (versus["fixed"], versus["broken"]) == (1, 1)
    assert versus["fixed_problems"] == ["toy/1"] and versus["broken_problems"] == ["toy/4"]
    assert versus["budget"]["budget"] == "equal completions per step (32)"
    assert versus["budget"]["tokens"] == {"srrl": 32.0 * (8 * 60 + 36 + 60 * 8), "grpo": 32.0 * (8 * 60 + 36)}
    assert record["comparisons"][1]["budget"] is None  # base samples nothing in training
    assert '<h2 id="vs-srrl-grpo">SRRL against GRPO</h2>' in page and '<h2 id="vs-grpo-base">GRPO against base</h2>' in page
    header, rows = parse_table(page, "comparison-srrl-grpo-toy-m")
    assert [cells[0] for _, cells in rows] == ["1", "2", "4"]
    for _, cells in rows:
        shown, value = dict(zip(header, cells, strict=True)), versus["delta_pass_at_k"][cells[0]]
        assert shown["Δ 95% paired CI"] == tables.fmt_interval(value["ci_low"], value["ci_high"], signed=True)
        assert shown["Δ (mean ± sd over seeds)"] == f"{value['delta']:+.3f} ± {value['sd_seeds']:.3f}"
        assert shown["verdict"] == value["verdict"] and shown["verdict"] in markdown
    assert "## SRRL against GRPO" in markdown and record["seed_noise_rule"] in markdown
    assert "tokens in training: generated SRRL" in record["findings"][3] and "sampled" not in record["findings"][3]
    # The watch's hard-coding counts pooled per fifth of steps (8 logged steps: windows of one step).
    windows = {(w["method"], w["window"]): w for w in record["hard_coding_windows"]}
    assert set(windows["grpo", "first"]) == {"dataset", "model", "method", "seed", "kind", "window", "steps", "first_step",
                                             "last_step", "checked", "flagged", "problems", "design_effect", "rate",
                                             "ci_low", "ci_high", "false_positive_floor"}
    assert (windows["grpo", "first"]["checked"], windows["grpo", "first"]["flagged"]) == (8, 1)
    # ... from the per-problem counts in the metrics files: 2 problems, the one flag in p1.
    assert windows["grpo", "first"]["problems"] == 2
    assert windows["grpo", "first"]["design_effect"] == pytest.approx(reward_hacking.design_effect([5, 3], [1, 0]))
    assert (windows["grpo", "last"]["last_step"], windows["grpo", "last"]["flagged"]) == (8, 0)
    assert "## Hard-coding rate, pooled per window" in markdown and 'id="hard-coding-windows"' in page
    assert all(c["sentence"] in markdown for c in record["reward_hacking"]["hard_coding_changes"])
    tokens = {r["method"]: r for r in record["token_budget"]["per_method"]}
    assert tokens["srrl"]["prompt_tokens_per_step"] == pytest.approx(32 * 100)
    assert tokens["grpo"]["completion_tokens"] == pytest.approx(32 * sum(20 + s for s in range(1, 9)))
    header, rows = parse_table(page, "token-budget")
    assert [cells[2] for _, cells in rows] == ["grpo", "srrl"]
    assert dict(zip(header, rows[1][1], strict=True))["prompt tokens / completion"] == "100.0"
    assert "## Tokens in training" in markdown and "num_generated_tokens" in record["token_budget"]["note"]
    # The training windows: 8 logged steps are windows of one value each, too few for an interval.
    header, rows = parse_table(page, "training-windows-table")
    shown = {(cells[0], cells[2]): dict(zip(header, cells, strict=True)) for _, cells in rows}
    assert shown["grpo", "reward"]["last − first"] == "+0.700" and shown["grpo", "reward"]["95% CI"] == tables.MISSING
    assert shown["grpo", "reward"]["change"] == "too few logged values for an interval"
    assert not any(metric.startswith("watch/") for _, metric in shown)  # those are the reward-hacking section's


def test_legacy_pass_at_k_rows_and_main_split():
    table = pd.DataFrame(
        [{"dataset": "d", "model": "m", "method": "base", "seed": s, "split": "test", "k": 1, "pass_at_k": v} for s, v in ((0, 0.2), (1, 0.4))]
    )
    (row,) = summary.legacy_pass_at_k_rows(table)
    assert row["mean"] == pytest.approx(0.3) and row["n_seeds"] == 2 and row["sd"] == pytest.approx(np.std([0.2, 0.4], ddof=1))
    assert summary.main_split(["train"]) == "train" and summary.main_split(["train", "test"]) == "test"


def test_read_tsv_keeps_names_as_text(tmp_path):
    path = tmp_path / "t.tsv"
    pd.DataFrame([{"dataset": "1", "model": "007", "method": "base", "seed": 0, "split": "test"}]).to_csv(path, sep="\t", index=False)
    frame = read_tsv(path)
    assert frame.loc[0, "model"] == "007" and frame.loc[0, "seed"] == 0


def test_a_methods_overrides_give_its_own_completions_per_step():
    overrides = {"srrl": {"grpo": {"prompts_per_step": 1}}}
    assert training.method_grpo("srrl", GRPO, overrides) == {**GRPO, "prompts_per_step": 1}
    assert training.method_grpo("grpo", GRPO, overrides) == GRPO
    steps = pd.Series([1.0, 2.0])
    assert list(training.samples_drawn("srrl", steps, GRPO, None, overrides)) == [8.0, 16.0]
    assert list(training.samples_drawn("grpo", steps, GRPO, None, overrides)) == [32.0, 64.0]


def test_training_jobs_are_billed_for_the_gpus_their_memory_plan_gave_them(tmp_path):
    """A full-weight job on 7 training GPUs beside a vLLM server's: 8 GPUs billed, not the size-based count."""
    write_benchmark(tmp_path / "train/d/big/grpo/0.tsv", 3600, 100)
    write_benchmark(tmp_path / "merge_adapter/d/big/grpo/0.tsv", 3600, 100)
    by_size = cost.job_table(tmp_path, {"big": 14.8}).set_index("rule")
    planned = cost.job_table(tmp_path, {"big": 14.8}, {"big": {"grpo": 8}}).set_index("rule")
    assert by_size.loc["train", "gpus"] == 2
    assert planned.loc["train", "gpus"] == 8 and planned.loc["train", "gpu_h"] == pytest.approx(8.0)
    assert planned.loc["merge_adapter", "gpus"] == 0  # merging runs on the CPU


def ar1_noise(rng, replications, steps, correlation):
    """replications × steps of stationary AR(1) noise with unit innovations."""
    noise = np.empty((replications, steps))
    noise[:, 0] = rng.normal(0, 1 / np.sqrt(1 - correlation**2), replications)
    for step in range(1, steps):
        noise[:, step] = correlation * noise[:, step - 1] + rng.normal(0, 1, replications)
    return noise


def iid_interval(first, last):
    """The interval that takes the steps as independent: the two window means' standard errors."""
    half = 1.96 * np.sqrt(first.var(ddof=1) / first.size + last.var(ddof=1) / last.size)
    change = last.mean() - first.mean()
    return change - half, change + half


def test_the_training_change_interval_covers_a_known_shift_on_autocorrelated_steps():
    """200 steps of AR(1) noise (lag correlation 0.5) with a shift of 0.5 halfway: the change's 95%
    interval covers the shift in 92-98% of 1,000 runs (about 0.94), the interval that takes steps as
    independent in under 85% (about 0.74); on uncorrelated steps both cover about 95%."""
    shift, steps, replications = 0.5, 200, 1000
    window = steps // training.WINDOW_FRACTION
    trend = shift * (np.arange(steps) >= steps // 2)

    def coverage(correlation, interval):
        runs = trend + ar1_noise(np.random.default_rng(int(correlation * 10)), replications, steps, correlation)
        hits = [low <= shift <= high for low, high in (interval(run[:window], run[-window:]) for run in runs)]
        return np.mean(hits)

    assert 0.92 <= coverage(0.5, training.change_interval) <= 0.98
    assert coverage(0.5, iid_interval) < 0.85
    assert 0.93 <= coverage(0.0, training.change_interval) <= 0.97


def test_the_change_interval_pays_for_windows_that_vary_unequally():
    """Early and late steps of a run rarely vary alike: with the last window's noise 3× the first's
    (or a quarter of it) Student's t at 2 × (batches − 1) degrees of freedom covered the shift in
    0.909 (0.916) of 1,000 runs; at Welch's degrees of freedom it covers 0.928 (0.940)."""
    shift, steps, replications = 0.5, 200, 1000
    window = steps // training.WINDOW_FRACTION
    half = steps // 2

    def coverage(scale_last):
        noise = ar1_noise(np.random.default_rng(5), replications, steps, 0.5)
        runs = np.where(np.arange(steps) >= half, shift + noise * scale_last, noise)
        return np.mean([low <= shift <= high for low, high in
                        (training.change_interval(run[:window], run[-window:]) for run in runs)])

    assert coverage(3.0) >= 0.925 and coverage(0.25) >= 0.925
    assert training.welch_df([1.0, 1.0], 3) == 6 and training.welch_df([1.0, 0.0], 3) == 3
    assert training.welch_df([0.0, 0.0], 3) == 6


def test_training_windows_carry_the_change_interval_and_whether_it_is_resolved():
    rng = np.random.default_rng(0)

    def rows(method, values):
        return [{"dataset": "d", "model": "m", "method": method, "seed": 0, "step": s, "samples": None, "elapsed_s": None,
                 "metric": "execution/pass_rate", "value": float(v)} for s, v in enumerate(values, start=1)]  # fmt: skip

    rising = np.linspace(0.3, 0.6, 100) + rng.normal(0, 0.05, 100)
    flat = 0.4 + rng.normal(0, 0.05, 100)
    windows = training.training_windows(pd.DataFrame(rows("grpo", rising) + rows("srrl", flat) + rows("dpo", rising[:35])))
    windows = windows.set_index("method")
    grpo, srrl = windows.loc["grpo"], windows.loc["srrl"]
    assert grpo["change_ci_low"] > 0 and grpo["change_resolved"]
    assert (grpo["change_ci_low"] + grpo["change_ci_high"]) / 2 == pytest.approx(grpo["last"] - grpo["first"])
    assert grpo["change_ci_high"] - grpo["change_ci_low"] > 2 * 1.96 * np.sqrt(2 * 0.05**2 / 20)  # wider than iid
    assert srrl["change_ci_low"] < 0 < srrl["change_ci_high"] and srrl["change_resolved"] is False
    # 35 values: windows of 7, fewer than two per batch
    assert windows.loc["dpo", "change_resolved"] is None and pd.isna(windows.loc["dpo", "change_ci_low"])
    assert training.change_interval(np.arange(8.0), np.arange(8.0) + 1) is not None
    assert training.change_interval(np.arange(7.0), np.arange(8.0)) is None


def test_the_report_and_the_readme_say_whether_a_training_change_is_resolved():
    rising = [{"dataset": "d", "model": "m", "method": "grpo", "seed": 0, "step": s, "samples": None, "elapsed_s": None,
               "metric": "execution/pass_rate", "value": 0.3 + 0.003 * s + 0.02 * (-1) ** s} for s in range(1, 101)]
    watch = [{**row, "metric": "watch/tamper/any", "value": 0.0} for row in rising]
    windows = training.training_windows(pd.DataFrame(rising + watch))
    record = summary.json_safe({"rule": training.WINDOW_RULE, "runs": windows.to_dict(orient="records")})
    record = json.loads(json.dumps(record, allow_nan=False))  # as read back from summary.json
    window = next(w for w in record["runs"] if w["metric"] == "execution/pass_rate")
    interval = tables.fmt_interval(window["change_ci_low"], window["change_ci_high"], signed=True)

    page = report_html.windows_section({"training_windows": record})
    header, rows = parse_table(page, "training-windows-table")
    assert len(rows) == 1  # the watch's window is shown in its own section
    shown = dict(zip(header, rows[0][1], strict=True))
    assert shown["95% CI"] == interval and shown["change"] == "resolved: the interval excludes 0"
    assert "batches of consecutive steps" in page

    lines = readme_results.windows_table([window])
    assert "| last − first | last − first, 95% CI | resolved | mean |" in lines[0]
    assert f"| {tables.fmt_signed(window['last'] - window['first'])} | {interval} | yes | {tables.fmt(window['mean'])} |" in lines[2]
    # a summary written before the interval renders as it did
    old = {key: value for key, value in window.items() if not key.startswith("change_")}
    assert readme_results.windows_table([old])[0] == (
        "| method | seed | metric | first fifth | last fifth | last − first | mean | logged values | every logged value (step: value) |"
    )


def test_the_sampling_paragraph_names_each_variant_that_samples_otherwise():
    from execrl.report.html import sampling_section

    config = {
        "generation": {"temperature": 1.0},
        "experiment": {"methods": ["base", "base_low_temp", "srrl", "srrl_separate"]},
        "method_variants": {
            "base_low_temp": {"method": "base", "overrides": {"generation": {"temperature": 0.2}}},
            "srrl_separate": {"method": "srrl", "overrides": {"srrl": {"groups": "separate"}}},
            "unused": {"method": "base", "overrides": {"generation": {"temperature": 0.5}}},
        },
    }
    text = sampling_section(config)
    assert "temperature 1," in text
    assert "<code>base_low_temp</code> samples base's model with temperature 0.2" in text and "It is a control" in text
    # a variant that samples as every method does, and one the experiment does not run, say nothing
    assert "srrl_separate" not in text and "unused" not in text


def test_a_finding_names_training_cost_only_for_a_method_that_trained():
    def record(method, mean, wall_h):
        return {
            "split": "test", "dataset": "builtin", "model": "tiny", "method": method, "n_seeds": 1, "n_problems": 10,
            "n_samples": 4, "pass_at_k": {"1": {"mean": mean}},
            "vs_baseline": None if method == "base" else
            {"ci_low": 0.01, "ci_high": 0.2, "delta_pass_at_1": mean - 0.3, "fixed": 2, "broken": 1},
            "cost": None if method == "base" else {"training_wall_h": wall_h, "training_cpu_h": wall_h},
        }  # fmt: skip

    sentences = summary.findings([record("base", 0.3, None), record("base_low_temp", 0.4, float("nan")),
                                  record("grpo", 0.35, 0.25)], "test")  # fmt: skip
    # NaN: how cost.per_method gives a method no training job (a variant of base), before summary.json
    cool = next(s for s in sentences if s.startswith("base_low_temp"))
    trained = next(s for s in sentences if s.startswith("grpo"))
    assert "training took" not in cool and cool.endswith("broke 1.")
    assert "fixed a problem that some sample of it passed and none of base's" in sentences[0]  # said once, per group
    # one seed: the interval holds the problems' spread, not the seeds' (as the pairwise sentences say)
    assert "95% CI [+0.010, +0.200]) (one seed: seed-to-seed noise not measured); fixed 2 problems" in trained
    several = summary.findings([record("base", 0.3, None), {**record("grpo", 0.35, 0.25), "n_seeds": 3}], "test")
    assert "one seed" not in several[-1]
    # it trains nothing, so it did not "help": it scored otherwise
    assert cool.startswith("base_low_temp (trains nothing: a control) scored higher than base: pass@1 0.400")
    assert trained.startswith("grpo helped: pass@1 0.350")
    assert "training took 0.250 h wall" in trained


def test_a_run_that_passed_every_test_and_did_not_pass_is_one_test_short_in_the_mean_fraction():
    problem = Problem(id="t/0", prompt="Write f(x).", test_type="assert", tests=["assert f(1) == 1", "assert f(2) == 2"],
                      entry_point="f")
    records = [{"problem_id": "t/0", "sample_index": 0, "status": "pass", "tests_passed": 2, "tests_total": 2},
               {"problem_id": "t/0", "sample_index": 1, "status": "timeout", "tests_passed": 2, "tests_total": 2}]
    [row] = evaluate_annotations([problem], records, ks=[1])["per_problem"]
    assert row["c"] == 1 and row["mean_tests_passed_fraction"] == pytest.approx((1 + 0.5) / 2)


def test_summary_md_uses_the_reports_column_headings():
    """summary.md's tables are the page's: its headings, not summary.json's keys."""
    from conftest import REPO

    record = json.loads((REPO / "docs" / "results" / "embedded-default.summary.json").read_text())
    text = summary.markdown(record, [1, 2, 4, 8])
    assert record["held_out"] and record["refinements"] and record["hard_coding_windows"] and record["reward_hacking"]["rates"]
    for key in ("pass_at_k_base", "pass_at_k_plus", "c2_pass_rate", "c2_tests_passed_fraction", "prompts_fixed",
                "first_step", "ci_low", "watch/tamper/any", "training_wall_h", "evaluation_cpu_h"):
        assert key not in text, key
    assert "pass@1 base + held-out" in text and "c2 pass rate, re-sampled" in text and "tamper signal" in text
