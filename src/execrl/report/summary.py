"""results/summary.json and results/summary.md: the report's numbers without the figures."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from execrl.compute import describe as describe_compute
from execrl.report import budget, comparisons, reward_hacking, splits, tables
from execrl.report.held_out import HEADINGS as HELD_OUT_HEADINGS
from execrl.report.refinements import HEADINGS as REFINEMENT_HEADINGS
from execrl.report import training as training_rules
from execrl.report.tables import fmt, fmt_count, fmt_hours, fmt_interval, fmt_signed


def legacy_pass_at_k_rows(table: pd.DataFrame) -> list[dict]:
    """Mean and sd over seeds of pass@k per dataset, model, method, split and configured k."""
    rows = []
    for (dataset, model, method, split, k), values in table.groupby(["dataset", "model", "method", "split", "k"])["pass_at_k"]:
        rows.append(
            {
                "dataset": dataset, "model": model, "method": method, "split": split, "k": int(k),
                "mean": float(values.mean()),
                "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                "n_seeds": int(len(values)),
            }
        )
    return rows


def main_split(eval_splits: Sequence[str]) -> str:
    """The split the headline numbers come from: held-out test when evaluated, else the first."""
    return "test" if "test" in eval_splits else eval_splits[0]


def verdict(low: float, high: float) -> str:
    if low > 0:
        return "helped"
    if high < 0:
        return "hurt"
    return "no clear difference"


CONTROL_VERDICTS = {"helped": "scored higher than base", "hurt": "scored lower than base",
                    "no clear difference": "no clear difference from base"}
"""A method that trains nothing (a variant of base that samples otherwise) is a control: it
cannot have helped or hurt, only scored otherwise."""


def trains(method: str, record: dict) -> bool:
    """Whether the record's method trains: the registry's word (variants registered), else
    whether any training was costed."""
    from execrl.methods import METHODS

    if method in METHODS:
        return METHODS[method].trained
    return tables.has_training_cost(record.get("cost"))


REFINEMENT_SPLIT = ("The prompts are built from train-split problems, which SRRL trained on, so its rate mixes using the "
                    "feedback with having learned the task.")
"""Where the refinement prompts come from (`sample_refinements` reads the base model's train-split
candidates), said beside the rate."""


def refinement_findings(refinements: pd.DataFrame | None) -> list[str]:
    """One sentence per dataset and model: how often each model's c2 fixes a failed first attempt,
    and that the prompts are of SRRL's own training problems."""
    if refinements is None or refinements.empty:
        return []
    sentences = []
    for (dataset, model), rows in refinements.groupby(["dataset", "model"], sort=True):
        parts = []
        for method in ["srrl", "base"] + sorted(set(rows["method"]) - {"srrl", "base"}):
            mine = rows[rows["method"] == method]
            if mine.empty:
                continue
            samples = int(mine["c2_samples"].sum())
            passed = float((mine["c2_pass_rate"] * mine["c2_samples"]).sum())
            parts.append(f"{method} {fmt(passed / samples if samples else float('nan'))} ({samples} samples)")
        prompts = int(rows["prompts"].max())
        sentences.append(
            f"{dataset} · {model}: c2 pass rate on refinements of failed base attempts ({prompts} prompts per seed): "
            + ", ".join(parts) + f". {REFINEMENT_SPLIT}"
        )
    return sentences


def findings(records: list[dict], split: str) -> list[str]:
    """Plain sentences: which method helped on which dataset and model, by how much, how surely, at what cost."""
    sentences = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        if record["split"] == split:
            groups.setdefault((record["dataset"], record["model"]), []).append(record)
    for (dataset, model), group in groups.items():
        with_pass1 = [r for r in group if "1" in r["pass_at_k"]]
        if not with_pass1:
            continue
        top = max(r["pass_at_k"]["1"]["mean"] for r in with_pass1)
        best = [r["method"] for r in with_pass1 if fmt(r["pass_at_k"]["1"]["mean"]) == fmt(top)]
        if len(best) == len(with_pass1) and len(best) > 1:
            ranking = f"every method has pass@1 {fmt(top)}"
        else:
            ranking = f"highest pass@1 is {' and '.join(best)} at {fmt(top)}"
        first = with_pass1[0]
        n_seeds = first["n_seeds"]
        if n_seeds == 1:
            intervals = "95% bootstrap intervals over problems"
        else:
            intervals = f"95% intervals over problems (bootstrap) and {n_seeds} seeds (Student's t)"
        sentences.append(
            f"{dataset} · {model} ({split} split, {first['n_problems']} problems, {first['n_samples']} samples each): "
            f"{ranking}; intervals are {intervals}; a method fixed a problem that some sample of it passed and "
            "none of base's, and broke one base passed and it never did."
        )
        base = next((r for r in group if r["method"] == "base"), None)
        for record in group:
            versus = record.get("vs_baseline")
            if not versus or base is None or "1" not in base["pass_at_k"]:
                continue
            cost = record.get("cost") or {}
            cost_text = ""
            if tables.has_training_cost(cost):  # a method that trains nothing (base's variants) has no training to cost
                cost_text = f"; training took {fmt_hours(cost.get('training_wall_h'))} h wall, {fmt_hours(cost.get('training_cpu_h'))} CPU h"
                if cost.get("training_gpu_h"):
                    cost_text += f", {fmt_hours(cost['training_gpu_h'])} GPU h"
            said = verdict(versus["ci_low"], versus["ci_high"])
            if not trains(record["method"], record):
                said = f"(trains nothing: a control) {CONTROL_VERDICTS[said]}"
            # as the pairwise comparisons say it: one seed's interval holds the problems' spread only
            one_seed = " (one seed: seed-to-seed noise not measured)" if record.get("n_seeds") == 1 else ""
            sentences.append(
                f"{record['method']} {said}: pass@1 {fmt(record['pass_at_k']['1']['mean'])} "
                f"vs {fmt(base['pass_at_k']['1']['mean'])} for base (Δ {fmt_signed(versus['delta_pass_at_1'])}, "
                f"95% CI {fmt_interval(versus['ci_low'], versus['ci_high'], signed=True)}){one_seed}; "
                f"fixed {fmt_count(versus['fixed'], 'problem')}, broke {versus['broken']}{cost_text}."
            )
    return sentences


def comparison_findings(pairwise: list[dict], split: str) -> list[str]:
    """One sentence per pairwise comparison on the main split, at pass@1."""
    return [sentence for record in pairwise if record["split"] == split and (sentence := comparisons.finding(record))]


def _records(frame: pd.DataFrame | None) -> list[dict]:
    if frame is None or frame.empty:
        return []
    return [{k: tables._clean(v) for k, v in row.items()} for row in frame.to_dict("records")]


def json_safe(value):
    """The same structure with NaN and infinities as None and numpy scalars as Python numbers (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def build_summary(
    *,
    title: str,
    experiment: dict,
    records: list[dict],
    pass_at_k_table: pd.DataFrame,
    split: str,
    refinements: pd.DataFrame | None = None,
    training: pd.DataFrame | None = None,
    cost_totals: dict | None = None,
    cost_per_rule: pd.DataFrame | None = None,
    cost_per_method: pd.DataFrame | None = None,
    rl_data: pd.DataFrame | None = None,
    provenance: dict | None = None,
    pairwise: list[dict] | None = None,
    token_budget: pd.DataFrame | None = None,
    token_runs: pd.DataFrame | None = None,
    training_windows: pd.DataFrame | None = None,
    training_jobs: pd.DataFrame | None = None,
    vs_base: pd.DataFrame | None = None,
) -> dict:
    """summary.json's record. Beside the report's tables: `training_windows` (per trained run and
    metric, the first and last fifth of its logged values, `execrl.report.training.training_windows`),
    `cost.training_jobs` (wall time of each warm-start and training job), `token_budget.per_run`
    (the tokens each online run sampled) and `vs_base` (the difference to base at every k and on
    every split, where `summary` has it at pass@1 on each split)."""
    pairwise = pairwise or []
    return json_safe({
        "title": title,
        "experiment": experiment.get("name"),
        "grid": experiment,
        "main_split": split,
        "findings": findings(records, split) + comparison_findings(pairwise, split) + refinement_findings(refinements),
        "summary": records,
        "vs_base": _records(vs_base[tables.VS_BASE_COLUMNS] if vs_base is not None and not vs_base.empty else None),
        "comparisons": pairwise,
        "seed_noise_rule": comparisons.SEED_NOISE_RULE,
        "token_budget": {"note": budget.NOTE, "per_method": _records(token_budget), "per_run": _records(token_runs)},
        "pass_at_k": legacy_pass_at_k_rows(pass_at_k_table),
        "refinements": _records(refinements),
        "training": _records(training),
        "training_windows": {"rule": training_rules.WINDOW_RULE, "runs": _records(training_windows)},
        "cost": {
            "total": cost_totals or {},
            "per_rule": _records(cost_per_rule),
            "per_method": _records(cost_per_method),
            "training_jobs": _records(training_jobs),
        },
        "rl_data": _records(rl_data),
        "provenance": provenance or {},
    })


def _num(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return tables.MISSING
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def markdown(summary: dict, ks: Sequence[int]) -> str:
    """The same numbers as the report, as Markdown (for a paper draft or a pull request)."""
    split = summary["main_split"]
    parts = [f"# {summary['title']}", ""]
    if summary.get("provenance"):
        p = summary["provenance"]
        parts += [f"Experiment `{summary['experiment']}` · generated {p.get('generated', '')} · git {p.get('git_commit', '')}"
                  + (f" (execrl package from another checkout, git {p['package_git_commit']})" if p.get("package_git_commit") else ""), ""]
        parts += [f"Computed on: {describe_compute(p.get('compute') or {})}", ""]
    if summary.get("method_notes"):
        parts += ["## Method notes", "", summary["method_notes"].strip(), ""]
    parts += ["## At a glance", ""] + [f"- {s}" for s in summary["findings"]] + [""]
    columns, rows = tables.main_table_rows(summary["summary"], split, ks)
    parts += [f"## Summary ({split} split)", "", tables.markdown_table(columns, [[r["cells"][c] for c in columns] for r in rows]), ""]
    overlap = [f"- {splits.sentence(row, tables.markdown_code)}" for row in summary.get("split_overlap") or []]
    overlap += [f"- {splits.skipped_sentence(row, tables.markdown_code)}" for row in summary.get("skipped_rows") or []]
    parts += [*overlap, ""] if overlap else []
    for heading, records in comparisons.by_title(summary["comparisons"], split):
        parts += [f"## {heading}", ""]
        for record in records:
            parts += [comparisons.finding(record) or "", "", tables.frame_markdown(comparisons.delta_frame(record)), ""]
        parts += [summary["seed_noise_rule"], ""]
    if summary["token_budget"]["per_method"]:
        frame = budget.table(pd.DataFrame(summary["token_budget"]["per_method"]))
        parts += ["## Tokens in training", "", tables.frame_markdown(frame, budget.FORMATS), "",
                  summary["token_budget"]["note"], ""]
    if summary.get("held_out"):
        frame = pd.DataFrame(summary["held_out"])[["dataset", "model", "method", "pass_at_k_base", "pass_at_k_plus", "gap"]]
        frame = frame.rename(columns=HELD_OUT_HEADINGS)
        parts += [f"## Held-out tests ({split} split, pass@1)", "", tables.frame_markdown(frame), ""]
    if summary.get("reward_hacking", {}).get("rates"):
        frame = reward_hacking.rates_shown(pd.DataFrame(summary["reward_hacking"]["rates"]))
        parts += ["## Reward-hacking watch (first and last fifth of training)", "", tables.frame_markdown(frame), ""]
    if summary.get("hard_coding_windows"):
        windows = pd.DataFrame(summary["hard_coding_windows"]).rename(columns=reward_hacking.WINDOW_HEADINGS)
        parts += ["## Hard-coding rate, pooled per window", "", tables.frame_markdown(windows), ""]
        parts += [f"- {change['sentence']}" for change in summary["reward_hacking"].get("hard_coding_changes", [])] + [""]
    detail = tables.all_splits_frame(summary["summary"], ks)
    if not detail.empty:
        parts += ["## Every split", "", tables.frame_markdown(detail), ""]
    if summary.get("vs_base"):
        parts += ["## Δ vs base at every k, every split", "", tables.frame_markdown(tables.vs_base_frame(summary["vs_base"])), ""]
    diversity = tables.diversity_frame(summary["summary"])
    if not diversity.empty:
        parts += ["## Candidate diversity", "", tables.frame_markdown(diversity), ""]
    if summary["refinements"]:
        frame = pd.DataFrame(summary["refinements"]).rename(columns=REFINEMENT_HEADINGS)
        parts += ["## Refinement (c2) after a failed first attempt", "", tables.frame_markdown(frame), ""]
    if summary["cost"]["per_method"]:
        parts += ["## Cost per method (hours, summed over jobs)", "", tables.frame_markdown(pd.DataFrame(summary["cost"]["per_method"]).rename(columns=tables.COST_LABELS)), ""]
    if summary["cost"]["total"]:
        total = summary["cost"]["total"]
        parts += [
            f"All jobs: {total.get('jobs', 0)} jobs, {_num(total.get('wall_h'))} wall h, {_num(total.get('cpu_h'))} CPU h, "
            f"{_num(total.get('gpu_h'))} GPU h.",
            "",
        ]
    if summary["rl_data"]:
        parts += ["## RL datasets", "", tables.frame_markdown(pd.DataFrame(summary["rl_data"])), ""]
    return "\n".join(parts).rstrip() + "\n"
