"""pass@k curves with confidence intervals over problems and seeds, and methods compared pairwise.

For one dataset, model, split and method, seeds × problems form a matrix of per-problem pass@k
values (the unbiased estimator from each run's (n, c)). The point estimate is their mean. The
interval covers both which problems were drawn (a bootstrap over problems) and, with several seeds,
sampling/training noise across seeds (Student's t over the per-seed means). A comparison of two
methods (each trained method against `base`, SRRL against GRPO, and the pairs the config names) is
paired: the same interval rule on the per-seed, per-problem differences, so both methods get the same
problem resamples and the same seeds, which is what makes small differences on a shared problem set
resolvable.

With two seeds or more, at every seed count, the interval is mean ± (t × SE_seeds + z × SE_problems)
(`seed_t_interval`): SE_seeds is the standard error of the per-seed means, with Student's t at S − 1
degrees of freedom; SE_problems is the problem bootstrap's standard deviation of the seed-averaged
values, with the normal's z. The seeds are not bootstrapped: resampling S seeds shrinks their spread by
(S − 1)/S and has few distinct outcomes, so a two-level bootstrap covers too little, from 5 seeds on
as well (`tests/test_report_intervals.py` simulates experiments with a known difference: there it
stays under 93% at 5 seeds, this rule over 93% at 2, 3, 5, 6 and 10). Adding the two half-widths errs
on the wide side. With one seed only the problems are resampled (a percentile
bootstrap) and seed-to-seed noise is not in the interval.

Problems that share a task: where the evaluation tables carry a `task` per problem (the builtin
suite names a task by its reference up to renaming, so several problems can be one task under other
names), the bootstrap resamples tasks, each drawn task bringing all its problems, and the point
estimate stays the mean over problems. Problems of one task pass and fail together, so a bootstrap
over problems treats a task drawn several times as independent evidence and gives too narrow an
interval (`tests/test_report_intervals.py` simulates clustered problems: over problems it covers
less than 93% at every seed count, over tasks at least 93%). The seeds' part of the rule is the same.
Where each problem is its own task (no `task` column, or every task distinct: MBPP, TACO,
HumanEval, a JSONL without `metadata.task`), the task bootstrap is the problem bootstrap, draw for
draw.

Seed-to-seed noise: with several seeds, each seed gives its own difference (mean over the shared
problems). A difference is inside seed-to-seed noise when its mean is no larger than the standard
deviation of these per-seed differences, |Δ| ≤ sd: one more seed would then often land on the
other side of zero (about one time in six under a normal spread), however narrow the problem
interval is. With one seed it is not measured.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np
import pandas as pd

from execrl.evaluation.passk import pass_at_k

BASELINE = "base"
SRRL_AGAINST_GRPO = ("srrl", "grpo")
CONFIDENCE = 0.95
CURVE_COLUMNS = [
    "dataset", "model", "split", "method", "k", "mean", "sd_seeds", "ci_low", "ci_high",
    "n_seeds", "n_problems", "n_samples", "n_tasks",
]
COMPARISON_COLUMNS = [
    "dataset", "model", "split", "method", "baseline", "k", "delta", "ci_low", "ci_high",
    "sd_seeds", "seeds_ahead", "seeds_behind", "within_seed_noise", "n_seeds",
    "n_problems", "n_tasks", "fixed", "broken", "improved", "worse", "solved", "baseline_solved",
]


def pass_at_k_table(n: int) -> np.ndarray:
    """table[c, k-1] = pass@k for n samples of which c pass, for c = 0..n and k = 1..n."""
    return np.array([[pass_at_k(n, c, k) for k in range(1, n + 1)] for c in range(n + 1)])


def run_matrix(runs: pd.DataFrame) -> tuple[np.ndarray, list[int], list[str], int]:
    """pass@k per seed, problem and k (k = 1..n) of one method's runs; problems every seed has."""
    n_values = runs["n"].unique()
    if len(n_values) != 1:
        raise ValueError(f"runs of one method have different sample counts: {sorted(n_values)}")
    n = int(n_values[0])
    # a pivot drops a missing id and keeps one row of repeated ones: either would take problems
    # out of pass@k without a word
    if runs["problem_id"].isna().any():
        raise ValueError("runs with no problem id (a table read with ids taken for missing values?)")
    repeated = runs.duplicated(["seed", "problem_id"])
    if repeated.any():
        first = runs[repeated].iloc[0]
        raise ValueError(f"problem {first['problem_id']!r} appears more than once in seed {first['seed']}'s run")
    counts = runs.pivot_table(index="seed", columns="problem_id", values="c", aggfunc="first").dropna(axis=1)
    table = pass_at_k_table(n)
    matrix = table[counts.to_numpy(dtype=int)]  # seeds × problems × k
    return matrix, [int(s) for s in counts.index], list(counts.columns), n


def _weights(rng: np.random.Generator, size: int, draws: int) -> np.ndarray:
    """Bootstrap resampling as weights: draws × size multinomial counts divided by size."""
    return rng.multinomial(size, np.full(size, 1.0 / size), size=draws) / size


def task_weights(rng: np.random.Generator, tasks, draws: int) -> np.ndarray:
    """A bootstrap over tasks as problem weights (draws × problems): each draw takes as many tasks
    as there are, with replacement, and weighs every problem by how often its task was drawn, over
    the problems drawn in all, so a weighted sum is the mean over the resampled problems. With every
    problem its own task this is `_weights`, the same draws from the same generator."""
    codes, uniques = pd.factorize(pd.Series(list(tasks), dtype=object), sort=False)
    counts = rng.multinomial(len(uniques), np.full(len(uniques), 1.0 / len(uniques)), size=draws)
    sizes = np.bincount(codes, minlength=len(uniques))
    # C order, as `_weights` gives: the matrix products then sum in the same order, to the last bit.
    return np.ascontiguousarray(counts[:, codes] / (counts @ sizes)[:, None])


def problem_tasks(runs: pd.DataFrame, problems: list) -> list | None:
    """The task of each of `problems` (in their order) from the runs' `task` column, a problem
    without one being its own task; None where the table has no task column or no two problems
    share a task, so that the bootstrap is over problems."""
    if "task" not in runs.columns:
        return None
    named = runs.dropna(subset=["task"]).drop_duplicates("problem_id").set_index("problem_id")["task"]
    tasks = [("task", str(named[p])) if p in named.index else ("problem", str(p)) for p in problems]
    return tasks if len(set(tasks)) < len(tasks) else None


def count_tasks(tasks: list | None, n_problems: int) -> int:
    return n_problems if tasks is None else len(set(tasks))


def bootstrap_means(matrix: np.ndarray, problem_weights: np.ndarray) -> np.ndarray:
    """Resampled means (draws × k) of a one-seed 1 × problems × k matrix, given problem weights per draw."""
    return problem_weights @ matrix[0]


def _interval(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1 - confidence) / 2 * 100
    return np.percentile(draws, tail, axis=0), np.percentile(draws, 100 - tail, axis=0)


INTERVAL_RULE = (
    "95% intervals: with one seed, a bootstrap over problems; with two seeds or more (the same rule at every seed "
    "count), mean ± (Student's t at S − 1 degrees of freedom × the per-seed means' standard error + z × the problem "
    "bootstrap's standard deviation), since resampling seeds understates their spread. Where problems share a task "
    "(one program under other names), the bootstrap resamples tasks, each with all its problems, since problems of "
    "one task pass and fail together. Comparisons are paired: the rule applied to the per-seed, per-problem "
    "differences of the two methods."
)


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile for df ≥ 1 (the normal's for infinite df).

    With t = √df · tan θ the t density becomes ∝ cos^(df−1) θ on (−π/2, π/2), a smooth bounded
    integrand: its cumulative integral on a fine grid, inverted, gives the quantile.
    """
    if not 0 < p < 1:
        raise ValueError(f"t quantile: p must be in (0, 1), got {p}")
    if math.isinf(df) or df > 1e7:
        return NormalDist().inv_cdf(p)
    if df < 1:
        raise ValueError(f"t quantile: needs df >= 1, got {df}")
    theta = np.linspace(0.0, math.pi / 2, 200_001)
    density = np.cos(theta) ** (df - 1)
    cumulative = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(theta))])
    cumulative /= cumulative[-1]  # the half-line's mass is 1/2: scale to 1
    target = abs(2 * p - 1)
    angle = float(np.interp(target, cumulative, theta))
    return math.copysign(math.sqrt(df) * math.tan(angle), p - 0.5)


def seed_t_interval(
    matrix: np.ndarray, problem_weights: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Interval per k of the mean of a seeds × problems × k matrix with two seeds or more: mean ± (t × SE_seeds
    + z × SE_problems). SE_seeds is the standard error of the per-seed means (S − 1 degrees of
    freedom, so Student's t); SE_problems the problem bootstrap's standard deviation of the
    seed-averaged values (hundreds of problems: the normal's z). Adding the half-widths keeps the
    seeds' t where they dominate and the problems' z where they do."""
    seeds = matrix.shape[0]
    per_seed = matrix.mean(axis=1)  # seeds × k
    mean = per_seed.mean(axis=0)
    seed_se = per_seed.std(axis=0, ddof=1) / math.sqrt(seeds)
    problem_se = (problem_weights @ matrix.mean(axis=0)).std(axis=0, ddof=1)
    upper = 1 - (1 - confidence) / 2
    half = t_quantile(upper, seeds - 1) * seed_se + NormalDist().inv_cdf(upper) * problem_se
    return mean - half, mean + half


def mean_interval(
    matrix: np.ndarray, n_boot: int, confidence: float, rng: np.random.Generator, tasks=None
) -> tuple[np.ndarray, np.ndarray]:
    """Interval per k of a seeds × problems × k matrix's mean: Student-t over seeds plus the problem
    bootstrap (`seed_t_interval`) with two seeds or more, the problem bootstrap alone with one. With
    `tasks` (one label per problem), the bootstrap resamples tasks (`task_weights`)."""
    if tasks is None:
        weights = _weights(rng, matrix.shape[1], n_boot)
    else:
        if len(tasks) != matrix.shape[1]:
            raise ValueError(f"{len(tasks)} task labels for {matrix.shape[1]} problems")
        weights = task_weights(rng, tasks, n_boot)
    if matrix.shape[0] > 1:
        return seed_t_interval(matrix, weights, confidence)
    return _interval(bootstrap_means(matrix, weights), confidence)


def pass_at_k_curves(
    per_problem: pd.DataFrame, n_boot: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> pd.DataFrame:
    """pass@k for k = 1..n per dataset, model, split and method, with 95% intervals (`mean_interval`,
    over tasks where problems share one)."""
    rows = []
    for (dataset, model, split, method), runs in per_problem.groupby(["dataset", "model", "split", "method"], sort=True):
        matrix, seeds, problems, n = run_matrix(runs)
        tasks = problem_tasks(runs, problems)
        low, high = mean_interval(matrix, n_boot, confidence, np.random.default_rng(seed), tasks)
        per_seed = matrix.mean(axis=1)  # seeds × k
        mean = per_seed.mean(axis=0)
        sd = per_seed.std(axis=0, ddof=1) if len(seeds) > 1 else np.full(n, np.nan)
        for k in range(1, n + 1):
            rows.append(
                {
                    "dataset": dataset, "model": model, "split": split, "method": method, "k": k,
                    "mean": float(mean[k - 1]), "sd_seeds": float(sd[k - 1]),
                    "ci_low": float(low[k - 1]), "ci_high": float(high[k - 1]),
                    "n_seeds": len(seeds), "n_problems": len(problems), "n_samples": n,
                    "n_tasks": count_tasks(tasks, len(problems)),
                }
            )
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def problem_rates(per_problem: pd.DataFrame) -> pd.DataFrame:
    """Pass rate per problem and method, pooled over seeds (Σc / Σn)."""
    pooled = per_problem.groupby(["dataset", "model", "split", "method", "problem_id"], sort=True)[["c", "n"]].sum()
    pooled["rate"] = pooled["c"] / pooled["n"]
    return pooled.reset_index()


def base_pairs(methods, baseline: str = BASELINE) -> list[tuple[str, str]]:
    """(method, baseline) for every method but the baseline, in name order."""
    return [(method, baseline) for method in sorted(set(methods) - {baseline})]


def comparison_pairs(methods, configured=(), variants=None) -> list[tuple[str, str]]:
    """The pairwise comparisons beside those with base: SRRL against GRPO whenever both run (the
    question the experiment asks), each method variant against the method it varies whenever both
    run (`variants`: variant name → that method; a variant of base is among the comparisons with
    base already), then every configured [method, baseline] pair, each once."""
    pairs = [SRRL_AGAINST_GRPO] if set(SRRL_AGAINST_GRPO) <= set(methods) else []
    varied = [(variant, of) for variant, of in sorted((variants or {}).items())
              if {variant, of} <= set(methods) and of != BASELINE]  # fmt: skip
    for method, baseline in [*varied, *configured]:
        if (method, baseline) not in pairs:
            pairs.append((method, baseline))
    return pairs


def _fixed_broken(mine, theirs) -> tuple[np.ndarray, np.ndarray]:
    """Per problem (pass rates pooled over seeds): fixed - the baseline never passed, the method
    did; broken - the reverse."""
    mine, theirs = np.asarray(mine), np.asarray(theirs)
    return (theirs == 0) & (mine > 0), (theirs > 0) & (mine == 0)


def seed_spread(per_seed: np.ndarray) -> list[dict]:
    """Per k, from the per-seed differences (seeds × k): their sd over seeds, how many seeds are
    ahead and behind, and whether the mean difference is inside seed-to-seed noise (|Δ| ≤ sd;
    None with one seed, where the noise is not measured)."""
    spread = []
    for values in per_seed.T:
        sd = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
        spread.append(
            {
                "sd_seeds": sd, "seeds_ahead": int((values > 0).sum()), "seeds_behind": int((values < 0).sum()),
                "within_seed_noise": None if np.isnan(sd) else bool(abs(values.mean()) <= sd),
            }
        )
    return spread


def compare_methods(
    per_problem: pd.DataFrame,
    pairs,
    n_boot: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> pd.DataFrame:
    """Per (method, baseline) pair, dataset, model and split where both ran: the pass@k difference
    on the problems and seeds both have, with a paired interval (`mean_interval` of the differences,
    over tasks where problems share one), its spread over seeds,
    and how many problems the method fixed, broke, improved or worsened against the baseline."""
    rows = []
    for (dataset, model, split), group in per_problem.groupby(["dataset", "model", "split"], sort=True):
        present = set(group["method"])
        for method, baseline in pairs:
            if method not in present or baseline not in present:
                continue
            matrix, seeds, problems, n = run_matrix(group[group["method"] == method])
            base_matrix, base_seeds, base_problems, base_n = run_matrix(group[group["method"] == baseline])
            shared = sorted(set(problems) & set(base_problems))
            shared_seeds = sorted(set(seeds) & set(base_seeds))
            if not shared or not shared_seeds:
                continue
            ks = min(n, base_n)
            a = matrix[np.ix_([seeds.index(s) for s in shared_seeds], [problems.index(p) for p in shared], range(ks))]
            b = base_matrix[np.ix_([base_seeds.index(s) for s in shared_seeds], [base_problems.index(p) for p in shared], range(ks))]
            # Paired: the interval of the per-seed, per-problem differences (the same problems, tasks and seeds for both).
            tasks = problem_tasks(group[group["method"].isin([method, baseline])], shared)
            low, high = mean_interval(a - b, n_boot, confidence, np.random.default_rng(seed), tasks)
            per_seed = (a - b).mean(axis=1)  # seeds × k
            delta = per_seed.mean(axis=0)
            spread = seed_spread(per_seed)
            mine, theirs = a[:, :, 0].mean(axis=0), b[:, :, 0].mean(axis=0)  # pass@1 = pass rate
            fixed, broken = _fixed_broken(mine, theirs)
            counts = {
                "fixed": int(fixed.sum()), "broken": int(broken.sum()),
                "improved": int((mine > theirs).sum()), "worse": int((mine < theirs).sum()),
                "solved": int((mine > 0).sum()), "baseline_solved": int((theirs > 0).sum()),
            }
            for k in range(1, ks + 1):
                rows.append(
                    {
                        "dataset": dataset, "model": model, "split": split, "method": method, "baseline": baseline,
                        "k": k, "delta": float(delta[k - 1]), "ci_low": float(low[k - 1]), "ci_high": float(high[k - 1]),
                        **spread[k - 1],
                        "n_seeds": len(shared_seeds), "n_problems": len(shared),
                        "n_tasks": count_tasks(tasks, len(shared)), **counts,
                    }
                )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def compare_to_baseline(
    per_problem: pd.DataFrame, baseline: str = BASELINE, n_boot: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> pd.DataFrame:
    """Each method against the baseline (`compare_methods` over `base_pairs`)."""
    pairs = base_pairs(per_problem["method"].unique(), baseline)
    return compare_methods(per_problem, pairs, n_boot=n_boot, confidence=confidence, seed=seed)


def changed_problems(per_problem: pd.DataFrame, pairs) -> pd.DataFrame:
    """The problems each method fixed or broke against its baseline, per (method, baseline) pair,
    pooled over seeds: dataset, model, split, method, baseline, change, problem_id."""
    rates = problem_rates(per_problem)
    keys = ["dataset", "model", "split", "problem_id"]
    frames = []
    for method, baseline in pairs:
        pair = rates[rates["method"] == method].merge(
            rates[rates["method"] == baseline][[*keys, "rate"]], on=keys, suffixes=("", "_baseline")
        )
        fixed, broken = _fixed_broken(pair["rate"], pair["rate_baseline"])
        pair["baseline"] = baseline
        pair["change"] = np.select([fixed, broken], ["fixed", "broken"], "")
        frames.append(pair[pair["change"] != ""])
    columns = ["dataset", "model", "split", "method", "baseline", "change", "problem_id"]
    if not frames:
        return pd.DataFrame(columns=columns)
    changed = pd.concat(frames)[columns]
    return changed.sort_values(columns).reset_index(drop=True)
