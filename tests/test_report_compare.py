"""`python -m execrl.report.compare A B`: the committed summaries, copied and perturbed, and results
folders built around them agree, or part at the job, metric and training step named."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.report import compare

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO / "docs" / "results" / "embedded-default.summary.json"
# Two runs of the embedded default before the kernel pin, on one machine: commit 6b9a238 (the
# README's results then) and a rerun at 3c90934, whose only changes were sandbox cuts.
EARLIER = REPO / "docs" / "results" / "embedded-default-6b9a238.json"
RERUN = REPO / "docs" / "results" / "embedded-default-rerun-3c90934.json"
DATASET, MODEL = "builtin-3f2a9c", "tiny-81d0e4"
TRAINED = {"dpo": "dpo-1a2b3c", "grpo": "grpo-5b7c11", "srrl": "srrl-0e1f2a"}
SCORED = {"base": "base-aa0001", "dpo": "dpo-aa0002", "grpo": "grpo-aa0003", "srrl": "srrl-aa0004"}


def load_default() -> dict:
    return json.loads(DEFAULT.read_text(encoding="utf-8"))


def write_summary(path: Path, summary: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return path


def summary_row(summary: dict, method: str, split: str = "test") -> dict:
    return next(r for r in summary["summary"] if r["method"] == method and r["split"] == split)


def metrics_records(steps: int = 10) -> list[dict]:
    """A training run's log as MetricsFileCallback writes it, TRL's closing record included."""
    records = [
        {"step": step, "epoch": step / steps, "elapsed_s": 3.25 * step, "step_time": 2.5, "reward": 0.1 + step / 64,
         "loss": 0.7 - step / 100, "watch/check_cpu_s": 0.017 * step, "watch/hard_coding_rate": step / 200}
        for step in range(1, steps + 1)
    ]  # fmt: skip
    records.append({"step": steps, "epoch": 1.0, "elapsed_s": 33.0, "train_runtime": 33.0,
                    "train_samples_per_second": 19.4, "train_loss": 0.61})  # fmt: skip
    return records


def results_folder(root: Path, summary: dict, metrics: dict[str, list[dict]] | None = None,
                   trained: dict[str, str] | None = None, scored: dict[str, str] | None = None) -> Path:  # fmt: skip
    """`root/results` as the workflow leaves it: summary.json, each trained method's metrics.jsonl
    and each method's pass@k files, under path segments with settings digests."""
    results = root / "results"
    write_summary(results / "summary.json", summary)
    trained, scored = trained or TRAINED, scored or SCORED
    for method, segment in trained.items():
        records = (metrics or {}).get(method, metrics_records())
        path = results / "training" / DATASET / MODEL / segment / "0" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    warm_start = results / "training" / DATASET / MODEL / "sft" / "metrics.jsonl"
    warm_start.parent.mkdir(parents=True)
    warm_start.write_text(json.dumps({"step": 5, "loss": 2.5}) + "\n", encoding="utf-8")
    for method, segment in scored.items():
        for split in ("train", "test"):
            path = results / "eval" / DATASET / MODEL / segment / "0" / f"{split}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"method": method, "split": split}), encoding="utf-8")
    return results


def run(a, b, capsys) -> tuple[int, str, str]:
    code = compare.main([str(a), str(b)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_identical_copies_agree(tmp_path, capsys):
    a = write_summary(tmp_path / "a.json", load_default())
    shutil.copyfile(DEFAULT, tmp_path / "b.json")
    code, out, _ = run(a, tmp_path / "b.json", capsys)
    assert code == 0, out
    assert "AGREE" in out and "DIFFER" not in out

    folder_a = results_folder(tmp_path / "run-a", load_default())
    folder_b = results_folder(tmp_path / "run-b", load_default())
    code, out, _ = run(folder_a, folder_b, capsys)
    assert code == 0, out
    # three methods' runs and the warm start
    assert "and 4 training runs are identical" in out
    assert "SETTINGS DIFFER" not in out


def test_volatile_fields_are_ignored_and_results_next_to_them_are_not(tmp_path, capsys):
    summary = load_default()
    summary["provenance"].update(generated="2030-01-01 00:00 UTC", git_commit="0000000000", host="elsewhere")
    summary["cost"]["total"]["wall_h"] *= 2
    summary["cost"]["training_jobs"][0]["wall_s"] += 1
    summary["cost"]["per_rule"][0]["jobs"] += 1
    for row in summary["summary"]:
        row["cost"]["evaluation_wall_h"] += 0.5
    summary["training"][0]["train_time_s"] += 7
    summary["findings"][0] += " (rerun)"
    cpu_window = next(r for r in summary["training_windows"]["runs"] if r["metric"] == "watch/check_cpu_s")
    cpu_window["mean"] += 0.01
    timing = metrics_records()
    for record in timing:
        record["elapsed_s"] = record["elapsed_s"] * 1.5
        if "step_time" in record:  # TRL's own per-step wall time
            record["step_time"] += 0.3
        if "watch/check_cpu_s" in record:
            record["watch/check_cpu_s"] += 0.001
        if "train_runtime" in record:
            record.update(train_runtime=49.5, train_samples_per_second=12.9)
    volatile_a = results_folder(tmp_path / "a", load_default())
    volatile_b = results_folder(tmp_path / "b", summary, metrics={"grpo": timing})
    code, out, _ = run(volatile_a, volatile_b, capsys)
    assert code == 0, out

    summary["training"][0]["final_loss"] = math.nextafter(summary["training"][0]["final_loss"], 2.0)
    write_summary(volatile_b / "summary.json", summary)
    code, out, _ = run(volatile_a, volatile_b, capsys)
    assert code == 1, out
    assert "first: builtin/tiny/dpo/0, training.final_loss" in out


def test_one_ulp_in_a_pass_at_k_names_that_method_and_metric(tmp_path, capsys):
    summary = load_default()
    row = summary_row(summary, "srrl")
    before = row["pass_at_k"]["1"]["mean"]
    row["pass_at_k"]["1"]["mean"] = after = math.nextafter(before, 1.0)
    b = write_summary(tmp_path / "b.json", summary)
    code, out, _ = run(DEFAULT, b, capsys)
    assert code == 1, out
    assert f"first: builtin/tiny/srrl (seeds pooled), summary[split=test].pass_at_k.1.mean: A {before!r}, B {after!r}" in out
    assert "DIFFER: 1 of" in out
    headline = {line.split()[3]: line for line in out.splitlines() if line.startswith("  builtin · tiny")}
    assert headline["srrl"].endswith("<- differs") and f"(+{after - before:.3g})" in headline["srrl"]
    others = {row["method"] for row in summary["summary"]} - {"srrl"}
    assert others and not any(headline[m].endswith("<- differs") for m in others)


def test_training_metrics_differing_at_step_7_name_step_7(tmp_path, capsys):
    parted = metrics_records()
    parted[6]["reward"] = math.nextafter(parted[6]["reward"], 0.0)
    assert parted[6]["step"] == 7
    for record in parted:  # timings differ at every step, and are no result
        record["elapsed_s"] += 0.5
    a = results_folder(tmp_path / "a", load_default())
    b = results_folder(tmp_path / "b", load_default(), metrics={"grpo": parted})
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    assert "summary: all" in out and "result fields identical" in out
    assert "DIFFER: training metrics of 1 of 4 runs" in out
    assert f"builtin/tiny/grpo/0: part at step 7, reward: A {metrics_records()[6]['reward']!r}, B {parted[6]['reward']!r}" in out


def test_a_run_that_stopped_early_parts_where_its_log_ends(tmp_path, capsys):
    a = results_folder(tmp_path / "a", load_default())
    b = results_folder(tmp_path / "b", load_default(), metrics={"srrl": metrics_records()[:8]})
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    assert "builtin/tiny/srrl/0: part at step 9, (records logged): A 11, B 8" in out


def test_digest_mismatch_is_reported_before_the_results(tmp_path, capsys):
    other_settings = {**TRAINED, "srrl": "srrl-999999"}
    other_scores = {**SCORED, "srrl": "srrl-bb0004"}
    a = results_folder(tmp_path / "a", load_default())
    b = results_folder(tmp_path / "b", load_default(), trained=other_settings, scored=other_scores)
    code, out, _ = run(a, b, capsys)
    # results that agree under other settings still agree
    assert code == 0, out
    assert "SETTINGS DIFFER" in out
    assert "digests of builtin/tiny/srrl/0 (training): A srrl-0e1f2a; B srrl-999999" in out
    assert "digests of builtin/tiny/srrl/0 (eval): A srrl-aa0004; B srrl-bb0004" in out
    assert "grpo" not in out.split("SETTINGS DIFFER")[1].split("AGREE")[0]

    summary = load_default()
    summary_row(summary, "srrl")["pass_at_k"]["2"]["mean"] += 0.01
    write_summary(b / "summary.json", summary)
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    lines = out.splitlines()
    settings = lines.index("SETTINGS DIFFER, so results are expected to differ:")
    differ = next(i for i, line in enumerate(lines) if line.startswith("DIFFER:"))
    assert settings < differ
    assert "summary[split=test].pass_at_k.2.mean" in lines[differ + 1]


def test_grid_difference_is_a_settings_difference(tmp_path, capsys):
    summary = load_default()
    summary["grid"]["seeds"] = [0, 1]
    code, out, _ = run(DEFAULT, write_summary(tmp_path / "b.json", summary), capsys)
    assert code == 0, out
    assert "grid.seeds: A [0], B [0, 1]" in out


def test_a_summary_against_a_results_folder_compares_the_folders_summary(tmp_path, capsys):
    folder = results_folder(tmp_path / "run", load_default())
    # the results folder itself, or the checkout above it
    for given in (folder, tmp_path / "run"):
        code, out, _ = run(DEFAULT, given, capsys)
        assert code == 0, out
        assert "training metrics not compared" in out
    summary = load_default()
    summary_row(summary, "grpo", "train")["outcomes"]["fail"] = math.nextafter(
        summary_row(summary, "grpo", "train")["outcomes"]["fail"], 0.0)
    write_summary(folder / "summary.json", summary)
    code, out, _ = run(DEFAULT, folder, capsys)
    assert code == 1, out
    assert "first: builtin/tiny/grpo (seeds pooled), summary[split=train].outcomes.fail" in out


def test_the_committed_rerun_parts_at_srrl_separate_only(capsys):
    # The rerun's watch CPU seconds differ for every online method; they are timings, not results.
    code, out, _ = run(EARLIER, RERUN, capsys)
    assert code == 1, out
    assert "first: builtin/tiny/srrl_separate (seeds pooled), summary[split=test].pass_at_k.1.mean: A 0.133125, B 0.129375" in out
    per_job = next(line for line in out.splitlines() if line.startswith("  fields per job:"))
    assert "grpo" not in per_job and "/srrl/" not in per_job and "srrl (" not in per_job
    differs = [line.split()[3] for line in out.splitlines() if line.endswith("<- differs")]
    assert differs == ["srrl_separate"]


def write_truncated(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "b.json"
    path.write_text(DEFAULT.read_text(encoding="utf-8")[:5000], encoding="utf-8")
    return path, path


def write_not_a_summary(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "plan_time.json"
    shutil.copyfile(REPO / "docs" / "results" / "plan_time.json", path)
    return path, path


def write_missing(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "nowhere.json", tmp_path / "nowhere.json"


def write_folder_without_summary(tmp_path: Path) -> tuple[Path, Path]:
    results = results_folder(tmp_path / "run", load_default())
    (results / "summary.json").unlink()
    return results, results / "summary.json"


def write_bad_metrics_line(tmp_path: Path) -> tuple[Path, Path]:
    results = results_folder(tmp_path / "run", load_default())
    metrics = results / "training" / DATASET / MODEL / TRAINED["grpo"] / "0" / "metrics.jsonl"
    metrics.write_text(metrics.read_text(encoding="utf-8") + '{"step": 11, "reward": \n', encoding="utf-8")
    return results, metrics


@pytest.mark.parametrize(
    "make_input, reason",
    [
        (write_truncated, "not valid JSON"),
        (write_not_a_summary, "not a report's summary.json"),
        (write_missing, "no such file or folder"),
        (write_folder_without_summary, "missing"),
        (write_bad_metrics_line, "line 12 is not valid JSON"),
    ],
)
def test_a_bad_input_exits_2_naming_the_file(tmp_path, capsys, make_input, reason):
    given, named = make_input(tmp_path)
    other = results_folder(tmp_path / "other", load_default())
    code, out, err = run(other, given, capsys)
    assert code == 2, out + err
    assert f"{named}: " in err and reason in err
    assert out == ""


def test_module_runs_as_a_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "execrl.report.compare", str(EARLIER), str(RERUN)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert result.returncode == 1, result.stderr
    first = next(line for line in result.stdout.splitlines() if line.startswith("  first:"))
    assert "builtin/tiny/srrl_separate (seeds pooled)" in first


def test_other_package_versions_are_a_note_not_a_difference(tmp_path, capsys):
    summary = load_default()
    summary["provenance"]["packages"]["torch"] = "2.12.0+cpu"
    code, out, _ = run(DEFAULT, write_summary(tmp_path / "b.json", summary), capsys)
    assert code == 0, out
    assert "note: environment differs: torch 2.13.0+cpu → 2.12.0+cpu" in out


def test_other_cpu_kernels_or_gpu_are_named_in_a_note(tmp_path, capsys):
    summary = load_default()
    summary["provenance"]["compute"].update(torch_cpu_capability="DEFAULT", cpu_model="Neoverse-N1")
    code, out, _ = run(DEFAULT, write_summary(tmp_path / "b.json", summary), capsys)
    assert code == 0, out
    assert "note: torch's CPU kernels differ: AVX2 on AMD EPYC → DEFAULT on Neoverse-N1" in out
    assert "GPU differs" not in out
    summary = load_default()
    summary["provenance"]["compute"]["gpu"] = "NVIDIA H200"
    code, out, _ = run(DEFAULT, write_summary(tmp_path / "c.json", summary), capsys)
    assert "note: GPU differs: none → NVIDIA H200" in out and "kernels differ" not in out


def test_a_training_run_only_one_folder_holds_is_a_difference(tmp_path, capsys):
    a = results_folder(tmp_path / "a", load_default())
    b = results_folder(tmp_path / "b", load_default(), trained={k: v for k, v in TRAINED.items() if k != "dpo"})
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    assert f"builtin/tiny/dpo/0: only in A ({a / 'training' / DATASET / MODEL / TRAINED['dpo'] / '0' / 'metrics.jsonl'})" in out
    assert "DIFFER: training metrics of 1 of 4 runs" in out


def test_a_count_that_moved_between_problems_names_the_problem(tmp_path, capsys):
    """Records' objects (the watch's per-problem counts) are compared entry by entry."""
    def with_counts(moved: bool):
        records = metrics_records()
        for record in records:
            record["watch/hard_coding_by_problem"] = {"watch/hard_coding_checked": {"p1": 2.0, "p2": 1.0}}
        if moved:
            records[3]["watch/hard_coding_by_problem"] = {"watch/hard_coding_checked": {"p1": 1.0, "p2": 2.0}}
        return records

    a = results_folder(tmp_path / "a", load_default(), metrics={"grpo": with_counts(False)})
    b = results_folder(tmp_path / "b", load_default(), metrics={"grpo": with_counts(True)})
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    step = metrics_records()[3]["step"]
    assert f"builtin/tiny/grpo/0: part at step {step}, watch/hard_coding_by_problem[watch/hard_coding_checked][p1]: A 2.0, B 1.0" in out


def test_fields_one_side_never_logged_do_not_hide_a_later_difference(tmp_path, capsys):
    """Results from before the watch logged per-problem counts against results from after: the
    new field is named only when everything else agrees; a metric that parts later is found."""
    newer = metrics_records()
    for record in newer:
        record["watch/hard_coding_by_problem"] = {"watch/hard_coding_checked": {"p1": 2.0}}
    a = results_folder(tmp_path / "a", load_default())
    b = results_folder(tmp_path / "b", load_default(), metrics={"grpo": newer})
    code, out, _ = run(a, b, capsys)
    assert code == 1, out
    assert ("builtin/tiny/grpo/0: part at step 1, (fields logged by one side only): A (absent), "
            'B "watch/hard_coding_by_problem (1 entry)"') in out
    newer[6]["reward"] = math.nextafter(newer[6]["reward"], 0.0)
    c = results_folder(tmp_path / "c", load_default(), metrics={"grpo": newer})
    code, out, _ = run(a, c, capsys)
    assert code == 1 and "builtin/tiny/grpo/0: part at step 7, reward:" in out, out
