# What reaches the rules through `params:`. Every value here can change a result, so a change
# reruns exactly the jobs that use it. Settings that cannot (logging, sandbox workers,
# parallelism) never appear here: script jobs read them from `config`, shell jobs from
# `resources` (resources.smk), and neither reruns anything.
import json
import os
import shlex

from execrl.config import left_out_of_report, shown_in_report, without_runtime_settings
from execrl.planning.launch import accelerate_config, accelerate_config_of_stage
from execrl.training_settings import backend_generation, training_settings

RESULT_CONFIG = without_runtime_settings(config)


def dataset_setting(key):
    """A params function returning one setting of the job's dataset."""

    def get(wildcards):
        return dataset_config(wildcards)[key]

    return get


def model_setting(key):
    """A params function returning one setting of the job's model."""

    def get(wildcards):
        return model_config(wildcards)[key]

    return get


def get_split_key(wildcards):
    """The dataset's key naming the split for the warmup/train/test role a path asks for (warmup:
    the train split unless `warmup_split` names another)."""
    if wildcards.split == "warmup" and not dataset_config(wildcards)["warmup_split"]:
        return "train_split"
    return f"{wildcards.split}_split"


def get_split_name(wildcards):
    """The dataset's own name for the warmup/train/test role a path asks for."""
    return dataset_config(wildcards)[get_split_key(wildcards)]


def get_prompt_settings(wildcards):
    """The prompt, with the model's reasoning format (some models are asked to reason first)."""
    return {
        **config["prompt"],
        "reasoning_format": model_config(wildcards)["reasoning_format"],
    }


def get_execution_limits(wildcards=None):
    """The sandbox limits that decide verdicts (its worker count does not)."""
    return RESULT_CONFIG["execution"]


def get_plus_test_settings(wildcards=None):
    return config["plus_tests"]


def get_generation_settings(wildcards):
    """The generation section as the job's method samples with it (a variant's sampling
    overrides applied), less what its backend ignores (`backend_generation`)."""
    settings = {
        k: v
        for k, v in backend_generation(config, method_name(wildcards)).items()
        if k not in ("backend", "vllm")
    }
    settings["seed"] = int(wildcards.seed)
    return settings


def get_vllm_settings(wildcards):
    """How vLLM loads the model, when it samples (other backends ignore these settings)."""
    if config["generation"]["backend"] != "vllm":
        return None
    return config["generation"]["vllm"]


# c2 samples per refinement prompt in the report's examples.
REFINEMENT_SAMPLES = 4


def get_refinement_generation_settings(wildcards):
    return {**get_generation_settings(wildcards), "num_samples": REFINEMENT_SAMPLES}


def get_tiny_model_settings(wildcards=None):
    return {
        k: v for k, v in config["tiny_model"].items() if k not in ("sft", "vocab_size")
    }


def get_refinement_prompt_settings(wildcards=None):
    """The SRRL settings that shape a refinement prompt: a change to SRRL's others (the c2
    share) leaves the tiny model's warm start and the base model's refinement samples alone.
    """
    used = ("feedback_tests", "refinement_template", "max_trace_chars")
    return {key: config["srrl"][key] for key in used}


def get_sft_refinement_settings(wildcards=None):
    """Refinement-prompt settings of the warm start's refinement examples (none when unused)."""
    if not config["tiny_model"]["sft"]["refinement_share"]:
        return None
    return get_refinement_prompt_settings()


def get_sft_code_game_settings(wildcards=None):
    """The code game's prompts, for the warm start's game examples (none when unused): its other
    settings (the opponent, the rewards) leave the warm start alone."""
    if not config["tiny_model"]["sft"]["code_game_share"]:
        return None
    used = ("program_template", "opponent_template")
    return {key: config["code_game"][key] for key in used}


def get_sft_game_settings(wildcards=None):
    """SPIRAL's game and how its turns are written, for the warm start's move examples (none when
    unused): the rest of SPIRAL's settings leave the warm start alone."""
    if not config["tiny_model"]["sft"]["game_examples"]:
        return None
    used = ("game", "answer_pattern", "answer_template", "observation")
    return {key: config["spiral"][key] for key in used}


def get_training_settings(wildcards):
    """Everything that decides what a method's training job learns, as one JSON object
    (`execrl.training_settings.training_settings`: its registry row's sections with the method's
    overrides, `lora` null when the model trains all its weights) and the seed. The job keys its
    checkpoints by this object, so a resumed job continues exactly when nothing here changed.
    """
    method = method_row(wildcards)
    settings = training_settings(config, method_name(wildcards), model_name(wildcards))
    settings[method.settings[0]] = {
        **settings[method.settings[0]],
        "seed": int(wildcards.seed),
    }
    return json.dumps(settings, sort_keys=True)


def get_token_budget_option(wildcards, input):
    """train_job's `--token-budget-from`, when the job's input has GRPO's metrics for a budget."""
    if not input.token_budget:
        return ""
    return f"--token-budget-from {input.token_budget}"


def get_eval_problems_option(wildcards, input):
    """train_job's `--eval-problems`, when the job's interval evaluation reads the test split."""
    if not input.eval_problems:
        return ""
    return f"--eval-problems {input.eval_problems}"


def get_model_sizes():
    return {name: config["models"][name]["params_b"] for name in EXPERIMENT["models"]}


def get_training_gpus():
    """GPUs of every training job by model and method (the memory plan's; 0 on CPU), for the
    report's cost section."""
    return {
        model: {
            method: (layout.gpus if (layout := training_layout(model, method)) else 0)
            for method in TRAINED
        }
        for model in EXPERIMENT["models"]
    }


def get_run_name(wildcards):
    return f"{wildcards.dataset}/{wildcards.model}/{wildcards.method}/{wildcards.seed}"


# This checkout's configs: the installed package may be another checkout's (a shared virtualenv).
ACCELERATE_CONFIGS = os.path.join(workflow.basedir, "accelerate")


def get_accelerate_config(wildcards):
    """DDP, ZeRO-3 or CPU processes: the memory plan's ZeRO stage on a GPU, the model's size on
    the CPU; never the process count."""
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is None:  # no plan: the built tiny model, or a model small enough for CPU
        params_b = model_config(wildcards)["params_b"]
        on_gpu = stage_resources("train", params_b)["gpu"] > 0
        path = accelerate_config(
            "gpu" if on_gpu else "cpu",
            params_b,
            full_weight=is_full_weight(wildcards),
            config_dir=ACCELERATE_CONFIGS,
        )
    else:
        path = accelerate_config_of_stage(
            "gpu", layout.zero_stage, config_dir=ACCELERATE_CONFIGS
        )
    # Relative, so that moving the checkout changes no params (and reruns nothing).
    return os.path.relpath(path)


def get_launch_options(wildcards):
    """`accelerate launch` options from the memory plan: the dtype `gpu_model` supports, and the
    optimizer offloaded to the host when the plan needs it."""
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is None:  # the accelerate config's own
        return ""
    options = ["--mixed_precision", layout.plan.dtype]
    if layout.offload_optimizer:
        options += ["--offload_optimizer_device", "cpu"]
    return shlex.join(options)


def get_micro_batching_options(wildcards):
    """train_job's micro-batch x accumulation from the memory plan (nothing on CPU: the settings')."""
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is None:
        return ""
    return f"--micro-batch {layout.micro_batch} --accumulation {layout.accumulation}"


def get_dpo_processes(wildcards):
    """The process count of a DPO job on GPUs, else None: the memory plan's, or before a hub
    model of unknown shape is staged, one a GPU `params_b` sizes. DPO's batch is per process
    (TRL's meaning), so the count changes what it trains on: where the plan chooses it
    (`training_processes: null`) from the cluster's GPU types, or `params_b` does, a new count
    reruns the job. GRPO shares each round's prompts out across its processes, so its count
    changes no result.
    """
    if method_row(wildcards).online:
        return None
    layout = training_layout(model_name(wildcards), method_name(wildcards))
    if layout is not None:
        return layout.processes
    if stage_resources("train", model_config(wildcards)["params_b"])["gpu"] == 0:
        return None  # one process on the CPU
    return training_resources("processes")(wildcards, 1)


def get_vllm_server_prefix(wildcards):
    """The command that serves vLLM beside a training job in server mode, or nothing: on the
    memory plan's GPUs (its tensor parallelism), with vLLM's context window, logging next to the
    job's log (`EXECRL_VLLM_SERVER_LOG`, set by the rule's shell)."""
    server_gpus = vllm_server_gpus(wildcards)
    if not server_gpus:
        return ""
    # The method's context window, as its memory plan sizes the server for it.
    grpo = method_section(config, method_name(wildcards), "grpo")
    command = [
        "python",
        "-m",
        "execrl.generation.vllm_server",
        "--model",
        get_base_model(wildcards),
        "--gpus",
        str(server_gpus),
        "--gpu-memory-utilization",
        str(grpo["vllm_server_gpu_memory_utilization"]),
    ]
    if grpo["vllm_max_model_length"]:
        command += ["--max-model-len", str(grpo["vllm_max_model_length"])]
    return shlex.join([*command, "--"]) + " "
