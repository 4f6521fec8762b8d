"""Cluster execution through `--profile slurm`, planned and run on a real single-node Slurm.

The dry-run tests need no Slurm. The integration tests start one with tests/cluster/slurm.sh
(root and Debian's slurm packages, which .ci/run installs) and run the reduced embedded default
through snakemake-executor-plugin-slurm, with the model declared at 1B parameters so the GPU
rules ask for a GPU (the node has two fake ones; the tiny model still runs on CPU). While it
runs, one training job is cancelled (Snakemake retries it with a longer runtime) and one
generation job is requeued (as on preemption); afterwards Slurm's own job records say what each
job asked for, and the results are compared with a local run of the same config.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SNAKEMAKE, copy_workflow, run_snakemake
from execrl.resources import stage_resources
from test_workflow import REDUCED, deep_update

SLURM_SH = REPO / "tests" / "cluster" / "slurm.sh"
TEST_PROFILE = REPO / "tests" / "cluster" / "profile"
PARAMS_B = 1.0  # large enough for a GPU in every GPU stage; the tiny model itself is unchanged
GPU_RULES = {"generate_candidates": "generate", "sft_tiny_model": "train", "train_dpo": "train", "merge_adapter": "merge"}
CANCELLED_RULE = "sft_tiny_model"
REQUEUED_RULE = "generate_candidates"
RUN_TIMEOUT_S = 1200


def slurm_config(methods=("base",)) -> dict:
    overlay = {"experiment": {"methods": list(methods)}, "models": {"tiny": {"source": "tiny", "params_b": PARAMS_B}}}
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
    output = dry_run(dry_run_dir)
    assert "Using profile slurm for setting default command line arguments" in output
    plan = planned_resources(output)
    assert {"generate_candidates", "annotate_candidates", "render_report"} <= set(plan)
    for rule, jobs in plan.items():
        for resources in jobs:
            assert resources.get("gpu", "0") == "0", (rule, resources)


def test_profile_plans_gpus_from_model_size(dry_run_dir):
    output = dry_run(dry_run_dir, "--configfile", "config/mbpp.yaml")
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
    for resources in plan["annotate_candidates"]:
        assert int(resources["cpus_per_task"]) == stage_resources("execute", 3.1)["cpus_per_task"]


def test_set_resources_overrides_the_derived_values(dry_run_dir):
    output = dry_run(
        dry_run_dir, "--configfile", "config/mbpp.yaml",
        "--set-resources", "generate_candidates:gpu=4", "generate_candidates:slurm_partition=gpu-long",
    )
    for resources in planned_resources(output)["generate_candidates"]:
        assert resources["gpu"] == "4" and resources["slurm_partition"] == "gpu-long"


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


class Interventions(threading.Thread):
    """While the workflow runs: cancel the first CANCELLED_RULE job and requeue the first
    REQUEUED_RULE job, each once it has run a few seconds."""

    def __init__(self, workdir: Path, after_s: int = 5):
        super().__init__(daemon=True)
        self.workdir, self.after_s = str(workdir), after_s
        self.cancelled: str | None = None
        self.requeued: str | None = None
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set() and not (self.cancelled and self.requeued):
            out = subprocess.run(
                ["squeue", "-h", "-t", "RUNNING", "-o", "%i|%M|%k|%Z"], capture_output=True, text=True
            ).stdout
            for line in out.splitlines():
                job_id, used, comment, workdir = line.split("|")
                if workdir != self.workdir or elapsed_s(used) < self.after_s:
                    continue
                if not self.cancelled and comment.startswith(f"rule_{CANCELLED_RULE}"):
                    subprocess.run(["scancel", job_id], check=True)
                    self.cancelled = job_id
                elif not self.requeued and comment.startswith(f"rule_{REQUEUED_RULE}"):
                    subprocess.run(["scontrol", "requeue", job_id], check=True)
                    # Slurm holds a requeued job for two minutes; a test need not wait.
                    time.sleep(1)
                    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True)
                    self.requeued = job_id
            time.sleep(1)


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    workdir = slurm_workdir(tmp_path_factory.mktemp("slurm-run"), slurm_config())
    args = ["--profile", "slurm", "--profile", "slurm-test", "results/report.html", "--configfile", "config/test.yaml"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    plan = subprocess.run([SNAKEMAKE, *args, "-n"], cwd=workdir, capture_output=True, text=True, env=env, timeout=300)
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    interventions = Interventions(workdir)
    interventions.start()
    started = time.monotonic()
    run = subprocess.Popen(
        [SNAKEMAKE, *args], cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output, _ = run.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        run.kill()
        output, _ = run.communicate()
        for record in job_records(workdir):
            subprocess.run(["scancel", record["JobId"]], capture_output=True)
    finally:
        interventions.stop.set()
    wall_s = time.monotonic() - started
    if run.returncode != 0:
        log = Path("/var/lib/execrl-slurm/log/slurmctld.log")
        tail = "\n".join(log.read_text().splitlines()[-30:]) if log.exists() else ""
        pytest.fail(f"snakemake --profile slurm failed ({run.returncode}) after {wall_s:.0f} s:\n{output[-6000:]}\n{tail}")
    print(f"Slurm run: {wall_s:.0f} s")
    return {
        "workdir": workdir,
        "records": job_records(workdir),
        "planned": job_stats(plan.stdout),
        "output": output,
        "interventions": interventions,
    }


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("local-run"))
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(slurm_config()))
    run_snakemake(workdir, "--profile", "profiles/local", "results/report.html", "--configfile", "config/test.yaml")
    return workdir


@pytest.mark.slow
def test_gpu_jobs_get_their_devices(slurm_cluster, tmp_path):
    def visible_devices(*options):
        out = tmp_path / f"job{len(options)}.out"
        subprocess.run(
            ["sbatch", "--wait", "--quiet", "-o", str(out), *options, "--wrap", "echo \"[$CUDA_VISIBLE_DEVICES]\""],
            check=True, timeout=120,
        )
        return out.read_text().strip()

    assert visible_devices("-p", "gpu-local", "--gpus=1") == "[0]"
    assert visible_devices("-p", "gpu-local", "--gpus=2") == "[0,1]"
    assert visible_devices("-p", "cpu-local") == "[]"


@pytest.mark.slow
def test_every_job_runs_as_a_slurm_job(slurm_run):
    records = slurm_run["records"]
    completed = Counter(r["rule"] for r in records if r["JobState"] == "COMPLETED")
    assert completed == slurm_run["planned"], (completed, slurm_run["planned"])
    assert len({r["JobName"] for r in records}) == 1  # one Snakemake run, one run id
    logs = slurm_run["workdir"] / ".snakemake" / "slurm_logs"
    assert {f"{r['JobId']}.log" for r in records} <= {p.name for p in logs.rglob("*.log")}


@pytest.mark.slow
def test_gpu_rules_ask_for_gpus_and_cpu_rules_do_not(slurm_run):
    for record in slurm_run["records"]:
        rule = record["rule"]
        if rule in GPU_RULES:
            gpus = stage_resources(GPU_RULES[rule], PARAMS_B)["gpu"]
            assert gpus == 1 and record.get("TresPerJob") == f"gres:gpu:{gpus}", record
            assert record["Partition"] == "gpu-local", record
        else:
            assert "gpu" not in record.get("TresPerJob", ""), record
            assert record["Partition"] == "cpu-local", record
    expected = stage_resources("generate", PARAMS_B)
    for record in (r for r in slurm_run["records"] if r["rule"] == "generate_candidates"):
        assert int(record["NumCPUs"]) == expected["cpus_per_task"]
        assert record["MinMemoryNode"] == f"{expected['mem_mb']}M"
        assert minutes(record["TimeLimit"]) == expected["runtime"]
    for record in (r for r in slurm_run["records"] if r["rule"] == "annotate_candidates"):
        assert int(record["NumCPUs"]) == 4  # set-resources in tests/cluster/profile


@pytest.mark.slow
def test_cancelled_job_is_retried_with_a_longer_runtime(slurm_run):
    assert slurm_run["interventions"].cancelled, f"no running {CANCELLED_RULE} job was seen to cancel"
    attempts = [r for r in slurm_run["records"] if r["rule"] == CANCELLED_RULE]
    assert [r["JobState"] for r in attempts] == ["CANCELLED", "COMPLETED"]
    assert attempts[0]["JobId"] == slurm_run["interventions"].cancelled
    stage = GPU_RULES[CANCELLED_RULE]
    assert [minutes(r["TimeLimit"]) for r in attempts] == [
        stage_resources(stage, PARAMS_B, attempt)["runtime"] for attempt in (1, 2)
    ]


@pytest.mark.slow
def test_requeued_job_runs_again_and_completes(slurm_run):
    job_id = slurm_run["interventions"].requeued
    assert job_id, f"no running {REQUEUED_RULE} job was seen to requeue"
    record = next(r for r in slurm_run["records"] if r["JobId"] == job_id)
    assert record["Requeue"] == "1" and record["Restarts"] == "1" and record["JobState"] == "COMPLETED"


@pytest.mark.slow
def test_results_match_a_local_run(slurm_run, local_run):
    remote = slurm_run["workdir"] / "results"
    local = local_run / "results"
    for pattern in ("candidates/**/*.jsonl", "eval/**/*.json", "models/**/model.safetensors", "tables/*.tsv"):
        local_files = sorted(p.relative_to(local) for p in local.glob(pattern))
        assert local_files, pattern
        assert local_files == sorted(p.relative_to(remote) for p in remote.glob(pattern))
        for path in local_files:
            assert (local / path).read_bytes() == (remote / path).read_bytes(), path
    summary = [json.loads((root / "summary.json").read_text())["pass_at_k"] for root in (local, remote)]
    assert summary[0] == summary[1]
