"""A self-contained HTML report: figures embedded as data URIs, no external assets."""

from __future__ import annotations

import base64
import datetime as dt
import html
import importlib.metadata
import platform
import subprocess
from pathlib import Path

import pandas as pd
import yaml

PACKAGES = ("execrl", "torch", "transformers", "trl", "peft", "datasets", "accelerate", "snakemake", "pandas", "seaborn")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
img { max-width: 100%; } pre { background: #f7f7f7; padding: .8rem; overflow-x: auto; font-size: .8rem; }
.meta { color: #666; font-size: .85rem; }
"""


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def summary_record(table: pd.DataFrame, experiment: dict) -> dict:
    """Mean and spread of pass@k over seeds, per dataset, model, method, split and k."""
    grouped = table.groupby(["dataset", "model", "method", "split", "k"])["pass_at_k"]
    rows = []
    for (dataset, model, method, split, k), values in grouped:
        rows.append(
            {
                "dataset": dataset,
                "model": model,
                "method": method,
                "split": split,
                "k": int(k),
                "mean": float(values.mean()),
                "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
                "n_seeds": int(len(values)),
            }
        )
    return {"experiment": experiment.get("name"), "pass_at_k": rows}


def embed_png(path: str | Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def summary_html(summary: dict) -> str:
    frame = pd.DataFrame(summary["pass_at_k"])
    frame["value"] = frame.apply(
        lambda r: f"{r['mean']:.3f}" + (f" ± {r['sd']:.3f}" if r["n_seeds"] > 1 else ""), axis=1
    )
    wide = frame.pivot_table(
        index=["dataset", "model", "split", "method"], columns="k", values="value", aggfunc="first"
    )
    wide.columns = [f"pass@{k}" for k in wide.columns]
    wide = wide.reset_index()
    return wide.to_html(index=False, classes="summary", border=0, escape=True)


def render_report(title: str, table: pd.DataFrame, figures: dict[str, str], config: dict, summary: dict) -> str:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = "".join(
        f"<tr><td class='text'>{html.escape(k)}</td><td class='text'>{html.escape(v)}</td></tr>"
        for k, v in package_versions().items()
    )
    figure_html = "".join(f"<h3>{html.escape(name)}</h3>{embed_png(path)}" for name, path in figures.items())
    n_samples = ", ".join(str(n) for n in sorted(table["n_samples"].unique()))
    n_problems = ", ".join(str(n) for n in sorted(table["n_problems"].unique()))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="meta">Generated {now} · git {html.escape(git_commit())} · host {html.escape(platform.node())} ·
Python {platform.python_version()}</p>
<h2>Summary</h2>
<p>pass@k (unbiased estimator) over {n_problems} problems with {n_samples} samples per problem;
mean ± sd over seeds where there are several.</p>
{summary_html(summary)}
<h2>Figures</h2>
{figure_html}
<h2>Configuration</h2>
<pre>{html.escape(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))}</pre>
<h2>Software</h2>
<table><tr><th>package</th><th>version</th></tr>{versions}</table>
</body></html>
"""
