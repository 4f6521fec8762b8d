"""Job sizes from the model's size, and the sbatch options snakemake-executor-plugin-slurm makes of them."""

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from execrl.planning.resources import (
    CPU_STAGES,
    GPU_STAGES,
    MAX_GPUS,
    MAX_RUNTIME_MINUTES,
    gpus_for,
    stage_resources,
)
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string
from snakemake_executor_plugin_slurm_jobstep import get_gpu_setting

KEYS = {"gpu", "tasks_per_gpu", "cpus_per_task", "mem_mb", "runtime"}
sizes = st.floats(min_value=0, max_value=1000, allow_nan=False)
attempts = st.integers(min_value=1, max_value=5)


@pytest.mark.parametrize(
    "stage, params_b, gpus",
    [
        ("generate", 0.003, 0),  # the embedded tiny model: CPU
        ("train", 0.099, 0),
        ("generate", 1.0, 1),
        ("generate", 3.1, 1),  # config/mbpp.yaml
        ("train", 7.6, 1),  # config/taco.yaml: 45.6 GB of LoRA training fits one 80 GB GPU
        ("train", 14, 2),  # 84 GB
        ("generate", 70, 4),  # 175 GB of weights and cache → 3 → a power of two
        ("train", 70, 8),  # 420 GB
        ("train", 400, MAX_GPUS),  # more than one node holds: capped, override by hand
    ],
)
def test_gpus_follow_model_size(stage, params_b, gpus):
    assert stage_resources(stage, params_b)["gpu"] == gpus_for(stage, params_b) == gpus


@given(stage=st.sampled_from(CPU_STAGES), params_b=sizes, attempt=attempts)
def test_cpu_stages_never_ask_for_a_gpu(stage, params_b, attempt):
    resources = stage_resources(stage, params_b, attempt)
    assert set(resources) == KEYS and resources["gpu"] == 0
    assert resources == stage_resources(stage, 0.0, attempt)  # the model's size does not matter


def test_execution_gets_more_cpus_and_memory_than_bookkeeping():
    execute, data = stage_resources("execute", 7.6), stage_resources("data", 7.6)
    assert execute["cpus_per_task"] >= 4 * data["cpus_per_task"]
    assert execute["mem_mb"] > data["mem_mb"]


@given(stage=st.sampled_from(GPU_STAGES), params_b=sizes, attempt=attempts)
def test_gpu_stage_resources_are_consistent(stage, params_b, attempt):
    resources = stage_resources(stage, params_b, attempt)
    assert set(resources) == KEYS and all(isinstance(v, int) and v >= 0 for v in resources.values())
    gpus = resources["gpu"]
    assert gpus == 0 or (gpus & (gpus - 1) == 0 and gpus <= MAX_GPUS)  # 0 or a power of two
    if gpus:
        assert resources["cpus_per_task"] == 8 * gpus
        assert resources["mem_mb"] >= 32_000
    assert 0 < resources["runtime"] <= MAX_RUNTIME_MINUTES


@given(stage=st.sampled_from(GPU_STAGES), small=sizes, extra=sizes)
def test_bigger_models_never_get_less(stage, small, extra):
    a, b = stage_resources(stage, small), stage_resources(stage, small + extra)
    assert all(b[key] >= a[key] for key in ("gpu", "mem_mb", "runtime"))


@pytest.mark.parametrize("stage", GPU_STAGES + CPU_STAGES)
@pytest.mark.parametrize("params_b", [0.003, 3.1, 70])
def test_runtime_grows_with_attempt_up_to_the_cap(stage, params_b):
    runtimes = [stage_resources(stage, params_b, attempt)["runtime"] for attempt in (1, 2, 3)]
    for earlier, later in zip(runtimes, runtimes[1:]):
        assert later > earlier or later == MAX_RUNTIME_MINUTES
    assert runtimes[1] == min(2 * runtimes[0], MAX_RUNTIME_MINUTES)


def test_training_takes_longer_than_generation_and_merging():
    train, generate, merge = (stage_resources(s, 7.6)["runtime"] for s in ("train", "generate", "merge"))
    assert train > generate > merge


@pytest.mark.parametrize("args", [("evaluate", 1.0), ("train", -1.0), ("train", 1.0, 0)])
def test_rejects_what_it_cannot_size(args):
    with pytest.raises(ValueError):
        stage_resources(*args)


# ---------------------------------------------------------------- what the Slurm plugin makes of them


class FakeResources(dict):
    __getattr__ = dict.__getitem__


def sbatch_options(resources: dict, threads: int = 2, **extra) -> str:
    """The sbatch command snakemake-executor-plugin-slurm 2.8 builds for a job with these resources."""
    job = SimpleNamespace(resources=FakeResources({**resources, **extra}), threads=threads, name="rule")
    params = {
        "run_uuid": "run",
        "slurm_logfile": "log",
        "comment_str": "rule_x",
        "account": "",
        "partition": "",
        "workdir": "/w",
    }
    return get_submit_command(job, params) + set_gres_string(job)


def test_gpu_job_becomes_sbatch_gpu_request():
    resources = stage_resources("train", 14, attempt=2)
    call = sbatch_options(resources)
    assert f"--gpus={resources['gpu']}" in call
    assert f"--cpus-per-task={resources['cpus_per_task']}" in call
    assert f"--mem {resources['mem_mb']}" in call
    assert f"-t {resources['runtime']}" in call
    assert "--ntasks" not in call  # the plugin leaves task geometry of GPU jobs to Slurm
    # ...and the step inside the allocation asks for the same GPUs
    job = SimpleNamespace(resources=FakeResources(resources))
    assert get_gpu_setting(job) == f"--gpus={resources['gpu']}"


def test_gpu_model_is_added_to_the_gpu_request():
    call = sbatch_options(stage_resources("generate", 3.1), gpu_model="h100")
    assert "--gpus=h100:1" in call


@pytest.mark.parametrize("stage", CPU_STAGES)
def test_cpu_job_becomes_sbatch_without_gpus(stage):
    resources = stage_resources(stage, 70)
    call = sbatch_options(resources)
    assert "--gpus" not in call and "--gres" not in call
    assert "--ntasks=1" in call and f"--cpus-per-task={resources['cpus_per_task']}" in call
    job = SimpleNamespace(resources=FakeResources(resources))
    assert get_gpu_setting(job) == ""


def test_small_model_gpu_stage_runs_on_cpu():
    call = sbatch_options(stage_resources("generate", 0.003), gpu_model="")
    assert "--gpus" not in call


@pytest.mark.parametrize(
    "params_b, lora_gpus, full_gpus",
    [
        (0.05, 0, 0),  # CPU either way
        (1.5, 1, 1),  # 27 GB of full-weight training
        (7.6, 1, 2),  # 137 GB: two GPUs under ZeRO-3
        (14, 2, 4),  # seed 004's 14B
        (32, 4, 8),  # seed 004's 32B: 576 GB
    ],
)
def test_full_weight_training_asks_for_its_optimizer_state(params_b, lora_gpus, full_gpus):
    assert stage_resources("train", params_b)["gpu"] == lora_gpus
    assert stage_resources("train", params_b, full_weight=True)["gpu"] == full_gpus
    # Only training keeps optimizer state: generation and merging are sized as before.
    for stage in ("generate", "merge"):
        assert stage_resources(stage, params_b, full_weight=True) == stage_resources(stage, params_b)


@given(params_b=sizes, attempt=attempts)
def test_full_weight_never_gets_less_than_lora(params_b, attempt):
    lora, full = stage_resources("train", params_b, attempt), stage_resources("train", params_b, attempt, full_weight=True)
    assert all(full[key] >= lora[key] for key in KEYS)


def test_training_without_a_plan_keeps_the_servers_gpus_and_one_process_per_other_gpu():
    from execrl.planning.resources import training_job_resources

    cpu = training_job_resources(None, 0.003, sandbox_workers=4)
    assert (cpu["gpu"], cpu["processes"], cpu["nodes"]) == (0, 1, 1) and cpu["cpus_per_task"] == 2 + 4
    unplanned = training_job_resources(None, 3.0, sandbox_workers=4, server_gpus=1)
    assert (unplanned["gpu"], unplanned["processes"]) == (2, 1) and unplanned["cpus_per_task"] == 16 + 4
    assert unplanned["mem_mb"] == 44_000  # 16 GB for each of the 2 GPUs + 4 GB x 3B


def test_training_resources_follow_the_memory_plan():
    from execrl.planning.architecture import architecture
    from execrl.planning.memory_plan import plan_training_layout
    from execrl.planning.training_plan import TrainingJob
    from execrl.planning.resources import training_job_resources

    arch = architecture("Qwen/Qwen2.5-32B-Instruct")
    layout = plan_training_layout(arch, TrainingJob(finetune="full"), lambda n: 8 * n, processes=7, server_gpus=1,
                                  server_max_model_len=8192, params_b=32.8, sandbox_workers=8)
    resources = training_job_resources(layout, 32.8, sandbox_workers=8)
    assert (resources["gpu"], resources["processes"], resources["nodes"]) == (8, 7, 1)
    assert resources["cpus_per_task"] == 8 * 8 + 8 * 7  # the server's GPU counted too
    assert resources["mem_mb"] == pytest.approx((16 * 8 + 4 * 32.8 + layout.plan.host_gb) * 1000, abs=1)
    assert layout.offload_optimizer and layout.plan.host_gb > 500  # offloaded state is host memory


def test_gpu_jobs_are_sized_for_the_nodes_gpu_and_capped_at_its_cpus():
    from execrl.planning.cluster import Gpu, Node

    forty = Node(gpus=4, gpu=Gpu("a100_40gb", 40, 8.0), cpus=24)
    # 20B generation: 50 GB of weights and cache, one 80 GB GPU or two 40 GB ones.
    assert stage_resources("generate", 20)["gpu"] == 1
    on_forty = stage_resources("generate", 20, node=forty)
    assert on_forty["gpu"] == 2 and on_forty["cpus_per_task"] == 16
    # 70B: 175 GB, 8 of 40 GB wanted, the node has 4; its 24 CPUs cap the 8 per GPU.
    assert stage_resources("generate", 70, node=forty)["gpu"] == 4
    assert stage_resources("generate", 70, node=forty)["cpus_per_task"] == 24
    assert stage_resources("data", 70, node=forty) == stage_resources("data", 70)


def test_gpu_job_cpus_give_the_node_what_it_has_down_to_the_least():
    from execrl.planning.resources import gpu_job_cpus, least_gpu_job_cpus

    assert gpu_job_cpus(8, 7, 8) == (120, 8)  # 8 per GPU and 8 sandbox workers per process
    assert gpu_job_cpus(8, 7, 8, node_cpus=96) == (96, 8)
    assert gpu_job_cpus(8, 7, 8, node_cpus=30) == (30, 2)
    assert least_gpu_job_cpus(8, 7, 8) == 23 and gpu_job_cpus(8, 7, 8, node_cpus=22) is None
    assert gpu_job_cpus(1, 1, 0, node_cpus=4) == (4, 0)  # DPO: no sandbox workers while training


def test_a_training_jobs_wall_time_comes_from_its_measured_step():
    from execrl.planning.resources import (
        MAX_RUNTIME_MINUTES,
        generation_rounds,
        measured_runtime_minutes,
        measured_step,
        training_job_resources,
        training_wall_seconds,
    )

    # config/config.yaml's GRPO: 800 updates, 8 per round (steps_per_generation 8, no accumulation): 100 rounds.
    assert generation_rounds(800, 1, 8, 1) == 100
    assert generation_rounds(800, 1, None, 1) == 800  # TRL's default: one round per update
    assert generation_rounds(800, 2, 8, 2) == 100  # 4 updates a pass, 2 passes
    assert generation_rounds(801, 1, 8, 1) == 101
    seconds = training_wall_seconds(800, update_seconds=2.0, rounds=100, generation_seconds=100.0)
    assert seconds == 800 * 2.0 + 100 * 100.0
    with pytest.raises(ValueError):
        training_wall_seconds(-1, 1.0)
    # 11,600 s with a margin of 1.5 and 30 minutes for loading, evaluations and saving; longer each attempt.
    assert measured_runtime_minutes(seconds) == 290 + 30
    assert measured_runtime_minutes(seconds, attempt=2) == 2 * 320
    assert measured_runtime_minutes(10**9) == MAX_RUNTIME_MINUTES
    report = {"jobs": [
        {"job": "m/srrl", "model": "m", "same_shape_as": ["srrl_separate"], "status": "fits",
         "measured": {"step_seconds": 12.0, "generation_seconds": 9.0, "update_seconds": 3.0}},
        {"job": "m/dpo", "model": "m", "same_shape_as": [], "status": "failed"},
    ]}
    assert measured_step(report, "m/srrl_separate") == {"generation_seconds": 9.0, "update_seconds": 3.0}
    assert measured_step(report, "m/dpo") is None  # not measured: the size-based guess stays
    assert measured_step(report, "other/srrl") is None
    # The measured runtime replaces the size-based one; nothing else changes.
    guessed = training_job_resources(None, 3.1)
    measured = training_job_resources(None, 3.1, wall_seconds=seconds)
    assert measured["runtime"] == 320 != guessed["runtime"]
    assert {k: v for k, v in measured.items() if k != "runtime"} == {k: v for k, v in guessed.items() if k != "runtime"}
