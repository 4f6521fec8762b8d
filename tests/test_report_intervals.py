"""Intervals over seeds and problems (and tasks, where problems share one): checked against
simulations where the true difference is known."""

import json

import numpy as np
import pandas as pd
import pytest

from execrl.datasets import builtin
from execrl.evaluation.scores import evaluate_annotations
from execrl.problems import Problem
from execrl.report import stats
from execrl.report.evaluations import per_problem_table, read_tsv

TRUE_DELTA = 0.05


def simulated_counts(rng, seeds, problems=300, n=4, seed_sd=0.05):
    """Passing samples (of n) per seed and problem of a method TRUE_DELTA better than its baseline
    on every problem, each training seed shifting a method's pass rate by N(0, seed_sd)
    (seed-to-seed noise): (method, baseline), each seeds × problems."""
    difficulty = rng.uniform(0.2, 0.6, problems)
    rates = [np.clip(difficulty + shift + rng.normal(0, seed_sd, size=(seeds, 1)), 0, 1) for shift in (TRUE_DELTA, 0.0)]
    return tuple(rng.binomial(n, rate) for rate in rates)


def simulated_runs(counts, n=4):
    """The counts as the per-problem table the report reads."""
    frames = [
        pd.DataFrame({"method": method, "seed": seed, "problem_id": np.arange(row.size), "c": row})
        for method, table in zip(("m", "base"), counts, strict=True)
        for seed, row in enumerate(table)
    ]
    runs = pd.concat(frames)
    runs["dataset"], runs["model"], runs["split"], runs["n"] = "d", "x", "test", n
    return runs


def difference_matrix(runs):
    """The seeds × problems × k matrix of pass@k differences compare_methods builds."""
    method, *_ = stats.run_matrix(runs[runs["method"] == "m"])
    base, *_ = stats.run_matrix(runs[runs["method"] == "base"])
    return method - base


def pass_rate_differences(counts, n=4):
    """The seeds × problems × 1 matrix of pass@1 differences, straight from the counts."""
    method, base = counts
    return ((method - base) / n)[:, :, None]


REPLICATIONS = 400
"""Simulated experiments per coverage estimate. Its Monte-Carlo sd is about 0.016 at the two-level
bootstrap's coverage over 5 seeds (0.87-0.90) and 0.007 at the report's rule's (about 0.98): the 0.93
bar lies 2-4 sd above the one and about 7 sd below the other."""


def two_level_bootstrap_interval(matrix, n_boot, confidence, rng):
    """The interval the report used from 5 seeds on before: problems and seeds both resampled."""
    seeds, problems, _ = matrix.shape
    problem_weights = rng.multinomial(problems, np.full(problems, 1 / problems), size=n_boot) / problems
    seed_weights = rng.multinomial(seeds, np.full(seeds, 1 / seeds), size=n_boot) / seeds
    draws = np.einsum("bs,bp,spk->bk", seed_weights, problem_weights, matrix)
    tail = (1 - confidence) / 2 * 100
    return np.percentile(draws, tail, axis=0), np.percentile(draws, 100 - tail, axis=0)


def coverage(seeds, replications, rng, interval=stats.mean_interval):
    hits = 0
    for replication in range(replications):
        matrix = pass_rate_differences(simulated_counts(rng, seeds))
        low, high = interval(matrix, 300, stats.CONFIDENCE, np.random.default_rng(replication))
        hits += low[0] <= TRUE_DELTA <= high[0]
    return hits / replications


def test_t_quantiles():
    for df, expected in ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (30, 2.042), (float("inf"), 1.960)):
        assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)
    assert stats.t_quantile(0.025, 3) == pytest.approx(-3.182, abs=1e-3)


@pytest.mark.parametrize("seeds", [2, 3, 5, 6, 10])
def test_intervals_cover_the_true_difference_at_every_seed_count(seeds):
    """With seed-to-seed noise larger than the problems', the report's 95% intervals over 2 to 10
    seeds cover the true difference in 93-99.5% of 400 simulated experiments (nominal 95%)."""
    assert 0.93 <= coverage(seeds, REPLICATIONS, np.random.default_rng(seeds)) <= 0.995


def test_bootstrapping_the_seeds_would_cover_too_little():
    """The two-level bootstrap the report used from 5 seeds on: over five seeds it misses the true
    difference in more than one experiment in fifteen, and over two in about a third."""
    assert coverage(5, REPLICATIONS, np.random.default_rng(5), two_level_bootstrap_interval) < 0.93
    assert coverage(2, REPLICATIONS, np.random.default_rng(2), two_level_bootstrap_interval) < 0.8


def test_one_seed_resamples_the_problems_only():
    """One seed: the percentile bootstrap over problems, whose width is about 2 × 1.96 standard errors
    of the problems' mean."""
    matrix = pass_rate_differences(simulated_counts(np.random.default_rng(1), seeds=1))
    low, high = stats.mean_interval(matrix, 2000, stats.CONFIDENCE, np.random.default_rng(0))
    standard_error = matrix[0, :, 0].std() / np.sqrt(matrix.shape[1])
    assert high[0] - low[0] == pytest.approx(2 * 1.96 * standard_error, rel=0.1)


def test_the_simulated_matrix_is_the_one_compare_methods_builds():
    counts = simulated_counts(np.random.default_rng(5), seeds=2)
    assert np.allclose(difference_matrix(simulated_runs(counts))[:, :, :1], pass_rate_differences(counts))


@pytest.mark.parametrize("seeds", [2, 5])
def test_comparisons_and_curves_use_the_one_rule(seeds):
    runs = simulated_runs(simulated_counts(np.random.default_rng(0), seeds=seeds))
    compared = stats.compare_methods(runs, [("m", "base")], n_boot=300)
    low, high = stats.mean_interval(difference_matrix(runs), 300, stats.CONFIDENCE, np.random.default_rng(0))
    assert np.allclose(compared["ci_low"], low) and np.allclose(compared["ci_high"], high)
    curves = stats.pass_at_k_curves(runs[runs["method"] == "m"], n_boot=300)
    matrix, *_ = stats.run_matrix(runs[runs["method"] == "m"])
    low, high = stats.mean_interval(matrix, 300, stats.CONFIDENCE, np.random.default_rng(0))
    assert np.allclose(curves["ci_low"], low) and np.allclose(curves["ci_high"], high)
    # Student's t over the per-seed differences: at least 2 t × their standard error wide
    seed_spread = stats.seed_spread(difference_matrix(runs).mean(axis=1))[0]["sd_seeds"]
    t_width = 2 * stats.t_quantile(0.975, seeds - 1) * seed_spread / np.sqrt(seeds)
    assert compared["ci_high"][0] - compared["ci_low"][0] > t_width


# ------------------------------------------------------------------ problems that share a task

TASK_SIZES = np.full(50, 4)
"""200 problems, four per task: one program under four namings, say."""


def clustered_differences(rng, seeds, task_sd=0.15, problem_sd=0.05, sampling_sd=0.02, seed_sd=0.002):
    """Per-seed, per-problem pass@1 differences of a method TRUE_DELTA better than its baseline on
    average over tasks, where how much it helps is a property of the task (N(TRUE_DELTA, task_sd),
    shared by the task's problems) more than of the problem (problem_sd); each problem's rate is
    measured from many samples (sampling_sd) and the seeds barely differ (seed_sd), so which tasks
    were drawn is what the interval must cover: (seeds × problems × 1 matrix, task per problem)."""
    tasks = np.repeat(np.arange(TASK_SIZES.size), TASK_SIZES)
    effect = rng.normal(TRUE_DELTA, task_sd, TASK_SIZES.size)[tasks] + rng.normal(0, problem_sd, tasks.size)
    matrix = effect + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, sampling_sd, (seeds, tasks.size))
    return matrix[:, :, None], list(tasks)


def clustered_coverage(seeds, replications, rng, over_tasks):
    hits = 0
    for replication in range(replications):
        matrix, tasks = clustered_differences(rng, seeds)
        low, high = stats.mean_interval(matrix, 300, stats.CONFIDENCE, np.random.default_rng(replication),
                                        tasks if over_tasks else None)  # fmt: skip
        hits += low[0] <= TRUE_DELTA <= high[0]
    return hits / replications


@pytest.mark.parametrize("seeds", [1, 2, 3, 5, 6, 10])
def test_resampling_tasks_covers_clustered_problems_and_resampling_problems_does_not(seeds):
    """Problems of one task move together: the bootstrap over tasks covers the true difference in
    at least 93% of 400 simulated experiments at every seed count (about 0.94-0.98), the bootstrap
    over problems, with the seeds' part of the rule the same, in under 90% (about 0.68-0.88)."""
    assert clustered_coverage(seeds, REPLICATIONS, np.random.default_rng(seeds), over_tasks=True) >= 0.93
    assert clustered_coverage(seeds, REPLICATIONS, np.random.default_rng(seeds), over_tasks=False) < 0.90


def test_with_every_problem_its_own_task_the_task_bootstrap_is_the_problem_bootstrap():
    matrix = pass_rate_differences(simulated_counts(np.random.default_rng(2), seeds=3))
    problems = matrix.shape[1]
    weights = stats._weights(np.random.default_rng(7), problems, 50)
    assert np.array_equal(stats.task_weights(np.random.default_rng(7), [f"p{i}" for i in range(problems)], 50), weights)
    for seeds in (1, 3):
        alone = stats.mean_interval(matrix[:seeds], 300, stats.CONFIDENCE, np.random.default_rng(0))
        own = stats.mean_interval(matrix[:seeds], 300, stats.CONFIDENCE, np.random.default_rng(0), list(range(problems)))
        assert np.array_equal(alone[0], own[0]) and np.array_equal(alone[1], own[1])


def test_task_weights_resample_whole_tasks():
    tasks = ["a", "a", "a", "b", "c", "c"]
    weights = stats.task_weights(np.random.default_rng(3), tasks, 200)
    assert np.allclose(weights.sum(axis=1), 1.0)  # a weighted sum is a mean over the problems drawn
    assert np.allclose(weights[:, 0], weights[:, 1]) and np.allclose(weights[:, 4], weights[:, 5])
    # a draw's mean is over problems: task a drawn once, c twice -> (3 + 2 * 2) problems
    drawn = {tuple(np.round(row * 7, 9)) for row in weights}
    assert (1, 1, 1, 0, 2, 2) in drawn


def evaluations_with_tasks(tmp_path, tasks):
    """Evaluation files of base and a method over 24 problems with the given metadata tasks (None:
    no task), two seeds: the method passes more on the tasks it helps."""
    rng = np.random.default_rng(11)
    problems = [Problem(id=f"toy/{i:02d}", prompt=f"Write f{i}(x).", test_type="assert", tests=[f"assert f{i}(1) == 1"],
                        entry_point=f"f{i}", metadata={} if task is None else {"task": task})
                for i, task in enumerate(tasks)]  # fmt: skip
    helped = {task: rng.integers(0, 3) for task in set(tasks)}
    paths = []
    for method in ("base", "m"):
        for seed in (0, 1):
            annotations = [
                {"problem_id": p.id, "status": "pass" if index < 1 + (method == "m") * helped[task] else "fail",
                 "tests_passed": 0, "tests_total": 1}
                for p, task in zip(problems, tasks, strict=True) for index in range(4)
            ]  # fmt: skip
            evaluation = evaluate_annotations(problems, annotations, ks=[1])
            evaluation["run"] = {"dataset": "d", "model": "x", "method": method, "seed": seed, "split": "test"}
            path = tmp_path / f"{method}-{seed}.json"
            path.write_text(json.dumps(evaluation))
            paths.append(path)
    return paths


def test_a_task_named_in_the_problems_reaches_the_intervals(tmp_path):
    """metadata.task → the evaluation's per-problem rows → per_problem.tsv → a bootstrap over tasks."""
    tasks = [f"t{i // 4}" for i in range(24)]  # six tasks of four problems
    table = tmp_path / "per_problem.tsv"
    per_problem_table(evaluations_with_tasks(tmp_path, tasks)).to_csv(table, sep="\t", index=False)
    runs = read_tsv(table)
    assert sorted(set(runs["task"])) == [f"t{i}" for i in range(6)]
    compared = stats.compare_methods(runs, [("m", "base")], n_boot=200).iloc[0]
    assert compared["n_problems"] == 24 and compared["n_tasks"] == 6
    method, _, problems, _ = stats.run_matrix(runs[runs["method"] == "m"])
    base, *_ = stats.run_matrix(runs[runs["method"] == "base"])
    by_tasks = stats.mean_interval(method - base, 200, stats.CONFIDENCE, np.random.default_rng(0), stats.problem_tasks(runs, problems))
    by_problems = stats.mean_interval(method - base, 200, stats.CONFIDENCE, np.random.default_rng(0))
    assert (compared["ci_low"], compared["ci_high"]) == pytest.approx((by_tasks[0][0], by_tasks[1][0]))
    assert by_tasks[1][0] - by_tasks[0][0] > by_problems[1][0] - by_problems[0][0]  # tasks move together: wider
    curves = stats.pass_at_k_curves(runs, n_boot=200)
    assert set(curves["n_tasks"]) == {6}


def test_problems_without_a_task_are_each_their_own(tmp_path):
    """No task in the problems (MBPP, TACO, HumanEval, a plain JSONL): the table's task column is
    empty and the intervals are the bootstrap over problems, as before tasks were read."""
    runs = per_problem_table(evaluations_with_tasks(tmp_path, [None] * 24))
    assert runs["task"].isna().all()
    with_column = stats.compare_methods(runs, [("m", "base")], n_boot=200)
    without = stats.compare_methods(runs.drop(columns="task"), [("m", "base")], n_boot=200)
    assert with_column.equals(without) and set(with_column["n_tasks"]) == {24}
    # some problems with a task and the rest without: each of the rest is a task of its own
    mixed = per_problem_table(evaluations_with_tasks(tmp_path, ["a", "a", "a", *[None] * 21]))
    assert set(stats.compare_methods(mixed, [("m", "base")], n_boot=200)["n_tasks"]) == {22}


def test_ids_pandas_would_read_as_missing_or_as_one_number_stay_problems(tmp_path):
    """per_problem.tsv is written and read back before any interval: ids `NA`, `nan`, `None`
    (read as missing by pandas' defaults, then dropped by the pivot) and `1`, `01`, `001` (read as
    one number) are problems like any other, so the failing ones still count."""
    ids = ["NA", "nan", "None", "null", "1", "01", "001", "add"]
    problems = [Problem(id=i, prompt="Write f(x).", test_type="assert", tests=["assert f(1) == 1"], entry_point="f")
                for i in ids]  # fmt: skip
    annotations = [{"problem_id": i, "status": "pass" if i == "add" else "fail", "tests_passed": 0, "tests_total": 1}
                   for i in ids for _ in range(2)]  # fmt: skip
    evaluation = evaluate_annotations(problems, annotations, ks=[1])
    evaluation["run"] = {"dataset": "d", "model": "x", "method": "base", "seed": 0, "split": "test"}
    (tmp_path / "base.json").write_text(json.dumps(evaluation))
    table = tmp_path / "per_problem.tsv"
    per_problem_table([tmp_path / "base.json"]).to_csv(table, sep="\t", index=False)
    runs = read_tsv(table)
    assert sorted(runs["problem_id"]) == sorted(ids) and runs["task"].isna().all()
    matrix, _, problems_read, _ = stats.run_matrix(runs)
    assert sorted(problems_read) == sorted(ids) and matrix[..., 0].mean() == pytest.approx(1 / 8)
    curve = stats.pass_at_k_curves(runs, n_boot=50).iloc[0]
    assert curve["n_problems"] == 8 and curve["mean"] == pytest.approx(1 / 8)
    # ids that are all numbers to pandas: read as 1, 1, 1, 2 they merged into two problems
    numeric = runs[runs["problem_id"].isin(["1", "01", "001"])].assign(problem_id=["1", "01", "001", "2"][:3])
    numeric = pd.concat([numeric, numeric.iloc[:1].assign(problem_id="2", c=2)])
    numeric.to_csv(table, sep="\t", index=False)
    assert sorted(read_tsv(table)["problem_id"]) == ["001", "01", "1", "2"]
    assert stats.pass_at_k_curves(read_tsv(table), n_boot=50).iloc[0]["n_problems"] == 4


def test_a_run_matrix_refuses_ids_it_would_drop_or_merge():
    runs = pd.DataFrame({"seed": [0, 0, 0], "problem_id": ["a", "b", "b"], "n": [2, 2, 2], "c": [0, 1, 2]})
    with pytest.raises(ValueError, match="problem 'b' appears more than once in seed 0"):
        stats.run_matrix(runs)
    with pytest.raises(ValueError, match="no problem id"):
        stats.run_matrix(runs.assign(problem_id=["a", None, "b"]))


def test_builtin_problems_name_their_task_by_the_reference_up_to_renaming():
    problems = builtin.generate("test", seed=0, n=120, names_per_task=3)
    pairs = {(p.metadata["task"], builtin.reference_key(p)) for p in problems}
    assert len({task for task, _ in pairs}) == len({reference for _, reference in pairs}) == len(pairs)
    assert len(pairs) < len(problems)  # some tasks come back under other names, under their one task


def test_bootstrap_samples_is_the_number_of_resamples_behind_an_interval():
    """`report.bootstrap_samples` (the `n_boot` of `mean_interval`): with few resamples an
    interval's end moves with the random stream, with many it settles; one seed, 200 problems."""
    matrix = (np.random.default_rng(0).random((1, 200, 1)) < 0.3).astype(float)
    spread = {}
    for n_boot in (20, 4000):
        lows = [stats.mean_interval(matrix, n_boot, 0.95, np.random.default_rng(seed))[0][0] for seed in range(20)]
        spread[n_boot] = float(np.std(lows))
    assert spread[20] > 4 * spread[4000] > 0, spread
