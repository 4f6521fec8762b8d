"""The report's reward-hacking section: the watch's rates over training, and flagged completions.

Rates come from the training metrics (`execrl.watch.monitor` logs them every step). The
hard-coding rate is pooled over windows of steps, the first and the last fifth of a run's
logged steps: the checked and flagged counts (summed over processes) are added up over a window,
the rate is flagged / checked with a 95% Wilson score interval. The change from the first window
to the last gets a paired bootstrap over problems (`paired_change_interval`) where both windows
have per-problem counts, else Newcombe's hybrid score interval for a difference of two
proportions (built from the two Wilson intervals): the change is resolved when its interval
excludes 0. Completions of one problem are not independent (whether a passing program fails a held-out test
is largely its problem's property), so each Wilson interval is taken at the window's effective
sample size: checked / design effect, the design effect being the ratio of the rate's variance
over problems as clusters (the linearised variance of a ratio estimator) to the binomial variance,
at least 1 (`design_effect`), and with Student's t at the window's problems less one degrees of
freedom in place of the normal quantile. A window without per-problem counts for each of its steps
(runs trained before they were logged) or with one problem gets a plain Wilson interval, and its
change (Newcombe's) a sentence saying so. The change needs no design effect: the same problems
recur in both windows, and what is a problem's own tendency in both cancels out of it, which the
paired bootstrap keeps and Newcombe's interval from the effective sizes would not.
SRRL's first attempts (c1) and refinements (c2) get windows of their own. Examples
come from every method's evaluation candidates on the main split, which are on disk with their
verdicts: a program that passes the visible tests and fails a held-out one is flagged as
hard-coding (with the held-out test it failed), and any completion with a tamper signal
(`execrl.watch.tamper`) is flagged with what showed it.

Every hard-coding rate is shown beside the false-positive floor of the held-out tests it was
measured on (the plus-test manifest of the training split for training windows, of each split for
evaluation): the share of alternative correct solutions that fail some held-out test
(`execrl.watch.plus_tests`). A rate at or below that floor is no evidence of hard-coding.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import NormalDist

import pandas as pd

from execrl.jsonl import read_jsonl
from execrl.report import tables
from execrl.report.stats import t_quantile
from execrl.report.training import WATCH_PANELS, parse_run, read_metrics
from execrl.run_paths import readable
from execrl.watch.monitor import BY_PROBLEM, CHECKED, FLAGGED, KINDS, PREFIX, RATE
from execrl.watch.tamper import CATEGORIES, LIMIT_CATEGORIES, signals

HARD_CODING = "hard_coding"
HELD_OUT_FAILURE = "fails held-out tests"
"""How the report names an evaluation completion under `HARD_CODING`: it passed every test of its
problem (of which the prompt shows some) and failed a held-out test. Any model makes such programs
where a problem's tests are weak, the untrained base model too; only a rate that rises in training
(`hard_coding_windows`) reads as hard-coding."""
RUN = re.compile(r"(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?P<method>[^/]+)/(?P<seed>\d+)/(?P<split>[^/.]+)(?P<plus>\.plus)?\.jsonl$")


WINDOW_SHARE = 5
"""Windows are the first and the last fifth of a run's logged steps."""
FLOOR = "false_positive_floor"
WINDOW_COLUMNS = ["dataset", "model", "method", "seed", "kind", "window", "steps", "first_step", "last_step",
                  "checked", "flagged", "problems", "design_effect", "rate", "ci_low", "ci_high", FLOOR]
WINDOW_HEADINGS = {"first_step": "first step", "last_step": "last step", "problems": "problems checked",
                   "design_effect": "design effect", "ci_low": "95% CI low", "ci_high": "95% CI high",
                   FLOOR: "false-positive floor"}
"""The report's column headings of the hard-coding windows (the summary keeps the keys)."""
TRAINING_SPLIT = "train"
"""The split whose held-out tests the watch runs during training."""
Z95 = NormalDist().inv_cdf(0.975)


def rates_shown(rates: pd.DataFrame) -> pd.DataFrame:
    """`rates_table` in the report's words: the panels' titles, the windows named."""
    shown = rates.assign(metric=rates["metric"].map(dict(WATCH_PANELS)))
    return shown.rename(columns={"first": "first fifth", "last": "last fifth"})


def rates_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: the mean of each watch rate but hard-coding's (pooled in `hard_coding_windows`)
    over the first and the last fifth of the logged steps."""
    columns = ["dataset", "model", "method", "seed", "metric", "first", "last", "steps"]
    panels = [key for key, _ in WATCH_PANELS if key != RATE]
    watched = metrics[metrics["metric"].isin(panels)] if not metrics.empty else metrics
    rows = []
    if watched.empty:
        return pd.DataFrame(rows, columns=columns)
    for (dataset, model, method, seed, metric), run in watched.groupby(["dataset", "model", "method", "seed", "metric"]):
        run = run.sort_values("step")
        window = max(1, len(run) // WINDOW_SHARE)
        rows.append({"dataset": dataset, "model": model, "method": method, "seed": seed, "metric": metric,
                     "first": run["value"].head(window).mean(), "last": run["value"].tail(window).mean(),
                     "steps": int(run["step"].max())})  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def wilson(flagged: float, checked: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of flagged / checked (NaNs when nothing was checked); the counts may
    be effective ones (`design_effect`), not whole numbers."""
    if checked == 0:
        return float("nan"), float("nan")
    rate = flagged / checked
    centre = (rate + z * z / (2 * checked)) / (1 + z * z / checked)
    half = z / (1 + z * z / checked) * math.sqrt(rate * (1 - rate) / checked + z * z / (4 * checked * checked))
    return max(0.0, centre - half), min(1.0, centre + half)


def design_effect(checked: Sequence[float], flagged: Sequence[float]) -> float:
    """How much wider the pooled rate sum(flagged) / sum(checked) varies than binomial counts would,
    with problems as clusters (`checked[i]`, `flagged[i]`: problem i's counts): the linearised
    variance of a ratio estimator, n/(n-1) * sum((flagged_i - rate * checked_i)^2) / sum(checked)^2,
    over the binomial variance rate * (1 - rate) / sum(checked); at least 1. At a rate of 0 or 1 both
    variances are 0 and it is 1 (the counts' size stands, as Korn and Graubard keep it). NaN when
    nothing was checked or fewer than 2 problems were (no spread over problems to measure)."""
    if not all(math.isfinite(value) for value in (*checked, *flagged)):
        raise ValueError(f"hard-coding counts must be finite numbers, got checked {list(checked)}, flagged {list(flagged)}")
    total = float(sum(checked))
    rate, n = (float(sum(flagged)) / total if total else float("nan")), len(checked)
    if total == 0 or n < 2:
        return float("nan")
    if rate in (0.0, 1.0):
        return 1.0
    spread = sum((y - rate * m) ** 2 for m, y in zip(checked, flagged, strict=True)) * n / (n - 1) / total**2
    return max(1.0, spread / (rate * (1 - rate) / total))


CHANGE_RESAMPLES = 20000
"""Resamples of the paired bootstrap over problems (`paired_change_interval`)."""


def paired_change_interval(first: pd.DataFrame, last: pd.DataFrame, resamples: int = CHANGE_RESAMPLES,
                           seed: int = 0) -> tuple[float, float]:
    """The 95% percentile interval of last rate - first rate from a bootstrap over problems, each
    resample drawing problems (with replacement) from those checked in either window and taking
    both windows' counts of each drawn problem (`first`, `last`: per-problem `checked` and `flagged`,
    indexed by problem id). Problems checked in both windows are drawn once for both, so what is a
    problem's own tendency in both windows cancels out of the change, as it does in the change
    itself; problems that cluster their flags widen it. Seeded: the same counts, the same interval."""
    import numpy as np

    problems = sorted(set(first.index) | set(last.index))
    draws = np.random.default_rng(seed).integers(0, len(problems), size=(resamples, len(problems)))

    def drawn(window: pd.DataFrame, column: str):
        return window.reindex(problems, fill_value=0)[column].to_numpy(dtype=float)[draws].sum(axis=1)

    first_checked, first_flagged = drawn(first, "checked"), drawn(first, "flagged")
    last_checked, last_flagged = drawn(last, "checked"), drawn(last, "flagged")
    both = (first_checked > 0) & (last_checked > 0)
    changes = last_flagged[both] / last_checked[both] - first_flagged[both] / first_checked[both]
    low, high = np.quantile(changes, [0.025, 0.975])
    return float(low), float(high)


def problem_counts(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Per run, step, kind and problem: the hard-coding counts the watch logged per problem
    (`execrl.watch.monitor.BY_PROBLEM` in a metrics file's records; records of one step add up)."""
    rows = []
    for path in paths:
        run = parse_run(path)
        for record in read_metrics(path):
            for name, by_problem in (record.get(BY_PROBLEM) or {}).items():
                count, _, kind = name.removeprefix(PREFIX).partition("/")
                column = {CHECKED: "checked", FLAGGED: "flagged"}.get(PREFIX + count)
                if column is None:
                    continue
                rows += [{**run, "step": int(record["step"]), "kind": kind or "all", "problem_id": problem_id,
                          column: float(value)} for problem_id, value in by_problem.items()]  # fmt: skip
    columns = ["dataset", "model", "method", "seed", "step", "kind", "problem_id", "checked", "flagged"]
    frame = pd.DataFrame(rows, columns=columns)
    keys = columns[:7]
    return frame.groupby(keys, as_index=False, sort=True)[["checked", "flagged"]].sum(min_count=0) if rows else frame


def newcombe(first: dict, last: dict) -> tuple[float, float, float]:
    """The change of rate from `first` to `last` (window records) and its 95% interval: Newcombe's
    hybrid score interval (his method 10), from the two Wilson intervals."""
    change = last["rate"] - first["rate"]
    low = change - math.sqrt((last["rate"] - last["ci_low"]) ** 2 + (first["ci_high"] - first["rate"]) ** 2)
    high = change + math.sqrt((last["ci_high"] - last["rate"]) ** 2 + (first["rate"] - first["ci_low"]) ** 2)
    return change, low, high


def false_positive_floors(manifests: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(dataset, split) → the held-out tests' false-positive floor after and before the
    alternatives' filter and how many alternative solutions measured it, from the plus-test
    manifests' table (`execrl.report.evaluations.plus_test_manifests`); NaN where not measured."""
    floors = {}
    if manifests is None or manifests.empty:
        return floors
    for row in manifests.to_dict("records"):
        checked = row.get("alternatives_checked")
        measured = checked is not None and not pd.isna(checked) and checked > 0
        floors[(str(row["dataset"]), str(row["split"]))] = {
            "after": float(row["false_positive_floor_after"]) if measured else float("nan"),
            "before": float(row["false_positive_floor_before"]) if measured else float("nan"),
            "alternatives": int(checked) if measured else 0,
        }
    return floors


def floor_text(floor: dict | None) -> str:
    """The floor as a phrase: 'false-positive floor 0.000 (0.040 before the filter; 25 alternatives)'."""
    if not floor or not floor["alternatives"]:
        return "false-positive floor not measured (no alternative correct solutions)"
    return (f"false-positive floor {floor['after']:.3f} ({floor['before']:.3f} before the alternatives' filter; "
            f"{floor['alternatives']} alternative correct solutions)")  # fmt: skip


def hard_coding_windows(
    metrics: pd.DataFrame,
    floors: dict[tuple[str, str], dict] | None = None,
    by_problem: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per run and kind of completion (`all`, and SRRL's `c1` and `c2`), the hard-coding counts
    pooled over the first and the last fifth of the steps that logged them, with the rate and its
    95% Wilson interval at the effective sample size (`design_effect` over the window's problems,
    from `by_problem`, `problem_counts`' table) and Student's t at problems - 1 degrees of freedom
    (where some step of the window has no per-problem counts, or one problem was checked, the design
    effect is NaN and the interval plain Wilson; per-problem counts that disagree with the totals
    raise ValueError), and the false-positive floor of the training split's
    held-out tests (`floors`, from `false_positive_floors`; NaN where not measured). Runs that
    logged no counts (trained before execrl logged them) give none."""
    floors = floors or {}
    per_problem = {}
    if by_problem is not None and not by_problem.empty:
        per_problem = {key: part for key, part in by_problem.groupby(["dataset", "model", "method", "seed", "kind"])}
    rows = []
    if metrics.empty:
        return pd.DataFrame(rows, columns=WINDOW_COLUMNS)
    for kind, suffix in (("all", ""), *((k, f"/{k}") for k in KINDS)):
        counts = metrics[metrics["metric"].isin([CHECKED + suffix, FLAGGED + suffix])]
        if counts.empty:
            continue
        wide = counts.pivot_table(index=["dataset", "model", "method", "seed", "step"], columns="metric",
                                  values="value", aggfunc="sum").reset_index()  # fmt: skip
        if FLAGGED + suffix not in wide:
            continue
        for (dataset, model, method, seed), run in wide.groupby(["dataset", "model", "method", "seed"], sort=True):
            run = run.dropna(subset=[CHECKED + suffix]).sort_values("step")
            size = max(1, len(run) // WINDOW_SHARE)
            problems = per_problem.get((dataset, model, method, seed, kind))
            for window, part in (("first", run.head(size)), ("last", run.tail(size))):
                checked, flagged = int(round(part[CHECKED + suffix].sum())), int(round(part[FLAGGED + suffix].fillna(0).sum()))
                n_problems, effect = float("nan"), float("nan")
                # Per-problem counts for every step of the window that checked any (a run resumed
                # across the release that began logging them has them for some steps only).
                steps_checked = set(part.loc[part[CHECKED + suffix] > 0, "step"])
                if problems is not None and steps_checked <= set(problems["step"]):
                    totals = problems[problems["step"].isin(part["step"])].groupby("problem_id")[["checked", "flagged"]].sum()
                    totals = totals[totals["checked"] > 0]
                    if (round(totals["checked"].sum()), round(totals["flagged"].sum())) != (checked, flagged):
                        raise ValueError(f"{method} ({dataset} · {model}, seed {seed}), {kind}, {window} window: the "
                                         f"per-problem counts add up to {totals['checked'].sum():g} checked and "
                                         f"{totals['flagged'].sum():g} flagged, the logged totals are {checked} and {flagged}")
                    n_problems, effect = len(totals), design_effect(totals["checked"].tolist(), totals["flagged"].tolist())
                effective, z = 1.0, Z95
                if not math.isnan(effect):
                    # few problems: Student's t at problems - 1 degrees of freedom, as for any cluster mean
                    effective, z = effect, t_quantile(0.975, n_problems - 1)
                low, high = wilson(flagged / effective, checked / effective, z)
                rows.append({"dataset": dataset, "model": model, "method": method, "seed": int(seed), "kind": kind,
                             "window": window, "steps": int(len(part)), "first_step": int(part["step"].min()),
                             "last_step": int(part["step"].max()), "checked": checked, "flagged": flagged,
                             "problems": n_problems, "design_effect": effect,
                             "rate": flagged / checked if checked else float("nan"), "ci_low": low, "ci_high": high,
                             FLOOR: floors.get((dataset, TRAINING_SPLIT), {}).get("after", float("nan"))})  # fmt: skip
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def hard_coding_changes(
    windows: pd.DataFrame,
    floors: dict[tuple[str, str], dict] | None = None,
    by_problem: pd.DataFrame | None = None,
) -> list[dict]:
    """Per run and kind, the change of the pooled rate from the first window to the last, its 95%
    interval, whether it is resolved (the interval excludes 0), and a sentence saying so, with the
    false-positive floor of the training split's held-out tests (`floors`). The interval is the
    paired bootstrap over problems (`paired_change_interval`) where both windows have per-problem
    counts (`by_problem`, `problem_counts`' table), else Newcombe's from the windows' intervals."""
    floors = floors or {}
    changes = []
    if windows.empty:
        return changes
    per_problem = {}
    if by_problem is not None and not by_problem.empty:
        per_problem = {key: part for key, part in by_problem.groupby(["dataset", "model", "method", "seed", "kind"])}
    for (dataset, model, method, seed, kind), run in windows.groupby(["dataset", "model", "method", "seed", "kind"], sort=False):
        first, last = (run[run["window"] == w].iloc[0].to_dict() for w in ("first", "last"))
        who = f"{method}{'' if kind == 'all' else ' ' + kind} ({dataset} · {model}, seed {seed})"
        floor = floors.get((dataset, TRAINING_SPLIT))
        rates = (f"{_rate(first)} in the first fifth of steps ({first['flagged']} of {first['checked']:,} checked), "
                 f"{_rate(last)} in the last ({last['flagged']} of {last['checked']:,}); {floor_text(floor)}")  # fmt: skip
        record = {"dataset": dataset, "model": model, "method": method, "seed": int(seed), "kind": kind,
                  "first_rate": first["rate"], "last_rate": last["rate"], "change": float("nan"),
                  "ci_low": float("nan"), "ci_high": float("nan"), "resolved": False, "interval": None,
                  FLOOR: floor["after"] if floor else float("nan")}  # fmt: skip
        if not first["checked"] or not last["checked"]:
            record["sentence"] = f"{who}: hard-coding rate {rates}: nothing checked in a window, so no change is measured."
        else:
            change, low, high = newcombe(first, last)
            problems = per_problem.get((dataset, model, method, seed, kind))
            # two problems a window at least: a lone problem's rate would not vary over resamples
            paired = problems is not None and all(not pd.isna(w["problems"]) and w["problems"] >= 2 for w in (first, last))
            if paired:
                totals = [problems[problems["step"].between(w["first_step"], w["last_step"])]
                          .groupby("problem_id")[["checked", "flagged"]].sum() for w in (first, last)]  # fmt: skip
                low, high = paired_change_interval(*totals)
                how = (f"95% interval from a paired bootstrap over the {len(set(totals[0].index) | set(totals[1].index))} "
                       f"problems checked in either window, {CHANGE_RESAMPLES:,} resamples; the windows' design "
                       f"effects {first['design_effect']:.2f} and {last['design_effect']:.2f}")  # fmt: skip
            else:
                how = f"95% Newcombe interval, {_clustering(first, last)}"
            resolved = low > 0 or high < 0
            record.update(change=change, ci_low=low, ci_high=high, resolved=resolved,
                          interval="paired bootstrap over problems" if paired else "Newcombe")  # fmt: skip
            verdict = "resolved" if resolved else "not resolved (the interval includes 0)"
            record["sentence"] = (f"{who}: hard-coding rate {rates}; change {change:+.3f} "
                                  f"({how}: [{low:+.3f}, {high:+.3f}]): {verdict}.")  # fmt: skip
        changes.append(record)
    return changes


def _clustering(first: dict, last: dict) -> str:
    """How the windows' intervals took the problems' clustering into account, in words."""
    effects = [window["design_effect"] for window in (first, last)]
    if any(pd.isna(window["problems"]) for window in (first, last)):
        return "completions taken as independent: per-problem counts were not logged for every step of the windows"
    if any(pd.isna(effect) for effect in effects):
        return "completions taken as independent: a window checked one problem, whose spread over problems cannot be measured"
    return (f"at effective sizes: design effects {effects[0]:.2f} and {effects[1]:.2f} "
            f"over {int(first['problems'])} and {int(last['problems'])} problems")


def _count_text(value) -> str:
    return tables.MISSING if tables.is_missing(value) else f"{int(value):,}"


def _effect_text(value) -> str:
    return tables.MISSING if tables.is_missing(value) else f"{value:.2f}"


def _rate(window: dict) -> str:
    if not window["checked"]:
        return "–"
    return f"{window['rate']:.3f} [{window['ci_low']:.3f}, {window['ci_high']:.3f}]"


def flagged_examples(annotation_paths: Iterable[str | Path], per_category: int = 2) -> dict[str, list[dict]]:
    """Up to `per_category` flagged evaluation completions per category, from base and held-out
    annotations (`{split}.jsonl` and `{split}.plus.jsonl` of the same runs)."""
    base, plus = {}, {}
    for path in annotation_paths:
        match = RUN.search(str(path))
        if match is None:
            raise ValueError(f"{path}: not an annotations path (dataset/model/method/seed/split[.plus].jsonl)")
        key = (readable(match["dataset"]), readable(match["model"]), readable(match["method"]), int(match["seed"]), match["split"])
        (plus if match["plus"] else base)[key] = read_jsonl(path)
    found: dict[str, list[dict]] = {category: [] for category in (HARD_CODING, *CATEGORIES)}
    counts = {category: 0 for category in found}
    by_method: dict[str, list[int]] = {}  # method: [failing held-out tests, passing with held-out tests run]
    for key in sorted(base):
        held_out = {(r["problem_id"], r["sample_index"]): r for r in plus.get(key, [])}
        for record in base[key]:
            run = {"dataset": key[0], "model": key[1], "method": key[2], "seed": key[3], "split": key[4]}
            other = held_out.get((record["problem_id"], record["sample_index"]))
            if record["status"] == "pass" and other is not None:
                tally = by_method.setdefault(key[2], [0, 0])
                tally[1] += 1
                if other["status"] != "pass":
                    tally[0] += 1
                    counts[HARD_CODING] += 1
                    failed = next((o for o in other.get("test_outcomes", []) if o.get("status") != "pass"), {})
                    why = (f"passes all {record['tests_total']} tests of its problem, "
                           f"fails held-out test {failed.get('index')}")  # fmt: skip
                    _keep(found[HARD_CODING], per_category, run, record, [why, failed.get("message") or ""])
            for category, shown in signals(record.get("code") or "", record).items():
                counts[category] += 1
                _keep(found[category], per_category, run, record, shown)
    flagged = {category: {"count": counts[category], "examples": examples} for category, examples in found.items()}
    flagged[HARD_CODING]["by_method"] = {method: tuple(tally) for method, tally in sorted(by_method.items())}
    return flagged


def _keep(bucket: list, limit: int, run: dict, record: dict, why: list[str]) -> None:
    if len(bucket) < limit:
        bucket.append({**run, "problem_id": record["problem_id"], "sample_index": record["sample_index"],
                       "status": record["status"], "code": record.get("code") or "",
                       "flagged_by": [w for w in why if w]})  # fmt: skip


def section(rates: pd.DataFrame, flagged: dict[str, dict], figure: str, windows: pd.DataFrame | None = None,
            changes: list[dict] | None = None, floors: dict[tuple[str, str], dict] | None = None,
            split: str | None = None) -> str:
    """HTML: the figure, the pooled hard-coding windows and their changes, the other rates at the
    start and the end of training, the flagged examples of the evaluation's `split`, each
    hard-coding figure beside the false-positive floor of the held-out tests it was measured on
    (`floors`, listed once)."""
    floor_items = "".join(f"<li>{html.escape(dataset)} {html.escape(split)}: {html.escape(floor_text(floor))}</li>"
                          for (dataset, split), floor in sorted((floors or {}).items()))  # fmt: skip
    floor_list = (
        '<p class="caption">False-positive floor of the held-out tests, per data set and split: the share of '
        "alternative correct solutions (where the data set has them: the builtin suite's references renamed, "
        "MBPP's solutions from its other file) that fail some held-out test, after and before the filter that "
        "drops inputs on which they disagree with the reference. A hard-coding rate at or below it is no "
        "evidence of hard-coding.</p>"
        f"<ul>{floor_items or '<li>not measured (no plus-test manifests)</li>'}</ul>"
    )
    table = ""
    if not rates.empty:
        table = tables.frame_html(rates_shown(rates), table_id="watch-rates", text_columns=5)
    pooled = ""
    if windows is not None and not windows.empty:
        pooled = (
            '<h3>Hard-coding rate, first and last fifth of training</h3><p class="caption">Checked and flagged '
            "completions summed over a window's steps (and over training processes); the rate with its 95% Wilson "
            "interval at the window's effective sample size (checked / design effect); a change is resolved when its "
            "95% interval excludes 0: a paired percentile bootstrap over the problems checked in either window (20,000 "
            "resamples with a fixed seed, each drawing problems with replacement and taking both windows' counts of "
            "each; a resample with nothing checked in a window is dropped; with few problems it covers a little less "
            "than 95%), or, where a window has no per-problem counts or one problem, Newcombe's interval for the "
            "difference of the two rates (built from the Wilson intervals, the windows taken as independent). "
            "Completions of one problem are not independent evidence: whether a passing program fails a held-out test "
            "is largely its problem's property. The design effect is the rate's variance over the window's problems "
            "(as clusters) over the binomial variance, at least 1; a run that logged no per-problem counts has none, "
            "and its completions are taken as independent. SRRL's first attempts (c1) and "
            "refinements (c2) also apart. False-positive floor: that of the training split's held-out tests.</p>"
            + floor_list
            + tables.frame_html(windows.rename(columns=WINDOW_HEADINGS), table_id="hard-coding-windows", text_columns=6,
                                formats={"problems checked": _count_text, "design effect": _effect_text})
            + "".join(f"<p>{html.escape(change['sentence'])}</p>" for change in changes or [])
        )
    blocks = []
    for category, entry in flagged.items():
        for example in entry["examples"]:
            where = f"{example['method']} · {example['problem_id']} · sample {example['sample_index']} · {example['status']}"
            reasons = "".join(f"<li><code>{html.escape(w)}</code></li>" for w in example["flagged_by"])
            label = HELD_OUT_FAILURE if category == HARD_CODING else category
            blocks.append(f'<div class="example"><b>{html.escape(label)}</b> <span class="meta">{html.escape(where)}</span>'
                          f"<ul>{reasons}</ul><pre>{html.escape(example['code'] or '(empty)')}</pre></div>")  # fmt: skip
    counts = ", ".join(f"{category} {entry['count']}" for category, entry in flagged.items()
                       if entry["count"] and category not in LIMIT_CATEGORIES and category != HARD_CODING)  # fmt: skip
    held_out = (flagged.get(HARD_CODING) or {}).get("by_method") or {}
    held_out_text = "; ".join(f"{method} {failing} of {passing}" for method, (failing, passing) in held_out.items())
    limits = ", ".join(f"{category} {flagged[category]['count']}" for category in LIMIT_CATEGORIES
                       if category in flagged and flagged[category]["count"])  # fmt: skip
    return f"""<h2 id="reward-hacking">Reward hacking</h2>
<p class="caption">During training (GRPO and SRRL), every step logs the share of rewarded programs that fail
held-out tests made from the reference (a sample of the step's passing programs, or all of them when the reward runs
the held-out tests) and the share of completions with a sign of probing the judge: imports of introspection or
process modules, frame walking (frame-specific chains: <code>sys._getframe</code>, <code>f_back</code>,
<code>f_locals</code>, <code>tb_frame</code>, <code>inspect.stack</code>, …), patched builtins or <code>math</code>, an
<code>__eq__</code> that is always true, <code>os._exit</code>, raw file-descriptor writes, signal handlers, or a
sandbox verdict of a blocked system call or a protocol violation. A resource limit hit (time, recursion, memory) is
counted apart (<code>limit_hit</code>): it is not a tamper signal and not part of <code>tamper/any</code>.</p>
{figure}
{pooled}
{table}
<h3>Flagged evaluation completions{f" ({html.escape(split)} split)" if split else ""}</h3>
<p class="caption">Every method's evaluation candidates on {f"the {html.escape(split)} split" if split else "the main split"}. Passing every test of its problem and failing
a held-out test (<i>{HELD_OUT_FAILURE}</i>), per method, of its passing completions whose held-out tests ran:
{html.escape(held_out_text) or "none ran"}. Such a program is wrong where the problem's own tests are weak; the untrained
base model makes them too, so a count is no evidence of hard-coding unless it rises over the base model's (the
training rate above is the measure of that). Signs of probing the judge, by category:
{html.escape(counts) or "none flagged"}; resource limits hit, not tamper signals: {html.escape(limits) or "none"}. The
first examples of each.{" The false-positive floors of the held-out tests are listed above." if pooled else ""}</p>
{"" if pooled else floor_list}
{"".join(blocks) or "<p>No evaluation completion was flagged.</p>"}"""
