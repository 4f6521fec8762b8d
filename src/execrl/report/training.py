"""Training metrics (the per-step JSONL files TRL's logs go to) in the report's long format."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from execrl.methods import METHODS
from execrl.report.stats import t_quantile
from execrl.run_paths import readable

_RUN = re.compile(r"training/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?:(?P<method>[^/]+)/(?P<seed>\d+)|(?P<sft>sft))/metrics\.jsonl$")

PANELS = [
    # (metric key, panel title)
    ("reward", "reward (weighted sum)"),
    ("execution/pass_rate", "training pass rate"),
    ("interval_eval/pass_at_1", "interval pass@1 (test subset)"),
    ("kl", "KL to the reference"),
    ("loss", "loss"),
    ("completions/mean_length", "completion length (tokens)"),
    ("rewards/margins", "DPO reward margin (chosen − rejected)"),
    ("rewards/accuracies", "DPO preference accuracy"),
]
"""Metrics the training-curve figure shows when a run logged them; reward components are added."""

COMPONENT = re.compile(r"^rewards/(?P<name>[^/]+)/mean$")
SRRL_KEYS = {"srrl/c1_pass_rate": "c1 (first attempt)", "srrl/c2_pass_rate": "c2 (refinement)"}
WARM_START_PANELS = [("loss", "loss"), ("mean_token_accuracy", "token accuracy")]
COLUMNS = ["dataset", "model", "method", "seed", "step", "samples", "elapsed_s", "metric", "value"]
WATCH_PANELS = (
    ("watch/hard_coding_rate", "rewarded programs failing held-out tests"),
    ("watch/tamper/any", "completions with a tamper signal"),
)
"""The reward-hacking watch's rates (`execrl.watch.monitor`) the report draws."""


def parse_run(path: str | Path) -> dict:
    """dataset, model, method and seed from a metrics path (method `sft` for a tiny model's warm start)."""
    match = _RUN.search(Path(path).as_posix())
    if not match:
        raise ValueError(f"{path}: not a results/training/... metrics file")
    dataset, model = readable(match["dataset"]), readable(match["model"])
    if match["sft"]:
        return {"dataset": dataset, "model": model, "method": "sft", "seed": 0}
    return {"dataset": dataset, "model": model, "method": readable(match["method"]), "seed": int(match["seed"])}


def completions_per_step(grpo: dict) -> float:
    """Completions an optimiser step of GRPO/SRRL draws: a round's prompts × generations, over the
    optimiser steps a round makes (steps_per_generation / accumulation, or one step of `accumulation`
    rounds when unset, times num_iterations passes)."""
    round_completions = grpo["prompts_per_step"] * grpo["num_generations"]
    accumulation = grpo.get("gradient_accumulation_steps", 1)
    micro_batches = grpo.get("steps_per_generation") or 1
    return round_completions * accumulation / micro_batches / grpo.get("num_iterations", 1)


def method_grpo(method: str, grpo: dict | None, overrides: dict | None = None) -> dict | None:
    """The GRPO settings `method` trained with: the `grpo` section, under its `method_overrides`."""
    if not grpo:
        return grpo
    return {**grpo, **((overrides or {}).get(method, {}).get("grpo", {}))}


def samples_drawn(
    method: str, steps: pd.Series, grpo: dict | None, offline_samples: float | None, overrides: dict | None = None
) -> pd.Series:
    """Samples drawn from a model up to each step: online for GRPO/SRRL (unknown without the GRPO
    settings), all up front for DPO; none for the warm start (`sft`), which samples nothing."""
    if method in METHODS and METHODS[method].online and grpo:
        return steps * completions_per_step(method_grpo(method, grpo, overrides))
    offline = method in METHODS and METHODS[method].data == "pairs"
    drawn = offline_samples if offline and offline_samples is not None else np.nan
    return pd.Series(np.full(len(steps), drawn), index=steps.index)


def read_metrics(path: str | Path) -> list[dict]:
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            records.append(json.loads(line))
    return records


def metrics_table(
    paths: Iterable[str | Path],
    grpo: dict | None = None,
    offline_samples: dict[tuple[str, str, int], float] | None = None,
    overrides: dict | None = None,
) -> pd.DataFrame:
    """Long format: one row per run, logged step and numeric metric.

    `offline_samples` maps (dataset, model, seed) to the candidates DPO's pairs were built from.
    TRL's end-of-training summary record (train_loss, train_runtime, …) is kept as metrics too.
    """
    rows = []
    for path in paths:
        run = parse_run(path)
        records = read_metrics(path)
        if not records:
            continue
        frame = pd.DataFrame(records)
        steps = frame["step"].astype(float)
        offline = (offline_samples or {}).get((run["dataset"], run["model"], run["seed"]))
        samples = samples_drawn(run["method"], steps, grpo, offline, overrides)
        elapsed = frame["elapsed_s"] if "elapsed_s" in frame else pd.Series(np.nan, index=frame.index)
        for column in frame.columns:
            if column in ("step", "epoch", "elapsed_s"):
                continue
            values = pd.to_numeric(frame[column], errors="coerce")
            for index in values.index[values.notna()]:
                rows.append(
                    {
                        **run,
                        "step": int(steps[index]),
                        "samples": samples[index],
                        "elapsed_s": elapsed[index],
                        "metric": column,
                        "value": float(values[index]),
                    }
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def panels_for(metrics: pd.DataFrame) -> list[tuple[str, str]]:
    """The (metric, title) panels with data, reward components right after the total reward (a lone
    component beside the total is left out: the total is that component, times its weight)."""
    present = set(metrics["metric"])
    components = sorted(m for m in present if COMPONENT.match(m))
    if len(components) == 1 and "reward" in present:
        components = []
    panels = []
    for key, title in PANELS:
        if key not in present:
            continue
        panels.append((key, title))
        if key == "reward":
            panels.extend((m, f"reward component: {COMPONENT.match(m)['name']}") for m in components)
    if "reward" not in present:
        panels[:0] = [(m, f"reward component: {COMPONENT.match(m)['name']}") for m in components]
    return panels


def smooth(values: pd.Series, window: int) -> pd.Series:
    """A centred rolling mean that keeps the ends (noisy per-step logs of a few prompts)."""
    return values.rolling(window, center=True, min_periods=1).mean()


def smoothing_window(n_points: int) -> int:
    return max(1, n_points // 20)


FINAL_METRICS = {
    "execution/pass_rate": "final_pass_rate",
    "interval_eval/pass_at_1": "final_interval_pass_at_1",
    "srrl/c1_pass_rate": "final_c1_pass_rate",
    "srrl/c2_pass_rate": "final_c2_pass_rate",
    "rewards/accuracies": "final_preference_accuracy",
    "loss": "final_loss",
}
SUMMARY_LABELS = {
    "steps": "steps",
    "train_time_s": "seconds to the last step",
    "samples_drawn": "samples drawn",
    "final_pass_rate": "training pass rate",
    "final_interval_pass_at_1": "interval pass@1 (test subset)",
    "final_c1_pass_rate": "c1 pass rate in training",
    "final_c2_pass_rate": "c2 pass rate in training",
    "final_preference_accuracy": "preference accuracy",
    "final_loss": "loss",
}
"""Column headings of the training summary in the report."""


def training_summary(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per trained run: steps, training time, samples drawn, and the mean of the last fifth of the
    logged values of the main metrics (the last window of `training_windows`)."""
    rows = []
    trained = metrics[metrics["method"] != "sft"]
    for (dataset, model, method, seed), run in trained.groupby(["dataset", "model", "method", "seed"], sort=True):
        row = {
            "dataset": dataset, "model": model, "method": method, "seed": int(seed),
            "steps": int(run["step"].max()),
            "train_time_s": float(run["elapsed_s"].max()) if run["elapsed_s"].notna().any() else float("nan"),
            "samples_drawn": float(run["samples"].max()) if run["samples"].notna().any() else float("nan"),
        }
        for key, name in FINAL_METRICS.items():
            series = run[run["metric"] == key].sort_values("step")["value"]
            row[name] = float(series.tail(max(1, len(series) // WINDOW_FRACTION)).mean()) if len(series) else float("nan")
        rows.append(row)
    frame = pd.DataFrame(rows, columns=["dataset", "model", "method", "seed", *list(SUMMARY_LABELS)])
    return frame.dropna(axis=1, how="all")


def offline_samples(manifest_paths: Iterable[str | Path]) -> dict[tuple[str, str, int], float]:
    """(dataset, model, seed) → candidates the RL dataset (DPO's pairs) was built from, from its manifest."""
    pattern = re.compile(r"rl_data/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?:[^/]+/)?(?P<seed>\d+)/manifest\.json$")
    samples = {}
    for path in manifest_paths:
        match = pattern.search(Path(path).as_posix())
        if match:
            manifest = json.loads(Path(path).read_text(encoding="utf-8"))
            samples[(readable(match["dataset"]), readable(match["model"]), int(match["seed"]))] = float(manifest["n_candidates"])
    return samples


WINDOW_FRACTION = 5
"""Training windows are the first and the last fifth of a metric's logged values."""
WINDOW_METRICS = (
    "reward",
    "execution/pass_rate",
    "srrl/c1_pass_rate",
    "srrl/c2_pass_rate",
    "interval_eval/pass_at_1",
    "mbpp_eval/pass_rate",
    "watch/hard_coding_rate",
    "watch/tamper/any",
    "watch/check_cpu_s",
)
"""Metrics every trained run gets windows of when it logged them; a method's own panels
(`execrl.methods.METHODS[...].panels`) are added for its runs."""
CHANGE_BATCHES = 4
"""Batches each window's values are cut into for the change's interval (`change_interval`)."""
CHANGE_CONFIDENCE = 0.95
WINDOW_RULE = (
    "Training windows: the mean of the first and of the last fifth of a run's logged values of a metric "
    "(at least one value each; a metric logged at a few steps only, such as the interval evaluation, compares "
    "its first and last values), and the mean of all its logged values. The change (last − first) has a 95% "
    f"interval where each window holds at least {2 * CHANGE_BATCHES} values: each window is cut into "
    f"{CHANGE_BATCHES} batches of consecutive steps and the batch means' spread gives each window mean's standard "
    f"error (Student's t at Welch's degrees of freedom, {CHANGE_BATCHES - 1} to {2 * (CHANGE_BATCHES - 1)}), so that neighbouring steps that move "
    "together are not counted as independent evidence; the change is resolved when its interval excludes 0."
)
MAX_POINTS = 12
"""A metric logged at no more steps than this (an evaluation every few steps) keeps every (step, value)."""


def change_interval(
    first, last, batches: int = CHANGE_BATCHES, confidence: float = CHANGE_CONFIDENCE
) -> tuple[float, float] | None:
    """The interval of mean(last) − mean(first), two windows of a metric's per-step values, allowing
    for their autocorrelation (batch means); None where a window has fewer than 2 × `batches` values.

    Per-step training values are autocorrelated: the policy drifts slowly, so neighbouring steps
    move together, and the iid standard error (sd / √n) is too small. Batch means: each window is
    cut into `batches` runs of consecutive steps; a batch long against the autocorrelation has a
    mean nearly independent of its neighbours', so the spread of the batch means over √batches
    estimates the window mean's standard error without a model of the autocorrelation (an AR fit
    or a sum of lag autocorrelations needs one, or a lag cut-off, and on windows of 40 values the
    estimated autocorrelations are biased low). The two windows are far apart in the run, so their
    errors are taken as independent and the variances add; Student's t at Welch's degrees of
    freedom (`welch_df`: 2 × (batches − 1) where the windows vary alike, fewer where one varies
    more, as a run's early steps often do) pays for estimating the variances from the batch means. A trend inside a window
    widens the batch means' spread, which errs on the wide side. Four batches trade width against
    coverage: on AR(1) noise of lag correlation 0.5 with windows of 40 values, the interval covers a
    known shift about 94% of the time, where the iid interval covers about 74%
    (`tests/test_report.py`); with shorter batches (more of them) it covers less when the
    correlation is strong, with fewer it is wider."""
    first, last = np.asarray(first, dtype=float), np.asarray(last, dtype=float)
    if min(first.size, last.size) < 2 * batches:
        return None
    variances = [
        np.array([batch.mean() for batch in np.array_split(window, batches)]).var(ddof=1) / batches
        for window in (first, last)
    ]
    variance = sum(variances)
    half = t_quantile(1 - (1 - confidence) / 2, welch_df(variances, batches - 1)) * math.sqrt(variance)
    change = last.mean() - first.mean()
    return change - half, change + half


def welch_df(variances: list[float], df_each: int) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of independently estimated variances, each
    on `df_each` degrees of freedom: the sum of theirs (2 × df_each for two) where the variances
    are equal, down to df_each where one dominates; the sum where all are 0 (no interval width to
    pay for)."""
    total = sum(variances)
    spread = sum(v * v / df_each for v in variances)
    return total * total / spread if spread > 0 else df_each * len(variances)


def window_metrics(method: str) -> list[str]:
    """The metrics a run of `method` gets training windows of: WINDOW_METRICS, then its own panels."""
    own = [key for key, _ in METHODS[method].panels] if method in METHODS else []
    return [*WINDOW_METRICS, *[key for key in own if key not in WINDOW_METRICS]]


def training_windows(metrics: pd.DataFrame, fraction: int = WINDOW_FRACTION) -> pd.DataFrame:
    """Per trained run and metric (`window_metrics`): the mean of the first and of the last
    1/`fraction` of its logged values, the steps each window spans, the mean over all logged values,
    and, for a metric logged at MAX_POINTS steps or fewer, every (step, value); the change's 95%
    interval (`change_interval`; None where the windows are too short) and whether it excludes 0."""
    columns = ["dataset", "model", "method", "seed", "metric", "first", "last", "mean", "first_steps", "last_steps",
               "values", "steps", "points", "change_ci_low", "change_ci_high", "change_resolved"]  # fmt: skip
    rows = []
    trained = metrics[metrics["method"] != "sft"] if not metrics.empty else metrics
    for (dataset, model, method, seed), run in trained.groupby(["dataset", "model", "method", "seed"], sort=True):
        for metric in window_metrics(method):
            logged = run[run["metric"] == metric].sort_values("step")
            if logged.empty:
                continue
            size = max(1, len(logged) // fraction)
            head, tail = logged.head(size), logged.tail(size)
            interval = change_interval(head["value"], tail["value"])
            rows.append(
                {
                    "dataset": dataset, "model": model, "method": method, "seed": int(seed), "metric": metric,
                    "first": float(head["value"].mean()), "last": float(tail["value"].mean()),
                    "mean": float(logged["value"].mean()),
                    "first_steps": [int(head["step"].min()), int(head["step"].max())],
                    "last_steps": [int(tail["step"].min()), int(tail["step"].max())],
                    "values": int(len(logged)), "steps": int(run["step"].max()),
                    "points": [[int(s), float(v)] for s, v in zip(logged["step"], logged["value"], strict=True)]
                    if len(logged) <= MAX_POINTS else None,
                    "change_ci_low": interval[0] if interval else None,
                    "change_ci_high": interval[1] if interval else None,
                    "change_resolved": bool(interval[0] > 0 or interval[1] < 0) if interval else None,
                }
            )
    return pd.DataFrame(rows, columns=columns)
