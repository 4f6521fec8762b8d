"""Seaborn figures for the report."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

METHOD_ORDER = ["base", "dpo", "grpo", "srrl"]


def pass_at_k_figure(table: pd.DataFrame) -> Figure:
    """pass@k against k, one line per method, one panel per dataset/model and split."""
    data = table.copy()
    data["run"] = data["dataset"] + " · " + data["model"] + " · " + data["split"]
    methods = [m for m in METHOD_ORDER if m in set(data["method"])]
    sns.set_theme(style="whitegrid", context="notebook")
    grid = sns.relplot(
        data=data,
        x="k",
        y="pass_at_k",
        hue="method",
        hue_order=methods,
        col="run",
        col_wrap=min(3, data["run"].nunique()),
        kind="line",
        marker="o",
        errorbar=("sd") if data["seed"].nunique() > 1 else None,
        height=3.2,
        aspect=1.2,
        facet_kws={"sharey": True},
    )
    grid.set(xscale="log", ylim=(0, 1))
    ks = sorted(data["k"].unique())
    for ax in grid.axes.flat:
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
    grid.set_axis_labels("k", "pass@k")
    grid.set_titles("{col_name}")
    return grid.figure
