"""The GPU a model's jobs are planned for and the node they must fit (execrl.planning.cluster), from the
config's `cluster:` section and the Slurm executor's partition file, checked against what
snakemake-executor-plugin-slurm itself accepts."""

import copy
import json
import math
import re
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO
from execrl.planning.cluster import ClusterError, target_gpu, target_nodes
from execrl.planning.memory_plan import training_job_layout
from execrl.config import SCHEMA as SCHEMA_PATH, ConfigError, merged_config
from snakemake_executor_plugin_slurm.partitions import read_partition_file
from snakemake_executor_plugin_slurm.utils import set_gres_string
from snakemake_interface_common.exceptions import WorkflowError

SHIPPED_PARTITIONS = REPO / "profiles" / "slurm" / "partitions.yaml"
SCHEMA = json.loads(SCHEMA_PATH.read_text())
GPU_TYPES = SCHEMA["properties"]["cluster"]["properties"]["gpu_types"]


@pytest.fixture(scope="module")
def shipped():
    config = merged_config(base=REPO / "config" / "config.yaml")
    config["cluster"]["partitions"] = str(SHIPPED_PARTITIONS)
    return config


def with_cluster(config, tmp_path, partitions: dict, gpu_model=None, **gpu_types):
    config = copy.deepcopy(config)
    path = tmp_path / "partitions.yaml"
    path.write_text(yaml.safe_dump({"partitions": partitions}))
    config["cluster"]["partitions"] = str(path)
    config["cluster"]["gpu_types"].update(gpu_types)
    model = config["experiment"]["models"][0]
    config["models"][model]["gpu_model"] = gpu_model
    return config, model


def plugin_accepts(gpu_model: str) -> bool:
    job = SimpleNamespace(resources=SimpleNamespace(get={"gpu": 1, "gpu_model": gpu_model}.get))
    try:
        return f"--gpus={gpu_model}:1" in set_gres_string(job)
    except WorkflowError:
        return False


def test_the_plugin_accepts_every_gpu_type_the_schema_ships_and_nothing_the_schema_refuses():
    pattern = re.compile(GPU_TYPES["propertyNames"]["pattern"])
    model_pattern = SCHEMA["properties"]["models"]["additionalProperties"]["properties"]["gpu_model"]["pattern"]
    assert model_pattern == pattern.pattern
    for name in GPU_TYPES["default"]:
        assert pattern.match(name) and plugin_accepts(name), name
    # The names the schema documented before (A100-40, A100-80) are what the plugin refuses.
    for name in ("a100_80gb", "nvidia.h100", "A100", "A100-40", "a100-sxm4-80gb", "a100:2", "a 100"):
        assert bool(pattern.match(name)) is plugin_accepts(name), name


def test_a_gpu_model_the_plugin_would_refuse_is_a_config_error(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"models": {"qwen2.5-3b-instruct": {"gpu_model": "A100-40"}}}))
    with pytest.raises(ConfigError, match=r"^models\.qwen2\.5-3b-instruct\.gpu_model: 'A100-40' does not match"):
        merged_config([overlay], base=REPO / "config" / "config.yaml")


def test_the_shipped_partition_file_is_one_the_plugin_reads():
    partitions = {p.name: p.limits for p in read_partition_file(SHIPPED_PARTITIONS)}
    assert partitions["gpu"].available_gpu_models == ["a100_80gb", "h100"]
    assert partitions["gpu"].max_gpu == 8 and partitions["cpu"].max_gpu == 0


def test_untyped_gpus_are_planned_as_the_smallest_the_gpu_partitions_list(shipped, tmp_path):
    model = shipped["experiment"]["models"][0]
    assert shipped["models"][model]["gpu_model"] is None
    (node,) = target_nodes(shipped, model)
    # Both are sold as 80 GB; the H100's driver reports fewer bytes (81559 MiB against 81920).
    assert (node.partition, node.gpus, node.gpu.name, node.gpu.memory_gb, node.memory_gb, node.cpus) == (
        "gpu", 8, "h100", 80, 1000, 96
    )
    assert node.gpu.capacity_gb == pytest.approx(85.52, abs=0.01)
    mixed, model = with_cluster(shipped, tmp_path, {
        "big": {"max_gpu": 8, "available_gpu_models": ["h200"]},
        "small": {"max_gpu": 4, "max_mem_mb": 512000, "max_threads": 64, "max_cpus_per_task": 48,
                  "available_gpu_models": ["a100_40gb", "l40s"]},
        "cpu": {"max_gpu": 0},
    })
    assert target_gpu(mixed, model).name == "a100_40gb"  # Slurm may give any of them
    big, small = target_nodes(mixed, model)
    assert (big.memory_gb, big.cpus) == (math.inf, math.inf)
    assert (small.gpus, small.memory_gb, small.cpus) == (4, 512, 48)


def test_untyped_gpus_on_a_partition_that_lists_none_stop_the_planning(shipped, tmp_path):
    config, model = with_cluster(shipped, tmp_path, {"gpu": {"max_gpu": 8}})
    with pytest.raises(ClusterError) as refused:
        target_gpu(config, model)
    message = str(refused.value)
    assert f"models.{model}.gpu_model is null" in message and "list no available_gpu_models" in message
    # Naming the type plans for it, on a partition that lists none.
    config["models"][model]["gpu_model"] = "h200"
    assert target_gpu(config, model).memory_gb == 141


def test_a_cluster_specific_type_name_plans_once_described(shipped, tmp_path):
    partitions = {"gpu": {"max_gpu": 4, "available_gpu_models": ["a100_sxm4_80gb"]}}
    config, model = with_cluster(shipped, tmp_path, partitions, gpu_model="a100_sxm4_80gb")
    with pytest.raises(ClusterError, match=r"'a100_sxm4_80gb' not described under cluster.gpu_types"):
        target_gpu(config, model)
    config["cluster"]["gpu_types"]["a100_sxm4_80gb"] = {"memory_gb": 80, "compute_capability": 8.0}
    gpu = target_gpu(config, model)
    assert (gpu.memory_gb, gpu.dtype) == (80, "bf16")
    config["models"][model]["gpu_model"] = "h100"  # not in the only GPU partition's list
    with pytest.raises(ClusterError, match=rf"models.{re.escape(model)}.gpu_model: no GPU partition .* offers 'h100'"):
        target_gpu(config, model)


@pytest.mark.parametrize("typed", [True, False])
def test_gpus_the_cuda_13_torch_cannot_run_are_refused(shipped, tmp_path, typed):
    partitions = {"gpu": {"max_gpu": 8, "available_gpu_models": ["v100", "a100_80gb"]}}
    config, model = with_cluster(shipped, tmp_path, partitions, gpu_model="v100" if typed else None)
    with pytest.raises(ClusterError) as refused:
        target_gpu(config, model)
    message = str(refused.value)
    assert "v100 (compute capability 7, cluster.gpu_types.v100)" in message
    assert "CUDA 13" in message and "R580" in message and "compute capability 7.5 or newer" in message
    assert f"set models.{model}.gpu_model to a newer GPU type" in message
    # T4 (Turing, 7.5) still runs, in fp16.
    config["models"][model]["gpu_model"] = "t4"
    config["cluster"]["partitions"] = str(SHIPPED_PARTITIONS)
    with pytest.raises(ClusterError, match="offers 't4'"):  # the shipped GPU partition has none
        target_gpu(config, model)
    config, model = with_cluster(shipped, tmp_path, {"gpu": {"max_gpu": 4}}, gpu_model="t4")
    assert target_gpu(config, model).dtype == "fp16"


def test_a_gpu_type_that_changes_dpos_process_count_reruns_dpo(tmp_path):
    """DPO's batch is per process (TRL's meaning): where the memory plan picks the count from the GPU
    type (`training_processes: null`), 3B full-weight DPO takes 1 process on an 80 GB A100 and 2 on
    an L40S, twice the pairs a step. The count is a param of DPO's train job, so the new type reruns
    it; GRPO shares a round's prompts out across its processes and has no such param."""
    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    node = {"max_runtime": 2880, "max_mem_mb": 1000000, "max_cpus_per_task": 96, "max_gpu": 8,
            "available_gpu_models": ["a100_80gb", "l40s"]}
    (workdir / "partitions.yaml").write_text(yaml.safe_dump({"partitions": {"gpu": node}}))
    processes = {}
    for gpu in ("a100_80gb", "l40s"):
        overlay = {"cluster": {"partitions": "partitions.yaml"}, "models": {"qwen2.5-3b-instruct": {"gpu_model": gpu}},
                   "experiment": {"methods": ["base", "dpo", "grpo"], "seeds": [0]}}
        (workdir / "config" / f"{gpu}.yaml").write_text(yaml.safe_dump(overlay))
        jobs = planned_jobs_of(workdir, "config/config.yaml", f"config/{gpu}.yaml")
        trains = [job["params"] for job in jobs.values() if job["rule"] == "train"]
        processes[gpu] = {(p["method"], p["dpo_processes"]) for p in trains}
    assert {m for m, _ in processes["a100_80gb"]} >= {"dpo", "grpo"}
    assert processes == {"a100_80gb": {(m, 1 if m == "dpo" else None) for m, _ in processes["a100_80gb"]},
                         "l40s": {(m, 2 if m == "dpo" else None) for m, _ in processes["a100_80gb"]}}


def test_a_new_training_process_count_reruns_training_in_place(tmp_path):
    """`training_processes` places a job and stays out of every path (execrl.run_paths), but the
    memory plan it feeds reaches the train job's params: 2 or 4 processes give GRPO another
    micro-batch and DPO another process count, so the change reruns both where they are."""
    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    trains = {}
    for processes in (2, 4):
        overlay = {"models": {"qwen2.5-3b-instruct": {"training_processes": processes}},
                   "experiment": {"methods": ["base", "dpo", "grpo"], "seeds": [0]}}
        (workdir / "config" / f"p{processes}.yaml").write_text(yaml.safe_dump(overlay))
        jobs = planned_jobs_of(workdir, "config/config.yaml", f"config/p{processes}.yaml")
        trains[processes] = {path: job["params"] for path, job in jobs.items()
                             if job["rule"] == "train" and path.endswith("/trained")}
    assert trains[2].keys() == trains[4].keys() and len(trains[2]) == 2  # the same outputs
    for path, params in trains[2].items():
        other = trains[4][path]
        changed = {key for key in params if params[key] != other[key]}
        assert changed == ({"dpo_processes"} if params["method"] == "dpo" else {"micro_batching"}), (path, changed)


def test_before_its_shape_is_known_params_b_sets_dpos_process_count_and_reruns_it(tmp_path):
    """A hub model outside the shipped shapes, not yet staged, has no memory plan: `params_b` sizes
    its jobs (a GPU a process). DPO's count is then a param too, so a new size reruns DPO in place
    (its path does not move: `params_b` places jobs); GRPO has no such param."""
    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    trains = {}
    for params_b in (14.8, 32.8):
        overlay = {"models": {"coder": {"source": "example-org/coder", "params_b": params_b}},
                   "experiment": {"models": ["coder"], "methods": ["base", "dpo", "grpo"], "seeds": [0]}}
        (workdir / "config" / "unplanned.yaml").write_text(yaml.safe_dump(overlay))
        jobs = planned_jobs_of(workdir, "config/config.yaml", "config/unplanned.yaml")
        trains[params_b] = {path: job["params"]["dpo_processes"] for path, job in jobs.items()
                            if job["rule"] == "train" and path.endswith("/trained")}
    assert trains[14.8].keys() == trains[32.8].keys() and len(trains[14.8]) == 2
    for path in trains[14.8]:
        expected = {14.8: 2, 32.8: 4} if "/dpo-" in path else {14.8: None, 32.8: None}
        assert {size: trains[size][path] for size in trains} == expected, path


def test_the_vllm_servers_share_reaches_the_train_command_in_server_mode_only(tmp_path):
    """`grpo.vllm_server_gpu_memory_utilization` stays out of result paths (RUNTIME_SETTINGS) but, in
    server mode, is part of the train job's command: a change reruns training (vLLM's KV cache can
    change what it samples); in colocate mode no train job's params hold it."""
    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    servers = {}
    for mode, share in (("server", 0.8), ("server", 0.9), ("colocate", 0.8)):
        overlay = {"grpo": {"use_vllm": True, "vllm_mode": mode, "vllm_server_gpu_memory_utilization": share},
                   "experiment": {"methods": ["base", "grpo"], "seeds": [0]}}
        (workdir / "config" / "server.yaml").write_text(yaml.safe_dump(overlay))
        jobs = planned_jobs_of(workdir, "config/config.yaml", "config/server.yaml")
        trains = {job["params"]["vllm_server"] for job in jobs.values() if job["rule"] == "train"}
        assert len(trains) == 1, trains
        (servers[mode, share],) = trains
    assert "--gpu-memory-utilization 0.8" in servers["server", 0.8]
    assert "--gpu-memory-utilization 0.9" in servers["server", 0.9]
    assert servers["colocate", 0.8] == ""


def test_a_methods_own_context_window_reaches_its_vllm_server(tmp_path):
    """A method's `grpo.vllm_max_model_length` override sizes its memory plan's server and is the
    window its server is started with; the other method keeps the run's."""
    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    overlay = {"grpo": {"use_vllm": True, "vllm_mode": "server", "vllm_max_model_length": 8192},
               "method_overrides": {"srrl": {"grpo": {"vllm_max_model_length": 4096}}},
               "experiment": {"methods": ["base", "grpo", "srrl"], "seeds": [0]}}
    (workdir / "config" / "server.yaml").write_text(yaml.safe_dump(overlay))
    jobs = planned_jobs_of(workdir, "config/config.yaml", "config/server.yaml")
    servers = {job["params"]["method"]: job["params"]["vllm_server"] for job in jobs.values() if job["rule"] == "train"}
    assert "--max-model-len 8192" in servers["grpo"] and "--max-model-len 4096" in servers["srrl"], servers
    config = merged_config([workdir / "config" / "server.yaml"], base=workdir / "config" / "config.yaml")
    model = config["experiment"]["models"][0]
    assert training_job_layout(config, model, "srrl").server_max_model_len == 4096


@pytest.mark.parametrize("key", ["vllm_server_gpus", "vllm_server_gpu_memory_utilization", "vllm_server_timeout_s"])
def test_the_vllm_servers_setup_cannot_differ_between_methods(key, tmp_path):
    overlay = tmp_path / "override.yaml"
    value = {"vllm_server_gpus": 2, "vllm_server_gpu_memory_utilization": 0.8, "vllm_server_timeout_s": 100}[key]
    overlay.write_text(yaml.safe_dump({"method_overrides": {"grpo": {"grpo": {key: value}}}}))
    with pytest.raises(ConfigError, match=rf"method_overrides.grpo.grpo: {key} cannot differ between methods.*set grpo.{key}"):
        merged_config([overlay])

