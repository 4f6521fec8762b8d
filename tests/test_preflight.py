"""The preflight (execrl.planning.preflight): its CPU mode on the embedded default at small shapes, a job
that does not fit, the environment checks, and `preflight.required` in the workflow's DAG."""

import json
import os
import re
import subprocess
import sys

from types import SimpleNamespace

import pytest
import yaml

from conftest import EMBEDDED, REPO, copy_workflow, planned_jobs_of, run_snakemake, segments
from execrl.planning.cluster import Gpu
from execrl.planning.preflight_env import FAIL, NOT_APPLICABLE, OK, driver_check, environment_checks, gpu_check

# The embedded default at shapes that step in seconds (bench/gpu_preflight.sh --cpu's overlay).
SMALL = yaml.safe_load((REPO / "bench" / "preflight" / "cpu.yaml").read_text())


def preflight(tmp_path, overlay, *args):
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(overlay))
    output = tmp_path / "preflight.json"
    result = subprocess.run(
        [sys.executable, "-m", "execrl.planning.preflight", "--configfile", str(REPO / EMBEDDED), "--configfile",
         str(tmp_path / "small.yaml"), "--device", "cpu", "--work", str(tmp_path / "work"), "--output", str(output), *args],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    return result, output


@pytest.mark.slow
def test_cpu_mode_steps_every_job_and_writes_the_table(tmp_path):
    """bench/gpu_check.sh --cpu: the remote GPU check's one command (bench/gpu_preflight.sh, then
    tests/test_gpu.py's one-GPU tests), in CPU mode on the embedded default."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    result = subprocess.run(["bash", "bench/gpu_check.sh", "--cpu"], cwd=REPO,
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Each part within its budget (the scripts' counts of seconds), and what they leave fits a remote
    # run's return: at most 8 files, none more than 2 folders below the output folder.
    spent, budget = map(int, re.search(r"report: .*\(exit 0, (\d+) s of a (\d+) s budget\)", result.stdout).groups())
    assert spent <= budget
    spent, budget = map(int, re.search(r"gpu check: .*, (\d+) s of a (\d+) s budget", result.stdout).groups())
    assert spent <= budget <= 570
    # The call's own record of each part's time matches what it printed.
    record = json.loads((tmp_path / "gpu-check.json").read_text())
    assert record["command"] == "bash bench/gpu_check.sh --cpu" and record["budget_s"] == budget
    assert record["preflight"]["rc"] == record["tests"]["rc"] == 0
    assert record["preflight"]["wall_s"] + record["tests"]["wall_s"] == spent
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(len(p.relative_to(tmp_path).parts) <= 3 for p in files), files
    # The GPU tests were collected and each skip says why (no CUDA here); none failed.
    tests = (tmp_path / "gpu-tests.log").read_text()
    assert re.search(r"SKIPPED \[\d+\] tests/test_gpu.py:\d+: needs a CUDA GPU", tests), tests
    junit = (tmp_path / "gpu-tests.xml").read_text()
    assert 'failures="0"' in junit and 'errors="0"' in junit and 'skipped="0"' not in junit
    report = json.loads((tmp_path / "preflight-cpu.json").read_text())
    assert report["mode"] == "cpu" and report["failures"] == []
    assert {c["name"]: c["status"] for c in report["checks"]}["gpu_vs_plan"] == NOT_APPLICABLE
    jobs = {job["job"]: job for job in report["jobs"]}
    assert set(jobs) == {"tiny/dpo", "tiny/grpo"}
    for name, job in jobs.items():
        assert job["status"] == "fits", job
        # One optimizer step of the planned cut of the step, measured.
        assert job["measured"]["raw_bytes"]["peak"]["allocated"] > job["measured"]["raw_bytes"]["baseline"]["allocated"]
        assert job["measured"]["tokens_per_s"] > 0
        terms = {row["term"]: row for row in job["terms"]}
        assert terms["weights"]["measured_gb"] > 0 and terms["weights"]["planned_gb"] > 0
        assert name in result.stdout  # the table
        assert (tmp_path / "logs" / f"{name.replace('/', '__')}.log").is_file()
        # The update's phase is measured from its own start; the step's time is cut into generation and update.
        update = job["measured"]["phases"]["update"]
        assert update["peak"]["allocated"] >= update["start"]["allocated"]
        assert terms["activations"]["measured_gb"] is not None and terms["optimizer_state"]["planned_gb"] > 0
        m = job["measured"]
        assert m["generation_seconds"] + m["update_seconds"] == pytest.approx(m["step_seconds"])
    # GRPO samples a round before its update: measured as its own phase, against transformers' round;
    # DPO generates nothing.
    assert jobs["tiny/grpo"]["measured"]["generation_seconds"] > 0
    generation = {row["term"]: row for row in jobs["tiny/grpo"]["terms"]}["generation"]
    assert generation["planned_gb"] > 0 and generation["measured_gb"] is not None
    assert "generation" not in {row["term"] for row in jobs["tiny/dpo"]["terms"]}
    assert jobs["tiny/dpo"]["measured"]["generation_seconds"] == 0
    # GRPO's planned sequence is capped by the tiny model's context window (96); its prompts fill it:
    # 4 sequences of 80 prompt tokens and up to 16 completion tokens.
    assert jobs["tiny/grpo"]["planned"]["sequence_tokens"] == 96
    assert jobs["tiny/grpo"]["measured"]["step_tokens"] >= 4 * 70
    # DPO: 2 pairs truncated to 64 tokens each side.
    assert jobs["tiny/dpo"]["measured"]["step_tokens"] >= 4 * 60


@pytest.mark.slow
def test_a_job_that_does_not_fit_exits_non_zero_naming_job_and_term(tmp_path):
    overlay = {**SMALL, "experiment": {"methods": ["base", "dpo"]}}
    result, output = preflight(tmp_path, overlay, "--capacity-gb", "0.001")
    assert result.returncode == 1
    assert "job tiny/dpo does not fit: term " in result.stderr
    job = json.loads(output.read_text())["jobs"][0]
    assert job["status"] == "does_not_fit" and job["term"] in {"weights", "optimizer_state", "activations"}
    assert f"term {job['term']}" in result.stderr


def test_variants_of_one_shape_run_once():
    from execrl.config import merged_config
    from execrl.planning.preflight import planned_jobs

    overlay = REPO / ".test" / "config" / "srrl-groups.yaml"
    config = merged_config([REPO / EMBEDDED, overlay], base=REPO / "config" / "config.yaml")
    jobs = {job.name: job for job in planned_jobs(config)}
    # srrl_separate differs from srrl in srrl.groups only: the same step.
    assert set(jobs) == {"tiny/dpo", "tiny/grpo", "tiny/srrl"}
    assert jobs["tiny/srrl"].same_shape == ["srrl_separate"]


def test_config_without_snakemake_fills_the_same_defaults(tmp_path):
    """The offline GPU node has no Snakemake: the preflight lays the files over one another and
    fills the schema's defaults itself, as Snakemake's validate does (the `if`/`then` ones too)."""
    from execrl.config import merged_config
    from execrl.config import merged_without_snakemake

    base = REPO / "config" / "config.yaml"
    builtin = tmp_path / "builtin.yaml"  # a builtin data set without options: the schema's holdout default
    builtin.write_text("datasets: {suite: {adapter: builtin}}\n")
    for overlays in ([], [REPO / EMBEDDED], [REPO / "bench" / "preflight" / "gpu.yaml"], [builtin]):
        assert merged_without_snakemake(overlays, base) == merged_config(overlays, base=base)
    assert merged_without_snakemake([builtin], base)["datasets"]["suite"]["options"] == {"holdout": "task"}


def test_carried_model_configs_have_the_planned_shapes():
    from execrl.planning.architecture import SHIPPED_SHAPES, Architecture
    from execrl.planning.preflight_workload import model_config_of

    carried = REPO / "bench" / "preflight" / "model_configs"
    for source in ("Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"):
        config = model_config_of(source, carried).to_dict()
        assert Architecture.from_config(config) == Architecture.from_config(SHIPPED_SHAPES[source])


def test_compare_holds_each_measured_phase_against_its_plan_terms():
    from execrl.planning.training_plan import Plan
    from execrl.planning.preflight import compare

    gb = 10**9
    plan = Plan(terms={"weights": 1.0, "master_weights": 1.0, "gradients": 1.0, "deepspeed_buffers": 0.5,
                       "optimizer": 2.0, "gathered": 0.5, "saved_activations": 0.5, "backward_peak": 1.0,
                       "colocated_vllm": 3.0, "frozen_copies": 0.0},
                host_gb=0.0, gpu_memory_gb=80, dtype="bf16",
                resident=("weights", "master_weights", "gradients", "deepspeed_buffers", "frozen_copies"),
                after_first_step=("optimizer",))
    layout = SimpleNamespace(plan=plan)

    def phase(start, peak):
        return {"start": {"allocated": start * gb}, "peak": {"allocated": peak * gb, "reserved": peak * gb}}

    # 3.5 GB loaded; generation climbs 4 GB above that and frees it; the update 2 GB above its own start;
    # Adam's 2 GB kept after the step.
    probe = {"baseline": {"allocated": 0, "reserved": 0}, "train_begin": {"allocated": 3.5 * gb},
             "after_step": {"allocated": 5.5 * gb}, "peak": {"allocated": 7.5 * gb, "reserved": 9 * gb},
             "phases": {"generation": phase(3.5, 7.5), "update": phase(3.6, 5.6), "optimizer": phase(5.4, 5.9)}}
    fits = compare(layout, probe, capacity_gb=80, planned_generation_gb=4.0)
    rows = {row["term"]: row for row in fits["terms"]}
    assert rows["weights"]["planned_gb"] == pytest.approx(3.5) and rows["weights"]["measured_gb"] == pytest.approx(3.5)
    assert rows["generation"]["measured_gb"] == pytest.approx(4.0) and rows["generation"]["ratio"] == pytest.approx(1.0)
    # The update's activations are above the level after generation, not above the step's start.
    assert rows["activations"]["planned_gb"] == pytest.approx(2.0) and rows["activations"]["measured_gb"] == pytest.approx(2.0)
    assert rows["optimizer_state"]["planned_gb"] == pytest.approx(2.0) and rows["optimizer_state"]["measured_gb"] == pytest.approx(2.0)
    assert rows["optimizer_step"]["measured_gb"] == pytest.approx(0.5)
    # A later step's peak: resident 3.5 + Adam 2 + the larger of generation 4 and the update 2.
    assert fits["planned_peak_gb"] == pytest.approx(9.5)
    assert fits["peak_ratio"] == pytest.approx(7.5 / 9.5)
    assert fits["fits"] and "term" not in fits
    # 9 GB reserved + 3 GB colocated vLLM (planned, not measured) > 11 GB: the term furthest over its plan is named.
    probe["phases"]["update"] = phase(3.6, 8.6)
    refused = compare(layout, probe, capacity_gb=11, planned_generation_gb=4.0)
    assert not refused["fits"] and refused["term"] == "activations"
    assert "measured 5 GB, planned 2 GB" in refused["reason"]
    # DPO: no generation phase, no generation row.
    del probe["phases"]["generation"]
    assert "generation" not in {row["term"] for row in compare(layout, probe, 80)["terms"]}


def test_driver_and_gpu_checks():
    assert driver_check("13.0", "575.57.08").status == FAIL
    assert driver_check("13.0", "580.65.06").status == OK
    assert driver_check(None, None).status == FAIL
    h100 = Gpu("h100", 80.0, 9.0)
    assert gpu_check("NVIDIA H100 80GB HBM3", 85_000_000_000, (9, 0), h100).status == OK
    assert gpu_check("NVIDIA A100-SXM4-40GB", 42_000_000_000, (8, 0), h100).status == FAIL
    assert gpu_check("Tesla V100", 34_000_000_000, (7, 0), Gpu("v100", 32.0, 7.0)).status == FAIL


def test_cpu_mode_reports_gpu_checks_as_not_applicable():
    checks = {c.name: c.status for c in environment_checks(gpu=False, planned=None)}
    assert checks["driver_vs_torch_cuda"] == checks["nccl"] == checks["gpu_vs_plan"] == NOT_APPLICABLE


def train_inputs(workdir, required):
    """The inputs of the embedded default's GRPO train job (seed 0) in a dry run's DAG."""
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump({"preflight": {"required": required}}))
    run = segments(workdir, EMBEDDED, "config/test.yaml").run("builtin", "tiny", "grpo", "trained")
    target = f"results/training/{run}/0/metrics.jsonl"
    result = run_snakemake(workdir, "-n", "--forceall", target, "--configfile", EMBEDDED, "config/test.yaml")
    block = next(b for b in result.stdout.split("\nrule ") if b.startswith("train:") or "rule train:" in b)
    return block.split("output:")[0], result.stdout


def planned_params(workdir, required):
    """Output path → {rule, params} of every job of the embedded default's report (forced)."""
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump({"preflight": {"required": required}}))
    return planned_jobs_of(workdir, EMBEDDED, "config/test.yaml")


def test_preflight_required_makes_training_wait_for_the_report(tmp_path):
    """Training always waits for the model's gate record; with `preflight.required` the gate waits
    for the preflight's report (and fails where it names a failure: `test_the_gate_...`)."""
    workdir = copy_workflow(tmp_path)
    model = segments(workdir, EMBEDDED).model["tiny"]
    report, gate = f"results/preflight/{model}.json", f"results/preflight/{model}.gate.json"
    inputs, plan = train_inputs(workdir, required=True)
    gate_block = next(b for b in re.split(r"\n(?:local)?rule ", plan) if b.startswith("preflight_gate:"))
    assert gate in inputs and "rule preflight:" in plan and report in gate_block.split("output:")[0]
    inputs, plan = train_inputs(workdir, required=False)
    assert gate in inputs and report not in inputs and "rule preflight:" not in plan


def test_the_gate_passes_a_clean_report_and_stops_at_a_failure(tmp_path):
    from execrl.planning.preflight import PreflightFailed, preflight_gate

    assert preflight_gate(None) == {"required": False}
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps({"failures": [], "jobs": [{"job": "tiny/grpo"}]}))
    assert preflight_gate(str(clean)) == {"required": True, "report": str(clean), "jobs": ["tiny/grpo"]}
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({"failures": ["tiny/grpo does not fit"], "jobs": []}))
    with pytest.raises(PreflightFailed, match="failed.json: tiny/grpo does not fit"):
        preflight_gate(str(failed))


def test_preflight_required_reruns_nothing(tmp_path):
    """The switch only adds the preflight job: every other job keeps its path and params, and only
    the gate's inputs change (it reads the preflight's report)."""
    workdir = copy_workflow(tmp_path)
    off, on = planned_params(workdir, False), planned_params(workdir, True)
    added = set(on) - set(off)
    assert {on[path]["rule"] for path in added} == {"preflight"}
    without_inputs = lambda plan: {path: {k: v for k, v in job.items() if k != "input"} for path, job in plan.items()}  # noqa: E731
    assert {path: job for path, job in without_inputs(on).items() if path in off} == without_inputs(off)
    read_more = {path: sorted(set(on[path]["input"]) - set(off[path]["input"])) for path in off if on[path]["input"] != off[path]["input"]}
    assert {on[path]["rule"] for path in read_more} == {"preflight_gate"}
    assert all(inputs == [path.removesuffix(".gate.json") + ".json"] for path, inputs in read_more.items())


def test_a_hub_model_is_built_from_its_config_with_random_weights(tmp_path):
    """The GPU mode's model: a carried config.json (here a one-layer Qwen2), random weights, and a
    tokenizer that AutoTokenizer loads as the model's type and that makes tokens of filler words."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from execrl.planning.preflight_workload import build_model, tokens_per_word

    shape = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 5000,
             "max_position_embeddings": 256, "tie_word_embeddings": True, "eos_token_id": 4999}
    carried = tmp_path / "configs" / "Org" / "Model"
    carried.mkdir(parents=True)
    (carried / "config.json").write_text(json.dumps(shape))
    config = {"models": {"m": {"source": "Org/Model-Instruct", "params_b": 1.0}}}
    folder = build_model(config, "m", tmp_path / "built", tmp_path / "configs")
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.vocab_size == 5000 and model.config.num_hidden_layers == 1
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert model.config.eos_token_id == tokenizer.eos_token_id != 4999
    assert 1 <= tokens_per_word(folder) <= 3
