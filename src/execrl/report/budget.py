"""The training budget of the online methods in tokens, from TRL's per-step logs, and what a
comparison of two of them held equal (completions, or under `srrl.budget: tokens` sampled tokens).

GRPOTrainer logs `num_tokens`: the cumulative count of prompt and completion tokens of every
completion it has sampled for training (`state.num_input_tokens_seen`, summed over processes;
each completion counts its own prompt, so a group of G completions counts its prompt G times).
SRRL's completions come from its `rollout_func`, whose prompt ids TRL counts the same way, so a
refinement is counted with its refinement prompt. TRL does not log prompt and completion tokens
apart; it logs the mean completion length of each generation batch (`completions/mean_length`).
Completion tokens here are that mean (over the logged batches, each of the same size) times the
completions drawn (steps × completions per step from the GRPO settings), and prompt tokens are the
logged total minus them: an estimate, exact when every batch is logged, as it is at one logged
step per optimiser step.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from execrl.methods import METHODS
from execrl.report.tables import MISSING, is_missing
from execrl.report.training import completions_per_step, method_grpo, parse_run, read_metrics
from execrl.token_budget import tokens_sampled

COMPLETION_LENGTH = "completions/mean_length"
NOTE = (
    "Tokens sampled in training: TRL's logged num_tokens, the prompt and completion tokens of every sampled "
    "completion (a group of G completions counts its prompt G times; SRRL's refinements count their refinement "
    "prompts). TRL does not log prompt and completion tokens apart: completion tokens are its logged mean "
    "completion length times the completions drawn, prompt tokens the logged total minus those (exact when every "
    "generation batch is logged, as it is at execrl's one log per step)."
)
RUN_COLUMNS = [
    "dataset", "model", "method", "seed", "steps", "completions_per_step", "completions", "tokens",
    "completion_tokens", "prompt_tokens", "mean_prompt_length", "mean_completion_length",
]
PER_STEP = ("tokens", "completion_tokens", "prompt_tokens")
LABELS = {
    "seeds": "seeds",
    "steps": "steps",
    "completions_per_step": "completions / step",
    "tokens_per_step": "tokens / step",
    "completion_tokens_per_step": "completion tokens / step (est.)",
    "prompt_tokens_per_step": "prompt tokens / step (rest)",
    "tokens": "tokens in all (num_tokens)",
    "completion_tokens": "completion tokens (est.)",
    "prompt_tokens": "prompt tokens (rest)",
    "mean_prompt_length": "prompt tokens / completion",
    "mean_completion_length": "completion tokens / completion",
}
"""Column headings of the token table, per method (means over seeds)."""


def fmt_tokens(value, digits: int = 0) -> str:
    return MISSING if is_missing(value) else f"{value:,.{digits}f}"


FORMATS = {label: (lambda v: fmt_tokens(v, 1)) if key.startswith("mean_") else fmt_tokens for key, label in LABELS.items()}
"""How the token table's figures are written: whole tokens, lengths to a tenth."""


def run_budget(path: str | Path, grpo: dict) -> dict | None:
    """Tokens one online run sampled, in total and split as TRL's logs allow; None without `num_tokens`."""
    run = parse_run(path)
    records = read_metrics(path)
    tokens = tokens_sampled(records)
    lengths = [r[COMPLETION_LENGTH] for r in records if isinstance(r.get(COMPLETION_LENGTH), (int, float))]
    if tokens is None:
        return None
    steps = max(r["step"] for r in records)
    per_step = completions_per_step(grpo)
    completions = steps * per_step
    completion_tokens = float(np.mean(lengths)) * completions if lengths else float("nan")
    prompt_tokens = tokens - completion_tokens
    return {
        **run, "steps": int(steps), "completions_per_step": per_step, "completions": completions, "tokens": tokens,
        "completion_tokens": completion_tokens, "prompt_tokens": prompt_tokens,
        "mean_prompt_length": prompt_tokens / completions if completions else float("nan"),
        "mean_completion_length": completion_tokens / completions if completions else float("nan"),
    }


def token_budget(paths: Iterable[str | Path], grpo: dict | None, overrides: dict | None = None) -> pd.DataFrame:
    """One row per online training run (GRPO, SRRL) whose metrics file logged `num_tokens`;
    `overrides` are the config's `method_overrides`."""
    rows = []
    for path in paths:
        method = parse_run(path)["method"]
        if grpo and method in METHODS and METHODS[method].online:
            row = run_budget(path, method_grpo(method, grpo, overrides))
            if row is not None:
                rows.append(row)
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def per_method(runs: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, model and method: means over seeds of the totals, and the same per step."""
    if runs.empty:
        return pd.DataFrame()
    numbers = [c for c in RUN_COLUMNS if c not in ("dataset", "model", "method", "seed")]
    frame = runs.groupby(["dataset", "model", "method"], sort=True)[numbers].mean()
    frame.insert(0, "seeds", runs.groupby(["dataset", "model", "method"], sort=True)["seed"].nunique())
    for column in PER_STEP:
        frame[f"{column}_per_step"] = frame[column] / frame["steps"]
    return frame.reset_index()


def for_method(methods: pd.DataFrame, dataset: str, model: str, method: str) -> dict | None:
    """One method's row of `per_method`, or None when it sampled nothing online."""
    if methods.empty:
        return None
    row = methods[(methods["dataset"] == dataset) & (methods["model"] == model) & (methods["method"] == method)]
    return row.iloc[0].to_dict() if not row.empty else None


MATCHED = {"completions": "equal completions", "tokens": "equal sampled tokens"}
"""What a comparison of two online methods held equal, as the report names it."""


def matched_on(method: str, baseline: str, srrl_budget: str | dict | None) -> str:
    """`tokens` for SRRL (or a variant of it) and GRPO when SRRL trained to GRPO's sampled tokens
    (`srrl.budget: tokens`; a dict gives each SRRL method's own); `completions` otherwise, each
    having drawn its completions per step for its steps."""
    sides = srrl_and_grpo(method, baseline)
    if sides is None:
        return "completions"
    value = srrl_budget.get(sides[0]) if isinstance(srrl_budget, dict) else srrl_budget
    return "tokens" if value == "tokens" else "completions"


def srrl_and_grpo(method: str, baseline: str) -> tuple[str, str] | None:
    """(the SRRL side, the GRPO side) of a pair of SRRL and GRPO (or variants of them), else None."""
    bases = {m: (METHODS[m].variant_of or m) if m in METHODS else m for m in (method, baseline)}
    if sorted(bases.values()) != ["grpo", "srrl"]:
        return None
    return (method, baseline) if bases[method] == "srrl" else (baseline, method)


def pair_budget(
    methods: pd.DataFrame, dataset: str, model: str, method: str, baseline: str, srrl_budget: str | None = None
) -> dict | None:
    """The budget a comparison of two online methods ran at and the tokens each sampled; None
    unless both sampled online. `srrl_budget` is the run's `srrl.budget`.

    `matched` is what the two were held equal on: `tokens`, `completions`, or None when they drew
    different completions per step (and so were not matched at all)."""
    mine, theirs = (for_method(methods, dataset, model, m) for m in (method, baseline))
    if mine is None or theirs is None:
        return None
    matched = matched_on(method, baseline, srrl_budget)
    if matched == "tokens":
        rule = f"{MATCHED['tokens']} (steps: {method} {mine['steps']:g}, {baseline} {theirs['steps']:g})"
    elif mine["completions_per_step"] == theirs["completions_per_step"]:
        rule = f"{MATCHED['completions']} per step ({mine['completions_per_step']:g})"
        if mine["steps"] != theirs["steps"]:  # e.g. an SRRL variant stopped at GRPO's tokens
            rule += f" for different steps ({method} {mine['steps']:g}, {baseline} {theirs['steps']:g})"
    else:
        matched = None
        rule = f"completions per step: {method} {mine['completions_per_step']:g}, {baseline} {theirs['completions_per_step']:g}"
    return {
        "budget": rule,
        "matched": matched,
        **{key: {method: mine[key], baseline: theirs[key]} for key in ("tokens", "completion_tokens", "prompt_tokens", "steps")},
        "token_ratio": mine["tokens"] / theirs["tokens"] if theirs["tokens"] else float("nan"),
    }


def table(methods: pd.DataFrame) -> pd.DataFrame:
    """`per_method` as the report shows it: dataset, model, method and the labelled figures."""
    if methods.empty:
        return methods
    shown = methods[["dataset", "model", "method", *LABELS]].rename(columns=LABELS)
    return shown.astype({label: float for label in LABELS.values()})
