"""Pairwise comparisons in the report: one record per pair, dataset, model and split, and the
plain-language verdict the report states for it."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from execrl.methods import METHODS
from execrl.report import budget
from execrl.report.tables import MISSING, _clean, fmt, fmt_count, fmt_interval, fmt_mean_sd, fmt_signed

NO_DIFFERENCE = "0 inside the interval: no difference resolved"
SEED_NOISE_RULE = (
    "A difference is inside seed-to-seed noise when |Δ| is no larger than the sd over seeds of the per-seed "
    "differences (one more seed would often land on the other side of zero); with one seed it is not measured."
)
PER_K = ("delta", "ci_low", "ci_high", "sd_seeds", "seeds_ahead", "seeds_behind", "within_seed_noise")
COUNTS = ("fixed", "broken", "improved", "worse", "solved", "baseline_solved")


def display(method: str) -> str:
    """A method as prose names it: GRPO, SRRL, DPO; base and method variants (srrl_separate) keep
    their config names."""
    registry = method in METHODS and METHODS[method].variant_of is None and method != "base"
    return method.upper() if registry else method


def title(method: str, baseline: str) -> str:
    return f"{display(method)} against {display(baseline)}"


def _flag(value) -> bool | None:
    """within_seed_noise as read back from a TSV: True, False, or None (one seed)."""
    value = _clean(value)
    return None if value is None else bool(value)


def verdict(method: str, baseline: str, value: dict) -> str:
    """The sentence the report gives a difference: resolved only when the paired interval excludes 0
    and, with several seeds, the difference is outside seed-to-seed noise."""
    inside_noise = value["within_seed_noise"]
    if value["ci_low"] > 0 or value["ci_high"] < 0:
        side = "ahead of" if value["ci_low"] > 0 else "behind"
        if inside_noise:
            text = (f"{display(method)} {side} {display(baseline)} on these problems, but inside seed-to-seed noise "
                    "(|Δ| ≤ sd over seeds): no difference resolved")
        else:
            text = f"{display(method)} {side} {display(baseline)}: the interval excludes 0"
            if inside_noise is False:
                text += " and |Δ| exceeds the sd over seeds"
    else:
        text = NO_DIFFERENCE + ("; also inside seed-to-seed noise" if inside_noise else "")
    if inside_noise is None:
        text += " (one seed: seed-to-seed noise not measured)"
    return text


def _pass_at_k(curves: pd.DataFrame, dataset, model, split, method, ks) -> dict:
    rows = curves[(curves["dataset"] == dataset) & (curves["model"] == model) & (curves["split"] == split) & (curves["method"] == method)]
    return {
        str(int(row["k"])): {"mean": float(row["mean"]), "sd": _clean(row["sd_seeds"]), "ci_low": float(row["ci_low"]),
                             "ci_high": float(row["ci_high"])}
        for _, row in rows.iterrows() if int(row["k"]) in ks
    }


def comparison_records(
    comparisons: pd.DataFrame,
    curves: pd.DataFrame,
    ks: Sequence[int],
    changes: pd.DataFrame | None = None,
    token_methods: pd.DataFrame | None = None,
    srrl_budget: str | None = None,
) -> list[dict]:
    """One record per (method, baseline) pair, dataset, model and split of comparisons.tsv: Δ pass@k
    per configured k with its interval, seed spread and verdict; both methods' pass@k; the problems
    fixed and broken; and, for two online methods, the budget they were compared at (`srrl_budget`,
    the run's `srrl.budget`, decides SRRL's against GRPO) and the tokens each used."""
    records = []
    token_methods = token_methods if token_methods is not None else pd.DataFrame()
    keys = ["dataset", "model", "split", "method", "baseline"]
    for (dataset, model, split, method, baseline), rows in comparisons.groupby(keys, sort=False):
        first = rows.iloc[0]
        record = {
            "dataset": dataset, "model": model, "split": split, "method": method, "baseline": baseline,
            "title": title(method, baseline),
            "n_problems": int(first["n_problems"]), "n_seeds": int(first["n_seeds"]),
            # Tables from before tasks were read have no n_tasks: each problem was its own task.
            "n_tasks": int(first["n_tasks"]) if _clean(first.get("n_tasks")) is not None else int(first["n_problems"]),
            **{key: int(first[key]) for key in COUNTS},
            "delta_pass_at_k": {},
            "pass_at_k": {m: _pass_at_k(curves, dataset, model, split, m, ks) for m in (method, baseline)},
        }
        for _, row in rows.iterrows():
            if int(row["k"]) not in ks:
                continue
            value = {key: _clean(row[key]) for key in PER_K}
            value["within_seed_noise"] = _flag(row["within_seed_noise"])
            value["verdict"] = verdict(method, baseline, value)
            record["delta_pass_at_k"][str(int(row["k"]))] = value
        if changes is not None:
            mine = changes[
                (changes["dataset"] == dataset) & (changes["model"] == model) & (changes["split"] == split)
                & (changes["method"] == method) & (changes["baseline"] == baseline)
            ]
            for change in ("fixed", "broken"):
                record[f"{change}_problems"] = sorted(mine[mine["change"] == change]["problem_id"])
        record["budget"] = budget.pair_budget(token_methods, dataset, model, method, baseline, srrl_budget)
        records.append(record)
    return records


def budget_sentence(record: dict) -> str:
    """Which budget a comparison of two online methods used and the tokens each used in training:
    generated (sampled) and prompt (read) tokens apart."""
    spent = record.get("budget")
    if not spent:
        return ""
    method, baseline = record["method"], record["baseline"]

    def counts(key: str, ratio: str) -> str:
        values = spent[key]
        return (f"{display(method)} {budget.fmt_tokens(values[method])}, {display(baseline)} "
                f"{budget.fmt_tokens(values[baseline])} ({fmt(spent[ratio], 2)}×)")  # fmt: skip

    sentence = (
        f"Budget: {spent['budget']}; tokens in training: generated {counts('completion_tokens', 'completion_token_ratio')}; "
        f"prompt {counts('prompt_tokens', 'prompt_token_ratio')}"
    )
    if spent["matched"] == "completions" and fmt(spent["completion_token_ratio"], 2) != fmt(1.0, 2):
        sentence += ", so equal completions are not equal generated tokens"
    return sentence + "."


def finding(record: dict, k: str = "1") -> str | None:
    """One sentence for the At a glance list: the pass@k of both, Δ, interval, verdict, budget."""
    value = record["delta_pass_at_k"].get(k)
    if value is None:
        return None
    method, baseline = record["method"], record["baseline"]
    mine, theirs = record["pass_at_k"][method].get(k), record["pass_at_k"][baseline].get(k)
    seeds = f", {record['n_seeds']} seeds" if record["n_seeds"] > 1 else ""
    if record.get("n_tasks", record["n_problems"]) < record["n_problems"]:
        seeds += f", {record['n_problems']} problems of {record['n_tasks']} tasks, resampled by task"
    sentence = (
        f"{record['title']} ({record['dataset']} · {record['model']}, {record['split']} split{seeds}): pass@{k} "
        f"{fmt(mine['mean']) if mine else MISSING} vs {fmt(theirs['mean']) if theirs else MISSING}, "
        f"Δ {fmt_signed(value['delta'])} (95% paired CI {fmt_interval(value['ci_low'], value['ci_high'], signed=True)}): "
        f"{value['verdict']}; {display(method)} fixed {fmt_count(record['fixed'], 'problem')} {display(baseline)} never solved and broke "
        f"{record['broken']}."
    )
    spent = budget_sentence(record)
    return f"{sentence} {spent}" if spent else sentence


def delta_frame(record: dict) -> pd.DataFrame:
    """Per configured k: both methods' pass@k (mean ± sd over seeds, interval), Δ and its verdict."""
    method, baseline = record["method"], record["baseline"]
    rows = []
    for k, value in record["delta_pass_at_k"].items():
        row = {"k": k}
        for name in (method, baseline):
            mine = record["pass_at_k"][name].get(k)
            row[f"{name} pass@k"] = (
                f"{fmt_mean_sd(mine['mean'], mine['sd'])} {fmt_interval(mine['ci_low'], mine['ci_high'])}" if mine else MISSING
            )
        row["Δ (mean ± sd over seeds)"] = fmt_signed(value["delta"]) + (
            "" if value["sd_seeds"] is None else f" ± {value['sd_seeds']:.3f}"
        )
        row["Δ 95% paired CI"] = fmt_interval(value["ci_low"], value["ci_high"], signed=True)
        row["seeds ahead / behind"] = f"{value['seeds_ahead']} / {value['seeds_behind']} of {record['n_seeds']}"
        row["verdict"] = value["verdict"]
        rows.append(row)
    return pd.DataFrame(rows)


def by_title(records: list[dict], split: str) -> list[tuple[str, list[dict]]]:
    """The records of one split grouped per pair, each under its title, in the order compared."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        if record["split"] == split:
            groups.setdefault(record["title"], []).append(record)
    return list(groups.items())
