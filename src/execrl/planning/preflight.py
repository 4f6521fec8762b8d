"""Preflight: prove on the node, in minutes, that each planned training job fits and runs.

    python -m execrl.planning.preflight --configfile config/config.yaml [--configfile OVERLAY ...] \\
        [--output results/preflight/MODEL.json] [--models MODEL ...] [--device auto|cpu|gpu]

1. Environment checks (`execrl.planning.preflight_env`): driver against torch's CUDA, the GPU against the
   plan's `gpu_model`, compilers and Python headers for Triton/DeepSpeed, NCCL (not applicable
   in CPU mode).
2. Every training job shape the config plans (each model of `experiment.models` with each trained
   method; method variants whose sections that size a step (grpo, dpo, lora) are the same as
   another's share its shape and run once): a model with random weights from the model's config
   (no weights downloaded: a staged, carried or the hub's config.json on a GPU, the config's
   `tiny_model` shape on the CPU) and a tokenizer trained here on filler text
   (`execrl.planning.preflight_workload`), one optimizer step through `execrl.training.train_job`
   under `accelerate launch` as the `train` rule runs it (`execrl.planning.preflight_step`): the same TRL trainer, the plan's micro-batch ×
   accumulation and ZeRO stage, LoRA or all weights, prompts and completions at the planned length.
3. A table of planned and measured memory per term and tokens/s per job, written as JSON; the exit
   status is non-zero when a check fails, a job does not fit (named with the term that overran its
   plan most), or a job fails.

What is not measured: vLLM (the step samples with transformers' generate; a plan's colocated vLLM
share is added to the measured peak as planned), and on a GPU node with fewer GPUs than the plan's
processes, a ZeRO-3 job runs on the GPUs there are, sharding over fewer (a per-GPU upper bound).

CPU mode runs the jobs of models that train on the CPU (the tiny model), planned as if on a GPU
of the cluster's type, measured by the process's resident set; GPU jobs are listed as skipped.
Planning itself is `execrl.planning.memory_plan.training_job_layout`, the function the workflow sizes jobs by.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from execrl.planning.preflight_env import FAIL, Check, environment_checks
from execrl.planning.preflight_workload import build_model, tokens_per_word, write_pairs, write_problems
from execrl.planning.training_plan import UNMEASURED_TERMS

GB = 1e9
# The method's sections that decide a training step's shape (and so its memory).
SHAPE_SECTIONS = ("grpo", "dpo", "lora")
# Settings of the probed job that change how long it runs, never one step's memory: no interval
# evaluation, no checkpoint, no vLLM (not installed on the offline GPU node; not measured).
GRPO_PROBE = {"eval_every": 0, "save_steps": 1_000_000, "use_vllm": False}
DPO_PROBE = {"eval_every": 0, "save_steps": 1_000_000}
# The measured terms, in the table's order: the plan's groups of terms (Plan.measured_groups), and
# generation, held against transformers' round (Architecture.generation_bytes), which is what the
# probe samples with.
MEASURED = ("weights", "generation", "activations", "optimizer_state")


# A job given less than this of the --budget-s is not started (building and loading alone take longer).
MIN_JOB_SECONDS = 30


class PreflightError(RuntimeError):
    """A job that could not be prepared or launched."""


@dataclasses.dataclass
class Job:
    """One training job shape: the model and method as the config names them."""

    model: str
    method: str
    trains_as: str  # the registry method train_job runs
    same_shape: list[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.model}/{self.method}"


def planned_jobs(config: dict, models: list[str] | None = None) -> list[Job]:
    """Every training job of the config, one per shape (method variants that size a step alike
    share one)."""
    from execrl.methods import trained_methods
    from execrl.training_settings import method_rows, registry_name, training_runtime, training_settings

    rows = method_rows(config)
    jobs: list[Job] = []
    seen: dict[tuple, Job] = {}
    for model in models or config["experiment"]["models"]:
        if model not in config["models"]:
            raise ValueError(f"--models: {model!r} is not under models: (known: {', '.join(config['models'])})")
        for method in trained_methods(config["experiment"]["methods"], rows):
            settings = training_settings(config, method, model)
            shape = {s: settings.get(s) for s in SHAPE_SECTIONS}
            key = (model, registry_name(config, method),
                   json.dumps({**shape, "runtime": training_runtime(config, method)}, sort_keys=True))
            if key in seen:
                seen[key].same_shape.append(method)
                continue
            seen[key] = Job(model, method, registry_name(config, method))
            jobs.append(seen[key])
    return jobs


def trains_on_cpu(config: dict, model: str) -> bool:
    """Models the workflow trains on the CPU (no memory plan): the tiny model and those below 0.1B."""
    from execrl.planning.resources import stage_resources

    spec = config["models"][model]
    return spec["source"] == "tiny" or stage_resources("train", spec["params_b"])["gpu"] == 0


# --- planning: the workflow's plan of each job ------------------------------------------------------------------


def planning_config(config: dict, job: Job, model_dir: Path, cpu: bool) -> dict:
    """The config the job is planned under. A model that trains on the CPU has no plan; in CPU mode
    it is planned as a local model of the size the plan handles (the plan reads its built
    config.json), its context window capping the planned sequence."""
    if not cpu:
        return config
    planned = copy.deepcopy(config)
    spec = planned["models"][job.model]
    spec.update(source=str(model_dir), params_b=max(spec["params_b"], 0.1))
    positions = json.loads((model_dir / "config.json").read_text()).get("max_position_embeddings")
    if positions and not planned["grpo"].get("vllm_max_model_length"):
        planned["grpo"]["vllm_max_model_length"] = positions
    return planned


def plan_of(config: dict, job: Job, model_dir: Path | None):
    """The job's `TrainingLayout` (`execrl.planning.memory_plan.training_job_layout`)."""
    from execrl.planning.memory_plan import training_job_layout

    return training_job_layout(config, job.model, job.method, model_dir)


def sequence_plan(config: dict, job: Job) -> dict:
    """Planned tokens of one sequence: GRPO's prompt and completion, DPO's max_length."""
    from execrl.planning.memory_plan import PROMPT_TOKENS
    from execrl.methods import METHODS
    from execrl.training_settings import method_section

    if METHODS[job.trains_as].online:
        grpo = method_section(config, job.method, "grpo")
        length = grpo["max_completion_length"] + PROMPT_TOKENS
        if grpo.get("vllm_max_model_length"):
            length = min(length, grpo["vllm_max_model_length"])
        return {"sequence_tokens": length, "prompt_tokens": max(length - grpo["max_completion_length"], 8)}
    dpo = method_section(config, job.method, "dpo")
    return {"sequence_tokens": dpo["max_length"], "prompt_tokens": dpo["max_length"] // 2}


# --- one job --------------------------------------------------------------------------------------------------


def job_settings(config: dict, job: Job, processes_run: int, processes_planned: int) -> dict:
    """train_job's `--settings` as the train rule builds them (seed 0), with GRPO_PROBE/DPO_PROBE,
    and the step's prompts cut to `processes_run` of `processes_planned` processes (each keeps its
    planned completions per step)."""
    from execrl.training_settings import method_rows, training_settings, with_training_runtime

    # as the train rule's options give them (the probes' save_steps then lie over them)
    settings = with_training_runtime(training_settings(config, job.method, model=job.model), config, job.method)
    if "grpo" in settings:
        settings["grpo"] = {**settings["grpo"], **GRPO_PROBE}
        if processes_run != processes_planned:
            prompts = settings["grpo"]["prompts_per_step"] * processes_run
            if prompts % processes_planned:
                raise PreflightError(f"{job.name}: grpo.prompts_per_step does not split over {processes_planned} processes")
            settings["grpo"]["prompts_per_step"] = prompts // processes_planned
    if "dpo" in settings:
        settings["dpo"] = {**settings["dpo"], **DPO_PROBE}
    if "srrl" in settings and settings["srrl"].get("budget") != "completions":
        settings["srrl"] = {**settings["srrl"], "budget": "completions"}  # no GRPO run to take a budget from
    first = method_rows(config)[job.method].settings[0]  # where the train rule puts the seed
    settings[first] = {**settings[first], "seed": 0}
    return settings


def launch_command(config: dict, planning: dict, job: Job, layout, processes: int, cpu: bool, model_dir: Path,
                   work: Path, probe_out: Path) -> tuple[list[str], int]:
    """The `accelerate launch ... -m execrl.planning.preflight_step` command of the job, as the train rule
    builds its own (accelerate config of the plan's ZeRO stage, dtype, offload, micro-batching),
    and the number of sequences one step trains on."""
    from execrl.planning.launch import accelerate_config_of_stage
    from execrl.methods import METHODS
    from execrl.training_settings import method_section

    settings = job_settings(config, job, processes, layout.processes)
    seq = sequence_plan(planning, job)
    per_word = tokens_per_word(model_dir)
    online = METHODS[job.trains_as].online
    if online:
        grpo = method_section(config, job.method, "grpo")
        prompts = settings["grpo"]["prompts_per_step"]
        data = write_problems(work / "problems.jsonl", max(prompts * 2, 8), int(seq["prompt_tokens"] / per_word))
        sequences = prompts * grpo["num_generations"]
    else:
        dpo = settings["dpo"]
        pairs = dpo["per_device_train_batch_size"] * dpo["gradient_accumulation_steps"] * processes
        data = write_pairs(work / "pairs.jsonl", pairs, int(seq["sequence_tokens"] / per_word) + 1)
        sequences = 2 * pairs
    eval_problems = write_problems(work / "eval.jsonl", 2, 16)
    accelerate = accelerate_config_of_stage("cpu" if cpu else "gpu", layout.zero_stage)
    options = [] if cpu else ["--mixed_precision", layout.plan.dtype]
    if layout.offload_optimizer:
        options += ["--offload_optimizer_device", "cpu"]
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate), *options,
        "--num_processes", str(processes), "--num_machines", "1", "--main_process_port", "0",
        "-m", "execrl.planning.preflight_step", "--probe-out", str(probe_out),
        job.trains_as, "--model", str(model_dir), "--settings", json.dumps(settings, sort_keys=True),
        "--data", str(data), "--eval-problems", str(eval_problems),
        "--micro-batch", str(layout.micro_batch), "--accumulation", str(layout.accumulation),
        "--output", str(work / "trained"), "--metrics", str(work / "metrics.jsonl"),
        "--checkpoint-root", str(work / "checkpoints"), "--run-name", job.name,
        "--sandbox-workers", "1", "--threads", str(max(1, (os.cpu_count() or 2) // max(processes, 1))),
    ]
    return command, sequences


def _phase_gb(probe: dict, name: str) -> float | None:
    """A phase's peak above the level it began at (GB), or None when the step had no such phase."""
    phase = probe.get("phases", {}).get(name)
    if not phase or "peak" not in phase:
        return None
    return max(phase["peak"]["allocated"] - phase["start"]["allocated"], 0) / GB


def compare(layout, probe: dict, capacity_gb: float, planned_generation_gb: float | None = None) -> dict:
    """Planned against measured GB per term, the planned steady-state peak against the measured
    one, the measured peak against `capacity_gb`, and the term that overran its plan most when the
    job does not fit.

    weights: allocated when training begins (Plan.resident); generation: the round's peak above
    its start, against `planned_generation_gb` (None: no generation, DPO); activations: the
    update's peak above its start (the reset after generation), against the terms a step makes
    and frees; optimizer_state: kept after the first step (Plan.after_first_step)."""
    plan = layout.plan
    terms = plan.terms
    groups = plan.measured_groups()
    base = probe["baseline"]["allocated"]
    begin = probe["train_begin"]["allocated"]
    after = probe["after_step"]["allocated"]
    peak = probe["peak"]["allocated"]
    measured = {
        "weights": (begin - base) / GB,
        "generation": _phase_gb(probe, "generation"),
        "activations": _phase_gb(probe, "update"),
        "optimizer_state": max(after - begin, 0) / GB,
    }
    planned = {name: sum(terms.get(t, 0.0) for t in groups[name]) for name in ("weights", "activations", "optimizer_state")}
    planned["generation"] = planned_generation_gb
    rows = []
    for name in MEASURED:
        if planned[name] is None and measured[name] is None:
            continue
        rows.append({"term": name, "plan_terms": list(groups.get(name, ("transformers_generation",))),
                     "planned_gb": planned[name], "measured_gb": measured[name],
                     "ratio": measured[name] / planned[name] if planned[name] and measured[name] is not None else None})
    optimizer_step = _phase_gb(probe, "optimizer")
    if optimizer_step is not None:  # the optimizer step's own temporaries: not a term of the plan
        rows.append({"term": "optimizer_step", "plan_terms": [], "planned_gb": None, "measured_gb": optimizer_step,
                     "ratio": None})
    unmeasured = {t: gb for t, gb in terms.items() if t in UNMEASURED_TERMS and gb}
    for term, gb in unmeasured.items():
        rows.append({"term": term, "plan_terms": [term], "planned_gb": gb, "measured_gb": None, "ratio": None})
    # What a later step holds at its peak: everything resident, the optimizer state, and the larger
    # of the round's generation and the update.
    planned_peak = planned["weights"] + planned["optimizer_state"] + max(planned["activations"], planned_generation_gb or 0.0)
    measured_peak = (peak - base) / GB
    # Above the process's baseline before the model loaded (on the CPU the resident set of the
    # imported libraries; on a GPU the allocator's nothing).
    reserved = (probe["peak"]["reserved"] - probe["baseline"]["reserved"]) / GB
    needed = reserved + sum(unmeasured.values())
    result = {
        "terms": rows,
        "planned_total_gb": plan.total_gb,
        "planned_peak_gb": planned_peak,
        "measured_peak_allocated_gb": measured_peak,
        "measured_peak_reserved_gb": reserved,
        "peak_ratio": measured_peak / planned_peak if planned_peak else None,
        "unmeasured_planned_gb": sum(unmeasured.values()),
        "capacity_gb": capacity_gb,
        "fits": needed <= capacity_gb,
    }
    if not result["fits"]:
        over = max((r for r in rows if r["measured_gb"] is not None and r["planned_gb"] is not None),
                   key=lambda r: (r["measured_gb"] - r["planned_gb"], r["measured_gb"]))
        result["term"] = over["term"]
        result["reason"] = (
            f"needs {needed:.3g} GB (peak reserved {reserved:.3g} GB"
            f"{f' + {sum(unmeasured.values()):.3g} GB planned, not measured' if unmeasured else ''}) of {capacity_gb:.3g} GB; "
            f"term {over['term']}: measured {over['measured_gb']:.3g} GB, planned {over['planned_gb']:.3g} GB"
        )
    return result


def planned_generation_gb(config: dict, planning: dict, job: Job, model_dir: Path, processes: int, dtype_bytes: int) -> float | None:
    """What the probe's generation round should take (Architecture.generation_bytes): each process's
    completions of a round at the planned prompt and completion lengths; None for offline methods."""
    from execrl.methods import METHODS
    from execrl.planning.architecture import architecture
    from execrl.training_settings import method_section

    if not METHODS[job.trains_as].online:
        return None
    grpo = method_section(config, job.method, "grpo")
    sequences = grpo["prompts_per_step"] // processes * grpo["num_generations"]
    seq = sequence_plan(planning, job)
    completion = seq["sequence_tokens"] - seq["prompt_tokens"]
    arch = architecture(str(model_dir), model_dir)
    phases = arch.generation_bytes(sequences, seq["prompt_tokens"], completion, dtype_bytes)
    return max(phases.values()) / GB


def run_job(config: dict, job: Job, cpu: bool, work: Path, configs_dir: Path | None, capacity_gb: float | None,
            gpus: int, timeout_s: float, logs: Path | None = None) -> dict:
    """Plan, build, launch and compare one job; its record for the table and the JSON. The launch
    is stopped (its whole process group) after `timeout_s`; the job's log is copied to `logs`."""
    deadline = time.perf_counter() + timeout_s
    from execrl.planning.training_plan import DoesNotFit

    record: dict = {"job": job.name, "method": job.method, "trains_as": job.trains_as, "model": job.model,
                    "same_shape_as": job.same_shape}
    model_dir = build_model(config, job.model, work / "models" / job.model, configs_dir)
    planning = planning_config(config, job, model_dir, cpu)
    try:
        layout = plan_of(planning, job, model_dir)
    except DoesNotFit as error:
        return {**record, "status": "does_not_fit", "term": "plan", "reason": f"the plan fits no node: {error}"}
    if layout is None:
        return {**record, "status": "skipped", "reason": "no memory plan (trains on the CPU)"}
    processes = layout.processes if cpu else min(layout.processes, gpus)
    record.update(
        planned={"processes": layout.processes, "zero_stage": layout.zero_stage, "micro_batch": layout.micro_batch,
                 "accumulation": layout.accumulation, "offload_optimizer": layout.offload_optimizer,
                 "dtype": layout.plan.dtype, "gpu": layout.node.gpu.name, "gpu_memory_gb": layout.plan.gpu_memory_gb,
                 "terms_gb": dict(layout.plan.terms), "describe": layout.describe(), **sequence_plan(planning, job)},
        processes_run=processes,
    )
    job_dir = work / "jobs" / job.name.replace("/", "__")
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True)
    probe_out = job_dir / "probe.json"
    command, sequences = launch_command(config, planning, job, layout, processes, cpu, model_dir, job_dir, probe_out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if not cpu:  # one process per visible GPU, as train_job checks (Slurm sets it for the train rule)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(gpus)]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:processes])
    started = time.perf_counter()
    log = job_dir / "job.log"
    with log.open("w") as handle:
        handle.write(shlex.join(command) + "\n")
        handle.flush()
        try:
            code = _run_in_group(command, handle, env, max(deadline - time.perf_counter(), 1.0))
        except subprocess.TimeoutExpired:
            code = "timeout"
    record["wall_seconds"] = time.perf_counter() - started
    record["log"] = str(log)
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
        record["log"] = str(shutil.copy(log, logs / f"{job.name.replace('/', '__')}.log"))
    if code != 0 or not probe_out.is_file():
        tail = log.read_text().splitlines()[-15:]
        oom = any("out of memory" in line.lower() for line in tail)
        return {**record, "status": "does_not_fit" if oom else "failed", "term": "activations" if oom else None,
                "reason": f"the step exited with {code}" + (" (out of memory)" if oom else ""), "log_tail": tail}
    probe = json.loads(probe_out.read_text())
    if capacity_gb is None:
        capacity_gb = _capacity_gb(cpu)
    dtype_bytes = 4 if cpu else 2  # the CPU steps in fp32, a GPU in bf16 or fp16
    generation_gb = planned_generation_gb(config, planning, job, model_dir, layout.processes, dtype_bytes)
    comparison = compare(layout, probe, capacity_gb, generation_gb)
    tokens = probe.get("step_tokens")
    record.update(
        measured={"device": probe["device"], "memory_source": probe["memory_source"], "step_seconds": probe["step_seconds"],
                  "generation_seconds": probe.get("generation_seconds", 0.0),
                  "update_seconds": probe.get("update_seconds", probe["step_seconds"]),
                  "step_tokens": tokens, "tokens_per_s": tokens / probe["step_seconds"] if tokens else None,
                  "sequences": sequences,
                  "raw_bytes": {k: probe[k] for k in ("baseline", "train_begin", "after_step", "peak", "load_peak") if k in probe},
                  "phases": probe.get("phases", {})},
        **comparison,
    )
    record["status"] = "fits" if comparison["fits"] else "does_not_fit"
    return record


def _run_in_group(command: list[str], log, env: dict, timeout_s: float) -> int:
    """The command's exit status; after `timeout_s` its whole process group is killed (accelerate's
    workers with it, so no process is left holding the GPU) and TimeoutExpired raised."""
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


def _capacity_gb(cpu: bool) -> float:
    """The device's memory: the visible GPU's total, or the host's (MemTotal) in CPU mode."""
    if not cpu:
        import torch

        return torch.cuda.get_device_properties(0).total_memory / GB
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / GB
    return float("inf")


# --- the table -------------------------------------------------------------------------------------------------


def _gb(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def table(report: dict) -> str:
    """Checks, then planned against measured per job and term, in plain text."""
    lines = [f"preflight on {report['device']} ({report['mode']} mode; memory: {report['memory_source']})", "", "checks:"]
    for check in report["checks"]:
        lines.append(f"  {check['status']:<5} {check['name']:<22} {check['detail']}")
    lines.append("")
    header = f"{'job':<36} {'term':<16} {'planned GB':>11} {'measured GB':>12} {'ratio':>6}"
    lines.append(header)
    lines.append("-" * len(header))
    for job in report["jobs"]:
        if "terms" not in job:
            lines.append(f"{job['job']:<36} {job['status']}: {job.get('reason', '')}")
            continue
        for row in job["terms"]:
            ratio = f"{row['ratio']:.2f}" if row.get("ratio") else "-"
            lines.append(f"{job['job']:<36} {row['term']:<16} {_gb(row['planned_gb']):>11} {_gb(row['measured_gb']):>12} {ratio:>6}")
        peak_ratio = f"{job['peak_ratio']:.2f}" if job.get("peak_ratio") else "-"
        lines.append(f"{job['job']:<36} {'peak':<16} {_gb(job.get('planned_peak_gb')):>11} "
                     f"{_gb(job['measured_peak_allocated_gb']):>12} {peak_ratio:>6}  (reserved "
                     f"{_gb(job['measured_peak_reserved_gb'])}; plan's total with unmeasured terms "
                     f"{_gb(job['planned_total_gb'])}; capacity {_gb(job['capacity_gb'])})")
        m, p = job["measured"], job["planned"]
        speed = f"{m['tokens_per_s']:.0f} tokens/s" if m["tokens_per_s"] else "tokens/s not logged"
        lines.append(f"{job['job']:<36} {job['status']}: {p['processes']} process(es) planned, {job['processes_run']} run, "
                     f"ZeRO {p['zero_stage']}, micro-batch {p['micro_batch']} x {p['accumulation']}, "
                     f"{p['sequence_tokens']} tokens; step {m['step_seconds']:.1f} s (generation "
                     f"{m.get('generation_seconds', 0.0):.1f} s, update {m.get('update_seconds', m['step_seconds']):.1f} s), {speed}")
    return "\n".join(lines)


# --- the command -----------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m execrl.planning.preflight", description=__doc__.split("\n")[0])
    parser.add_argument("--configfile", action="append", default=[], type=Path,
                        help="config files laid over config/config.yaml, as snakemake --configfile")
    parser.add_argument("--base", type=Path, default=None, help="the base config (default: config/config.yaml of the checkout)")
    parser.add_argument("--models", nargs="+", help="only these models (names under models:)")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="gpu: GPU jobs on this node's GPUs; cpu: jobs of models that train on the CPU; auto: gpu when CUDA is available")
    parser.add_argument("--output", type=Path, help="write the report as JSON here")
    parser.add_argument("--work", type=Path, help="folder for models, data and job logs (default: a temporary one, removed)")
    parser.add_argument("--model-configs", type=Path,
                        help="folder of carried config.json files, MODEL_SOURCE/config.json (offline nodes); else the hub's")
    parser.add_argument("--capacity-gb", type=float,
                        help="memory a job may use (default: the visible GPU's total; CPU mode: the host's)")
    parser.add_argument("--timeout-s", type=float, default=1800, help="limit of one job's step")
    parser.add_argument("--budget-s", type=float,
                        help="limit of all jobs together: each job gets an equal share of what is left (at most --timeout-s)")
    parser.add_argument("--logs", type=Path, help="copy each job's log here, as JOB.log (default: left in --work)")
    return parser


def run(config: dict, models: list[str] | None = None, device: str = "auto", work: Path | None = None,
        model_configs: Path | None = None, model_dirs: dict[str, Path] | None = None, capacity_gb: float | None = None,
        timeout_s: float = 1800, configfiles: list[str] = (), budget_s: float | None = None, logs: Path | None = None,
        on_job=None) -> dict:
    """The preflight of the merged workflow `config`'s training jobs (of `models`, default all):
    the report, whose `failures` list is empty when every check passes and every job fits.
    `model_dirs`: folders holding a hub model's config.json (the workflow's staged models);
    `model_configs`: a folder of carried ones (SOURCE/config.json); else the hub's."""
    import torch

    from execrl.planning.cluster import ClusterError, target_gpu

    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if not cpu and not torch.cuda.is_available():
        raise PreflightError("--device gpu: torch.cuda.is_available() is False")
    jobs = planned_jobs(config, models)
    gpu_jobs = [j for j in jobs if not trains_on_cpu(config, j.model)]
    planned_gpu = None
    if gpu_jobs and not cpu:
        try:
            planned_gpu = target_gpu(config, gpu_jobs[0].model)
        except ClusterError as error:
            raise PreflightError(str(error)) from None
    checks: list[Check] = environment_checks(gpu=not cpu, planned=planned_gpu)
    report = {
        "mode": "cpu" if cpu else "gpu",
        "device": "cpu" if cpu else torch.cuda.get_device_name(0),
        "memory_source": "process resident set (VmRSS/VmHWM)" if cpu else "torch.cuda allocator",
        "configfiles": [str(p) for p in configfiles],
        "checks": [c.as_dict() for c in checks],
        "jobs": [],
        "not_measured": "vLLM (each step samples with transformers' generate; colocated vLLM is counted as planned)",
    }
    work_root = Path(work) if work else Path(tempfile.mkdtemp(prefix="execrl-preflight-"))
    gpus = 0 if cpu else torch.cuda.device_count()
    started = time.perf_counter()
    try:
        for index, job in enumerate(jobs):
            if cpu != trains_on_cpu(config, job.model):
                reason = "GPU job: run the preflight on its GPU node" if cpu else "trains on the CPU: no GPU plan"
                report["jobs"].append({"job": job.name, "status": "skipped", "reason": reason})
                continue
            print(f"preflight: {job.name} ...", file=sys.stderr, flush=True)
            configs = model_configs
            if model_dirs and job.model in model_dirs:
                configs = Path(model_dirs[job.model])
            limit = timeout_s
            if budget_s is not None:  # an equal share of what is left among the jobs still to run
                left = budget_s - (time.perf_counter() - started)
                limit = min(timeout_s, left / (len(jobs) - index))
                if limit < MIN_JOB_SECONDS:
                    report["jobs"].append({"job": job.name, "status": "failed", "reason":
                                           f"--budget-s {budget_s:.0f} spent: {max(left, 0):.0f} s left"})
                    continue
            report["jobs"].append(run_job(config, job, cpu, work_root, configs, capacity_gb, gpus, limit, logs))
            if on_job is not None:
                on_job({**report, "failures": _failures(checks, report["jobs"]), "partial": True})
    finally:
        if not work:
            shutil.rmtree(work_root, ignore_errors=True)
    report["failures"] = _failures(checks, report["jobs"])
    return report


def _failures(checks: list[Check], jobs: list[dict]) -> list[str]:
    failures = [f"check {c.name}: {c.detail}" for c in checks if c.status == FAIL]
    for job in jobs:
        if job["status"] == "does_not_fit":
            failures.append(f"job {job['job']} does not fit: term {job.get('term')}: {job['reason']}")
        elif job["status"] == "failed":
            failures.append(f"job {job['job']} failed: {job['reason']} (log: {job.get('log')})")
    return failures


def write_json(report: dict, output: Path | None) -> None:
    """The report as JSON at `output`, replaced whole (a reader never sees half a file)."""
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        partial = Path(output).with_name(Path(output).name + ".part")
        partial.write_text(json.dumps(report, indent=2, sort_keys=True))
        partial.replace(output)


def write_report(report: dict, output: Path | None) -> None:
    """Print the table (stdout) and failures (stderr); write the JSON to `output`."""
    print(table(report), flush=True)
    write_json(report, output)
    for failure in report["failures"]:
        print(f"preflight: {failure}", file=sys.stderr, flush=True)


def preflight_model(config: dict, model: str, output: Path, model_dir: str | None = None) -> None:
    """The workflow's `preflight` rule: the jobs of `model` on this node, the report to `output`;
    raises PreflightFailed naming each failure (the rule fails, and training that depends on it waits)."""
    dirs = {model: Path(model_dir)} if model_dir else None
    report = run(config, [model], model_dirs=dirs)
    write_report(report, output)
    if report["failures"]:
        raise PreflightFailed("; ".join(report["failures"]))


class PreflightFailed(RuntimeError):
    """A check failed, or a job does not fit or failed."""


def preflight_gate(report_path: str | None) -> dict:
    """The record the train rule waits for (rule `preflight_gate`): with `preflight.required`, the
    model's preflight report, which must name no failure; without, a record saying none was
    required. The train rule reads it as `ancient`, so switching `preflight.required` reruns this
    record and the preflight, never a training job (the switch cannot change a result)."""
    if report_path is None:
        return {"required": False}
    report = json.loads(Path(report_path).read_text())
    if report.get("failures"):
        raise PreflightFailed(f"{report_path}: " + "; ".join(report["failures"]))
    return {"required": True, "report": str(report_path), "jobs": [job["job"] for job in report.get("jobs", [])]}



def main(argv: list[str] | None = None) -> None:
    from execrl.config import DEFAULT_CONFIG, REPO, load_config

    args = parser().parse_args(argv)
    try:
        config = load_config(args.configfile, base=args.base or (REPO / DEFAULT_CONFIG))
        report = run(config, args.models, args.device, args.work, args.model_configs, None, args.capacity_gb,
                     args.timeout_s, [str(p) for p in args.configfile], args.budget_s, args.logs,
                     on_job=lambda partial: write_json(partial, args.output))
    except (PreflightError, ValueError) as error:
        sys.exit(f"preflight: {error}")
    write_report(report, args.output)
    sys.exit(1 if report["failures"] else 0)


if __name__ == "__main__":
    main()
