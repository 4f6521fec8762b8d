"""Whether two runs' results agree to the last digit, and where they part when they do not.

    python -m execrl.report.compare A B

A and B are each a `summary.json` (what the report writes: `results/summary.json`, or a committed
copy under `docs/results/`) or a results folder (the workflow's `results/`, or the folder above it).
From a results folder the comparison reads its `summary.json` and its training metrics,
`training/{dataset}/{model}/{method}/{seed}/metrics.jsonl` (and the warm start's `.../sft/...`);
training metrics are compared only when both sides are results folders. A record's objects (the
watch's per-problem counts) are compared entry by entry; fields only one side's file ever logs (a
release that began logging something new) are named after every other field of the run agreed.

Exit status: 0 when every result agrees to the last digit, 1 when one differs (the output names the
first job, dataset/model/method/seed, and metric where they part, the training step for training
metrics, and each method's headline pass@1 in A and B with their difference), 2 when an input is
missing or malformed (the message names the file).

Settings come first, since results made under different settings are expected to differ: the
summaries' `experiment`, `grid` and `main_split`, and, between two results folders, the settings
digests in the paths of `training/` and `eval/` (`execrl.run_paths`). Jobs are matched by their
config names (`execrl.run_paths.readable`); a job whose digests differ is named with both. A
difference of settings alone (with results that agree) does not make the exit status 1; a training
run that only one folder holds does.

Every figure of a summary is a result except these fields, which change from run to run of the same
code on the same data, or are prose and labels that no run computes:

- `provenance` (generated, git_commit, host, python, platform, packages, compute): when and where
  the run happened. Differing package versions, torch CPU kernels and GPUs are printed as notes,
  since they explain differing results.
- `cost` (total, per_rule, per_method, training_jobs) and each `summary` row's `cost`: wall, CPU and
  GPU hours, job counts and peak memory from the benchmark files (a job count also changes when
  Snakemake reuses outputs).
- `training[].train_time_s`: a training run's wall time.
- `findings`: sentences whose figures are compared where they come from; they also quote training
  hours.
- `title`, `method_notes`, `seed_noise_rule`, `token_budget.note`, `training_windows.rule`: the
  config's and the code's fixed prose.
- timing metrics of training (VOLATILE_METRICS, and names ending in `_runtime` or `_per_second` or
  starting with `profiling/`): `elapsed_s`, the watch's `watch/check_cpu_s`, TRL's `step_time`,
  `train_runtime`, `train_samples_per_second`, ...; ignored in `metrics.jsonl` and in the
  summary's records of one metric (`training_windows.runs`, `reward_hacking.rates`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from execrl.run_paths import readable

SETTINGS_KEYS = ("experiment", "grid", "main_split")
"""Summary fields that say what was run rather than what came out (compared first)."""

RECORD = "[]"
"""A path step into one record of a list (IGNORED's paths use it for "any record")."""

IGNORED = {
    ("provenance",),
    ("cost",),
    ("findings",),
    ("title",),
    ("method_notes",),
    ("seed_noise_rule",),
    ("token_budget", "note"),
    ("training_windows", "rule"),
    ("summary", RECORD, "cost"),
    ("training", RECORD, "train_time_s"),
}
"""Summary fields that are no result (the module's docstring says why each)."""

VOLATILE_METRICS = {"elapsed_s", "watch/check_cpu_s", "step_time"}
VOLATILE_SUFFIXES = ("_runtime", "_per_second")
VOLATILE_PREFIXES = ("profiling/",)

JOB_FIELDS = ("dataset", "model", "method", "seed")
RECORD_FIELDS = ("split", "baseline", "k", "metric", "kind", "window")
"""Besides the job, what tells one record of a summary's list from another of the same job."""

ENVIRONMENT_KEYS = ("python", "platform")
NOTES_SHOWN = 6

_TRAINING_PATH = re.compile(
    r"^training/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?:(?P<method>[^/]+)/(?P<seed>\d+)|(?P<sft>sft))/metrics\.jsonl$"
)
_EVAL_PATH = re.compile(r"^eval/(?P<dataset>[^/]+)/(?P<model>[^/]+)/(?P<method>[^/]+)/(?P<seed>\d+)/[^/]+\.json$")


class InputError(Exception):
    """An input that is missing or not what it should be; the message names the file."""


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()


def volatile_metric(name: Any) -> bool:
    return isinstance(name, str) and (
        name in VOLATILE_METRICS or name.endswith(VOLATILE_SUFFIXES) or name.startswith(VOLATILE_PREFIXES)
    )


# ---------------------------------------------------------------- jobs


@dataclass(frozen=True)
class Job:
    """dataset/model/method/seed by config name; None where a result does not have that level (a
    summary row pools its seeds; RL data belong to no method)."""

    dataset: str | None = None
    model: str | None = None
    method: str | None = None
    seed: int | None = None

    def __str__(self) -> str:
        if self.dataset is None:
            return "(whole experiment)"
        name = "/".join(part for part in (self.dataset, self.model, self.method) if part is not None)
        if self.method is None:
            return name if self.seed is None else f"{name} (seed {self.seed})"
        return f"{name} (seeds pooled)" if self.seed is None else f"{name}/{self.seed}"


def job_of(record: dict) -> Job:
    seed = record.get("seed")
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    return Job(record.get("dataset"), record.get("model"), record.get("method"), seed)


def job_order(*grids: dict):
    """A sort key for jobs: the grids' datasets, models and methods in their order (names no grid
    lists after them, by name), a level a result lacks first, seeds pooled before seed 0, and
    whole-experiment fields last."""
    orders = {}
    for level, key in (("dataset", "datasets"), ("model", "models"), ("method", "methods")):
        orders[level] = list(dict.fromkeys(name for grid in grids for name in grid.get(key, []) or []))

    def position(level: str, name: str | None) -> tuple[int, str]:
        if name is None:
            return (-1, "")
        names = orders[level]
        return (names.index(name), "") if name in names else (len(names), name)

    def key(job: Job) -> tuple:
        if job.dataset is None:
            return ((1,),)
        return (
            (0,),
            position("dataset", job.dataset),
            position("model", job.model),
            position("method", job.method),
            -1 if job.seed is None else job.seed,
        )

    return key


# ---------------------------------------------------------------- reading inputs


@dataclass(frozen=True)
class RunPath:
    """One result file of a results folder, by its job's config names and its path segments."""

    kind: str  # "training" or "eval"
    job: Job
    segments: tuple[str, ...]
    path: Path


@dataclass
class Side:
    """One input: its summary and, for a results folder, its result paths."""

    given: Path
    summary_path: Path
    summary: dict
    results: Path | None = None
    runs: list[RunPath] = field(default_factory=list)

    @property
    def training(self) -> list[RunPath]:
        return [run for run in self.runs if run.kind == "training"]

    def describe(self) -> str:
        if self.results is None:
            return f"{self.given} (summary.json)"
        return f"{self.given} (results folder: {self.summary_path}, {len(self.training)} training runs)"


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg}, line {error.lineno} column {error.colno})") from None


def read_summary(path: Path) -> dict:
    summary = read_json(path)
    shaped = isinstance(summary, dict) and isinstance(summary.get("summary"), list)
    if not shaped or not isinstance(summary.get("grid"), dict):
        raise InputError(f"{path}: not a report's summary.json (it needs a 'summary' list and a 'grid' object)")
    return summary


def read_metrics(path: Path) -> list[dict]:
    """A metrics.jsonl's records, each with its step; InputError naming the file and line otherwise."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: line {number} is not valid JSON ({error.msg})") from None
        if not isinstance(record, dict) or "step" not in record:
            raise InputError(f"{path}: line {number} is not a training record (an object with a 'step')")
        records.append(record)
    return records


def result_paths(results: Path) -> list[RunPath]:
    """The training metrics and pass@k files of a results folder, by job and path segments."""
    runs = []
    for path in sorted(results.glob("training/**/metrics.jsonl")):
        match = _TRAINING_PATH.match(path.relative_to(results).as_posix())
        if not match:
            continue
        if match["sft"]:
            job, method = Job(readable(match["dataset"]), readable(match["model"]), "sft", 0), "sft"
        else:
            method = match["method"]
            job = Job(readable(match["dataset"]), readable(match["model"]), readable(method), int(match["seed"]))
        runs.append(RunPath("training", job, (match["dataset"], match["model"], method), path))
    for path in sorted(results.glob("eval/**/*.json")):
        match = _EVAL_PATH.match(path.relative_to(results).as_posix())
        if match:
            names = (readable(match["dataset"]), readable(match["model"]), readable(match["method"]))
            job = Job(*names, int(match["seed"]))
            runs.append(RunPath("eval", job, (match["dataset"], match["model"], match["method"]), path))
    return runs


def load(given: str | Path) -> Side:
    """A summary.json, or a results folder (`results/` or the folder holding it)."""
    path = Path(given)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_file():
        return Side(path, path, read_summary(path))
    results = path
    if not (path / "summary.json").exists() and (path / "results").is_dir():
        results = path / "results"
    summary_path = results / "summary.json"
    if not summary_path.exists():
        raise InputError(f"{summary_path}: missing (a results folder holds the report's summary.json)")
    return Side(path, summary_path, read_summary(summary_path), results, result_paths(results))


# ---------------------------------------------------------------- summary fields


def _is_record_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def result_fields(summary: dict) -> dict[tuple[Job, str], Any]:
    """Every result of a summary as (job, label) → value, in the summary's order; settings and
    IGNORED fields left out. A label names the section, the record within its job and the field:
    `summary[split=test].pass_at_k.1.mean`."""
    fields: dict[tuple[Job, str], Any] = {}

    def emit(job: Job, label: str, value: Any) -> None:
        key, copy = (job, label), 2
        while key in fields:  # two records alike in every identifying field: keep both, in order
            key, copy = (job, f"{label}#{copy}"), copy + 1
        fields[key] = value

    def walk(value: Any, path: tuple[str, ...], job: Job, label: str) -> None:
        if path in IGNORED:
            return
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key), job, f"{label}.{key}" if label else key)
        elif _is_record_list(value):
            for record in value:
                if volatile_metric(record.get("metric")):
                    continue
                identity = ", ".join(f"{name}={record[name]}" for name in RECORD_FIELDS if name in record)
                prefix = f"{label}[{identity}]" if identity else label
                for key, item in record.items():
                    if key not in JOB_FIELDS and key not in RECORD_FIELDS:
                        owner = job_of(record) if "dataset" in record else job
                        walk(item, (*path, RECORD, key), owner, f"{prefix}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, RECORD), job, f"{label}[{index}]")
        else:
            emit(job, label, value)

    for key, value in summary.items():
        if key not in SETTINGS_KEYS:
            walk(value, (key,), Job(), key)
    return fields


@dataclass(frozen=True)
class FieldDifference:
    job: Job
    label: str
    a: Any
    b: Any


def field_differences(a: dict, b: dict, order) -> tuple[list[FieldDifference], int]:
    """Every result field whose value differs (or is in one summary only), first job first, and
    how many fields were compared."""
    fields_a, fields_b = result_fields(a), result_fields(b)
    keys = list(dict.fromkeys([*fields_a, *fields_b]))
    differences = [
        FieldDifference(job, label, fields_a.get((job, label), MISSING), fields_b.get((job, label), MISSING))
        for job, label in keys
        if not _same(fields_a.get((job, label), MISSING), fields_b.get((job, label), MISSING))
    ]
    rank = {job: order(job) for job in {d.job for d in differences}}
    # stable: within a job, the summary's own order of fields
    differences.sort(key=lambda d: rank[d.job])
    return differences, len(keys)


def _same(a: Any, b: Any) -> bool:
    """Equal to the last digit: JSON's 1 and 1.0 are one figure, true and 1 are not, NaN is NaN."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def settings_differences(a: dict, b: dict) -> list[str]:
    lines = []
    for key in SETTINGS_KEYS:
        value_a, value_b = a.get(key), b.get(key)
        if key == "grid" and isinstance(value_a, dict) and isinstance(value_b, dict):
            for name in dict.fromkeys([*value_a, *value_b]):
                if value_a.get(name) != value_b.get(name):
                    lines.append(f"grid.{name}: A {_show(value_a.get(name))}, B {_show(value_b.get(name))}")
        elif value_a != value_b:
            lines.append(f"{key}: A {_show(value_a)}, B {_show(value_b)}")
    return lines


def environment_notes(a: dict, b: dict) -> list[str]:
    """Package and interpreter versions that differ (provenance is no result, but explains one)."""
    pa, pb = a.get("provenance") or {}, b.get("provenance") or {}
    packages_a, packages_b = pa.get("packages") or {}, pb.get("packages") or {}
    parts = [
        f"{name} {packages_a.get(name, '(absent)')} → {packages_b.get(name, '(absent)')}"
        for name in dict.fromkeys([*packages_a, *packages_b])
        if packages_a.get(name) != packages_b.get(name)
    ]
    both = [key for key in ENVIRONMENT_KEYS if key in pa and key in pb]
    parts += [f"{key} {pa[key]} → {pb[key]}" for key in both if pa[key] != pb[key]]
    notes = [f"environment differs: {', '.join(parts)}"] if parts else []
    return notes + kernel_notes(pa.get("compute") or {}, pb.get("compute") or {})


def kernel_notes(compute_a: dict, compute_b: dict) -> list[str]:
    """A note when torch's CPU kernels or the GPU differ: other kernels sum in another order, so
    their results differ in the last digits and, through sampling, beyond. The AVX2 pin
    (compute.cpu_kernels) holds only on x86-64 CPUs that have AVX2; elsewhere (aarch64, say)
    torch uses that CPU's own kernels, and the run is that machine's own."""
    notes = []
    kernels_a, kernels_b = compute_a.get("torch_cpu_capability"), compute_b.get("torch_cpu_capability")
    if kernels_a and kernels_b and kernels_a != kernels_b:
        notes.append(
            f"torch's CPU kernels differ: {kernels_a} on {compute_a.get('cpu_model', '?')} → {kernels_b} on "
            f"{compute_b.get('cpu_model', '?')}; other kernels give other numbers (the AVX2 pin holds only on "
            "x86-64 CPUs with AVX2: docs/reproducibility.md)"
        )
    if compute_a.get("gpu") != compute_b.get("gpu"):
        notes.append(f"GPU differs: {compute_a.get('gpu') or 'none'} → {compute_b.get('gpu') or 'none'}")
    return notes


# ---------------------------------------------------------------- digests and training metrics


def digest_differences(runs_a: Sequence[RunPath], runs_b: Sequence[RunPath], order) -> list[str]:
    """One line per job and kind of result that both folders hold under no common path: the path
    segments that differ, A's then B's. A job one folder also holds under other digests (another
    experiment's runs beside the shared ones) is not listed."""
    segments_a, segments_b = defaultdict(set), defaultdict(set)
    for runs, segments in ((runs_a, segments_a), (runs_b, segments_b)):
        for run in runs:
            segments[run.kind, run.job].add(run.segments)
    lines = []
    for kind, job in sorted(set(segments_a) & set(segments_b), key=lambda key: (order(key[1]), key[0])):
        a, b = segments_a[kind, job], segments_b[kind, job]
        if a & b:
            continue
        only_a = sorted({s for path in a for s in path} - {s for path in b for s in path})
        only_b = sorted({s for path in b for s in path} - {s for path in a for s in path})
        lines.append(f"{job} ({kind}): A {', '.join(only_a)}; B {', '.join(only_b)}")
    return lines


@dataclass(frozen=True)
class TrainingDifference:
    """Where two runs' training metrics part: the step and metric, or a run only one side holds."""

    job: Job
    path_a: Path | None
    path_b: Path | None
    step: Any = None
    metric: str | None = None
    a: Any = None
    b: Any = None


def _flat_fields(record: dict, prefix: str = "") -> dict[str, Any]:
    """A metrics record with its objects opened: `watch/hard_coding_by_problem[watch/hard_coding_checked][p1]`."""
    fields = {}
    for key, value in record.items():
        name = f"{prefix}[{key}]" if prefix else key
        if isinstance(value, dict):
            fields.update(_flat_fields(value, name))
        else:
            fields[name] = value
    return fields


def first_metrics_difference(job: Job, path_a: Path, path_b: Path) -> TrainingDifference | None:
    """The first record (in logging order) where the two files part, and its first differing
    metric (inside a record's object, the entry that differs); timing metrics ignored. Fields one
    file never logs (a release that began logging something) are not compared step by step: they
    are named after every other field agreed."""
    records_a = [_flat_fields(r) for r in read_metrics(path_a)]
    records_b = [_flat_fields(r) for r in read_metrics(path_b)]
    logged_a, logged_b = ({key for r in records for key in r} for records in (records_a, records_b))
    one_sided = logged_a ^ logged_b
    for record_a, record_b in zip(records_a, records_b):
        if not _same(record_a["step"], record_b["step"]):
            return TrainingDifference(job, path_a, path_b, record_a["step"], "step", record_a["step"], record_b["step"])
        for key in dict.fromkeys([*record_a, *record_b]):
            if volatile_metric(key) or key in one_sided:
                continue
            value_a, value_b = record_a.get(key, MISSING), record_b.get(key, MISSING)
            if not _same(value_a, value_b):
                return TrainingDifference(job, path_a, path_b, record_a["step"], key, value_a, value_b)
    if len(records_a) != len(records_b):
        longer = records_a if len(records_a) > len(records_b) else records_b
        step = longer[min(len(records_a), len(records_b))]["step"]
        return TrainingDifference(job, path_a, path_b, step, "(records logged)", len(records_a), len(records_b))
    one_sided = {key for key in one_sided if not volatile_metric(key)}
    if one_sided:
        first = min((r["step"] for r in (*records_a, *records_b) if one_sided & set(r)), default=0)
        return TrainingDifference(job, path_a, path_b, first, "(fields logged by one side only)",
                                  _field_names(logged_a & one_sided), _field_names(logged_b & one_sided))  # fmt: skip
    return None


def _field_names(keys: set[str]) -> str | Any:
    """One side's fields, by the name before any object's entries: `watch/hard_coding_by_problem (12 entries)`."""
    if not keys:
        return MISSING
    heads: dict[str, int] = {}
    for key in sorted(keys):
        head = key.split("[", 1)[0]
        heads[head] = heads.get(head, 0) + 1
    return ", ".join(head if head in keys else f"{head} ({count} {'entry' if count == 1 else 'entries'})"
                     for head, count in heads.items())


def training_differences(
    runs_a: Sequence[RunPath], runs_b: Sequence[RunPath], order
) -> tuple[list[TrainingDifference], int]:
    """Each job's training runs paired (the same path first, then the one run each side holds under
    other digests), the pairs that part, runs only one side holds, and how many pairs were compared."""
    by_job_a, by_job_b = defaultdict(dict), defaultdict(dict)
    for run in runs_a:
        by_job_a[run.job][run.segments] = run.path
    for run in runs_b:
        by_job_b[run.job][run.segments] = run.path
    differences, compared = [], 0
    for job in sorted(set(by_job_a) | set(by_job_b), key=order):
        a, b = dict(by_job_a.get(job, {})), dict(by_job_b.get(job, {}))
        pairs = [(a.pop(s), b.pop(s)) for s in sorted(set(a) & set(b))]
        if len(a) == 1 and len(b) == 1:
            pairs.append((a.popitem()[1], b.popitem()[1]))
        for path_a, path_b in pairs:
            compared += 1
            if (difference := first_metrics_difference(job, path_a, path_b)) is not None:
                differences.append(difference)
        differences += [TrainingDifference(job, path, None) for path in a.values()]
        differences += [TrainingDifference(job, None, path) for path in b.values()]
    return differences, compared


# ---------------------------------------------------------------- headline


def headline(summary: dict) -> dict[tuple[str, str, str], tuple[str, Any]]:
    """(dataset, model, method) → (pass@k label, mean) on the main split: pass@1, or the smallest k."""
    split = summary.get("main_split")
    figures = {}
    for row in summary.get("summary", []):
        if not isinstance(row, dict) or row.get("split") != split or not isinstance(row.get("pass_at_k"), dict):
            continue
        ks = sorted(row["pass_at_k"], key=lambda k: int(k) if str(k).isdigit() else 1 << 30)
        if ks:
            figures[row.get("dataset"), row.get("model"), row.get("method")] = (
                f"pass@{ks[0]}", (row["pass_at_k"][ks[0]] or {}).get("mean"))
    return figures


# ---------------------------------------------------------------- the comparison


@dataclass
class Comparison:
    a: Side
    b: Side
    settings: list[str]
    digests: list[str]
    notes: list[str]
    fields: list[FieldDifference]
    fields_compared: int
    training: list[TrainingDifference]
    training_compared: int

    @property
    def agree(self) -> bool:
        return not self.fields and not self.training


def compare(a: Side, b: Side) -> Comparison:
    order = job_order(a.summary["grid"], b.summary["grid"])
    notes = environment_notes(a.summary, b.summary)
    digests, training, training_compared = [], [], 0
    if a.results is not None and b.results is not None:
        digests = digest_differences(a.runs, b.runs, order)
        training, training_compared = training_differences(a.training, b.training, order)
    else:
        folder = a if a.results is not None else b if b.results is not None else None
        why = "neither input is a results folder" if folder is None else f"only {folder.given} is a results folder"
        notes.append(f"settings digests and training metrics not compared: {why} (a summary.json holds neither)")
    fields, fields_compared = field_differences(a.summary, b.summary, order)
    return Comparison(a, b, settings_differences(a.summary, b.summary), digests, notes, fields, fields_compared,
                      training, training_compared)


def _show(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    if isinstance(value, float):
        return repr(value)
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _delta(a: Any, b: Any) -> str:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return ""
    return "0" if b == a else f"{b - a:+.3g}"


def _listed(lines: Sequence[str], indent: str = "  ") -> list[str]:
    shown = [indent + line for line in lines[:NOTES_SHOWN]]
    if len(lines) > NOTES_SHOWN:
        shown.append(f"{indent}... and {len(lines) - NOTES_SHOWN} more")
    return shown


def render(comparison: Comparison) -> str:
    """The comparison in a few lines: inputs, settings, the first difference, the headline figures."""
    c = comparison
    lines = [f"A: {c.a.describe()}", f"B: {c.b.describe()}"]
    if c.settings or c.digests:
        lines.append("SETTINGS DIFFER, so results are expected to differ:")
        lines += _listed(c.settings + [f"digests of {line}" for line in c.digests])
    else:
        lines.append(f"settings: the same (experiment {c.a.summary.get('experiment')}, same grid and main split)")
    lines += [f"note: {note}" for note in c.notes]
    if c.agree:
        training = f" and {c.training_compared} training runs" if c.training_compared else ""
        lines.append(f"AGREE: all {c.fields_compared} result fields{training} are identical to the last digit "
                     "(timings, hosts, dates and commits ignored)")
        return "\n".join(lines) + "\n"
    if c.fields:
        first = c.fields[0]
        jobs: dict[Job, int] = {}
        for difference in c.fields:
            jobs[difference.job] = jobs.get(difference.job, 0) + 1
        lines.append(f"DIFFER: {len(c.fields)} of {c.fields_compared} summary result fields, in {len(jobs)} job(s)")
        lines.append(f"  first: {first.job}, {first.label}: A {_show(first.a)}, B {_show(first.b)}"
                     + (f" (B - A {_delta(first.a, first.b)})" if _delta(first.a, first.b) else ""))
        listed = [f"{job} ({count})" for job, count in jobs.items()]
        more = f", ... and {len(listed) - NOTES_SHOWN} more" if len(listed) > NOTES_SHOWN else ""
        lines.append("  fields per job: " + ", ".join(listed[:NOTES_SHOWN]) + more)
    else:
        lines.append(f"summary: all {c.fields_compared} result fields identical")
    if c.training:
        parted = [d for d in c.training if d.path_a is not None and d.path_b is not None]
        lines.append(f"DIFFER: training metrics of {len(c.training)} of "
                     f"{c.training_compared + len(c.training) - len(parted)} runs")
        for difference in c.training[:NOTES_SHOWN]:
            lines.append("  " + _training_line(difference))
        if len(c.training) > NOTES_SHOWN:
            lines.append(f"  ... and {len(c.training) - NOTES_SHOWN} more")
    elif c.training_compared:
        lines.append(f"training metrics: all {c.training_compared} runs identical")
    lines += _headline_lines(c.a.summary, c.b.summary)
    return "\n".join(lines) + "\n"


def _training_line(difference: TrainingDifference) -> str:
    d = difference
    if d.path_b is None:
        return f"{d.job}: only in A ({d.path_a})"
    if d.path_a is None:
        return f"{d.job}: only in B ({d.path_b})"
    delta = _delta(d.a, d.b)
    return (f"{d.job}: part at step {d.step}, {d.metric}: A {_show(d.a)}, B {_show(d.b)}"
            + (f" (B - A {delta})" if delta else ""))


def _headline_lines(a: dict, b: dict) -> list[str]:
    figures_a, figures_b = headline(a), headline(b)
    rows = list(dict.fromkeys([*figures_a, *figures_b]))
    if not rows:
        return []
    label = next(iter({**figures_a, **figures_b}.values()))[0]
    lines = [f"headline: {a.get('main_split')} {label}, A → B (B - A)"]
    width = max(len(f"{d} · {m}  {method}") for d, m, method in rows)
    for dataset, model, method in rows:
        value_a = figures_a.get((dataset, model, method), ("", MISSING))[1]
        value_b = figures_b.get((dataset, model, method), ("", MISSING))[1]
        mark = "" if _same(value_a, value_b) else "   <- differs"
        name = f"{dataset} · {model}  {method}"
        delta = _delta(value_a, value_b) or "-"
        lines.append(f"  {name:<{width}}  {_show(value_a)} → {_show(value_b)} ({delta}){mark}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m execrl.report.compare",
        description="Exit 0 when two runs' results agree to the last digit, 1 naming where they part, "
        "2 on a bad input.",
    )
    parser.add_argument("a", metavar="A", help="a summary.json or a results folder")
    parser.add_argument("b", metavar="B", help="a summary.json or a results folder")
    args = parser.parse_args(argv)
    try:
        comparison = compare(load(args.a), load(args.b))
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render(comparison))
    return 0 if comparison.agree else 1


if __name__ == "__main__":
    sys.exit(main())
