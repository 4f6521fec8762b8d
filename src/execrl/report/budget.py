"""The training budget of the online methods in tokens, from their per-step logs, and what a
comparison of two of them held equal (completions, or under a token budget of `srrl.budget`
generated or total tokens).

Two running counts are logged, both summed over processes: TRL's `num_tokens`, the prompt and
completion tokens of every completion sampled for training (`state.num_input_tokens_seen`; each
completion counts its own prompt, so a group of G completions counts its prompt G times, and a
refinement its refinement prompt), and execrl's `num_generated_tokens`, the completion tokens
alone (`execrl.training.common.GeneratedTokenCount`). Generated tokens are the policy's sampling;
prompt tokens (the difference) are only read. A run trained before execrl logged
`num_generated_tokens` gets an estimate instead: TRL's mean completion length per generation
batch (`completions/mean_length`, averaged over the logged batches) times the completions drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from execrl.methods import METHODS
from execrl.report.tables import MISSING, is_missing
from execrl.report.training import completions_per_step, method_grpo, parse_run, read_metrics
from execrl.training.token_budget import GENERATED_TOKENS, TOKEN_BUDGETS, TOTAL_TOKENS, logged_total

COMPLETION_LENGTH = "completions/mean_length"
NOTE = (
    "Tokens in training, summed over processes: generated tokens are the completion tokens the policy sampled "
    "(num_generated_tokens); prompt tokens are those its completions were conditioned on, read but not sampled "
    "(a group of G completions counts its prompt G times; SRRL's refinements count their refinement prompts); "
    "total tokens are TRL's num_tokens, both together. Runs that did not log num_generated_tokens get an estimate: "
    "TRL's logged mean completion length times the completions drawn."
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
    "completion_tokens_per_step": "generated tokens / step",
    "prompt_tokens_per_step": "prompt tokens / step",
    "tokens_per_step": "total tokens / step",
    "completion_tokens": "generated tokens",
    "prompt_tokens": "prompt tokens",
    "tokens": "total tokens (num_tokens)",
    "mean_completion_length": "generated tokens / completion",
    "mean_prompt_length": "prompt tokens / completion",
}
"""Column headings of the token table, per method (means over seeds)."""


def fmt_tokens(value, digits: int = 0) -> str:
    return MISSING if is_missing(value) else f"{value:,.{digits}f}"


FORMATS = {label: (lambda v: fmt_tokens(v, 1)) if key.startswith("mean_") else fmt_tokens for key, label in LABELS.items()}
"""How the token table's figures are written: whole tokens, lengths to a tenth."""


def run_budget(path: str | Path, grpo: dict) -> dict | None:
    """Tokens one online run used, in total and split into generated and prompt tokens; None
    without `num_tokens`."""
    run = parse_run(path)
    records = read_metrics(path)
    tokens = logged_total(records, TOTAL_TOKENS)
    if tokens is None:
        return None
    steps = max(r["step"] for r in records)
    per_step = completions_per_step(grpo)
    completions = steps * per_step
    completion_tokens = logged_total(records, GENERATED_TOKENS)
    if completion_tokens is None:
        lengths = [r[COMPLETION_LENGTH] for r in records if isinstance(r.get(COMPLETION_LENGTH), (int, float))]
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


MATCHED = {
    "completions": "equal completions",
    "generated_tokens": "equal generated tokens",
    "total_tokens": "equal total tokens (prompt and generated)",
}
"""What a comparison of two online methods held equal, as the report names it."""
MATCHED_COLUMN = {"generated_tokens": "completion_tokens", "total_tokens": "tokens"}
"""The token table's column each token budget equalises."""
BUDGET_NAMES = {"generated_tokens": "a budget of GRPO's generated tokens", "total_tokens": "a budget of GRPO's total tokens"}
"""Each token budget as the report names it where it was set but not reached."""


def short_of_budget(mine: dict, theirs: dict, method: str, baseline: str, budget: str) -> str | None:
    """Where the SRRL side of a pair held to `budget` used fewer of its tokens than the GRPO side
    (`StopAtTokenBudget` stops at or past the count, so only `max_steps` ends a run short of it):
    how far short, in words; None where it reached the count."""
    column = MATCHED_COLUMN[budget]
    sides = {method: mine, baseline: theirs}
    srrl_side, grpo_side = srrl_and_grpo(method, baseline)
    used, target = sides[srrl_side][column], sides[grpo_side][column]
    if is_missing(used) or is_missing(target) or used >= target:
        return None
    return (f"{srrl_side} reached its max_steps ({sides[srrl_side]['steps']:g}) at {used / target:.2f}× {grpo_side}'s "
            f"{LABELS[column]}")  # fmt: skip


def matched_on(method: str, baseline: str, srrl_budget: str | dict | None) -> str:
    """The token budget (`generated_tokens`, `total_tokens`) for SRRL (or a variant of it) and
    GRPO when SRRL trained to GRPO's tokens (`srrl.budget`; a dict gives each SRRL method's own);
    `completions` otherwise, each having drawn its completions per step for its steps."""
    sides = srrl_and_grpo(method, baseline)
    if sides is None:
        return "completions"
    value = srrl_budget.get(sides[0]) if isinstance(srrl_budget, dict) else srrl_budget
    return value if value in TOKEN_BUDGETS else "completions"


def srrl_and_grpo(method: str, baseline: str) -> tuple[str, str] | None:
    """(the SRRL side, the GRPO side) of a pair of SRRL and GRPO (or variants of them), else None."""
    bases = {m: (METHODS[m].variant_of or m) if m in METHODS else m for m in (method, baseline)}
    if sorted(bases.values()) != ["grpo", "srrl"]:
        return None
    return (method, baseline) if bases[method] == "srrl" else (baseline, method)


def _ratio(mine: float, theirs: float) -> float:
    return mine / theirs if theirs and not is_missing(theirs) else float("nan")


def pair_budget(
    methods: pd.DataFrame, dataset: str, model: str, method: str, baseline: str, srrl_budget: str | dict | None = None
) -> dict | None:
    """The budget a comparison of two online methods ran at and the tokens each used, generated
    and prompt apart; None unless both sampled online. `srrl_budget` is the run's `srrl.budget`.

    `matched` is what the two were held equal on: `generated_tokens`, `total_tokens`,
    `completions`, or None when they drew different completions per step, or when SRRL's token
    budget was set but `grpo.max_steps` stopped it first (so they were not matched at all; the
    rule says which and by how much)."""
    mine, theirs = (for_method(methods, dataset, model, m) for m in (method, baseline))
    if mine is None or theirs is None:
        return None
    matched = matched_on(method, baseline, srrl_budget)
    steps = f"steps: {method} {mine['steps']:g}, {baseline} {theirs['steps']:g}"
    if matched in TOKEN_BUDGETS and (short := short_of_budget(mine, theirs, method, baseline, matched)):
        matched = None  # the budget was set, and max_steps stopped SRRL before it held the two equal
        rule = f"{BUDGET_NAMES[matched_on(method, baseline, srrl_budget)]} set, not reached: {short} ({steps})"
    elif matched in TOKEN_BUDGETS:
        rule = f"{MATCHED[matched]} ({steps})"
    elif mine["completions_per_step"] == theirs["completions_per_step"]:
        rule = f"{MATCHED['completions']} per step ({mine['completions_per_step']:g})"
        if mine["steps"] != theirs["steps"]:  # e.g. an SRRL variant stopped at GRPO's tokens
            rule += f" for different steps ({method} {mine['steps']:g}, {baseline} {theirs['steps']:g})"
    else:
        matched = None
        rule = f"completions per step: {method} {mine['completions_per_step']:g}, {baseline} {theirs['completions_per_step']:g}"
    keys = ("tokens", "completion_tokens", "prompt_tokens", "steps")
    return {
        "budget": rule,
        "matched": matched,
        **{key: {method: mine[key], baseline: theirs[key]} for key in keys},
        "token_ratio": _ratio(mine["tokens"], theirs["tokens"]),
        "completion_token_ratio": _ratio(mine["completion_tokens"], theirs["completion_tokens"]),
        "prompt_token_ratio": _ratio(mine["prompt_tokens"], theirs["prompt_tokens"]),
    }


def table(methods: pd.DataFrame) -> pd.DataFrame:
    """`per_method` as the report shows it: dataset, model, method and the labelled figures."""
    if methods.empty:
        return methods
    shown = methods[["dataset", "model", "method", *LABELS]].rename(columns=LABELS)
    return shown.astype({label: float for label in LABELS.values()})
