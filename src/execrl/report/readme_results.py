"""The documents' results sections, rendered from the summary.json of the run they report.

A results section of a document (docs/results.md, docs/reward-hacking.md) sits between two markers,

    <!-- results:NAME:begin -->
    ...
    <!-- results:NAME:end -->

(or `results:NAME/PART:…`), and its text is what `render(summary, PART)` gives for the committed
summary `docs/results/NAME.summary.json` (a copy of a run's `results/summary.json`). PART
`results` (the default) holds pass@k with its intervals per split, the differences to base and the
pairwise comparisons, the training windows (first → last fifth of steps, the change's 95% interval and
whether it is resolved, where the summary has them), the tokens each online run
sampled and the wall time of every warm-start and training job; PART `watch` holds the held-out
tests, the hard-coding windows and the tamper flags. A section whose summary is not committed is
left as it is.

    python -m execrl.report.readme_results --write [DOC ...]    # re-render every section
    python -m execrl.report.readme_results --check [DOC ...]    # exit 1 naming each section that drifted
    python -m execrl.report.readme_results --print results/summary.json [--part watch]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from execrl.report.comparisons import display
from execrl.report.reward_hacking import HARD_CODING
from execrl.report.tables import MISSING, fmt, fmt_interval, fmt_mean_sd, fmt_signed, fmt_steps, is_missing
from execrl.watch.tamper import LIMIT_CATEGORIES

SUMMARIES = Path("docs/results")
"""Where the committed summaries live, relative to the repository's root: NAME.summary.json."""
DOCUMENTS = (Path("docs/results.md"), Path("docs/reward-hacking.md"))
"""The documents with results sections, relative to the repository's root (the command's default)."""
MARKER = re.compile(
    r"^<!-- results:(?P<key>[a-z0-9][a-z0-9-]*(?:/[a-z]+)?):begin -->\n(?P<body>.*?)^<!-- results:(?P<end>[^ ]*):end -->$",
    re.S | re.M,
)
"""A results section: its markers are lines of their own (a marker quoted in the text is not one)."""
ANY_MARKER = re.compile(r"^<!-- results:(?P<key>[^ ]*):(?P<edge>begin|end) -->$", re.M)
WATCH_METRIC = "watch/"
REWARD = "reward"
REFINEMENT_METRICS = (("srrl/c1_pass_rate", "c1 pass rate"), ("srrl/c2_pass_rate", "c2"))


def root_of(document: Path) -> Path:
    """The folder the summaries are found under: the nearest one at or above the document's that
    holds SUMMARIES (the document's own where none does)."""
    folder = document.resolve().parent
    return next((f for f in (folder, *folder.parents) if (f / SUMMARIES).is_dir()), folder)


def summary_path(document: Path, name: str) -> Path:
    return root_of(document) / SUMMARIES / f"{name}.summary.json"


def split_key(key: str) -> tuple[str, str]:
    """(summary name, part) of a section key: `embedded-default` → (embedded-default, results)."""
    name, _, part = key.partition("/")
    return name, part or "results"


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _tokens(value) -> str:
    return MISSING if is_missing(value) else f"{value:,.0f}"


def _duration(seconds) -> str:
    """`4.5 min (270 s)`, `35 s`."""
    if is_missing(seconds):
        return MISSING
    return f"{seconds / 60:.1f} min ({seconds:.0f} s)" if seconds >= 60 else f"{seconds:.0f} s"


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if not is_missing(v)]
    return sum(values) / len(values) if values else None


def _groups(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record["dataset"], record["model"]), []).append(record)
    return groups


def _windows(summary: dict) -> list[dict]:
    return (summary.get("training_windows") or {}).get("runs") or []


def reward_cell(windows: list[dict], dataset: str, model: str, method: str) -> str:
    """`0.598 → 0.637`, for SRRL with its c1 and c2 pass rates: the mean over seeds of each run's
    first and last fifth."""

    def change(metric: str) -> str | None:
        runs = [w for w in windows if (w["dataset"], w["model"], w["method"], w["metric"]) == (dataset, model, method, metric)]
        if not runs:
            return None
        return f"{fmt(_mean([w['first'] for w in runs]))} → {fmt(_mean([w['last'] for w in runs]))}"

    reward = change(REWARD)
    extra = [f"{label} {text}" for metric, label in REFINEMENT_METRICS if (text := change(metric))]
    if reward is None:
        return ", ".join(extra)
    return reward + (f" ({', '.join(extra)})" if extra else "")


def pass_at_1_section(summary: dict) -> list[str]:
    """Per dataset and model: pass@1 with its 95% interval on every split (the main split first),
    Δ pass@1 against base on the main split, and the training reward's first → last fifth."""
    main = summary["main_split"]
    lines = []
    windows = _windows(summary)
    for (dataset, model), records in _groups(summary["summary"]).items():
        splits = sorted({r["split"] for r in records}, key=lambda s: (s != main, s))
        methods = list(dict.fromkeys(r["method"] for r in records))
        by = {(r["method"], r["split"]): r for r in records}
        seeds = max(r["n_seeds"] for r in records)
        columns = ["method", *[f"{split} pass@1 [95% CI]" for split in splits], f"Δ {main} pass@1 vs base [95% CI]",
                   "mean training reward, first → last fifth of steps"]  # fmt: skip
        rows = []
        for method in methods:
            row = [method]
            for split in splits:
                value = by.get((method, split), {}).get("pass_at_k", {}).get("1")
                row.append(f"{fmt_mean_sd(value['mean'], value['sd'])} {fmt_interval(value['ci_low'], value['ci_high'])}"
                           if value else MISSING)  # fmt: skip
            versus = by.get((method, main), {}).get("vs_baseline")
            row.append(f"{fmt_signed(versus['delta_pass_at_1'])} {fmt_interval(versus['ci_low'], versus['ci_high'], signed=True)}"
                       if versus else "")  # fmt: skip
            row.append(reward_cell(windows, dataset, model, method))
            rows.append(row)
        first = by.get((methods[0], main)) or records[0]
        lines += [f"{dataset} · {model}: {seeds} seed{'s' if seeds > 1 else ''}, {first['n_problems']} {main} problems, "
                  f"{first['n_samples']} samples each (pass@1: mean{' ± sd over seeds' if seeds > 1 else ''} and 95% interval).",
                  ""]  # fmt: skip
        lines += _table(columns, rows)
        ks = sorted({int(k) for r in records if r["split"] == main for k in r["pass_at_k"]})
        if len(ks) > 1:
            rows = []
            for method in methods:
                values = by.get((method, main), {}).get("pass_at_k", {})
                rows.append([method, *[
                    f"{fmt_mean_sd(v['mean'], v['sd'])} {fmt_interval(v['ci_low'], v['ci_high'])}" if (v := values.get(str(k))) else MISSING
                    for k in ks
                ]])  # fmt: skip
            lines += _table(["method", *[f"{main} pass@{k} [95% CI]" for k in ks]], rows)
    return lines


def _budget_text(record: dict) -> str:
    spent = record.get("budget")
    if not spent:
        return ""
    method, baseline = record["method"], record["baseline"]
    generated = spent.get("completion_tokens") or spent.get("generated_tokens") or {}
    prompt = spent.get("prompt_tokens") or {}
    sides = [f"{display(m)} {_tokens(spent['tokens'][m])} (prompt {_tokens(prompt.get(m))}, generated {_tokens(generated.get(m))})"
             for m in (method, baseline)]  # fmt: skip
    steps = spent.get("steps") or {}
    count = lambda m: MISSING if is_missing(steps.get(m)) else f"{steps[m]:g}"  # noqa: E731
    return (f"{spent['budget']}; tokens {sides[0]} vs {sides[1]}, {fmt(spent.get('token_ratio'), 2)}×; "
            f"steps {count(method)} vs {count(baseline)}")  # fmt: skip


def comparisons_section(summary: dict) -> list[str]:
    """Every pairwise comparison on the main split at pass@1: both pass@1s, Δ, its paired interval,
    the verdict, and for two online methods the budget and the tokens each sampled."""
    main = summary["main_split"]
    records = [r for r in summary.get("comparisons", []) if r["split"] == main and "1" in r["delta_pass_at_k"]]
    if not records:
        return []
    rows = []
    for record in records:
        value = record["delta_pass_at_k"]["1"]
        mine, theirs = (record["pass_at_k"][m].get("1") for m in (record["method"], record["baseline"]))
        seeds = f"{record['n_seeds']} seed{'s' if record['n_seeds'] > 1 else ''}"
        both = [fmt_mean_sd(v["mean"], v["sd"]) if v else MISSING for v in (mine, theirs)]
        rows.append([
            f"{record['method']} against {record['baseline']} ({record['dataset']} · {record['model']}, {seeds})",
            f"{both[0]} vs {both[1]}",
            fmt_signed(value["delta"]), fmt_interval(value["ci_low"], value["ci_high"], signed=True), value["verdict"],
            _budget_text(record),
        ])  # fmt: skip
    columns = [f"comparison ({main} pass@1)", "pass@1", "Δ", "95% paired CI", "verdict", "budget and tokens in training"]
    return _table(columns, rows)


def change_cells(window: dict) -> list[str]:
    """The change's 95% interval and whether it is resolved (its interval excludes 0); – where the
    windows were too short for one."""
    if is_missing(window.get("change_ci_low")):
        return [MISSING, MISSING]
    resolved = "yes" if window["change_resolved"] else "no"
    return [fmt_interval(window["change_ci_low"], window["change_ci_high"], signed=True), resolved]


def windows_table(windows: list[dict]) -> list[str]:
    """One row per run and metric. Summaries written before the change had an interval
    (`change_ci_low`) render as they did, without its two columns."""
    with_interval = any("change_ci_low" in w for w in windows)
    rows = []
    for w in windows:
        points = ", ".join(f"{step}: {fmt(value)}" for step, value in w["points"]) if w.get("points") else ""
        rows.append([w["method"], str(w["seed"]), f"`{w['metric']}`", f"{fmt(w['first'])} (steps {fmt_steps(w['first_steps'])})",
                     f"{fmt(w['last'])} (steps {fmt_steps(w['last_steps'])})", fmt_signed(w["last"] - w["first"]),
                     *(change_cells(w) if with_interval else []),
                     fmt(w["mean"]), str(w["values"]), points])  # fmt: skip
    columns = ["method", "seed", "metric", "first fifth", "last fifth", "last − first",
               *(["last − first, 95% CI", "resolved"] if with_interval else []), "mean", "logged values",
               "every logged value (step: value)"]  # fmt: skip
    return _table(columns, rows) if rows else []


def tokens_section(summary: dict) -> list[str]:
    """Tokens each online run used in training: prompt (read), generated, total."""
    runs = (summary.get("token_budget") or {}).get("per_run") or []
    if not runs:
        return []
    rows = [[r["method"], str(r["seed"]), f"{r['steps']:g}", _tokens(r.get("prompt_tokens")),
             _tokens(r.get("completion_tokens", r.get("generated_tokens"))), _tokens(r.get("tokens"))] for r in runs]  # fmt: skip
    return ["Tokens in training (generated: the completion tokens counted as `num_generated_tokens`, estimated from TRL's "
            "mean completion length for runs that did not log it; prompt: TRL's `num_tokens` less those):", "",
            *_table(["method", "seed", "steps", "prompt tokens", "generated tokens", "tokens in all"], rows)]  # fmt: skip


def wall_times_section(summary: dict) -> list[str]:
    """Wall and CPU time of every warm-start and training job, from its benchmark file, and the total."""
    cost = summary.get("cost") or {}
    jobs = cost.get("training_jobs") or []
    lines = []
    if jobs:
        rows = [["warm start" if j["rule"] == "sft_tiny_model" else "training", j.get("method") or MISSING,
                 MISSING if j.get("seed") is None else str(j["seed"]), _duration(j["wall_s"]), _duration(j["cpu_s"])]
                for j in jobs]  # fmt: skip
        lines += ["Wall time of each warm-start and training job (Snakemake's benchmark files):", "",
                  *_table(["job", "method", "seed", "wall time", "CPU time"], rows)]  # fmt: skip
    total = cost.get("total") or {}
    if total:
        lines += [f"The jobs in the run's cost table: {total.get('jobs', 0)} jobs, "
                  f"{fmt(total.get('wall_h'), 2)} wall h and {fmt(total.get('cpu_h'), 2)} CPU h summed over jobs.", ""]  # fmt: skip
    return lines


def render_results(summary: dict) -> list[str]:
    windows = [w for w in _windows(summary) if not w["metric"].startswith(WATCH_METRIC)]
    lines = pass_at_1_section(summary) + comparisons_section(summary)
    if windows:
        lines += [(summary.get("training_windows") or {}).get("rule", ""), "", *windows_table(windows)]
    return lines + tokens_section(summary) + wall_times_section(summary)


def _floor(made: dict) -> str:
    """', false-positive floor 0.000 (0.040 before the filter, 25 alternatives)' of a held-out test set."""
    if not made.get("alternatives_checked"):
        return ", false-positive floor not measured"
    return (f", false-positive floor {fmt(made.get('false_positive_floor'))} "
            f"({fmt(made.get('false_positive_floor_before'))} before the alternatives' filter, "
            f"{made['alternatives_checked']} alternatives)")  # fmt: skip


def _seeds(record: dict) -> str:
    seeds = record.get("seeds", record.get("seed"))
    return ", ".join(str(s) for s in seeds) if isinstance(seeds, list) else str(seeds)


def _method_kind(record: dict) -> str:
    """The method, and for SRRL's subgroups which attempts (`srrl c1`)."""
    kind = record.get("kind", "all")
    return record["method"] if kind == "all" else f"{record['method']} {kind}"


def _window_steps(record: dict) -> str:
    """A window's steps: `first_step–last_step (n)` where the record has them."""
    if isinstance(record["steps"], list):
        return fmt_steps(record["steps"])
    if "first_step" in record:
        return f"{record['first_step']}–{record['last_step']} ({record['steps']})"
    return str(record["steps"])


def render_watch(summary: dict) -> list[str]:
    """The held-out tests (pass@1 on both sides, and how many were made), the hard-coding windows
    and the changes between them, the watch's other rates over the first and last fifth of steps,
    the watch's training windows and the flagged completions."""
    lines = []
    held_out = summary.get("held_out") or []
    if held_out:
        rows = [[r["method"], str(r["n_seeds"]), fmt(r["pass_at_k_base"]), fmt(r["pass_at_k_plus"]), fmt(r["gap"])] for r in held_out]
        lines += [f"Held-out tests ({summary['main_split']} split, pass@1, mean over seeds):", "",
                  *_table(["method", "seeds", "base tests", "base + held-out tests", "gap"], rows)]  # fmt: skip
    made = summary.get("held_out_tests") or []
    if made:
        lines += ["Held-out tests made: " + "; ".join(
            f"{m['dataset']} {m['split']} {m['problems_with_plus_tests']} of {m['problems']} problems, {m['plus_tests']:,} tests"
            + _floor(m) for m in made) + ".", ""]  # fmt: skip
    hard_coding = summary.get("hard_coding_windows")
    watch = summary.get("reward_hacking") or {}
    if hard_coding:
        clustered = any(not is_missing(r.get("design_effect")) for r in hard_coding)
        rows = [[_method_kind(r), _seeds(r), str(r["window"]), _window_steps(r),
                 str(r["checked"]), str(r["flagged"]),
                 *([MISSING if is_missing(r.get("problems")) else str(int(r["problems"])),
                    MISSING if is_missing(r.get("design_effect")) else f"{r['design_effect']:.2f}"] if clustered else []),
                 fmt(r["rate"]), fmt_interval(r["ci_low"], r["ci_high"]), fmt(r.get("false_positive_floor"))]
                for r in hard_coding]  # fmt: skip
        by_problem = ("; the interval is Wilson's at the effective sample size, checked / design effect (completions of one "
                      "problem are not independent evidence; the design effect is how much more the rate varies over the "
                      "window's problems than independent completions would let it)") if clustered else ""
        lines += ["Hard-coding during training: rewarded programs checked and flagged (failing a held-out test) per fifth of steps, "
                  "beside the false-positive floor of the training split's held-out tests (the share of alternative correct "
                  "solutions failing one; – where not measured)" + by_problem + ":", "",
                  *_table(["method", "seeds", "window", "steps", "checked", "flagged",
                           *(["problems", "design effect"] if clustered else []),
                           "rate", "95% CI", "false-positive floor"], rows)]  # fmt: skip
        changes = [c["sentence"] for c in watch.get("hard_coding_changes") or [] if c.get("sentence")]
        lines += [*(f"- {sentence}" for sentence in changes), *([""] if changes else [])]
    if watch.get("rates"):
        rows = [[r["method"], str(r["seed"]), f"`{r['metric']}`", fmt(r["first"]), fmt(r["last"]), str(r["steps"])]
                for r in watch["rates"]]  # fmt: skip
        lines += ["The watch's other rates, mean per step:", "",
                  *_table(["method", "seed", "metric", "first fifth of steps", "last fifth", "steps"], rows)]  # fmt: skip
    windows = [w for w in _windows(summary) if w["metric"].startswith(WATCH_METRIC)]
    if windows:
        lines += [(summary.get("training_windows") or {}).get("rule", ""), "", *windows_table(windows)]
    if "flagged" in watch:
        counts = sorted((category, count) for category, count in watch["flagged"].items() if count)
        flagged = ", ".join(f"{c} {n}" for c, n in counts if c not in LIMIT_CATEGORIES and c != HARD_CODING) or "none"
        limits = ", ".join(f"{c} {n}" for c, n in counts if c in LIMIT_CATEGORIES) or "none"
        lines += [f"Flagged evaluation completions ({summary['main_split']} split), every method's, the base model's "
                  f"included: passing every test of its problem and failing a held-out test "
                  f"{watch['flagged'].get(HARD_CODING, 0)} (wrong programs the problems' own tests let pass; "
                  "the report gives them per method, of its passing completions); signs of probing the judge, per "
                  f"category: {flagged}; resource limits hit (not a tamper signal): {limits}.", ""]  # fmt: skip
    return lines


PARTS: dict[str, Callable[[dict], list[str]]] = {"results": render_results, "watch": render_watch}


def render(summary: dict, part: str = "results", source: str | None = None) -> str:
    """The text of a results section: what `summary` says, as PART renders it."""
    if part not in PARTS:
        raise ValueError(f"results section part {part!r}: not one of {sorted(PARTS)}")
    provenance = summary.get("provenance") or {}
    origin = f"`{source}`" if source else "a run's summary.json"
    head = (f"<!-- generated from {origin} (experiment {summary.get('experiment')}, git {provenance.get('git_commit', MISSING)}) "
            "by `python -m execrl.report.readme_results --write`; edit the summary, not this text -->")  # fmt: skip
    body = PARTS[part](summary)
    while body and body[-1] == "":
        body.pop()
    return "\n".join([head, "", *body]) + "\n"


def sections(text: str) -> list[re.Match]:
    """A document's results sections, checking that every begin has its end."""
    found = list(MARKER.finditer(text))
    for match in found:
        if match["end"] != match["key"]:
            raise ValueError(f"results section {match['key']!r} ends with the marker of {match['end']!r}")
    markers = [m["key"] for m in ANY_MARKER.finditer(text)]
    if len(markers) != 2 * len(found):
        raise ValueError(f"results markers do not pair up: {markers}")
    for match in found:
        name, part = split_key(match["key"])
        if part not in PARTS:
            raise ValueError(f"results section {match['key']!r}: part {part!r} is not one of {sorted(PARTS)}")
    return found


def rendered_sections(readme: Path, text: str) -> dict[str, str]:
    """Section key → its text rendered from the committed summary, for every section whose summary exists."""
    out = {}
    for match in sections(text):
        name, part = split_key(match["key"])
        path = summary_path(readme, name)
        if path.exists():
            out[match["key"]] = render(json.loads(path.read_text(encoding="utf-8")), part, (SUMMARIES / path.name).as_posix())
    return out


def drift(documents: Path | list[Path]) -> list[str]:
    """One line per results section of the documents that differs from what its committed summary
    renders, and per committed summary that no section of any of them shows."""
    documents = [documents] if isinstance(documents, Path) else list(documents)
    problems, shown = [], set()
    for document in documents:
        text = document.read_text(encoding="utf-8")
        rendered = rendered_sections(document, text)
        problems += [
            f"{document.name} section results:{m['key']} differs from what {SUMMARIES / (split_key(m['key'])[0] + '.summary.json')} "
            f"renders (python -m execrl.report.readme_results --write {document})"
            for m in sections(text) if m["key"] in rendered and m["body"] != rendered[m["key"]]
        ]  # fmt: skip
        shown |= {split_key(m["key"])[0] for m in sections(text)}
    folder = root_of(documents[0]) / SUMMARIES if documents else None
    for path in sorted(folder.glob("*.summary.json")) if folder and folder.is_dir() else []:
        if path.name.removesuffix(".summary.json") not in shown:
            names = ", ".join(d.name for d in documents)
            problems.append(f"{SUMMARIES / path.name}: no section <!-- results:{path.name.removesuffix('.summary.json')}:begin --> in {names}")
    return problems


def write(readme: Path) -> list[str]:
    """Re-render every section whose summary is committed; the keys rewritten."""
    text = readme.read_text(encoding="utf-8")
    rendered = rendered_sections(readme, text)

    def replace(match: re.Match) -> str:
        body = rendered.get(match["key"], match["body"])
        return f"<!-- results:{match['key']}:begin -->\n{body}<!-- results:{match['key']}:end -->"

    readme.write_text(MARKER.sub(replace, text), encoding="utf-8")
    return sorted(rendered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m execrl.report.readme_results", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="exit 1 when a section differs from its committed summary")
    action.add_argument("--write", action="store_true", help="re-render every section whose summary is committed")
    action.add_argument("--print", metavar="SUMMARY", help="print the section a summary.json renders")
    parser.add_argument("--part", default="results", choices=sorted(PARTS), help="with --print: the part to render")
    parser.add_argument("documents", nargs="*", type=Path, help=f"default: {' '.join(map(str, DOCUMENTS))}")
    args = parser.parse_args(argv)
    if args.print:
        sys.stdout.write(render(json.loads(Path(args.print).read_text(encoding="utf-8")), args.part, args.print))
        return 0
    documents = args.documents or list(DOCUMENTS)
    if args.write:
        for document in documents:
            for key in write(document):
                print(f"{document}: rendered results:{key}")
        return 0
    for document in documents:
        for match in sections(document.read_text(encoding="utf-8")):
            name, _ = split_key(match["key"])
            if not summary_path(document, name).exists():
                print(f"results:{match['key']}: no {SUMMARIES / (name + '.summary.json')} committed; its text is not checked")
    problems = drift(documents)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
