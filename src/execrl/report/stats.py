"""pass@k curves with bootstrap confidence intervals, and each method against the baseline.

For one dataset, model, split and method, seeds × problems form a matrix of per-problem pass@k
values (the unbiased estimator from each run's (n, c)). The point estimate is their mean. The
interval resamples problems with replacement and, where there are several seeds, seeds too
(a two-level bootstrap), so it covers both which problems were drawn and sampling/training
noise across seeds. Differences to the baseline resample the same problems for both methods
(a paired bootstrap), which is what makes small differences on a shared problem set resolvable.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from execrl.passk import pass_at_k

BASELINE = "base"
CONFIDENCE = 0.95
CURVE_COLUMNS = [
    "dataset", "model", "split", "method", "k", "mean", "sd_seeds", "ci_low", "ci_high",
    "n_seeds", "n_problems", "n_samples",
]
COMPARISON_COLUMNS = [
    "dataset", "model", "split", "method", "baseline", "k", "delta", "ci_low", "ci_high",
    "n_problems", "fixed", "broken", "improved", "worse", "solved", "baseline_solved",
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
    counts = runs.pivot_table(index="seed", columns="problem_id", values="c", aggfunc="first").dropna(axis=1)
    table = pass_at_k_table(n)
    matrix = table[counts.to_numpy(dtype=int)]  # seeds × problems × k
    return matrix, [int(s) for s in counts.index], list(counts.columns), n


def _weights(rng: np.random.Generator, size: int, draws: int) -> np.ndarray:
    """Bootstrap resampling as weights: draws × size multinomial counts divided by size."""
    return rng.multinomial(size, np.full(size, 1.0 / size), size=draws) / size


def bootstrap_means(
    matrix: np.ndarray, problem_weights: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Resampled means (draws × k) of a seeds × problems × k matrix, given problem weights per draw."""
    seeds = matrix.shape[0]
    per_seed = np.einsum("bp,spk->bsk", problem_weights, matrix)
    if seeds == 1:
        return per_seed[:, 0, :]
    seed_weights = _weights(rng, seeds, problem_weights.shape[0])
    return np.einsum("bs,bsk->bk", seed_weights, per_seed)


def _interval(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1 - confidence) / 2 * 100
    return np.percentile(draws, tail, axis=0), np.percentile(draws, 100 - tail, axis=0)


def pass_at_k_curves(
    per_problem: pd.DataFrame, n_boot: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> pd.DataFrame:
    """pass@k for k = 1..n per dataset, model, split and method, with bootstrap intervals."""
    rows = []
    for (dataset, model, split, method), runs in per_problem.groupby(["dataset", "model", "split", "method"], sort=True):
        matrix, seeds, problems, n = run_matrix(runs)
        rng = np.random.default_rng(seed)
        draws = bootstrap_means(matrix, _weights(rng, len(problems), n_boot), rng)
        low, high = _interval(draws, confidence)
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
                }
            )
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def problem_rates(per_problem: pd.DataFrame) -> pd.DataFrame:
    """Pass rate per problem and method, pooled over seeds (Σc / Σn)."""
    pooled = per_problem.groupby(["dataset", "model", "split", "method", "problem_id"], sort=True)[["c", "n"]].sum()
    pooled["rate"] = pooled["c"] / pooled["n"]
    return pooled.reset_index()


def compare_to_baseline(
    per_problem: pd.DataFrame,
    baseline: str = BASELINE,
    n_boot: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> pd.DataFrame:
    """Each method minus the baseline: pass@k difference with a paired bootstrap interval, and
    how many problems it fixed (baseline never passed, method did), broke, improved or worsened."""
    rows = []
    rates = problem_rates(per_problem)
    for (dataset, model, split), group in per_problem.groupby(["dataset", "model", "split"], sort=True):
        if baseline not in set(group["method"]):
            continue
        base_matrix, _, base_problems, base_n = run_matrix(group[group["method"] == baseline])
        base_rates = rates[
            (rates["dataset"] == dataset) & (rates["model"] == model) & (rates["split"] == split) & (rates["method"] == baseline)
        ].set_index("problem_id")["rate"]
        for method in sorted(set(group["method"]) - {baseline}):
            matrix, _, problems, n = run_matrix(group[group["method"] == method])
            shared = sorted(set(problems) & set(base_problems))
            if not shared:
                continue
            a = matrix[:, [problems.index(p) for p in shared], :]
            b = base_matrix[:, [base_problems.index(p) for p in shared], :]
            ks = min(n, base_n)
            a, b = a[:, :, :ks], b[:, :, :ks]
            rng = np.random.default_rng(seed)
            weights = _weights(rng, len(shared), n_boot)
            draws = bootstrap_means(a, weights, rng) - bootstrap_means(b, weights, rng)
            low, high = _interval(draws, confidence)
            delta = a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))
            method_rates = rates[
                (rates["dataset"] == dataset) & (rates["model"] == model) & (rates["split"] == split) & (rates["method"] == method)
            ].set_index("problem_id")["rate"]
            mine, theirs = method_rates.reindex(shared), base_rates.reindex(shared)
            counts = {
                "fixed": int(((theirs == 0) & (mine > 0)).sum()),
                "broken": int(((theirs > 0) & (mine == 0)).sum()),
                "improved": int((mine > theirs).sum()),
                "worse": int((mine < theirs).sum()),
                "solved": int((mine > 0).sum()),
                "baseline_solved": int((theirs > 0).sum()),
            }
            for k in range(1, ks + 1):
                rows.append(
                    {
                        "dataset": dataset, "model": model, "split": split, "method": method, "baseline": baseline,
                        "k": k, "delta": float(delta[k - 1]), "ci_low": float(low[k - 1]), "ci_high": float(high[k - 1]),
                        "n_problems": len(shared), **counts,
                    }
                )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def changed_problems(per_problem: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """The problems each method fixed (the baseline never passed, the method did) or broke (the
    reverse), pooled over seeds: dataset, model, split, method, change, problem_id."""
    rates = problem_rates(per_problem)
    base = rates[rates["method"] == baseline][["dataset", "model", "split", "problem_id", "rate"]]
    pairs = rates[rates["method"] != baseline].merge(base, on=["dataset", "model", "split", "problem_id"], suffixes=("", "_base"))
    pairs["change"] = np.where(
        (pairs["rate_base"] == 0) & (pairs["rate"] > 0), "fixed", np.where((pairs["rate_base"] > 0) & (pairs["rate"] == 0), "broken", "")
    )
    changed = pairs[pairs["change"] != ""][["dataset", "model", "split", "method", "change", "problem_id"]]
    return changed.sort_values(["dataset", "model", "split", "method", "change", "problem_id"]).reset_index(drop=True)
