"""Seaborn figures for the report. Each function takes the report's tables and returns a Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from execrl.methods import METHODS
from execrl.report.evaluations import OUTCOME_LABELS
from execrl.report.training import SRRL_KEYS, WARM_START_PANELS, WATCH_PANELS, panels_for, smooth, smoothing_window

METHOD_ORDER = list(METHODS)
# base grey, the warm start (sft) purple, every registry method its own colour in registry order.
METHOD_COLORS = {
    "base": "#7f7f7f",
    "sft": "#9467bd",
    **dict(
        zip(
            [m for m in METHODS if m != "base" and METHODS[m].variant_of is None],
            ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#8c564b", "#e377c2", "#17becf", "#bcbd22"],
        )
    ),
}
# Method variants (config names outside the registry) take these, in name order.
VARIANT_COLORS = ["#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"]


def method_colors(methods) -> dict[str, str]:
    """A colour per method name: a registry method's own, and for the others (method variants, e.g.
    srrl_separate) the next of VARIANT_COLORS, so that every figure can draw any config's methods."""
    colors = {m: METHOD_COLORS[m] for m in methods if m in METHOD_COLORS}
    others = sorted(set(methods) - colors.keys())
    colors.update({m: VARIANT_COLORS[i % len(VARIANT_COLORS)] for i, m in enumerate(others)})
    return colors


OUTCOME_COLORS = {
    "syntax error": "#d62728",
    "runtime error": "#ff9896",
    "timeout": "#c5b0d5",
    "wrong answer": "#ffbb78",
    "pass": "#2ca02c",
}
CHANGE_COLORS = {"fixed": "#2ca02c", "improved": "#98df8a", "same": "#bbbbbb", "worse": "#ff9896", "broken": "#d62728"}
DPI = 110


def _theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.9)


def methods_in(frame: pd.DataFrame) -> list[str]:
    present = set(frame["method"])
    return [m for m in METHOD_ORDER if m in present] + sorted(present - set(METHOD_ORDER))


def run_label(frame: pd.DataFrame, with_split: bool = True) -> pd.Series:
    label = frame["dataset"].astype(str) + " · " + frame["model"].astype(str)
    if with_split and "split" in frame:
        label = label + " · " + frame["split"].astype(str)
    return label


def message_figure(text: str) -> Figure:
    """A small figure that says why there is nothing to plot."""
    figure, ax = plt.subplots(figsize=(6, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, color="#555")
    return figure


def pass_at_k_figure(curves: pd.DataFrame) -> Figure:
    """pass@k against k (1..n) per method with its bootstrap interval; one panel per dataset, model, split."""
    _theme()
    data = curves.assign(run=run_label(curves))
    methods = methods_in(data)
    colors = method_colors(methods)
    grid = sns.FacetGrid(data, col="run", col_wrap=min(3, data["run"].nunique()), height=3.3, aspect=1.25, sharey=True)

    def draw(data, color=None, label=None):
        ax = plt.gca()
        for method in methods:
            rows = data[data["method"] == method].sort_values("k")
            if rows.empty:
                continue
            color = colors[method]
            ax.fill_between(rows["k"], rows["ci_low"], rows["ci_high"], color=color, alpha=0.18, linewidth=0)
            ax.plot(rows["k"], rows["mean"], color=color, marker="o", markersize=3, label=method)

    grid.map_dataframe(draw)
    n_max = int(data["k"].max())
    ticks = sorted({1, n_max, *[2**i for i in range(int(np.log2(max(n_max, 1))) + 1)]})
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_ylim(-0.02, 1.02)  # lines at 0 or 1 stay visible
    grid.set_axis_labels("k (samples per problem)", "pass@k")
    grid.set_titles("{col_name}")
    handles = [plt.Line2D([], [], color=colors[m], marker="o", label=m) for m in methods]
    grid.figure.legend(handles=handles, loc="upper center", ncol=len(methods), bbox_to_anchor=(0.5, 1.06), frameon=False)
    return grid.figure


def change_category(base: pd.Series, other: pd.Series) -> pd.Series:
    category = np.where(
        (base == 0) & (other > 0), "fixed",
        np.where((base > 0) & (other == 0), "broken", np.where(other > base, "improved", np.where(other < base, "worse", "same"))),
    )
    return pd.Series(category, index=base.index)


def per_problem_figure(rates: pd.DataFrame, baseline: str = "base", seed: int = 0) -> Figure:
    """Per-problem pass rate of each method against the baseline's (pooled over seeds)."""
    _theme()
    methods = [m for m in methods_in(rates) if m != baseline]
    if baseline not in set(rates["method"]) or not methods:
        return message_figure("per-problem comparison needs the base method and at least one trained method")
    base = rates[rates["method"] == baseline][["dataset", "model", "split", "problem_id", "rate"]].rename(columns={"rate": "base_rate"})
    pairs = rates[rates["method"] != baseline].merge(base, on=["dataset", "model", "split", "problem_id"])
    pairs["change"] = change_category(pairs["base_rate"], pairs["rate"])
    pairs["run"] = run_label(pairs)
    runs = sorted(pairs["run"].unique())
    rng = np.random.default_rng(seed)
    jitter = 0.012
    figure, axes = plt.subplots(len(runs), len(methods), figsize=(3.3 * len(methods), 3.3 * len(runs)), squeeze=False)
    for r, run in enumerate(runs):
        for m, method in enumerate(methods):
            ax = axes[r][m]
            rows = pairs[(pairs["run"] == run) & (pairs["method"] == method)]
            x = rows["base_rate"] + rng.uniform(-jitter, jitter, len(rows))
            y = rows["rate"] + rng.uniform(-jitter, jitter, len(rows))
            sns.scatterplot(
                x=x, y=y, hue=rows["change"], hue_order=list(CHANGE_COLORS), palette=CHANGE_COLORS,
                s=18, alpha=0.75, linewidth=0, ax=ax, legend=(r == 0 and m == len(methods) - 1),
            )
            ax.plot([0, 1], [0, 1], color="#999", linewidth=0.8, linestyle="--")
            ax.set_xlim(-0.04, 1.04)
            ax.set_ylim(-0.04, 1.04)
            counts = rows["change"].value_counts()
            ax.set_title(f"{method} vs {baseline}\n{run}\nfixed {counts.get('fixed', 0)} · broke {counts.get('broken', 0)}", fontsize=9)
            ax.set_xlabel(f"{baseline} pass rate" if r == len(runs) - 1 else "")
            # Each column is another method: the title names it, the shared label says what y is.
            ax.set_ylabel("method's pass rate" if m == 0 else "")
    legend = axes[0][-1].get_legend()
    if legend is not None:
        sns.move_legend(axes[0][-1], "upper left", bbox_to_anchor=(1.02, 1), title="problem", frameon=False)
    figure.tight_layout()
    return figure


def outcomes_figure(outcomes: pd.DataFrame) -> Figure:
    """Share of candidates by outcome per method (before training: base; after: the others)."""
    _theme()
    data = outcomes.assign(outcome=outcomes["status"].map(OUTCOME_LABELS), run=run_label(outcomes))
    shares = data.groupby(["run", "method", "outcome"])["count"].sum().unstack("outcome", fill_value=0)
    shares = shares.div(shares.sum(axis=1), axis=0)
    order = [label for label in ("syntax error", "runtime error", "timeout", "wrong answer", "pass") if label in shares.columns]
    runs = sorted(data["run"].unique())
    methods = methods_in(data)
    figure, axes = plt.subplots(len(runs), 1, figsize=(8, 0.45 * len(methods) * len(runs) + 1.2 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        frame = shares.loc[run].reindex([m for m in methods if m in shares.loc[run].index])[order]
        left = np.zeros(len(frame))
        for outcome in order:
            values = frame[outcome].to_numpy()
            ax.barh(frame.index, values, left=left, color=OUTCOME_COLORS[outcome], label=outcome, edgecolor="white", height=0.7)
            for y, (start, width) in enumerate(zip(left, values, strict=True)):
                if width >= 0.06:
                    ax.text(start + width / 2, y, f"{width:.0%}", ha="center", va="center", fontsize=8)
            left += values
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_title(run, fontsize=10)
        ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes[0, 0].legend(loc="lower center", bbox_to_anchor=(0.5, 1.12), ncol=len(order), frameon=False)
    axes[-1, 0].set_xlabel("share of sampled candidates")
    figure.tight_layout()
    return figure


DIVERSITY_BOOTSTRAP = 1000
"""Resamples of the problems behind each diversity bar's interval (seaborn's percentile bootstrap)."""


def _smoothed(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each run's series smoothed with a centred rolling mean (window: a twentieth of its points)."""
    parts = []
    for _, run in metrics.groupby(["dataset", "model", "method", "seed", "metric"], sort=False):
        run = run.sort_values("step").copy()
        run["smoothed"] = smooth(run["value"], smoothing_window(len(run)))
        parts.append(run)
    return pd.concat(parts) if parts else metrics.assign(smoothed=[])


def _panel_axes(n_panels: int, runs: list[str], width: float = 4.6, height: float = 2.5):
    """Axes per (panel, run): panels wrap into three columns for one run, else one column per run."""
    if len(runs) == 1:
        ncols = min(3, n_panels)
        nrows = -(-n_panels // ncols)
        figure, grid = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows + 0.6), squeeze=False, sharex=True)
        axes = {(r, runs[0]): grid[r // ncols][r % ncols] for r in range(n_panels)}
        for extra in range(n_panels, nrows * ncols):
            grid[extra // ncols][extra % ncols].axis("off")
        return figure, axes
    figure, grid = plt.subplots(n_panels, len(runs), figsize=(width * len(runs), height * n_panels + 0.6), squeeze=False, sharex="col")
    return figure, {(r, run): grid[r][c] for r in range(n_panels) for c, run in enumerate(runs)}


def training_figure(metrics: pd.DataFrame, x: str = "step") -> Figure:
    """Training metrics against optimiser step or samples drawn: a panel per metric (and per dataset
    and model), one line per method (mean over seeds, band: sd over seeds)."""
    _theme()
    trained = metrics[metrics["method"] != "sft"]
    if trained.empty:
        return message_figure("no trained methods in this run")
    panels = panels_for(trained)
    data = _smoothed(trained[trained["metric"].isin([key for key, _ in panels])])
    data = data.assign(run=run_label(data, with_split=False))
    runs = sorted(data["run"].unique())
    methods = methods_in(data)
    colors = method_colors(methods)
    figure, axes = _panel_axes(len(panels), runs)
    for run in runs:
        for r, (key, title) in enumerate(panels):
            ax = axes[(r, run)]
            rows = data[(data["run"] == run) & (data["metric"] == key)]
            online = rows[rows["samples"].notna() & rows["method"].map(lambda m: m in METHODS and METHODS[m].online)] if x == "samples" else rows
            if not online.empty:
                sns.lineplot(
                    data=online, x=x, y="smoothed", hue="method", hue_order=[m for m in methods if m in set(online["method"])],
                    palette=colors, errorbar="sd" if online["seed"].nunique() > 1 else None, ax=ax, legend=False, linewidth=1.4,
                )
            if x == "samples":
                # Offline methods draw all their samples before training: one point at the final value.
                offline = rows[rows["method"].map(lambda m: m in METHODS and not METHODS[m].online) & rows["samples"].notna()]
                for (method, _), run_rows in offline.groupby(["method", "seed"]):
                    last = run_rows.sort_values("step").iloc[-1]
                    ax.scatter([last["samples"]], [last["smoothed"]], marker="X", s=50, color=colors[method], zorder=3)
            ax.set_title(title if len(runs) == 1 else f"{title}\n{run}", fontsize=9)
            ax.set_ylabel("")
            ax.set_xlabel("optimiser step" if x == "step" else "completions sampled from the model", fontsize=8)
    handles = [plt.Line2D([], [], color=colors[m], label=m) for m in methods]
    heading = runs[0] if len(runs) == 1 else None
    top = 1 - (0.55 if heading else 0.35) / figure.get_figheight()  # inches kept free for the legend
    figure.legend(handles=handles, loc="upper center", ncol=len(methods), bbox_to_anchor=(0.5, 1.0), frameon=False,
                  title=heading)
    for ax in figure.axes:
        ax.tick_params(labelbottom=True)
    figure.tight_layout(rect=(0, 0, 1, top))
    return figure


# c1 and c2 colours of each SRRL run drawn, in order: srrl's own first, then its variants'.
SRRL_SERIES_COLORS = [("#2ca02c", "#17becf"), ("#393b79", "#9c9ede"), ("#8c6d31", "#e7ba52"), ("#843c39", "#e7969c")]


def srrl_figure(metrics: pd.DataFrame, srrl_methods=("srrl",)) -> Figure:
    """SRRL's first-attempt (c1) and refinement (c2) pass rates over training, for SRRL and each of
    its variants in `srrl_methods` (e.g. srrl_separate), GRPO's pass rate for reference."""
    _theme()
    srrl = metrics[metrics["method"].isin(srrl_methods) & metrics["metric"].isin(SRRL_KEYS)]
    if srrl.empty:
        return message_figure("no SRRL pass rates logged")
    reference = metrics[(metrics["method"] == "grpo") & (metrics["metric"] == "execution/pass_rate")]
    data = _smoothed(pd.concat([srrl, reference]))
    data["series"] = data.apply(
        lambda r: f"{r['method']} {SRRL_KEYS[r['metric']]}" if r["method"] != "grpo" else "grpo (all samples)", axis=1
    )
    data["run"] = run_label(data, with_split=False)
    drawn = [m for m in srrl_methods if m in set(srrl["method"])]
    palette = {}
    for i, method in enumerate(drawn):
        c1, c2 = SRRL_SERIES_COLORS[i % len(SRRL_SERIES_COLORS)]
        palette[f"{method} c1 (first attempt)"], palette[f"{method} c2 (refinement)"] = c1, c2
    palette["grpo (all samples)"] = "#ff7f0e"
    grid = sns.relplot(
        data=data, x="step", y="smoothed", hue="series", hue_order=[s for s in palette if s in set(data["series"])],
        palette=palette, col="run", kind="line", height=3.2, aspect=1.6,
        errorbar="sd" if data["seed"].nunique() > 1 else None, facet_kws={"sharey": True},
    )
    grid.set(ylim=(-0.02, 1.02))
    grid.set_axis_labels("optimiser step", "training pass rate")
    grid.set_titles("{col_name}")
    if len(drawn) > 1:  # one row of the legend per SRRL run, beside the panels
        sns.move_legend(grid, "center left", bbox_to_anchor=(1.0, 0.5), ncol=1, title=None, frameon=False)
        grid.figure.subplots_adjust(right=0.98)  # the saved figure's tight box takes the legend in
    else:
        sns.move_legend(grid, "upper center", bbox_to_anchor=(0.5, 1.08), ncol=3, title=None, frameon=False)
    return grid.figure


def method_figure(metrics: pd.DataFrame, method: str) -> Figure:
    """A method's own training metrics (its registry row's `panels`) against step, one panel each."""
    _theme()
    titles = dict(METHODS[method].panels)
    rows = metrics[(metrics["method"] == method) & metrics["metric"].isin(titles)]
    if rows.empty:
        return message_figure(f"no {method} metrics logged")
    data = _smoothed(rows)
    data = data.assign(run=run_label(data, with_split=False), panel=data["metric"].map(titles))
    grid = sns.relplot(
        data=data, x="step", y="smoothed", hue="run", col="panel", col_wrap=min(3, data["panel"].nunique()),
        col_order=[t for k, t in METHODS[method].panels if k in set(rows["metric"])], kind="line", height=2.8, aspect=1.5,
        errorbar="sd" if data["seed"].nunique() > 1 else None, facet_kws={"sharey": False}, legend=data["run"].nunique() > 1,
    )
    grid.set_axis_labels("optimiser step", "")
    grid.set_titles("{col_name}")
    return grid.figure


def watch_figure(metrics: pd.DataFrame) -> Figure:
    """The reward-hacking watch over training: a panel per rate, one line per method."""
    _theme()
    titles = dict(WATCH_PANELS)
    rows = metrics[metrics["metric"].isin(titles)] if not metrics.empty else metrics
    if rows.empty:
        return message_figure("no reward-hacking rates logged (no GRPO or SRRL run)")
    data = _smoothed(rows)
    data = data.assign(run=run_label(data, with_split=False), panel=data["metric"].map(titles))
    grid = sns.relplot(
        data=data, x="step", y="smoothed", hue="method", hue_order=methods_in(data), palette=method_colors(methods_in(data)),
        col="panel", row="run" if data["run"].nunique() > 1 else None,
        col_order=[t for k, t in WATCH_PANELS if k in set(rows["metric"])], kind="line", height=2.8, aspect=1.5,
        errorbar="sd" if data["seed"].nunique() > 1 else None, facet_kws={"sharey": False},
    )
    grid.set(ylim=(-0.02, 1.02))
    grid.set_axis_labels("optimiser step", "share")
    grid.set_titles("{col_name}" if data["run"].nunique() == 1 else "{col_name}\n{row_name}")
    return grid.figure


def warm_start_figure(metrics: pd.DataFrame) -> Figure:
    """The tiny model's supervised warm start: loss and token accuracy against step."""
    _theme()
    keys = dict(WARM_START_PANELS)
    sft = metrics[(metrics["method"] == "sft") & metrics["metric"].isin(keys)]
    if sft.empty:
        return message_figure("no warm-start metrics")
    data = sft.assign(run=run_label(sft, with_split=False), panel=sft["metric"].map(keys))
    grid = sns.relplot(
        data=data, x="step", y="value", hue="run", col="panel", col_order=[t for k, t in WARM_START_PANELS if k in set(sft["metric"])],
        kind="line", height=2.8, aspect=1.5, facet_kws={"sharey": False}, marker="o", markersize=3,
        legend=data["run"].nunique() > 1,
    )
    grid.set_axis_labels("optimiser step", "")
    grid.set_titles("{col_name}")
    return grid.figure


def diversity_figure(diversity: pd.DataFrame) -> Figure:
    """Distinct programs per problem (as a share of n) and mean pairwise similarity, per method."""
    _theme()
    data = diversity.assign(
        run=run_label(diversity),
        distinct_share=diversity["distinct_programs"] / diversity["n"],
    )
    long = data.melt(
        id_vars=["run", "method"], value_vars=["distinct_share", "mean_similarity", "mean_jaccard"],
        var_name="measure", value_name="value",
    ).dropna(subset=["value"])
    titles = {
        "distinct_share": "distinct programs / samples",
        "mean_similarity": "pairwise similarity (difflib)",
        "mean_jaccard": "pairwise token Jaccard",
    }
    long["measure"] = long["measure"].map(titles)
    methods = methods_in(data)
    grid = sns.catplot(
        data=long, x="run", y="value", hue="method", hue_order=methods, palette=method_colors(methods), col="measure",
        col_order=list(titles.values()), kind="bar", errorbar=("ci", 95), n_boot=DIVERSITY_BOOTSTRAP, seed=0,
        height=3.2, aspect=1.2, sharey=True,
    )  # seeded: the same data give the same bars
    grid.set(ylim=(0, 1))
    grid.set_axis_labels("", "mean over problems")
    grid.set_titles("{col_name}")
    for ax in grid.axes.flat:
        ax.tick_params(axis="x", labelrotation=15)
    return grid.figure


def cost_figure(per_rule: pd.DataFrame) -> Figure:
    """Wall hours, CPU hours (and GPU hours when any) per rule, summed over its jobs."""
    _theme()
    if per_rule.empty:
        return message_figure("no benchmark files found")
    measures = [("wall_h", "wall time (h)"), ("cpu_h", "CPU time (h)")]
    if per_rule["gpu_h"].sum() > 0:
        measures.append(("gpu_h", "GPU time (h, requested GPUs × wall)"))
    order = per_rule.sort_values("wall_h", ascending=False)
    figure, axes = plt.subplots(1, len(measures), figsize=(4.2 * len(measures), 0.32 * len(order) + 1.4), sharey=True, squeeze=False)
    phase_colors = dict(zip(["data", "warm start", "training", "evaluation", "report"], sns.color_palette("muted", 5), strict=True))
    for ax, (column, title) in zip(axes[0], measures, strict=True):
        sns.barplot(data=order, y="rule", x=column, hue="phase", palette=phase_colors, dodge=False, ax=ax, legend=ax is axes[0][-1])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("")
        ax.set_ylabel("")
    if axes[0][-1].get_legend() is not None:
        sns.move_legend(axes[0][-1], "lower right", title="phase", frameon=True)
    figure.tight_layout()
    return figure


def save(figure: Figure, path) -> None:
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(figure)
