"""The report's tables: numbers per dataset × model × method, formatted once for HTML and Markdown."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

import pandas as pd

from execrl.report.evaluations import OUTCOME_LABELS
from execrl.report.figures import methods_in

MISSING = "–"


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value, digits: int = 3) -> str:
    return MISSING if is_missing(value) else f"{value:.{digits}f}"


def fmt_signed(value, digits: int = 3) -> str:
    return MISSING if is_missing(value) else f"{value:+.{digits}f}"


def fmt_mean_sd(mean, sd, digits: int = 3) -> str:
    """`mean ± sd` when there is a spread over seeds, else `mean`."""
    return fmt(mean, digits) + ("" if is_missing(sd) else f" ± {sd:.{digits}f}")


def fmt_interval(low, high, digits: int = 3, signed: bool = False) -> str:
    if is_missing(low) or is_missing(high):
        return MISSING
    f = fmt_signed if signed else fmt
    return f"[{f(low, digits)}, {f(high, digits)}]"


def fmt_count(count: int, noun: str) -> str:
    """`1 problem`, `6 problems`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def has_training_cost(cost: dict | None) -> bool:
    """Whether a method's cost record holds training time: a method that trains nothing has none
    (missing, NaN before the summary is written, None after)."""
    value = (cost or {}).get("training_wall_h")
    return not is_missing(value) and value > 0


def fmt_steps(span) -> str:
    """A window's steps: `3–9`, or `0` where it is one step."""
    return MISSING if not span else (f"{span[0]}" if span[0] == span[1] else f"{span[0]}–{span[1]}")


def fmt_hours(value) -> str:
    if is_missing(value):
        return MISSING
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _clean(value):
    """JSON-friendly: NaN becomes None, numpy scalars become Python numbers."""
    if is_missing(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def summary_records(
    curves: pd.DataFrame,
    comparison: pd.DataFrame,
    outcomes: pd.DataFrame,
    ks: Sequence[int],
    diversity: pd.DataFrame | None = None,
    cost_per_method: pd.DataFrame | None = None,
    changes: pd.DataFrame | None = None,
) -> list[dict]:
    """One record per dataset, model, split and method with everything the summary shows."""
    records = []
    keys = ["dataset", "model", "split", "method"]
    for (dataset, model, split, method), rows in curves.groupby(keys, sort=True):
        first = rows.iloc[0]
        record = {
            "dataset": dataset, "model": model, "split": split, "method": method,
            "n_seeds": int(first["n_seeds"]), "n_problems": int(first["n_problems"]), "n_samples": int(first["n_samples"]),
            "pass_at_k": {},
        }
        for k in ks:
            row = rows[rows["k"] == k]
            if row.empty:
                continue
            row = row.iloc[0]
            record["pass_at_k"][str(k)] = {
                "mean": float(row["mean"]), "sd": _clean(row["sd_seeds"]),
                "ci_low": float(row["ci_low"]), "ci_high": float(row["ci_high"]),
            }
        versus = comparison[
            (comparison["dataset"] == dataset) & (comparison["model"] == model) & (comparison["split"] == split)
            & (comparison["method"] == method) & (comparison["k"] == 1)
        ]
        if not versus.empty:
            row = versus.iloc[0]
            record["vs_baseline"] = {
                "baseline": row["baseline"],
                "delta_pass_at_1": float(row["delta"]), "ci_low": float(row["ci_low"]), "ci_high": float(row["ci_high"]),
                **{key: int(row[key]) for key in ("fixed", "broken", "improved", "worse", "solved", "baseline_solved")},
            }
            if changes is not None:
                mine = changes[
                    (changes["dataset"] == dataset) & (changes["model"] == model) & (changes["split"] == split)
                    & (changes["method"] == method) & (changes["baseline"] == row["baseline"])
                ]
                for change in ("fixed", "broken"):
                    record["vs_baseline"][f"{change}_problems"] = sorted(mine[mine["change"] == change]["problem_id"])
        counts = outcomes[
            (outcomes["dataset"] == dataset) & (outcomes["model"] == model) & (outcomes["split"] == split) & (outcomes["method"] == method)
        ].groupby("status")["count"].sum()
        total = counts.sum()
        record["outcomes"] = {status: (float(counts.get(status, 0) / total) if total else None) for status in OUTCOME_LABELS}
        if diversity is not None and not diversity.empty:
            mine = diversity[
                (diversity["dataset"] == dataset) & (diversity["model"] == model) & (diversity["split"] == split) & (diversity["method"] == method)
            ]
            if not mine.empty:
                record["diversity"] = {
                    "distinct_programs": float(mine["distinct_programs"].mean()),
                    "distinct_passing": float(mine["distinct_passing"].mean()),
                    "distinct_share": float((mine["distinct_programs"] / mine["n"]).mean()),
                    "mean_similarity": _clean(float(mine["mean_similarity"].mean())),
                    "mean_jaccard": _clean(float(mine["mean_jaccard"].mean())),
                }
        if cost_per_method is not None and method in set(cost_per_method.get("method", [])):
            row = cost_per_method[cost_per_method["method"] == method].iloc[0]
            record["cost"] = {key: float(row[key]) for key in cost_per_method.columns if key != "method"}
        records.append(record)
    order = {m: i for i, m in enumerate(methods_in(curves))}
    records.sort(key=lambda r: (r["dataset"], r["model"], r["split"], order[r["method"]]))
    return records


def unestimated_ks(records: list[dict], split: str, ks: Sequence[int]) -> str:
    """A sentence naming the configured ks no run of `split` could estimate (pass@k needs n ≥ k
    samples per problem), with the samples drawn; empty when every k was estimated."""
    mine = [r for r in records if r["split"] == split]
    missing = [k for k in ks if mine and not any(str(k) in r["pass_at_k"] for r in mine)]
    if not missing:
        return ""
    drawn = sorted({int(r["n_samples"]) for r in mine if r.get("n_samples") is not None})
    named = ", ".join(f"pass@{k}" for k in missing)
    verb = "needs" if len(missing) == 1 else "need"
    return (f"Not shown: {named} (evaluation.k), which {verb} more samples per problem than were drawn "
            f"({' or '.join(map(str, drawn))}: generation.num_samples).")


def main_table_rows(records: list[dict], split: str, ks: Sequence[int]) -> tuple[list[str], list[dict]]:
    """The headline table for one split: column names and, per row, `{"attrs", "cells"}` of display strings."""
    shown_ks = [k for k in ks if any(str(k) in r["pass_at_k"] for r in records if r["split"] == split)]
    columns = ["dataset", "model", "method", "seeds", *[f"pass@{k}" for k in shown_ks], "pass@1 95% CI",
               "Δ pass@1 vs base", "Δ 95% CI", "fixed / broke", "distinct / n", "training CPU h", "training GPU h"]
    rows = []
    for record in records:
        if record["split"] != split:
            continue
        cells = {"dataset": record["dataset"], "model": record["model"], "method": record["method"], "seeds": str(record["n_seeds"])}
        for k in shown_ks:
            value = record["pass_at_k"].get(str(k))
            cells[f"pass@{k}"] = fmt_mean_sd(value["mean"], value["sd"]) if value else MISSING
        first = record["pass_at_k"].get("1")
        cells["pass@1 95% CI"] = fmt_interval(first["ci_low"], first["ci_high"]) if first else MISSING
        versus = record.get("vs_baseline")
        cells["Δ pass@1 vs base"] = fmt_signed(versus["delta_pass_at_1"]) if versus else MISSING
        cells["Δ 95% CI"] = fmt_interval(versus["ci_low"], versus["ci_high"], signed=True) if versus else MISSING
        cells["fixed / broke"] = f"{versus['fixed']} / {versus['broken']}" if versus else MISSING
        diversity = record.get("diversity")
        cells["distinct / n"] = fmt(diversity["distinct_share"], 2) if diversity else MISSING
        cost = record.get("cost") or {}
        trained = has_training_cost(cost)  # base and its variants train nothing: no cost to show
        cells["training CPU h"] = fmt_hours(cost.get("training_cpu_h")) if trained else MISSING
        cells["training GPU h"] = fmt_hours(cost.get("training_gpu_h")) if trained else MISSING
        rows.append({"attrs": {"dataset": record["dataset"], "model": record["model"], "method": record["method"]}, "cells": cells})
    return columns, rows


def all_splits_frame(records: list[dict], ks: Sequence[int]) -> pd.DataFrame:
    """pass@k (mean ± sd over seeds) for every split, and the outcome shares."""
    rows = []
    for record in records:
        row = {"dataset": record["dataset"], "model": record["model"], "split": record["split"], "method": record["method"],
               "seeds": record["n_seeds"], "problems": record["n_problems"], "samples": record["n_samples"]}
        for k in ks:
            value = record["pass_at_k"].get(str(k))
            row[f"pass@{k}"] = fmt_mean_sd(value["mean"], value["sd"]) if value else MISSING
        for status, label in OUTCOME_LABELS.items():
            share = record["outcomes"].get(status)
            row[label] = MISSING if share is None else f"{share:.1%}"
        rows.append(row)
    return pd.DataFrame(rows)


VS_BASE_COLUMNS = ["dataset", "model", "split", "method", "baseline", "k", "delta", "ci_low", "ci_high", "n_seeds",
                   "within_seed_noise"]
"""The differences to base at every k (the comparison table, `results/tables/vs_base.tsv`) that
summary.json keeps."""


def vs_base_frame(rows: list[dict]) -> pd.DataFrame:
    """Δ pass@k against base at every k and on every split, with its interval, as the report shows it."""
    return pd.DataFrame([
        {"dataset": r["dataset"], "model": r["model"], "split": r["split"], "method": r["method"], "k": int(r["k"]),
         f"Δ pass@k vs {r['baseline']}": fmt_signed(r["delta"]), "Δ 95% CI": fmt_interval(r["ci_low"], r["ci_high"], signed=True),
         "seeds": str(r["n_seeds"])}
        for r in rows
    ])  # fmt: skip


def changes_frame(records: list[dict], split: str, limit: int = 40) -> pd.DataFrame:
    """Per trained method: the problems it fixed and broke on one split (ids, the first `limit`)."""
    rows = []
    for record in records:
        versus = record.get("vs_baseline")
        if record["split"] != split or not versus or "fixed_problems" not in versus:
            continue
        row = {"dataset": record["dataset"], "model": record["model"], "method": record["method"]}
        for change in ("fixed", "broken"):
            ids = versus[f"{change}_problems"]
            row[change] = ", ".join(ids[:limit]) + (f" … ({len(ids)} in all)" if len(ids) > limit else "") or MISSING
        rows.append(row)
    return pd.DataFrame(rows)


def diversity_frame(records: list[dict]) -> pd.DataFrame:
    """Diversity per dataset, model, split and method (means over problems and seeds)."""
    rows = []
    for record in records:
        diversity = record.get("diversity")
        if not diversity:
            continue
        rows.append(
            {
                "dataset": record["dataset"], "model": record["model"], "split": record["split"], "method": record["method"],
                "samples": record["n_samples"],
                "distinct programs": fmt(diversity["distinct_programs"], 2),
                "distinct passing programs": fmt(diversity.get("distinct_passing"), 2),
                "distinct / n": fmt(diversity["distinct_share"], 2),
                "similarity (difflib)": fmt(diversity["mean_similarity"]),
                "token Jaccard": fmt(diversity["mean_jaccard"]),
            }
        )
    return pd.DataFrame(rows)


COST_LABELS = {
    "training_wall_h": "training wall h",
    "training_cpu_h": "training CPU h",
    "training_gpu_h": "training GPU h",
    "evaluation_wall_h": "evaluation wall h",
    "evaluation_cpu_h": "evaluation CPU h",
    "wall_h": "wall h",
    "cpu_h": "CPU h",
    "gpu_h": "GPU h",
    "max_rss_mb": "peak memory (MB)",
}


def rl_data_frame(manifests: list[tuple[dict, dict]]) -> pd.DataFrame:
    """One row per RL dataset (dataset, model, seed) from build_rl_dataset's manifests."""
    rows = []
    for run, manifest in manifests:
        without = manifest.get("problems_without_pairs", {})
        rows.append(
            {
                **run,
                "problems": manifest["n_problems"],
                "candidates": manifest["n_candidates"],
                "duplicate candidates": manifest["n_duplicate_candidates"],
                "pairs": manifest["n_pairs"],
                "pairs by kind": ", ".join(f"{k}: {v}" for k, v in sorted(manifest.get("pairs_by_kind", {}).items())) or MISSING,
                "problems with pairs": manifest["n_problems_with_pairs"],
                "all candidates pass": without.get("all_pass", {}).get("count", 0),
                "no candidate passes": without.get("none_pass", {}).get("count", 0),
            }
        )
    return pd.DataFrame(rows)


def html_table(columns: list[str], rows: list[dict], table_id: str | None = None, numeric_from: int = 0) -> str:
    """A table from `{"attrs", "cells"}` rows; attrs become data-* attributes of the row. It sits in
    a `table-scroll` box, so a table wider than the page scrolls by itself, not the whole page."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        attrs = "".join(f' data-{html.escape(k)}="{html.escape(str(v))}"' for k, v in row.get("attrs", {}).items())
        cells = "".join(
            f'<td class="{"num" if i >= numeric_from else "text"}" data-key="{html.escape(c)}">{html.escape(str(row["cells"].get(c, MISSING)))}</td>'
            for i, c in enumerate(columns)
        )
        body.append(f"<tr{attrs}>{cells}</tr>")
    id_attr = f' id="{html.escape(table_id)}"' if table_id else ""
    return f'<div class="table-scroll"><table{id_attr}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def frame_html(frame: pd.DataFrame, table_id: str | None = None, text_columns: int = 0, formats: dict | None = None) -> str:
    formats = formats or {}
    rows = [
        {"cells": {c: (formats[c](v) if c in formats else (fmt(v) if isinstance(v, float) else v)) for c, v in record.items()}}
        for record in frame.to_dict("records")
    ]
    return html_table([str(c) for c in frame.columns], rows, table_id=table_id, numeric_from=text_columns)


def markdown_code(value) -> str:
    """Text from a data set (a problem id, a malformed row's message) as an inline code span of
    Markdown: shown as it is, never read as Markdown or HTML. Characters that would break the line
    (newlines, other control and separator characters) are written as their escapes, and the span's
    fence is longer than any run of backticks in the text."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    # Markdown strips one space from each end of a span that has both: a pad keeps the text's own
    # (a span of spaces only is kept as it is)
    pad = " " if text.strip() and (text[0] in "` " or text[-1] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def frame_markdown(frame: pd.DataFrame, formats: dict | None = None) -> str:
    formats = formats or {}
    rows = [
        [formats[c](v) if c in formats else (fmt(v) if isinstance(v, float) else v) for c, v in record.items()]
        for record in frame.to_dict("records")
    ]
    return markdown_table([str(c) for c in frame.columns], rows)
