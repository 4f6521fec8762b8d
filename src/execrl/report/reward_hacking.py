"""The report's reward-hacking section: the watch's rates over training, and flagged completions.

Rates come from the training metrics (`execrl.watch.monitor` logs them every step). Examples
come from every method's evaluation candidates on the main split, which are on disk with their
verdicts: a program that passes the visible tests and fails a held-out one is flagged as
hard-coding (with the held-out test it failed), and any completion with a tamper signal
(`execrl.watch.tamper`) is flagged with what showed it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from execrl.jsonl import read_jsonl
from execrl.report import tables
from execrl.report.training import WATCH_PANELS
from execrl.run_paths import readable
from execrl.watch.tamper import CATEGORIES, signals

HARD_CODING = "hard_coding"
RUN = re.compile(r"(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?P<method>[^/]+)/(?P<seed>\d+)/(?P<split>[^/.]+)(?P<plus>\.plus)?\.jsonl$")


def rates_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: each watch rate over the first and the last tenth of the logged steps."""
    columns = ["dataset", "model", "method", "seed", "metric", "first", "last", "steps"]
    watched = metrics[metrics["metric"].isin([key for key, _ in WATCH_PANELS])] if not metrics.empty else metrics
    rows = []
    if watched.empty:
        return pd.DataFrame(rows, columns=columns)
    for (dataset, model, method, seed, metric), run in watched.groupby(["dataset", "model", "method", "seed", "metric"]):
        run = run.sort_values("step")
        tenth = max(1, len(run) // 10)
        rows.append({"dataset": dataset, "model": model, "method": method, "seed": seed, "metric": metric,
                     "first": run["value"].head(tenth).mean(), "last": run["value"].tail(tenth).mean(),
                     "steps": int(run["step"].max())})  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


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
    for key in sorted(base):
        held_out = {(r["problem_id"], r["sample_index"]): r for r in plus.get(key, [])}
        for record in base[key]:
            run = {"dataset": key[0], "model": key[1], "method": key[2], "seed": key[3], "split": key[4]}
            other = held_out.get((record["problem_id"], record["sample_index"]))
            if record["status"] == "pass" and other is not None and other["status"] != "pass":
                counts[HARD_CODING] += 1
                failed = next((o for o in other.get("test_outcomes", []) if o.get("status") != "pass"), {})
                why = f"passes the {record['tests_total']} visible tests, fails held-out test {failed.get('index')}"
                _keep(found[HARD_CODING], per_category, run, record, [why, failed.get("message") or ""])
            for category, shown in signals(record.get("code") or "", record).items():
                counts[category] += 1
                _keep(found[category], per_category, run, record, shown)
    return {category: {"count": counts[category], "examples": examples} for category, examples in found.items()}


def _keep(bucket: list, limit: int, run: dict, record: dict, why: list[str]) -> None:
    if len(bucket) < limit:
        bucket.append({**run, "problem_id": record["problem_id"], "sample_index": record["sample_index"],
                       "status": record["status"], "code": record.get("code") or "",
                       "flagged_by": [w for w in why if w]})  # fmt: skip


def section(rates: pd.DataFrame, flagged: dict[str, dict], figure: str) -> str:
    """HTML: the figure, the rates at the start and the end of training, the flagged examples."""
    titles = dict(WATCH_PANELS)
    table = ""
    if not rates.empty:
        shown = rates.assign(metric=rates["metric"].map(titles))
        table = tables.frame_html(shown.rename(columns={"first": "first tenth", "last": "last tenth",
                                                         "steps": "steps"}), table_id="watch-rates", text_columns=5)  # fmt: skip
    blocks = []
    for category, entry in flagged.items():
        for example in entry["examples"]:
            where = f"{example['method']} · {example['problem_id']} · sample {example['sample_index']} · {example['status']}"
            reasons = "".join(f"<li><code>{html.escape(w)}</code></li>" for w in example["flagged_by"])
            blocks.append(f'<div class="example"><b>{html.escape(category)}</b> <span class="meta">{html.escape(where)}</span>'
                          f"<ul>{reasons}</ul><pre>{html.escape(example['code'] or '(empty)')}</pre></div>")  # fmt: skip
    counts = ", ".join(f"{category} {entry['count']}" for category, entry in flagged.items() if entry["count"])
    return f"""<h2 id="reward-hacking">Reward hacking</h2>
<p class="caption">During training (GRPO and SRRL), every step logs the share of rewarded programs that fail
held-out tests made from the reference (a sample of the step's passing programs, or all of them when the reward runs
the held-out tests) and the share of completions with a sign of probing the judge: imports of introspection or
process modules, frame walking, patched builtins or <code>math</code>, an <code>__eq__</code> that is always true,
<code>os._exit</code>, raw file-descriptor writes, signal handlers, or a sandbox verdict of a blocked system call,
a limit hit or a protocol violation.</p>
{figure}
{table}
<h3>Flagged evaluation completions</h3>
<p class="caption">Every method's evaluation candidates on this split, flagged by category ({html.escape(counts) or "none flagged"});
the first examples of each.</p>
{"".join(blocks) or "<p>No evaluation completion was flagged.</p>"}"""
