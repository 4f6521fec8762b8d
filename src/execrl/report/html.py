"""The self-contained HTML report: figures embedded as data URIs, no external assets."""

from __future__ import annotations

import base64
import html
import importlib.metadata
import platform
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from execrl.compute import compute_provenance
from execrl.compute import describe as describe_compute
from execrl.generation.sampling import SamplingSettings
from execrl.methods import METHODS
from execrl.report import budget, comparisons, splits, stats, tables
from execrl.report.figures import DIVERSITY_BOOTSTRAP
from execrl.report.refinements import HEADINGS as REFINEMENT_HEADINGS
from execrl.report.evaluations import OUTCOME_LABELS
from execrl.report.training import SUMMARY_LABELS

PACKAGES = (
    "execrl", "torch", "transformers", "trl", "peft", "datasets", "accelerate", "tokenizers", "snakemake",
    "numpy", "pandas", "matplotlib", "seaborn", "vllm",
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1180px; padding: 0 1rem;
       color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
h3 { margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .8rem; }
.table-scroll { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d5d5d5; padding: .2rem .4rem; } th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } td.text { text-align: left; }
td[data-key="verdict"] { white-space: normal; text-align: left; }
figure { margin: 1rem 0 1.6rem; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .caption { color: #555; font-size: .85rem; max-width: 60rem; }
pre { background: #f7f7f7; padding: .6rem .8rem; overflow-x: auto; font-size: .78rem; margin: .2rem 0 .6rem; white-space: pre-wrap; }
.meta { color: #666; font-size: .85rem; }
ul.findings li { margin-bottom: .35rem; }
.badge { display: inline-block; padding: 0 .4rem; border-radius: .3rem; font-size: .75rem; color: #fff; }
.badge.pass { background: #2ca02c; } .badge.fail { background: #e08a1e; } .badge.error { background: #d62728; }
.badge.syntax_error { background: #8c1a1a; } .badge.timeout { background: #7f5fa8; }
.example { border: 1px solid #e3e3e3; border-radius: .4rem; padding: .6rem .9rem; margin: .8rem 0; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: .8rem; }
nav a { margin-right: .8rem; font-size: .9rem; }
details > summary { cursor: pointer; color: #335; margin: .4rem 0; }
"""

FIGURES = {
    # name: (section id, heading, caption)
    "pass_at_k": (
        "pass-at-k",
        "pass@k",
        "pass@k for k = 1…n (n samples per problem), computed per problem from its (n, c) with the unbiased estimator "
        "and averaged over problems. Bands are 95% intervals: a bootstrap over problems ({n_boot} resamples; over "
        "tasks where problems share one), and with two seeds or more Student's t over the per-seed means added to "
        "it. Every method is sampled and scored the same way.",
    ),
    "per_problem": (
        "per-problem",
        "Which problems changed",
        "Each dot is a problem: its pass rate (passing samples / samples, pooled over seeds) under the base model "
        "(x) and under the method (y), slightly jittered. Fixed: the base model never passed, the method did; broke: "
        "the reverse. Points above the diagonal improved.",
    ),
    "outcomes": (
        "outcomes",
        "Outcomes before and after training",
        "Share of all sampled candidates by the sandbox's verdict: syntax error (does not compile), runtime error "
        "(an exception other than a wrong answer, or a crash), timeout, wrong answer (ran, a test failed), pass. "
        "base is the model before training, as are base's variants (base sampled otherwise, such as base_low_temp); "
        "the other methods are after training.",
    ),
    "training_steps": (
        "training",
        "Training curves against step",
        "Per-step training logs (TRL) of each trained method: total reward and its components (where there are "
        "several), pass rate of the "
        "sampled completions, pass@1 of the interval evaluation (on a fixed subset of the test problems), KL to the reference (logged when β > 0), "
        "loss and completion length; DPO logs its implicit reward margin and preference accuracy instead of rewards, and "
        "its interval evaluation as GRPO and SRRL do. "
        "Lines: centred rolling means over a twentieth of the logged steps; bands: sd over seeds where there are several.",
    ),
    "training_samples": (
        "training-samples",
        "Training curves against samples drawn",
        "The same curves against completions sampled from the model during training "
        "(GRPO and SRRL draw prompts × generations per step; SRRL's refinements count within that budget). "
        "DPO draws all its samples — the base model's train-split candidates — before training, so it is one "
        "cross at that count, at its final value.",
    ),
    "srrl": (
        "srrl",
        "SRRL: first attempts (c1) and refinements (c2)",
        "Pass rate of SRRL's first attempts and of its refinements of failed first attempts over training (SRRL's and "
        "each variant's of SRRL, e.g. srrl_separate), with GRPO's pass rate over all its samples for reference. A c2 "
        "is only sampled for a failed c1, so its pass rate is a fix rate.",
    ),
    "reward_hacking": (
        "reward-hacking-figure",
        "Reward hacking over training",
        "Per training step and method: the share of rewarded programs that fail held-out tests made from the "
        "reference, and the share of completions with a tamper signal (mean over seeds; lines: centred rolling means "
        "over a twentieth of the logged steps).",
    ),
    "warm_start": (
        "warm-start",
        "Warm start of the tiny model",
        "Supervised warm start of a locally built tiny model on the reference solutions of its dataset's "
        "warm-start split (datasets.NAME.warmup_split; the train split when unset), before any RL (the base method).",
    ),
    "diversity": (
        "diversity",
        "Candidate diversity",
        "Per problem: distinct programs among the n samples after normalization (comments and layout dropped), as a "
        "share of n, and the mean pairwise similarity of the samples (difflib ratio of token sequences; token-set "
        "Jaccard). Bars: mean over problems (and seeds), with a 95% percentile bootstrap interval over them "
        f"({DIVERSITY_BOOTSTRAP:,} resamples, seeded). RL that sharpens a model usually lowers diversity.",
    ),
    "cost": (
        "cost",
        "Cost per rule",
        "Wall time and CPU time of every job, from Snakemake's benchmark files, summed per rule (jobs run in "
        "parallel, so sums exceed the elapsed time). GPU hours are wall time × GPUs the workflow requested for the "
        "job; they are shown when any job had a GPU. The report's own jobs (refinement samples, diversity, "
        "summaries, plots, this page) are not included.",
    ),
}


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(path: str | Path | None = None) -> str:
    """The commit of the checkout holding `path` (default: this package's source), `-dirty` if modified."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        return subprocess.run(
            ["git", "-C", str(where), "describe", "--always", "--dirty", "--abbrev=10"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sampling_section(config: dict) -> str:
    """The sampling distribution every method draws from, and each method variant that draws from
    another (the base model's low-temperature control, for one)."""
    generation = config.get("generation", {})
    shared = SamplingSettings.of(generation).describe()
    lines = [
        f"<p id=\"sampling\">Sampling, of the online methods' rollouts and of the evaluated candidates alike (the "
        f"interval evaluation during training changes only the temperature): {html.escape(shared)}.</p>"
    ]
    methods = config.get("experiment", {}).get("methods", [])
    for name, variant in (config.get("method_variants") or {}).items():
        own = (variant.get("overrides") or {}).get("generation")
        if name not in methods or not own:
            continue
        changes = ", ".join(f"{key} {value}" for key, value in own.items())
        role = (" It is a control: RL that only sharpens the base model's distribution raises pass@1 as cooling it "
                "does, so a trained method's gain over base is read against this one's." if variant["method"] == "base" else "")
        lines.append(f"<p class=\"caption\"><code>{html.escape(name)}</code> samples {html.escape(variant['method'])}'s "
                     f"model with {html.escape(changes)}, every other setting as above.{html.escape(role)}</p>")
    return "\n".join(lines)


def left_out_note(left_out: list[str]) -> str:
    """The settings the printed configuration leaves out (``execrl.config.left_out_of_report``)."""
    runtime = ("Settings that cannot change a result (logging, parallelism, checkpointing, "
               "<code>preflight.required</code>) are not shown.")
    everything = "<code>python -m execrl.config</code> with the same config files prints them all."
    if not left_out:
        return f"<p class=\"caption\">{runtime} {everything}</p>"
    names = ", ".join(f"<code>{html.escape(key)}</code>" for key in left_out)
    return (f"<p class=\"caption\">Left out below, as no job of this experiment reads them: {names} (the sections of "
            f"methods it does not run, their variants and overrides, the tiny model's where no model is the tiny "
            f"one, and the vLLM settings where generation does not use vLLM). {runtime} {everything}</p>")


def checkout_root(path: str | Path | None = None) -> str | None:
    """The top folder of the git checkout holding `path` (default: this package's source)."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        return subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(cpu_kernels: str | None = None, workflow_dir: str | Path | None = None) -> dict:
    """Where and with what the report was made; `compute` says what computed its numbers
    (the report job inherits the same kernel pin as every job, execrl.compute). `git_commit` is
    the commit of the workflow's checkout (`workflow_dir`: its rules and configs); where the
    `execrl` package was imported from another checkout (a virtual environment shared between
    clones), `package_git_commit` is that one's."""
    import datetime as dt

    record = {
        "compute": compute_provenance(cpu_kernels),
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": git_commit(workflow_dir),
        "host": platform.node(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
    }
    if workflow_dir is not None and checkout_root(workflow_dir) != checkout_root():
        record["package_git_commit"] = git_commit()
    return record


def package_commit(meta: dict) -> str:
    """The package's own commit beside the workflow's, where they are two checkouts."""
    commit = meta.get("package_git_commit")
    return f" (execrl package from another checkout, git {html.escape(commit)})" if commit else ""


def data_uri(path: str | Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


METHOD_FIGURE_PREFIX = "method_"
"""Figures named `method_NAME` are a method's own training metrics, captioned by its registry row."""


def figure_entry(name: str) -> tuple[str, str, str]:
    """(section id, heading, caption) of a figure: from FIGURES, or the method registry."""
    if name.startswith(METHOD_FIGURE_PREFIX):
        method = name[len(METHOD_FIGURE_PREFIX) :]
        return f"training-{method}", f"{method}: its own training metrics", METHODS[method].figure_caption
    return FIGURES[name]


def figure_html(name: str, path: str | Path, caption_values: dict | None = None) -> str:
    section, heading, caption = figure_entry(name)
    caption = caption.format(**(caption_values or {}))
    return (
        f'<h3 id="{section}">{html.escape(heading)}</h3>'
        f'<figure><img class="figure" id="fig-{name}" alt="{html.escape(heading)}" src="{data_uri(path)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def vs_base_html(rows: list[dict]) -> str:
    """The difference to base at every k and on every split (the Summary has pass@1 on one split)."""
    if not rows:
        return ""
    return ("<details><summary>Δ vs base at every k, every split</summary>"
            '<p class="caption">pass@k of each method minus the base model\'s, on the same problems and seeds, with the '
            f"interval of the Summary's Δ ({html.escape(stats.INTERVAL_RULE)}).</p>"
            f'{tables.frame_html(tables.vs_base_frame(rows), table_id="vs-base-every-k", text_columns=5)}</details>')


def split_overlap_html(rows: list[dict]) -> str:
    """What each evaluated split shares with the others (builtin: program shapes, never a task;
    other adapters: problems with the same id or prompt)."""
    if not rows:
        return ""
    items = "".join(f"<li>{html.escape(splits.sentence(row))}</li>" for row in rows)
    return f'<ul class="findings" id="split-overlap">{items}</ul>'


def skipped_rows_html(rows: list[dict]) -> str:
    """The prepared splits that left malformed rows out (nothing when none did)."""
    if not rows:
        return ""
    items = "".join(f"<li>{html.escape(splits.skipped_sentence(row))}</li>" for row in rows)
    return f'<ul class="findings" id="skipped-rows">{items}</ul>'


def badge(status: str | None) -> str:
    status = status or "unknown"
    return f'<span class="badge {html.escape(status)}">{html.escape(OUTCOME_LABELS.get(status, status))}</span>'


def example_html(record: dict, others: dict[str, dict]) -> str:
    """One refinement example: the problem, the failed c1, the refinement prompt, c2 per compared model."""
    c1 = record["c1"]
    error = " ".join(x for x in (c1.get("error_type"), c1.get("error_message")) if x)
    c2_blocks = []
    for method, other in others.items():
        c2 = other["c2"][0] if other and other["c2"] else None
        if c2 is None:
            continue
        passed = sum(c["status"] == "pass" for c in other["c2"])
        c2_blocks.append(
            f"<div><b>c2 from {html.escape(method)}</b>, its first sample: {badge(c2['status'])} "
            f'<span class="meta">({passed} of its {len(other["c2"])} samples pass)</span>'
            f"<pre>{html.escape(c2['code'] or '(empty)')}</pre></div>"
        )
    return (
        f'<div class="example"><b>{html.escape(record["problem_id"])}</b>'
        f'<p class="caption">{html.escape(record["problem"])}</p>'
        f"<div><b>c1 (base model)</b> {badge(c1['status'])} "
        f'<span class="meta">{html.escape(error)} · {c1.get("tests_passed")}/{c1.get("tests_total")} tests</span>'
        f"<pre>{html.escape(c1['code'] or '(empty)')}</pre></div>"
        f"<details open><summary>refinement prompt (the message the model is given)</summary>"
        f"<pre>{html.escape(record['refinement_message'])}</pre></details>"
        f'<div class="columns">{"".join(c2_blocks)}</div></div>'
    )


def examples_section(runs: list[tuple[dict, list[dict]]], summary: pd.DataFrame, n_examples: int) -> str:
    """Refinement rates per model and the first few examples of the first dataset, model and seed."""
    if not runs:
        return "<p>SRRL is not in this experiment's methods, so there are no refinement examples.</p>"
    caption = (
        "How these were made: SRRL's training rollouts are not stored, so after training the merged SRRL model was "
        "sampled on refinement prompts built with <code>execrl.refinement.refinement_prompt</code> (the prompt SRRL trains "
        "on) from the base model's failed train-split candidates: the first failure of each chosen problem, failure "
        "kinds taken in turn. The base model answers the same prompts for comparison. Every c2 is executed by the "
        "sandbox. The examples are the first prompts of that selection, not chosen by outcome."
    )
    table = tables.frame_html(
        summary.rename(columns=REFINEMENT_HEADINGS),
        table_id="refinement-rates", text_columns=4,
    )
    first = runs[0][0]
    same = {
        run["method"]: {r["problem_id"]: r for r in records}
        for run, records in runs
        if (run["dataset"], run["model"], run["seed"]) == (first["dataset"], first["model"], first["seed"])
    }
    order = [m for m in ("srrl", "base") if m in same] + sorted(set(same) - {"srrl", "base"})
    lead = same[order[0]]
    examples = [
        example_html(record, {method: same[method].get(pid) for method in order})
        for pid, record in list(lead.items())[:n_examples]
    ]
    where = f"{first['dataset']} · {first['model']} · seed {first['seed']}"
    return (
        f'<p class="caption">{caption}</p>{table}'
        f"<h3>Examples ({html.escape(where)})</h3>{''.join(examples) or '<p>No failed first attempts to refine.</p>'}"
    )


def changes_section(records: list[dict], split: str) -> str:
    frame = tables.changes_frame(records, split)
    if frame.empty:
        return ""
    return (
        f"<details><summary>Problems each method fixed or broke ({html.escape(split)} split)</summary>"
        f"{tables.frame_html(frame, table_id='changed-problems', text_columns=5)}</details>"
    )


def section_id(method: str, baseline: str) -> str:
    return f"vs-{method}-{baseline}"


def comparison_sections(summary: dict, split: str) -> str:
    """One section per pairwise comparison (titled for its question, e.g. SRRL against GRPO): per
    dataset and model, the verdict at pass@1 with its budget, and Δ at every configured k."""
    blocks = []
    for heading, records in comparisons.by_title(summary["comparisons"], split):
        first = records[0]
        body = []
        for record in records:
            frame = comparisons.delta_frame(record)
            table_id = f"comparison-{record['method']}-{record['baseline']}-{record['dataset']}-{record['model']}"
            body.append(
                f"<h3>{html.escape(record['dataset'])} · {html.escape(record['model'])}</h3>"
                f'<p class="verdict">{html.escape(comparisons.finding(record) or "")}</p>'
                f"{tables.frame_html(frame, table_id=table_id, text_columns=1)}"
            )
        blocks.append(
            f'<h2 id="{section_id(first["method"], first["baseline"])}">{html.escape(heading)}</h2>'
            f'<p class="caption">{html.escape(first["method"])} minus {html.escape(first["baseline"])} on the problems and seeds '
            f"both have ({html.escape(split)} split). {html.escape(stats.INTERVAL_RULE)} "
            f"pass@k: mean ± sd over seeds, with its 95% interval. "
            f"{html.escape(summary['seed_noise_rule'])} Fixed and broke: problems the baseline never passed that the method "
            f"passed at least once, and the reverse (pooled over seeds).</p>"
            + "".join(body)
        )
    return "".join(blocks)


def token_section(summary: dict) -> str:
    per_method = summary["token_budget"]["per_method"]
    if not per_method:
        return ""
    frame = budget.table(pd.DataFrame(per_method))
    return (
        '<h3 id="tokens">Tokens in training</h3>'
        f"{tables.frame_html(frame, table_id='token-budget', text_columns=3, formats=budget.FORMATS)}"
        f'<p class="caption">Per online method, means over seeds. {html.escape(summary["token_budget"]["note"])}</p>'
    )


WATCH_METRIC = "watch/"
"""The watch's windows are in the reward-hacking section; the training section shows the others."""


def windows_frame(windows: list[dict]) -> pd.DataFrame:
    """Per trained run and metric: the first and last fifth of its logged values, the change with
    its 95% interval (autocorrelation allowed for, `execrl.report.training.change_interval`) and
    whether that interval excludes 0."""
    rows = []
    for w in windows:
        if w["metric"].startswith(WATCH_METRIC):
            continue
        interval = not tables.is_missing(w.get("change_ci_low"))
        rows.append({
            "method": w["method"], "seed": str(w["seed"]), "metric": w["metric"],
            "first fifth": f"{tables.fmt(w['first'])} (steps {tables.fmt_steps(w['first_steps'])})",
            "last fifth": f"{tables.fmt(w['last'])} (steps {tables.fmt_steps(w['last_steps'])})",
            "last − first": tables.fmt_signed(w["last"] - w["first"]),
            "95% CI": tables.fmt_interval(w["change_ci_low"], w["change_ci_high"], signed=True) if interval else tables.MISSING,
            "change": ("resolved: the interval excludes 0" if w["change_resolved"] else "not resolved: 0 inside the interval")
            if interval else "too few logged values for an interval",
            "logged values": str(w["values"]),
        })  # fmt: skip
    return pd.DataFrame(rows)


def windows_section(summary: dict) -> str:
    frame = windows_frame((summary.get("training_windows") or {}).get("runs") or [])
    if frame.empty:
        return ""
    return (
        '<h3 id="training-windows">First and last fifth of training</h3>'
        f"{tables.frame_html(frame, table_id='training-windows-table', text_columns=3)}"
        f'<p class="caption">{html.escape(summary["training_windows"]["rule"])}</p>'
    )


def nav(sections: list[tuple[str, str]]) -> str:
    return "<nav>" + "".join(f'<a href="#{html.escape(i)}">{html.escape(t)}</a>' for i, t in sections) + "</nav>"


def method_notes_html(notes: str | None) -> str:
    """What the experiment's config says a reader must know about its methods (`report.method_notes`)."""
    if not notes:
        return ""
    return f'<h2 id="method-notes">Method notes</h2><p class="notes">{html.escape(notes.strip())}</p>'


def render(
    *,
    title: str,
    summary: dict,
    ks: list[int],
    figures: dict[str, str],
    caption_values: dict,
    config: dict,
    config_left_out: list[str] = (),
    refinement_runs: list[tuple[dict, list[dict]]],
    refinement_summary: pd.DataFrame,
    cost_per_rule: pd.DataFrame,
    cost_per_method: pd.DataFrame,
    rl_data: pd.DataFrame,
    training: pd.DataFrame,
    n_examples: int = 4,
    held_out_html: str = "",
    reward_hacking_html: str = "",
) -> str:
    split = summary["main_split"]
    meta = summary["provenance"]
    columns, rows = tables.main_table_rows(summary["summary"], split, ks)
    detail = tables.all_splits_frame(summary["summary"], ks)
    fig = lambda name: figure_html(name, figures[name], caption_values) if name in figures else ""  # noqa: E731
    findings = "".join(f"<li>{html.escape(s)}</li>" for s in summary["findings"])
    total = summary["cost"]["total"]
    pairs = [(section_id(r[0]["method"], r[0]["baseline"]), t) for t, r in comparisons.by_title(summary["comparisons"], split)]
    sections = [("glance", "At a glance"), ("summary", "Summary"), *pairs, ("pass-at-k", "pass@k"), ("per-problem", "Problems"),
                ("outcomes", "Outcomes"), *([("held-out", "Held-out tests")] if held_out_html else []),
                ("reward-hacking", "Reward hacking"),
                ("training", "Training"), ("refinements", "Refinements"), ("diversity", "Diversity"),
                ("cost", "Cost"), ("rl-data", "RL data"), ("configuration", "Configuration")]
    labels = tables.COST_LABELS
    hours = {labels["wall_h"]: tables.fmt_hours, labels["cpu_h"]: tables.fmt_hours, labels["gpu_h"]: tables.fmt_hours,
             labels["max_rss_mb"]: lambda v: tables.fmt(v, 0)}
    method_hours = {labels[c]: tables.fmt_hours for c in cost_per_method.columns if c != "method"}
    diversity = tables.diversity_frame(summary["summary"])
    training_table = (
        tables.frame_html(training.rename(columns=SUMMARY_LABELS), table_id="training-summary", text_columns=4,
                          formats={"seconds to the last step": lambda v: tables.fmt(v, 0), "samples drawn": lambda v: tables.fmt(v, 0)})
        + '<p class="caption">Per trained run; metric columns are means of the last fifth of the logged steps '
        "(the last window of the table below). "
        "Seconds to the last step: the trainer's own clock, from its start to its last logged step (a job's wall "
        "time, with loading, merging and saving, is in Cost). Samples drawn: completions sampled for training, "
        "online (GRPO, SRRL) or, for DPO, the base model's candidates its preference pairs were built from. "
        "Preference accuracy (DPO): the share of pairs whose chosen program the model ranks above the rejected. "
        "Loss: each trainer's own objective (DPO's loss, GRPO's clipped surrogate), not comparable across "
        "methods. SRRL's c1 and c2 pass rates in training are its "
        "rollouts' first attempts and refinements; the Refinements section's c2 pass rate is another measure (the "
        "trained model re-sampled on refinements of the base model's failures). "
        "Interval pass@1 is the interval evaluation's, logged while training: the first eval_problems test problems "
        "at the method's eval_temperature (the grpo section, which SRRL shares, and the dpo section), so it is not the "
        "Summary's pass@1, which is every test problem sampled as the evaluation samples.</p>"
        if not training.empty else ""
    )
    versions = "".join(
        f"<tr><td class='text'>{html.escape(k)}</td><td class='text'>{html.escape(v)}</td></tr>" for k, v in meta["packages"].items()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="meta">Experiment <b>{html.escape(str(summary["experiment"]))}</b> · generated {html.escape(meta["generated"])} ·
git {html.escape(meta["git_commit"])}{package_commit(meta)} · host {html.escape(meta["host"])} · Python {html.escape(meta["python"])}</p>
<p class="meta" id="compute">Computed on: {html.escape(describe_compute(meta.get("compute") or {}))}</p>
{nav(sections)}
{method_notes_html(summary.get("method_notes"))}
<h2 id="glance">At a glance</h2>
<ul class="findings">{findings}</ul>
<h2 id="summary">Summary ({html.escape(split)} split)</h2>
<p class="caption">One row per dataset × model × method. pass@k: mean ± sd over seeds (sd only with several seeds; n = seeds);
95% CI and Δ (difference to the base model on the same problems and seeds): {html.escape(stats.INTERVAL_RULE)}
Fixed / broke: problems the base model never passed that the method passed at least once, and the reverse.
distinct / n: distinct programs per problem as a share of the samples. Training hours: train, merge and RL-data jobs of the method.
{html.escape(tables.unestimated_ks(summary["summary"], split, ks))}</p>
{tables.html_table(columns, rows, table_id="summary-table", numeric_from=3)}
{split_overlap_html(summary.get("split_overlap") or [])}
{skipped_rows_html(summary.get("skipped_rows") or [])}
<details><summary>Every split, with outcome shares</summary>{tables.frame_html(detail, table_id="all-splits", text_columns=4)}</details>
{vs_base_html(summary.get("vs_base") or [])}
{comparison_sections(summary, split)}
<h2>Evaluation</h2>
{fig("pass_at_k")}
{fig("per_problem")}
{changes_section(summary["summary"], split)}
{fig("outcomes")}
{held_out_html}
{reward_hacking_html}
<h2>Training</h2>
{training_table}
{windows_section(summary)}
{token_section(summary)}
{fig("training_steps")}
{fig("training_samples")}
{fig("srrl")}
{"".join(fig(name) for name in figures if name.startswith(METHOD_FIGURE_PREFIX))}
{fig("warm_start")}
<h2 id="refinements">Refinements: a failed first attempt, its feedback, a second attempt</h2>
{examples_section(refinement_runs, refinement_summary, n_examples)}
<h2>Diversity</h2>
{tables.frame_html(diversity, table_id="diversity-table", text_columns=4) if not diversity.empty else ""}
{fig("diversity")}
<h2>Cost</h2>
<p>Jobs that compute results (the report's own left out): {total.get("jobs", 0)} jobs, {tables.fmt_hours(total.get("wall_h"))} wall hours,
{tables.fmt_hours(total.get("cpu_h"))} CPU hours, {tables.fmt_hours(total.get("gpu_h"))} GPU hours (summed over jobs).</p>
{tables.frame_html(cost_per_method.rename(columns=labels), table_id="cost-per-method", text_columns=1, formats=method_hours) if not cost_per_method.empty else ""}
{fig("cost")}
<details><summary>Per rule</summary>{tables.frame_html(cost_per_rule.rename(columns=labels), table_id="cost-per-rule", text_columns=3, formats=hours)}</details>
<h2 id="rl-data">RL datasets</h2>
{tables.frame_html(rl_data, table_id="rl-data-table", text_columns=3) if not rl_data.empty else "<p>No preference datasets (DPO is not in this experiment's methods).</p>"}
<p class="caption">Built from the base model's train-split candidates: n-best lists and preference pairs (a passing program over a failing one;
with <code>include_partial</code>, also more tests passed over fewer). Problems where every or no candidate passes give no pairs.</p>
<h2 id="configuration">Configuration</h2>
{sampling_section(config)}
{left_out_note(config_left_out)}
<pre>{html.escape(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))}</pre>
<h2>Software</h2>
<p class="meta">{html.escape(meta["platform"])}</p>
<div class="table-scroll"><table><tr><th>package</th><th>version</th></tr>{versions}</table></div>
</body></html>
"""
