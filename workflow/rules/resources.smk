# Cluster resources of every rule, sized by `execrl.planning.resources` from the job's model, and for
# training by its memory plan (`execrl.planning.memory_plan`), made here when the DAG is planned. Resources
# never change a result, so none of this reruns anything.
import json
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from execrl.planning.cluster import ClusterError, target_nodes
from execrl.methods import METHODS
from execrl.planning.architecture import UnknownShape
from execrl.planning.memory_plan import training_job_layout
from execrl.planning.training_plan import DoesNotFit
from execrl.planning.resources import (
    generation_rounds,
    measured_step,
    stage_resources,
    training_job_resources,
    training_wall_seconds,
)


def params_b_of(wildcards):
    return model_config(wildcards)["params_b"] if "model" in wildcards.keys() else 0.0


def gpu_model(wildcards):
    """The GPU type to request (Slurm's name for it), or nothing for any type and for models
    small enough to run on CPU."""
    if stage_resources("generate", params_b_of(wildcards))["gpu"] == 0:
        return ""
    return model_config(wildcards)["gpu_model"] or ""


@cache
def model_node(model):
    """The node a GPU job of `model` is sized for (execrl.planning.cluster): the first GPU partition of
    `cluster.partitions` it may run on, with the GPU its `gpu_model` names, or the smallest the
    partitions list. A GPU the pinned torch cannot run, or one the plan cannot know, stops the
    planning here, naming the key."""
    try:
        return target_nodes(config, model)[0]
    except ClusterError as error:
        raise WorkflowError(
            f"models.{model} ({config['models'][model]['source']}): {error}"
        ) from None


def resource(stage, key):
    """One resource of a stage, sized from the model in the job's wildcards (and the node its GPU
    jobs target) and the attempt."""

    def get(wildcards, attempt):
        params_b = params_b_of(wildcards)
        full_weight = "model" in wildcards.keys() and is_full_weight(wildcards)
        on_gpu = (
            stage in ("generate", "train")
            and stage_resources(stage, params_b)["gpu"] > 0
        )
        node = model_node(model_name(wildcards)) if on_gpu else None
        return stage_resources(stage, params_b, attempt, full_weight, node)[key]

    return get


def job_resources(stage):
    """Resources of every job of this stage (`resources: **job_resources(stage)`)."""
    if stage == "execute":  # one CPU per sandbox worker: the rules' `threads`
        return {
            "mem_mb": resource(stage, "mem_mb"),
            "runtime": resource(stage, "runtime"),
        }
    if stage in ("data", "report", "merge"):  # on the CPU
        return {
            "cpus_per_task": resource(stage, "cpus_per_task"),
            "mem_mb": resource(stage, "mem_mb"),
            "runtime": resource(stage, "runtime"),
        }
    return {
        "gpu": resource(stage, "gpu"),
        # One node: the plugin adds --nodes only when asked, and a job step's GPUs must share one.
        "nodes": 1,
        "tasks_per_gpu": resource(stage, "tasks_per_gpu"),
        "gpu_model": gpu_model,
        "cpus_per_task": resource(stage, "cpus_per_task"),
        "mem_mb": resource(stage, "mem_mb"),
        "runtime": resource(stage, "runtime"),
    }


def vllm_server_gpus(wildcards):
    """GPUs of a training job that serve vLLM instead of training (server mode only): the
    memory plan's tensor parallelism, at least `grpo.vllm_server_gpus`."""
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is not None:
        return layout.server_gpus
    grpo = config["grpo"]
    unplanned_gpu = stage_resources("train", params_b_of(wildcards))["gpu"] > 0
    server = grpo["use_vllm"] and grpo["vllm_mode"] == "server"
    online = method_row(wildcards).online
    return grpo["vllm_server_gpus"] if unplanned_gpu and server and online else 0


@cache
def training_layout(model, method):
    """The memory plan of `method`'s training job on `model` (None on CPU): GPUs, ZeRO stage,
    micro-batch x accumulation and offload. A job that fits no node stops the planning here.
    A hub model outside the shipped shapes has no plan until it is staged (its config.json):
    until then it is sized by `params_b` alone, and planning says so.
    """
    try:
        return training_job_layout(config, model, method, get_base_model_dir(model))
    except UnknownShape as error:
        print(f"no memory plan for {model}/{method}: {error}", file=sys.stderr)
        return None
    except (DoesNotFit, ClusterError, ValueError) as error:
        raise WorkflowError(
            f"models.{model} ({config['models'][model]['source']}), method {method}: {error}"
        ) from None


def get_base_model_dir(model):
    """Where the model's config.json is (a staged or local folder), for the memory plan."""
    if is_hub_model(model):
        return f"resources/models/{SEGMENTS.staged[model]}"
    return None if is_tiny_model(model) else config["models"][model]["source"]


@cache
def training_wall_estimate(model, method):
    """(seconds, how) of `method`'s training job on `model`, from the step its preflight measured
    (`results/preflight/{model}.json`, when it has run: GRPO's rounds and updates from grpo.max_steps);
    None without a measured step, or for DPO, whose steps are known only once its pairs are built.
    """
    preflight_report = Path(f"results/preflight/{model}.json")
    if not preflight_report.is_file():
        return None
    step = measured_step(json.loads(preflight_report.read_text()), f"{model}/{method}")
    if step is None or not METHODS[registry_name(config, method)].online:
        return None
    grpo = training_settings(config, method, model)["grpo"]
    rounds = generation_rounds(
        grpo["max_steps"],
        grpo["gradient_accumulation_steps"],
        grpo.get("steps_per_generation"),
        grpo["num_iterations"],
    )
    seconds = training_wall_seconds(
        grpo["max_steps"],
        step["update_seconds"],
        rounds,
        step["generation_seconds"],
    )
    how = (
        f"{grpo['max_steps']} updates x {step['update_seconds']:.1f} s + {rounds} rounds x "
        f"{step['generation_seconds']:.1f} s of generation, measured by {preflight_report}"
    )
    return seconds, how


def training_resources(key):
    """One resource of a training job, from its memory plan (CPU jobs: from the model's size);
    its runtime from the preflight's measured step when there is one."""

    def get(wildcards, attempt):
        model, method = model_name(wildcards), method_name(wildcards)
        layout = training_layout(model, method)
        online = method_row(wildcards).online
        workers = config["execution"]["workers"] if online else 0
        estimate = training_wall_estimate(model, method) if layout is not None else None
        return training_job_resources(
            layout,
            params_b_of(wildcards),
            attempt,
            sandbox_workers=workers,
            server_gpus=vllm_server_gpus(wildcards),
            wall_seconds=estimate[0] if estimate else None,
        )[key]

    return get


def sandbox_workers(wildcards):
    """Sandbox workers of each training process: `execution.workers`, fewer when the memory plan's
    node has too few CPUs for them (online methods on a GPU)."""
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is None or not method_row(wildcards).online:
        return config["execution"]["workers"]
    return layout.sandbox_workers


def print_training_plans():
    """Every training job's memory plan, on stderr when the DAG is planned (`snakemake -n`)."""
    for model in EXPERIMENT["models"]:
        for method in TRAINED:
            layout = training_layout(model, method)
            if layout is not None:
                print(
                    f"memory plan of {model}/{method}: {layout.describe()}",
                    file=sys.stderr,
                )
                estimate = training_wall_estimate(model, method)
                if estimate is not None:
                    print(
                        f"time plan of {model}/{method}: {estimate[0] / 3600:.1f} h "
                        f"({estimate[1]})",
                        file=sys.stderr,
                    )


print_training_plans()


def training_runtime_setting(key):
    """`save_steps` or `gradient_checkpointing` (as 0 or 1) of a train job's method
    (`execrl.training_settings.training_runtime`): how the job runs, not what it learns, so a
    resource (resources never rerun a job)."""

    def get(wildcards):
        return int(training_runtime(config, method_name(wildcards))[key])

    return get


def runtime_setting(section, key):
    """A setting that cannot change a result, handed to a shell job as a resource (resources
    never rerun a job, params do)."""

    def get(wildcards):
        return config[section][key]

    return get
