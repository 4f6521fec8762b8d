"""The README's results sections: summary.json computes every figure they quote, the renderer shows
each, and the README does not drift from what its committed summaries render."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from test_report import GRPO, evaluations, metrics_files, per_problem, write_benchmark  # noqa: F401 (fixtures)

from execrl.evaluation.scores import summary_table
from execrl.report import cost, readme_results, stats, training
from execrl.report.build import ReportInputs, build
from execrl.report.evaluations import outcome_table
from execrl.report.tables import fmt, fmt_interval, fmt_mean_sd, fmt_signed

REPO = Path(__file__).resolve().parent.parent
# What the watch logs per step: counts summed over processes, the other rates as means.
WATCH = {"watch/hard_coding_checked": 20, "watch/hard_coding_flagged": 1, "watch/hard_coding_rate": 0.05,
         "watch/check_cpu_s": 0.017, "watch/tamper/any": 0.0,
         "watch/hard_coding_by_problem": {"watch/hard_coding_checked": {"p1": 12.0, "p2": 8.0},
                                          "watch/hard_coding_flagged": {"p1": 1.0}}}  # fmt: skip


@pytest.fixture
def run_summary(tmp_path, evaluations, per_problem, metrics_files):  # noqa: F811
    """summary.json as the report writes it for two seeds of base, GRPO and SRRL, with a warm start
    and training jobs benchmarked, held-out tests, and the watch's counts logged."""
    grpo_metrics = metrics_files["metrics"][0]
    records = [json.loads(line) for line in grpo_metrics.read_text().splitlines()]
    grpo_metrics.write_text("".join(json.dumps({**r, **WATCH} if "reward" in r else r) + "\n" for r in records))
    folder = tmp_path / "t"
    folder.mkdir()
    paths = {name: folder / f"{name}.tsv"
             for name in ("pass_at_k", "curves", "comparison", "comparisons", "outcomes", "cost", "per_problem", "plus",
                          "plus_manifests")}
    summary_table(evaluations).to_csv(paths["pass_at_k"], sep="\t", index=False)
    stats.pass_at_k_curves(per_problem, n_boot=100).to_csv(paths["curves"], sep="\t", index=False)
    stats.compare_to_baseline(per_problem, n_boot=100).to_csv(paths["comparison"], sep="\t", index=False)
    pairs = stats.comparison_pairs(per_problem["method"].unique())
    stats.compare_methods(per_problem, pairs, n_boot=100).to_csv(paths["comparisons"], sep="\t", index=False)
    outcome_table(evaluations).to_csv(paths["outcomes"], sep="\t", index=False)
    per_problem.to_csv(paths["per_problem"], sep="\t", index=False)
    pd.DataFrame([
        {"dataset": "toy", "model": "m", "method": method, "seed": 0, "split": "test", "k": 1,
         "pass_at_k_base": base, "pass_at_k_plus": plus, "gap": base - plus}
        for method, base, plus in (("base", 0.412, 0.393), ("grpo", 0.441, 0.422))
    ]).to_csv(paths["plus"], sep="\t", index=False)  # fmt: skip
    pd.DataFrame([{"dataset": "toy", "split": "test", "problems": 200, "problems_with_plus_tests": 198, "plus_tests": 1975,
                   "tests_per_problem": "{}", "skipped": "{}"},
                  {"dataset": "toy", "split": "train", "problems": 50, "problems_with_plus_tests": 48, "plus_tests": 480,
                   "tests_per_problem": "{}", "skipped": "{}", "alternatives_checked": 20,
                   "false_positive_floor_before": 0.05, "false_positive_floor_after": 0.0}]
                 ).to_csv(paths["plus_manifests"], sep="\t", index=False)  # fmt: skip
    write_benchmark(tmp_path / "bench/sft_tiny_model/toy/m.tsv", 144.0, 250.0)
    write_benchmark(tmp_path / "bench/train/toy/m/grpo/0.tsv", 270.0, 265.0)
    write_benchmark(tmp_path / "bench/train/toy/m/srrl/0.tsv", 462.0, 455.0)
    write_benchmark(tmp_path / "bench/generate_candidates/toy/m/grpo/0/test.tsv", 86.0, 80.0)
    cost.job_table(tmp_path / "bench", {"m": 0.003}).to_csv(paths["cost"], sep="\t", index=False)
    _, record, _ = build(
        ReportInputs(pass_at_k=str(paths["pass_at_k"]), curves=str(paths["curves"]), comparison=str(paths["comparison"]),
                     outcomes=str(paths["outcomes"]), cost_jobs=str(paths["cost"]), per_problem=str(paths["per_problem"]),
                     comparisons=str(paths["comparisons"]), plus=str(paths["plus"]), figures={},
                     plus_manifests=str(paths["plus_manifests"]),
                     metrics=[str(p) for p in metrics_files["metrics"]]),
        title="toy", experiment={"name": "toy", "eval_splits": ["train", "test"]}, config={}, ks=[1, 2, 4], n_boot=100,
        grpo=GRPO,
    )  # fmt: skip
    return json.loads(json.dumps(record, allow_nan=False))  # as read back from summary.json


def test_training_windows_are_the_first_and_last_fifth_of_the_logged_values():
    rows = [{"dataset": "d", "model": "m", "method": "srrl", "seed": 0, "step": s, "samples": None, "elapsed_s": None,
             "metric": metric, "value": value}
            for s in range(1, 21) for metric, value in (("reward", s / 10), ("srrl/c2_pass_rate", 1 - s / 10))]
    rows += [{"dataset": "d", "model": "m", "method": "srrl", "seed": 0, "step": s, "samples": None, "elapsed_s": None,
              "metric": "interval_eval/pass_at_1", "value": v} for s, v in ((0, 0.5), (5, 0.6), (10, 0.4))]
    rows += [{"dataset": "d", "model": "m", "method": "sft", "seed": 0, "step": 1, "samples": None, "elapsed_s": None,
              "metric": "reward", "value": 9.0}]  # fmt: skip
    windows = training.training_windows(pd.DataFrame(rows)).set_index("metric")
    # 20 logged values: each fifth is 4
    assert windows.loc["reward", "first"] == pytest.approx(0.25) and windows.loc["reward", "last"] == pytest.approx(1.85)
    assert windows.loc["reward", "first_steps"] == [1, 4] and windows.loc["reward", "last_steps"] == [17, 20]
    assert windows.loc["reward", "mean"] == pytest.approx(1.05) and windows.loc["reward", "values"] == 20
    assert windows.loc["srrl/c2_pass_rate", "first"] == pytest.approx(0.75)
    # three evaluations: the first and the last value, and every point kept
    assert (windows.loc["interval_eval/pass_at_1", "first"], windows.loc["interval_eval/pass_at_1", "last"]) == (0.5, 0.4)
    assert windows.loc["interval_eval/pass_at_1", "points"] == [[0, 0.5], [5, 0.6], [10, 0.4]]
    assert windows.loc["reward", "points"] is None and set(windows["method"]) == {"srrl"}  # no warm start
    assert training.training_windows(pd.DataFrame(rows), fraction=10).set_index("metric").loc["reward", "first"] == pytest.approx(0.15)


def test_a_methods_own_panels_get_windows():
    assert "spiral/eval/random/win_rate" in training.window_metrics("spiral")
    assert "code_game/opponent_accuracy" in training.window_metrics("code_game")
    assert "spiral/eval/random/win_rate" not in training.window_metrics("grpo")


def test_summary_json_computes_windows_tokens_and_wall_times(run_summary):
    windows = {(w["method"], w["metric"]): w for w in run_summary["training_windows"]["runs"]}
    # GRPO logs reward s/10 at steps 1-8: a fifth of 8 values is one value
    assert (windows[("grpo", "reward")]["first"], windows[("grpo", "reward")]["last"]) == (0.1, 0.8)
    assert windows[("srrl", "srrl/c1_pass_rate")]["last"] == pytest.approx(0.8)
    assert windows[("grpo", "watch/check_cpu_s")]["mean"] == pytest.approx(0.017)
    assert windows[("grpo", "interval_eval/pass_at_1")]["points"] == [[4, 0.25]]
    assert "fifth" in run_summary["training_windows"]["rule"]
    jobs = [(j["rule"], j["method"], j["seed"], j["wall_s"]) for j in run_summary["cost"]["training_jobs"]]
    assert jobs == [("sft_tiny_model", None, None, 144.0), ("train", "grpo", 0, 270.0), ("train", "srrl", 0, 462.0)]
    tokens = {r["method"]: r for r in run_summary["token_budget"]["per_run"]}
    assert tokens["grpo"]["tokens"] == 32.0 * (8 * 60 + 36) and tokens["srrl"]["seed"] == 0
    assert tokens["grpo"]["completion_tokens"] + tokens["grpo"]["prompt_tokens"] == pytest.approx(tokens["grpo"]["tokens"])


def test_the_rendered_sections_contain_every_figure_of_the_summary(run_summary):
    results = readme_results.render(run_summary, "results", "docs/results/toy.summary.json")
    watch = readme_results.render(run_summary, "watch")
    assert results.startswith("<!-- generated from `docs/results/toy.summary.json`")
    for record in run_summary["summary"]:
        for value in record["pass_at_k"].values():  # every split and k, with its interval
            assert f"{fmt_mean_sd(value['mean'], value['sd'])} {fmt_interval(value['ci_low'], value['ci_high'])}" in results
        if record.get("vs_baseline") and record["split"] == "test":
            versus = record["vs_baseline"]
            assert f"{fmt_signed(versus['delta_pass_at_1'])} {fmt_interval(versus['ci_low'], versus['ci_high'], signed=True)}" in results
    assert run_summary["comparisons"]
    for record in run_summary["comparisons"]:
        if record["split"] != "test":
            continue
        value = record["delta_pass_at_k"]["1"]
        assert fmt_interval(value["ci_low"], value["ci_high"], signed=True) in results and value["verdict"] in results
        if record["budget"]:
            for method in (record["method"], record["baseline"]):
                assert f"{record['budget']['tokens'][method]:,.0f}" in results
            assert f"{record['budget']['token_ratio']:.2f}×" in results
    # the training reward's first → last fifth, SRRL's c1 and c2 beside it
    assert "| grpo | " in results and "0.100 → 0.800 |" in results
    assert "0.100 → 0.800 (c1 pass rate 0.100 → 0.800, c2 0.050 → 0.400)" in results
    for window in run_summary["training_windows"]["runs"]:
        shown = results if not window["metric"].startswith("watch/") else watch
        assert f"`{window['metric']}` | {fmt(window['first'])} (steps" in shown and fmt(window["last"]) in shown
        assert f"{fmt(window['last'])} (steps {window['last_steps'][0]}) | {fmt_signed(window['last'] - window['first'])} |" in shown
    assert "4: 0.250" in results  # an evaluation logged once keeps its step
    for run in run_summary["token_budget"]["per_run"]:
        for key in ("prompt_tokens", "completion_tokens", "tokens"):
            assert f"{run[key]:,.0f}" in results
    assert "| warm start | – | – | 2.4 min (144 s) |" in results
    assert "| training | grpo | 0 | 4.5 min (270 s) |" in results and "7.7 min (462 s)" in results
    assert f"{run_summary['cost']['total']['jobs']} jobs" in results
    assert run_summary["hard_coding_windows"], "the report pools the logged counts"
    for window in run_summary["hard_coding_windows"]:
        row = (f"| {window['method']} | {window['seed']} | {window['window']} | {window['first_step']}–{window['last_step']} ({window['steps']}) | "
               f"{window['checked']} | {window['flagged']} | {int(window['problems'])} | {window['design_effect']:.2f} | "
               f"{fmt(window['rate'])} | {fmt_interval(window['ci_low'], window['ci_high'])} | "
               f"{fmt(window['false_positive_floor'])} |")
        assert row in watch and window["false_positive_floor"] == 0.0  # the training split's floor
    for change in run_summary["reward_hacking"]["hard_coding_changes"]:
        assert f"- {change['sentence']}" in watch and "not resolved" in change["sentence"]
    assert "| grpo | 1 | 0.441 | 0.422 | 0.019 |" in watch
    assert "toy test 198 of 200 problems, 1,975 tests, false-positive floor not measured" in watch
    assert "toy train 48 of 50 problems, 480 tests, false-positive floor 0.000 (0.050 before the alternatives' filter, 20 alternatives)" in watch
    assert "0.017" in watch  # the held-out check's CPU seconds per step


def test_the_watch_shows_its_other_rates_per_fifth_with_or_without_hard_coding_windows(run_summary):
    for windows in (run_summary["hard_coding_windows"], None):
        if windows is None:
            del run_summary["hard_coding_windows"]
        watch = readme_results.render(run_summary, "watch")
        assert "first fifth of steps" in watch and "`watch/tamper/any` | 0.000 | 0.000 | 8 |" in watch
        assert ("Hard-coding during training" in watch) == (windows is not None)


def readme_with_sections(tmp_path, summary):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# x\n\nSome text.\n\n<!-- results:toy:begin -->\ntyped numbers\n<!-- results:toy:end -->\n\nMore text.\n\n"
        "<!-- results:toy/watch:begin -->\ntyped too\n<!-- results:toy/watch:end -->\n"
        "<!-- results:later:begin -->\nno summary yet\n<!-- results:later:end -->\n"
    )
    (tmp_path / "docs/results").mkdir(parents=True)
    (tmp_path / "docs/results/toy.summary.json").write_text(json.dumps(summary))
    return readme


def test_write_renders_each_section_and_check_names_the_one_that_drifted(tmp_path, run_summary, capsys):
    readme = readme_with_sections(tmp_path, run_summary)
    assert "results:toy differs" in readme_results.drift(readme)[0]
    assert readme_results.main(["--write", str(readme)]) == 0
    text = readme.read_text()
    assert "typed numbers" not in text and "typed too" not in text and "no summary yet" in text
    assert text.startswith("# x\n\nSome text.\n\n") and "\n\nMore text.\n\n" in text
    assert readme_results.drift(readme) == [] and readme_results.main(["--check", str(readme)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "results:later: no docs/results/later.summary.json committed; its text is not checked"
    )
    readme.write_text(text.replace("| grpo | 0 | first | 1–1 (1) | 20 |", "| grpo | 0 | first | 1–1 (1) | 21 |"))
    assert readme_results.main(["--check", str(readme)]) == 1
    problems = capsys.readouterr().err.strip().splitlines()
    assert len(problems) == 1
    assert problems[0].startswith("README.md section results:toy/watch differs from what docs/results/toy.summary.json renders")
    readme.write_text(text)
    (tmp_path / "docs/results/orphan.summary.json").write_text(json.dumps(run_summary))
    assert readme_results.drift(readme) == ["docs/results/orphan.summary.json: no section <!-- results:orphan:begin --> in README.md"]


def test_markers_that_do_not_pair_up_are_an_error(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:a:begin -->\nx\n<!-- results:b:end -->\n")
    with pytest.raises(ValueError, match="'a' ends with the marker of 'b'"):
        readme_results.drift(readme)
    readme.write_text("<!-- results:a:begin -->\nx\n")
    with pytest.raises(ValueError, match="do not pair up"):
        readme_results.drift(readme)
    readme.write_text("<!-- results:a/figures:begin -->\nx\n<!-- results:a/figures:end -->\n")
    with pytest.raises(ValueError, match="part 'figures'"):
        readme_results.drift(readme)


def test_the_documents_match_the_summaries_they_are_generated_from(tmp_path):
    """Every results section of the documents whose summary is committed (docs/results/NAME.summary.json)
    is what that summary renders; the embedded default and seed 002's overlay have sections, and
    every committed summary is shown."""
    documents = [REPO / d for d in readme_results.DOCUMENTS]
    keys = [m["key"] for d in documents for m in readme_results.sections(d.read_text(encoding="utf-8"))]
    assert {"embedded-default", "embedded-default/watch", "seed-002"} <= set(keys)
    # A section whose summary is missing is not checked at all, so each must be in the repository.
    for name in sorted({readme_results.split_key(key)[0] for key in keys}):
        summary = REPO / readme_results.SUMMARIES / f"{name}.summary.json"
        assert summary.is_file(), f"results section results:{name}: {summary} is missing"
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(summary)], cwd=REPO).returncode == 0
        assert not ignored, f"{summary} is ignored by git, so a clone would not check section results:{name}"
    assert readme_results.drift(documents) == []
    committed = sorted((REPO / readme_results.SUMMARIES).glob("*.summary.json"))
    # The check itself on copies: a section changed by hand is named.
    (tmp_path / "docs").mkdir()
    copies = [tmp_path / d for d in readme_results.DOCUMENTS]
    for document, copy in zip(documents, copies):
        shutil.copy(document, copy)
    shutil.copytree(REPO / readme_results.SUMMARIES, tmp_path / readme_results.SUMMARIES)
    assert readme_results.drift(copies) == []
    name = committed[0].name.removesuffix(".summary.json")
    edited = next(c for c in copies if f"<!-- results:{name}:begin -->" in c.read_text(encoding="utf-8"))
    text = edited.read_text(encoding="utf-8")
    edited.write_text(re.sub(rf"(<!-- results:{name}:begin -->\n)", r"\1edited by hand\n", text, count=1))
    assert any(f"results:{name} differs" in p for p in readme_results.drift(copies))
    # a summary no document shows is named
    shutil.copy(committed[0], tmp_path / readme_results.SUMMARIES / "orphan.summary.json")
    assert any(p.startswith("docs/results/orphan.summary.json: no section") for p in readme_results.drift(copies))


def test_resource_limits_are_listed_apart_from_tamper_signals(run_summary):
    run_summary["reward_hacking"]["flagged"] = {"limit_hit": 3, "frame_walk": 1, "fd_write": 0}
    watch = readme_results.render(run_summary, "watch")
    assert "per category: frame_walk 1; resource limits hit (not a tamper signal): limit_hit 3." in watch
