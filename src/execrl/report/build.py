"""Everything render_report does between reading its inputs and writing its outputs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from execrl.jsonl import read_jsonl
from execrl.report import budget, comparisons, cost, held_out, html, refinements, reward_hacking, splits, stats, summary, tables
from execrl.report.evaluations import read_tsv
from execrl.report.training import metrics_table, training_windows
from execrl.run_paths import readable
from execrl.training_settings import method_section, registry_name

_RL_RUN = re.compile(r"rl_data/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?:[^/]+/)?(?P<seed>\d+)/manifest\.json$")
_REFINEMENT_RUN = re.compile(r"refinements/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?P<method>[^/]+)/(?P<seed>\d+)\.jsonl$")


@dataclass
class ReportInputs:
    pass_at_k: str
    curves: str
    comparison: str
    outcomes: str
    figures: dict[str, str]
    comparisons: str | None = None
    per_problem: str | None = None
    diversity: str | None = None
    training: str | None = None
    cost_jobs: str | None = None
    refinements: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    data_manifests: list[str] = field(default_factory=list)
    """The evaluated splits' dataset manifests (what each shares with training's splits)."""
    split_manifests: list[str] = field(default_factory=list)
    """Every prepared split's dataset manifest (the malformed rows each left out)."""
    split_problems: list[str] = field(default_factory=list)
    """Every split's prepared problems (`results/data/{dataset}/{split}.jsonl`): what the
    evaluated splits share with the others, for datasets whose manifests do not say."""
    metrics: list[str] = field(default_factory=list)
    plus: str | None = None
    plus_manifests: str | None = None
    annotations: list[str] = field(default_factory=list)
    """Every run's main-split annotations, base and held-out (`{split}.plus.jsonl`)."""


def _optional_tsv(path: str | None) -> pd.DataFrame:
    if not path:
        return pd.DataFrame()
    frame = read_tsv(path)
    return frame


def srrl_budgets(config: dict, methods: list[str]) -> dict[str, str]:
    """Each SRRL method's (SRRL's and its variants') `srrl.budget`, by name."""
    if "srrl" not in config:
        return {}
    return {m: method_section(config, m, "srrl").get("budget") for m in methods if registry_name(config, m) == "srrl"}


def rl_data_table(paths: list[str]) -> pd.DataFrame:
    manifests = []
    for path in paths:
        match = _RL_RUN.search(Path(path).as_posix())
        run = {"dataset": readable(match["dataset"]), "model": readable(match["model"]), "seed": int(match["seed"])} if match else {"dataset": path}
        manifests.append((run, json.loads(Path(path).read_text(encoding="utf-8"))))
    return tables.rl_data_frame(manifests)


def refinement_runs(paths: list[str]) -> list[tuple[dict, list[dict]]]:
    """(run, records) per refinement file, SRRL first, then by dataset, model and seed."""
    runs = []
    for path in paths:
        match = _REFINEMENT_RUN.search(Path(path).as_posix())
        if not match:
            raise ValueError(f"{path}: not a results/analysis/refinements/... file")
        run = {key: readable(match[key]) for key in ("dataset", "model", "method")} | {"seed": int(match["seed"])}
        runs.append((run, read_jsonl(path)))
    return sorted(runs, key=lambda r: (r[0]["dataset"], r[0]["model"], r[0]["seed"], r[0]["method"] != "srrl", r[0]["method"]))


def build(
    inputs: ReportInputs,
    *,
    title: str,
    experiment: dict,
    config: dict,
    ks: list[int],
    config_left_out: list[str] = (),
    n_boot: int,
    n_examples: int = 4,
    grpo: dict | None = None,
    method_overrides: dict | None = None,
    workflow_dir: str | None = None,
) -> tuple[str, dict, str]:
    """The report's HTML, summary.json's record and summary.md's text. `grpo` (the GRPO settings
    the online methods trained with, under each one's `method_overrides`) turns their logged token
    counts into per-step figures; `workflow_dir` (a folder of the workflow's checkout) gives the
    provenance's commit."""
    pass_at_k = read_tsv(inputs.pass_at_k)
    curves = read_tsv(inputs.curves)
    comparison = read_tsv(inputs.comparison)
    outcomes = read_tsv(inputs.outcomes)
    diversity = _optional_tsv(inputs.diversity)
    training = _optional_tsv(inputs.training)
    jobs = _optional_tsv(inputs.cost_jobs)
    if not jobs.empty:
        jobs = jobs.astype({"method": object})
    per_rule = cost.per_rule(jobs) if not jobs.empty else cost.per_rule(pd.DataFrame(columns=cost.JOB_COLUMNS))
    per_method = cost.per_method(jobs) if not jobs.empty else pd.DataFrame()
    runs = refinement_runs(inputs.refinements)
    refinement_summary = refinements.summary_table(runs)
    rl_data = rl_data_table(inputs.manifests)

    split = summary.main_split(experiment.get("eval_splits", ["test"]))
    per_problem = read_tsv(inputs.per_problem) if inputs.per_problem else None
    changes = stats.changed_problems(per_problem, stats.base_pairs(per_problem["method"])) if per_problem is not None else None
    records = tables.summary_records(
        curves, comparison, outcomes, ks, diversity=diversity, cost_per_method=per_method, changes=changes
    )
    pairwise = _optional_tsv(inputs.comparisons)
    token_runs = budget.token_budget(inputs.metrics, grpo, method_overrides)
    tokens = budget.per_method(token_runs)
    windows = training_windows(metrics_table(inputs.metrics))
    comparison_records = []
    if not pairwise.empty:
        pairs = list(pairwise[["method", "baseline"]].drop_duplicates().itertuples(index=False, name=None))
        pair_changes = stats.changed_problems(per_problem, pairs) if per_problem is not None else None
        comparison_records = comparisons.comparison_records(
            pairwise, curves, ks, changes=pair_changes, token_methods=tokens,
            srrl_budget=srrl_budgets(config, experiment.get("methods", [])),
        )
    held_out_records = held_out.method_records(_optional_tsv(inputs.plus), split)
    record = summary.build_summary(
        title=title,
        experiment=experiment,
        records=records,
        pass_at_k_table=pass_at_k,
        split=split,
        refinements=refinement_summary,
        training=training,
        cost_totals=cost.totals(jobs) if not jobs.empty else {},
        cost_per_rule=per_rule,
        cost_per_method=per_method,
        rl_data=rl_data,
        provenance=html.provenance(config.get("compute", {}).get("cpu_kernels"), workflow_dir),
        pairwise=comparison_records,
        token_budget=tokens,
        token_runs=token_runs,
        training_windows=windows,
        training_jobs=cost.training_jobs(jobs),
        vs_base=comparison[comparison["k"].isin(ks)],  # the ks the evaluation reports
    )
    record["method_notes"] = config.get("report", {}).get("method_notes") or ""
    record["held_out"] = held_out_records
    described = splits.overlap_rows(inputs.data_manifests)
    record["split_overlap"] = described + splits.shared_problem_rows(
        inputs.split_problems, experiment.get("eval_splits") or [], covered={row["dataset"] for row in described}
    )
    record["skipped_rows"] = splits.skipped_rows(inputs.split_manifests)
    plus_made = _optional_tsv(inputs.plus_manifests)
    floors = reward_hacking.false_positive_floors(plus_made)
    record["held_out_tests"] = summary.json_safe(
        [{**row, "false_positive_floor": floors[(str(row["dataset"]), str(row["split"]))]["after"],
          "false_positive_floor_before": floors[(str(row["dataset"]), str(row["split"]))]["before"],
          "alternatives_checked": floors[(str(row["dataset"]), str(row["split"]))]["alternatives"]}
         for row in plus_made[["dataset", "split", "problems", "problems_with_plus_tests", "plus_tests"]].to_dict("records")]
        if not plus_made.empty else []
    )  # fmt: skip
    watch_metrics = metrics_table(inputs.metrics) if inputs.metrics else pd.DataFrame()
    watch_rates = reward_hacking.rates_table(watch_metrics)
    by_problem = reward_hacking.problem_counts(inputs.metrics) if inputs.metrics else None
    windows = reward_hacking.hard_coding_windows(watch_metrics, floors, by_problem)
    changes = reward_hacking.hard_coding_changes(windows, floors, by_problem)
    flagged = reward_hacking.flagged_examples(inputs.annotations)
    record["reward_hacking"] = {
        "rates": watch_rates.to_dict(orient="records"),
        "hard_coding_changes": summary.json_safe(changes),
        "flagged": {category: entry["count"] for category, entry in flagged.items()},
    }
    record["hard_coding_windows"] = summary.json_safe(windows.to_dict(orient="records"))
    page = html.render(
        title=title,
        summary=record,
        ks=ks,
        figures=inputs.figures,
        caption_values={"n_boot": n_boot},
        config=config,
        config_left_out=list(config_left_out),
        refinement_runs=runs,
        refinement_summary=refinement_summary,
        cost_per_rule=per_rule,
        cost_per_method=per_method,
        rl_data=rl_data,
        training=training,
        n_examples=n_examples,
        held_out_html=held_out.section(held_out_records, _optional_tsv(inputs.plus_manifests), split),
        reward_hacking_html=reward_hacking.section(
            watch_rates, flagged, html.figure_html("reward_hacking", inputs.figures["reward_hacking"], {})
            if "reward_hacking" in inputs.figures else "", windows, changes, floors, split
        ),
    )
    return page, record, summary.markdown(record, ks)
