# Cluster resources of every rule, sized by `execrl.resources` from the job's model. Resources
# never change a result, so none of this reruns anything.
from execrl.resources import stage_resources


def params_b_of(wildcards):
    return model_config(wildcards)["params_b"] if "model" in wildcards.keys() else 0.0


def gpu_model(wildcards):
    """The GPU type to request, or nothing for models small enough to run on CPU."""
    if stage_resources("generate", params_b_of(wildcards))["gpu"] == 0:
        return ""
    return model_config(wildcards)["gpu_model"] or ""


def resource(stage, key):
    """One resource of a stage, sized from the model in the job's wildcards and the attempt."""

    def get(wildcards, attempt):
        full_weight = "model" in wildcards.keys() and is_full_weight(wildcards)
        return stage_resources(stage, params_b_of(wildcards), attempt, full_weight)[key]

    return get


def job_resources(stage):
    """Resources of every job of this stage (`resources: **job_resources(stage)`)."""
    if stage in ("data", "report", "execute"):
        return {
            "mem_mb": resource(stage, "mem_mb"),
            "runtime": resource(stage, "runtime"),
        }
    return {
        "gpu": resource(stage, "gpu"),
        "tasks_per_gpu": resource(stage, "tasks_per_gpu"),
        "gpu_model": gpu_model,
        "cpus_per_task": resource(stage, "cpus_per_task"),
        "mem_mb": resource(stage, "mem_mb"),
        "runtime": resource(stage, "runtime"),
    }


def vllm_server_gpus(wildcards):
    """GPUs of a training job that serve vLLM instead of training (server mode only)."""
    grpo = config["grpo"]
    online = method_row(wildcards).online
    return (
        grpo["vllm_server_gpus"]
        if online and grpo["use_vllm"] and grpo["vllm_mode"] == "server"
        else 0
    )


def training_gpus(wildcards, attempt):
    """The job's GPUs: the trainer's, of which `vllm_server_gpus` serve vLLM (at least one left)."""
    derived = resource("train", "gpu")(wildcards, attempt)
    server = vllm_server_gpus(wildcards)
    return max(derived, server + 1) if server else derived


def training_processes(wildcards, attempt):
    """Training processes: one per GPU not serving vLLM, one on CPU. Override it together with
    `gpu` (`--set-resources train:gpu=8 train:processes=7`); the job checks they agree.
    """
    return max(1, training_gpus(wildcards, attempt) - vllm_server_gpus(wildcards))


def training_cpus(wildcards, attempt):
    """The trainer's CPUs plus, for online methods, one per sandbox worker of every process."""
    cpus = resource("train", "cpus_per_task")(wildcards, attempt)
    if method_row(wildcards).online:
        processes = training_processes(wildcards, attempt)
        cpus += config["execution"]["workers"] * processes
    return cpus


def runtime_setting(section, key):
    """A setting that cannot change a result, handed to a shell job as a resource (resources
    never rerun a job, params do)."""

    def get(wildcards):
        return config[section][key]

    return get
