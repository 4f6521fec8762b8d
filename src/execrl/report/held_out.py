"""The report's held-out tests section: pass@1 on the base tests against base + held-out tests."""

from __future__ import annotations

import html

import pandas as pd

from execrl.report import tables


HEADINGS = {"pass_at_k_base": "pass@1 base", "pass_at_k_plus": "pass@1 base + held-out", "n_seeds": "seeds"}
"""The report's column headings of the held-out table (the summary keeps the keys)."""


def method_records(plus: pd.DataFrame, split: str, k: int = 1) -> list[dict]:
    """Per dataset × model × method on `split`: pass@k base and plus, means over seeds, and the gap."""
    if plus.empty:
        return []
    rows = plus[(plus["split"] == split) & (plus["k"] == k)]
    grouped = rows.groupby(["dataset", "model", "method"], sort=False)
    out = []
    for (dataset, model, method), group in grouped:
        out.append({"dataset": dataset, "model": model, "method": method, "k": k, "n_seeds": len(group),
                    "pass_at_k_base": float(group["pass_at_k_base"].mean()),
                    "pass_at_k_plus": float(group["pass_at_k_plus"].mean()),
                    "gap": float(group["gap"].mean())})  # fmt: skip
    return out


def section(records: list[dict], manifests: pd.DataFrame, split: str) -> str:
    """HTML: the side-by-side table and how many problems got how many held-out tests."""
    if not records:
        return ""
    frame = pd.DataFrame(records).rename(columns=HEADINGS)[
        ["dataset", "model", "method", "seeds", "pass@1 base", "pass@1 base + held-out", "gap"]
    ]
    made = ""
    if not manifests.empty:
        made = "".join(
            f"<li>{html.escape(str(m.dataset))} {html.escape(str(m.split))}: {m.problems_with_plus_tests} of "
            f"{m.problems} problems got held-out tests, {m.plus_tests} in all</li>"
            for m in manifests.itertuples()
        )
        made = f"<ul>{made}</ul>"
    return f"""<h2 id="held-out">Held-out tests ({html.escape(split)} split)</h2>
<p class="caption">pass@1 on the tests the prompt showed and on those plus held-out tests made from the reference
(its visible inputs mutated by type, the reference run in the sandbox for each expected output). The gap is what the
held-out tests take away: programs that pass what they were shown but not new inputs of the same shape. Means over
problems and seeds, without an interval: the gap is a property of one set of held-out tests, not a comparison of
methods (those are in the Summary).</p>
{tables.frame_html(frame, table_id="held-out-table", text_columns=3)}
{made}"""
