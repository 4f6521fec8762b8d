"""Cluster execution through `--profile slurm`, planned and run on a real single-node Slurm.

The dry-run tests need no Slurm. The integration tests start one with tests/cluster/slurm.sh
(root and Debian's slurm packages, which .ci/run installs) and run the reduced embedded default
through snakemake-executor-plugin-slurm, with the model declared at 1B parameters so the GPU
rules ask for a GPU (the node has two fake ones; the tiny model still runs on CPU), while the
same config runs locally. One generation job is requeued while it runs, as preemption does.
Then DPO trains through Slurm in the same folder and is cancelled after its first checkpoint:
Snakemake retries it with a longer runtime and it resumes from that checkpoint. Slurm's own job
records say what each job asked for; the results are compared with the local run. The node's
GPUs have a type of the cluster's own naming (CLUSTER_GPU), which the GPU jobs request.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import EMBEDDED, REPO, SNAKEMAKE, copy_workflow, dpo_paths
from execrl.config import merged_config
from execrl.planning.resources import stage_resources
from test_workflow import REDUCED, deep_update

SLURM_SH = REPO / "tests" / "cluster" / "slurm.sh"
TEST_PROFILE = REPO / "tests" / "cluster" / "profile"
PARAMS_B = 1.0  # large enough for a GPU in every GPU stage; the tiny model itself is unchanged
# A GPU type named as one cluster names it (tests/cluster/slurm.sh declares the node's GPUs so),
# not in the schema's table: the config describes it.
CLUSTER_GPU = "a100_sxm4_80gb"
CLUSTER = {
    "partitions": str(TEST_PROFILE / "partitions.yaml"),
    "gpu_types": {CLUSTER_GPU: {"memory_gb": 80, "compute_capability": 8.0}},
}
# merge_adapter merges on the CPU: no GPU.
GPU_RULES = {"generate_candidates": "generate", "sft_tiny_model": "train", "train": "train"}
CANCELLED_RULE = "train"
REQUEUED_RULE = "generate_candidates"
LOCAL_RULES = {"prepare_dataset", "prepare_alternatives", "stage_model", "preflight_gate"}
RUN_TIMEOUT_S = 1200
N_PAIRS = 60
DPO = {"per_device_train_batch_size": 2, "num_train_epochs": 1, "save_steps": 3, "max_length": 128}


def job_env() -> dict:
    """The jobs' environment (sbatch passes it on): the training rule's `accelerate` is found beside
    the tests' interpreter, as in an activated environment."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PYTHONHASHSEED": "0", "PATH": path}


def slurm_config(methods=("base",)) -> dict:
    overlay = {
        "experiment": {"methods": list(methods)},
        "models": {"tiny": {"source": "tiny", "params_b": PARAMS_B, "gpu_model": CLUSTER_GPU}},
        "cluster": CLUSTER,
    }
    return deep_update(json.loads(json.dumps(REDUCED)), overlay)


def slurm_workdir(destination: Path, config: dict) -> Path:
    """A copy of the repository root as a user has it: workflow, configs, profiles, the `slurm` link."""
    copy_workflow(destination)
    (destination / "slurm").symlink_to("profiles/slurm")
    shutil.copytree(TEST_PROFILE, destination / "slurm-test")
    (destination / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    return destination


def planned_resources(output: str) -> dict[str, list[dict[str, str]]]:
    """Rule → the resources a dry run prints for each of its jobs."""
    plan: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"\n(?=\[[^\]]+\]\nrule )", output):
        rule = re.search(r"^rule (\w+):", block, re.MULTILINE)
        resources = re.search(r"^\s+resources: (.*)$", block, re.MULTILINE)
        if rule and resources:
            pairs = dict(item.split("=", 1) for item in resources.group(1).split(", ") if "=" in item)
            plan.setdefault(rule.group(1), []).append(pairs)
    return plan


def job_stats(output: str) -> Counter:
    table = output.split("Job stats:")[1].split("total")[0]
    return Counter({m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)})


# ---------------------------------------------------------------- dry runs (no Slurm needed)


@pytest.fixture(scope="module")
def dry_run_dir(tmp_path_factory):
    return slurm_workdir(tmp_path_factory.mktemp("slurm-dry"), slurm_config())


def dry_run(workdir: Path, *args: str) -> str:
    result = subprocess.run(
        [SNAKEMAKE, "--profile", "slurm", "-n", "results/report.html", *args],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def test_profile_plans_the_embedded_default_on_cpu(dry_run_dir):
    output = dry_run(dry_run_dir, "--configfile", EMBEDDED)
    assert "Using profile slurm for setting default command line arguments" in output
    plan = planned_resources(output)
    assert {"generate_candidates", "annotate_candidates", "render_report"} <= set(plan)
    for rule, jobs in plan.items():
        for resources in jobs:
            assert resources.get("gpu", "0") == "0", (rule, resources)


def test_profile_plans_gpus_from_model_size(dry_run_dir):
    output = dry_run(dry_run_dir)  # config/config.yaml: MBPP with Qwen2.5-3B-Instruct
    plan = planned_resources(output)
    expected = stage_resources("generate", 3.1)
    for resources in plan["generate_candidates"]:
        assert int(resources["gpu"]) == expected["gpu"] == 1
        assert int(resources["cpus_per_task"]) == expected["cpus_per_task"]
        assert int(resources["mem_mb"]) == expected["mem_mb"]
        assert int(resources["runtime"]) == expected["runtime"]
    for rule in ("annotate_candidates", "prepare_dataset", "evaluate_pass_at_k", "render_report"):
        for resources in plan[rule]:
            assert resources.get("gpu", "0") == "0", (rule, resources)
    # CPU stages get the CPUs their table gives, not the rule's single thread.
    for rule, stage in (("prepare_dataset", "data"), ("evaluate_pass_at_k", "data"), ("render_report", "report")):
        for resources in plan[rule]:
            assert int(resources["cpus_per_task"]) == stage_resources(stage, 0.0)["cpus_per_task"] == 2, rule
    workers = merged_config(base=dry_run_dir / "config" / "config.yaml")["execution"]["workers"]
    for resources in plan["annotate_candidates"]:  # one CPU per sandbox worker
        assert int(resources["cpus_per_task"]) == workers


def test_the_preflight_job_asks_for_what_the_largest_training_job_does(dry_run_dir, tmp_path):
    overlay = tmp_path / "preflight.yaml"
    overlay.write_text("preflight: {required: true}\n")
    output = dry_run(dry_run_dir, "--configfile", str(overlay))  # over config/config.yaml
    plan = planned_resources(output)
    (preflight,) = plan["preflight"]
    training = plan["train"]
    assert len(training) >= 2
    # Its host memory and CPUs are the training jobs' most (the 3B GRPO job's 44 GB, 32 CPUs), not
    # the profile's 8 GB default and the rule's 2 threads; one task for all GPUs, as training asks.
    assert int(preflight["mem_mb"]) == max(int(job["mem_mb"]) for job in training) > 8000
    assert int(preflight["cpus_per_task"]) == max(int(job["cpus_per_task"]) for job in training) > 2
    assert preflight["tasks_per_gpu"] == "0" and all(job["tasks_per_gpu"] == "0" for job in training)


def test_set_resources_overrides_the_derived_values(dry_run_dir):
    output = dry_run(
        dry_run_dir,
        "--set-resources", "generate_candidates:gpu=4", "generate_candidates:slurm_partition=gpu-long",
    )
    for resources in planned_resources(output)["generate_candidates"]:
        assert resources["gpu"] == "4" and resources["slurm_partition"] == "gpu-long"


def test_a_cluster_specific_gpu_type_plans_and_reaches_sbatch(tmp_path):
    """A GPU type of the cluster's own naming: the memory plan sizes the jobs for the GPU the
    config says it is, on the partition that lists it, and the Slurm plugin's own code picks that
    partition and asks for `--gpus=TYPE:N`."""
    from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    workdir = copy_workflow(tmp_path / "cluster")
    (workdir / "slurm").symlink_to("profiles/slurm")
    partitions = workdir / "profiles" / "slurm" / "partitions.yaml"
    partitions.write_text(yaml.safe_dump({"partitions": {
        "cpu": {"max_gpu": 0, "max_mem_mb": 256000, "max_cpus_per_task": 64},
        "a100": {"max_gpu": 4, "max_mem_mb": 512000, "max_cpus_per_task": 64, "available_gpu_models": [CLUSTER_GPU]},
        "h100": {"max_gpu": 8, "max_mem_mb": 2000000, "max_cpus_per_task": 112, "available_gpu_models": ["h100"]},
    }}))
    (workdir / "config" / "cluster.yaml").write_text(yaml.safe_dump({
        "models": {"qwen2.5-3b-instruct": {"gpu_model": CLUSTER_GPU}},
        "cluster": {"gpu_types": {**CLUSTER["gpu_types"], "h100": {"memory_gb": 80, "compute_capability": 9.0}}},
    }))
    output = dry_run(workdir, "--configfile", "config/cluster.yaml")
    assert re.search(rf"memory plan of qwen2.5-3b-instruct/grpo: .*\({CLUSTER_GPU}\); host memory \d+ of 512 GB, "
                     r"\d+ of 64 CPUs \(partition a100\)", output)
    plan = planned_resources(output)
    candidates = read_partition_file(partitions)
    logger = SimpleNamespace(info=print, debug=print, warning=print)
    for rule in ("generate_candidates", "train"):
        for resources in plan[rule]:
            assert resources["gpu_model"] == CLUSTER_GPU
            typed = {key: int(value) if value.isdigit() else value for key, value in resources.items()}
            job = SimpleNamespace(resources=FakeResources(typed), threads=1, name=rule)
            assert get_best_partition(candidates, job, logger) == "a100"
            call = get_submit_command(job, {"run_uuid": "r", "slurm_logfile": "l", "comment_str": "c", "account": "",
                                            "partition": " -p a100", "workdir": str(workdir)})
            assert f" --gpus={CLUSTER_GPU}:{resources['gpu']}" in call + set_gres_string(job)


class FakeResources(dict):
    """Job resources as the plugin reads them (`.get` and attributes), from a dry run's strings."""

    __getattr__ = dict.__getitem__


# ---------------------------------------------------------------- a real Slurm


def cluster_unavailable() -> str | None:
    """Why a Slurm cannot be started here, or None."""
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd needs root (tests/cluster/slurm.sh)"
    missing = [
        name for name in ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "munged")
        if not shutil.which(name) and not Path("/usr/sbin", name).exists()
    ]
    if missing:
        return (
            f"Slurm is not installed (no {', '.join(missing)}); "
            "apt-get install slurmctld slurmd slurm-client munge, as .ci/run does"
        )
    conf = Path("/etc/slurm/slurm.conf")
    if conf.exists() and "tests/cluster/slurm.sh" not in conf.read_text().splitlines()[0]:
        return "/etc/slurm/slurm.conf belongs to another Slurm installation; not replacing it"
    return None


@pytest.fixture(scope="module")
def slurm_cluster():
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    was_running = subprocess.run([SLURM_SH, "status"], capture_output=True).returncode == 0 and subprocess.run(
        ["sinfo", "-h", "-o", "%P"], capture_output=True, text=True
    ).stdout.strip() != ""
    started = subprocess.run([SLURM_SH, "start"], capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    yield
    if not was_running:
        subprocess.run([SLURM_SH, "stop"], capture_output=True, timeout=180)


def job_records(workdir: Path) -> list[dict[str, str]]:
    """Slurm's record of every job submitted from `workdir` (kept an hour after it ends)."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, check=True).stdout
    records = [dict(re.findall(r"(\S+?)=(\S*)", line)) for line in out.splitlines() if line.strip()]
    records = [r for r in records if r.get("WorkDir") == str(workdir)]
    for record in records:
        match = re.match(r"rule_(\w+?)(?:_wildcards_.*)?$", record.get("Comment", ""))
        record["rule"] = match.group(1) if match else ""
    return sorted(records, key=lambda r: int(r["JobId"]))


def minutes(time_limit: str) -> int:
    days, _, clock = time_limit.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


def elapsed_s(squeue_time: str) -> int:
    days, _, clock = squeue_time.rpartition("-")
    parts = [int(x) for x in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


class Intervention(threading.Thread):
    """While a workflow runs, do something to the first running job of a rule (from `workdir`)
    once `ready()` says so: cancel it (`scancel`, as a user would, or a failed node) or requeue
    it (`scontrol requeue`, as preemption does)."""

    def __init__(self, workdir: Path, rule: str, action: str, ready=lambda job_s: job_s >= 5):
        super().__init__(daemon=True)
        self.workdir, self.rule, self.action, self.ready = str(workdir), rule, action, ready
        self.job_id: str | None = None
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set() and not self.job_id:
            out = subprocess.run(
                ["squeue", "-h", "-t", "RUNNING", "-o", "%i|%M|%k|%Z"], capture_output=True, text=True
            ).stdout
            for line in out.splitlines():
                job_id, used, comment, workdir = line.split("|")
                if workdir != self.workdir or not comment.startswith(f"rule_{self.rule}_"):
                    continue
                if not self.ready(elapsed_s(used)):
                    continue
                if self.action == "cancel":
                    subprocess.run(["scancel", job_id], check=True)
                else:
                    subprocess.run(["scontrol", "requeue", job_id], check=True)
                    # Slurm holds a requeued job back for two minutes; a test need not wait.
                    time.sleep(1)
                    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True)
                self.job_id = job_id
                break
            time.sleep(0.5)


def run_through_slurm(workdir: Path, *args: str, intervention: Intervention | None = None, local=None):
    """`snakemake --profile slurm --profile slurm-test ARGS` in `workdir`: the planned job counts,
    the output and the wall time. `local`, a started local run, is waited for too."""
    command = [SNAKEMAKE, "--profile", "slurm", "--profile", "slurm-test", *args]
    env = job_env()
    plan = subprocess.run([*command, "-n"], cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    if intervention:
        intervention.start()
    started = time.monotonic()
    run = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = run.communicate(timeout=RUN_TIMEOUT_S)
        if local:
            local.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if intervention:
            intervention.stop.set()
        for process in (run, local):
            if process and process.poll() is None:
                process.kill()
                process.wait()
        if run.returncode is None or run.returncode < 0:
            for record in job_records(workdir):
                subprocess.run(["scancel", record["JobId"]], capture_output=True)
    wall_s = time.monotonic() - started
    if run.returncode != 0:
        log = Path("/var/lib/execrl-slurm/log/slurmctld.log")
        tail = "\n".join(log.read_text().splitlines()[-30:]) if log.exists() else ""
        pytest.fail(f"snakemake {' '.join(args)} through Slurm failed after {wall_s:.0f} s:\n{output[-6000:]}\n{tail}")
    return job_stats(plan.stdout), output, wall_s


def preference_pairs(n: int) -> str:
    """Pairs to train on: the reduced model's own candidates may give none."""
    return "".join(
        json.dumps({
            "problem_id": f"builtin/train/{i:04d}",
            "prompt": f"Write a function f(x) that returns x plus {i}.\nTest: assert f(1) == {i + 1}\n",
            "chosen": f"def f(x):\n    return x + {i}\n",
            "rejected": f"def f(x):\n    return x - {i}\n",
            "kind": "pass_vs_fail",
        }) + "\n"
        for i in range(n)
    )


def dpo_checkpoint_steps(workdir: Path) -> list[int]:
    """Steps of the complete DPO checkpoints (trainer_state.json is written last)."""
    root = workdir / dpo_paths(workdir, "config/test-dpo.yaml")["checkpoints"]
    return sorted(json.loads(p.read_text())["global_step"] for p in root.glob("*/checkpoint-*/trainer_state.json"))


@pytest.fixture(scope="module")
def runs(slurm_cluster, tmp_path_factory):
    """The reduced default run through Slurm and, meanwhile, locally; then DPO training through
    Slurm in the same folder, cancelled after its first checkpoint."""
    config = slurm_config()
    workdir = slurm_workdir(tmp_path_factory.mktemp("slurm-run"), config)
    local = copy_workflow(tmp_path_factory.mktemp("local-run"))
    (local / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    target = ["results/report.html", "--configfile", EMBEDDED, "config/test.yaml"]
    local_log = local / "snakemake.log"
    local_run = subprocess.Popen(
        [SNAKEMAKE, "--profile", "profiles/local", *target],
        cwd=local, env=job_env(), stdout=local_log.open("w"), stderr=subprocess.STDOUT,
    )
    requeue = Intervention(workdir, REQUEUED_RULE, "requeue")
    planned, output, wall_s = run_through_slurm(workdir, *target, intervention=requeue, local=local_run)
    assert local_run.returncode == 0, f"local run failed:\n{local_log.read_text()[-6000:]}"

    # DPO: the RL dataset through Slurm, pairs made by hand, then training, cancelled mid-run.
    dpo_config = deep_update(json.loads(json.dumps(config)), {"experiment": {"methods": ["base", "dpo"]}, "dpo": DPO})
    (workdir / "config" / "test-dpo.yaml").write_text(yaml.safe_dump(dpo_config))
    PAIRS, ADAPTER = (dpo_paths(workdir, "config/test-dpo.yaml")[key] for key in ("pairs", "trained"))
    planned_pairs, _, pairs_s = run_through_slurm(workdir, PAIRS, "--configfile", EMBEDDED, "config/test-dpo.yaml")
    (workdir / PAIRS).write_text(preference_pairs(N_PAIRS))
    steps_at_cancel: list[int] = []

    def first_checkpoint_saved(job_s):
        steps_at_cancel[:] = dpo_checkpoint_steps(workdir)
        return bool(steps_at_cancel)

    cancel = Intervention(workdir, CANCELLED_RULE, "cancel", ready=first_checkpoint_saved)
    planned_dpo, dpo_output, dpo_s = run_through_slurm(workdir, ADAPTER, "--configfile", EMBEDDED, "config/test-dpo.yaml", intervention=cancel)
    print(f"Slurm runs: report {wall_s:.0f} s, RL dataset {pairs_s:.0f} s, DPO {dpo_s:.0f} s")
    return {
        "workdir": workdir,
        "local": local,
        "records": job_records(workdir),
        "planned": planned + planned_pairs + planned_dpo,
        "output": output + dpo_output,
        "requeued": requeue.job_id,
        "cancelled": cancel.job_id,
        "steps_at_cancel": steps_at_cancel,
    }


@pytest.mark.slow
def test_gpu_jobs_get_their_devices(slurm_cluster, tmp_path):
    def visible_devices(*options):
        out = tmp_path / f"job-{'-'.join(options).replace('=', '')}.out"
        subprocess.run(
            ["sbatch", "--wait", "--quiet", "-o", str(out), *options, "--wrap", "echo \"[$CUDA_VISIBLE_DEVICES]\""],
            check=True, timeout=120,
        )
        return out.read_text().strip()

    assert visible_devices("-p", "gpu-local", "--gpus=1") == "[0]"
    assert visible_devices("-p", "gpu-local", "--gpus=2") == "[0,1]"
    assert visible_devices("-p", "cpu-local") == "[]"


@pytest.mark.slow
def test_every_job_runs_as_a_slurm_job(runs):
    records = runs["records"]
    completed = Counter(r["rule"] for r in records if r["JobState"] == "COMPLETED")
    # Staging rules run where Snakemake runs (they reach the hub); every other job goes to Slurm.
    expected = Counter({rule: n for rule, n in runs["planned"].items() if rule not in LOCAL_RULES})
    assert completed == expected, (completed, expected)
    assert {r["JobState"] for r in records} == {"COMPLETED", "CANCELLED"}
    logs = runs["workdir"] / ".snakemake" / "slurm_logs"
    assert {f"{r['JobId']}.log" for r in records} <= {p.name for p in logs.rglob("*.log")}


@pytest.mark.slow
def test_gpu_rules_ask_for_gpus_and_cpu_rules_do_not(runs):
    assert {"generate_candidates", "sft_tiny_model", "train"} <= {r["rule"] for r in runs["records"]}
    for record in runs["records"]:
        rule = record["rule"]
        if rule in GPU_RULES:
            gpus = stage_resources(GPU_RULES[rule], PARAMS_B)["gpu"]
            assert gpus == 1 and record.get("TresPerJob") == f"gres:gpu:{CLUSTER_GPU}:{gpus}", record
            assert record["Partition"] == "gpu-local", record
        else:
            assert "gpu" not in record.get("TresPerJob", ""), record
            assert record["Partition"] == "cpu-local", record
    expected = stage_resources("generate", PARAMS_B)
    for record in (r for r in runs["records"] if r["rule"] == "generate_candidates"):
        assert int(record["NumCPUs"]) == expected["cpus_per_task"]
        assert record["MinMemoryNode"] == f"{expected['mem_mb']}M"
        assert minutes(record["TimeLimit"]) == expected["runtime"]
    for record in (r for r in runs["records"] if r["rule"] == "annotate_candidates"):
        assert int(record["NumCPUs"]) == 4  # set-resources in tests/cluster/profile


@pytest.mark.slow
def test_requeued_job_runs_again_and_completes(runs):
    assert runs["requeued"], f"no running {REQUEUED_RULE} job was seen to requeue"
    record = next(r for r in runs["records"] if r["JobId"] == runs["requeued"])
    assert record["Requeue"] == "1" and record["Restarts"] == "1" and record["JobState"] == "COMPLETED"


@pytest.mark.slow
def test_cancelled_training_is_retried_with_a_longer_runtime(runs):
    assert runs["cancelled"], f"no running {CANCELLED_RULE} job was seen to cancel"
    attempts = [r for r in runs["records"] if r["rule"] == CANCELLED_RULE]
    assert [r["JobState"] for r in attempts] == ["CANCELLED", "COMPLETED"]
    assert attempts[0]["JobId"] == runs["cancelled"]
    stage = GPU_RULES[CANCELLED_RULE]
    assert [minutes(r["TimeLimit"]) for r in attempts] == [
        stage_resources(stage, PARAMS_B, attempt)["runtime"] for attempt in (1, 2)
    ]


@pytest.mark.slow
def test_cancelled_training_resumes_from_its_last_checkpoint(runs):
    workdir = runs["workdir"]
    saved = runs["steps_at_cancel"]
    assert saved, "the training job was cancelled before any checkpoint"
    paths = dpo_paths(workdir, "config/test-dpo.yaml")
    log = (workdir / paths["log"]).read_text()
    resumed = re.search(r"resuming from \S*checkpoint-(\d+)", log)
    assert resumed, log[-2000:]
    total_steps = N_PAIRS // DPO["per_device_train_batch_size"]
    assert max(saved) <= int(resumed.group(1)) < total_steps
    metrics = workdir / paths["metrics"]
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] == total_steps
    assert (workdir / paths["trained"] / "adapter_config.json").is_file()


@pytest.mark.slow
def test_results_match_a_local_run(runs):
    remote = runs["workdir"] / "results"
    local = runs["local"] / "results"
    for pattern in ("candidates/**/*.jsonl", "eval/**/*.json", "models/*/*/*/model.safetensors", "tables/pass_at_k.tsv"):
        local_files = sorted(p.relative_to(local) for p in local.glob(pattern))
        assert local_files, pattern
        for path in local_files:
            assert (local / path).read_bytes() == (remote / path).read_bytes(), path
    summary = [json.loads((root / "summary.json").read_text())["pass_at_k"] for root in (local, remote)]
    assert summary[0] == summary[1]
