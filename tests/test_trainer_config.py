"""`python -m execrl.training.train_job ... --print-trainer-config`: the TRL config, PEFT config and launch
layout of every training job a shipped config plans, read from the dry run's own command lines,
and each seed's values against the table below (no model loads, nothing trains)."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EMBEDDED, SNAKEMAKE, copy_workflow
from execrl.training import train_job

# Every shipped config: (profile, config files over config/config.yaml or the embedded default).
SHIPPED = {
    "config.yaml": ("slurm", []),
    "mbpp-taco-dpo-grpo.yaml": ("slurm", ["config/mbpp-taco-dpo-grpo.yaml"]),
    "scaling-binary-bonus.yaml": ("slurm", ["config/scaling-binary-bonus.yaml"]),
    "seed-002-self-play.yaml": ("slurm", ["config/seed-002-self-play.yaml"]),
    "embedded default": ("profiles/local", [EMBEDDED]),
}

# Seed 000 (config/config.yaml) against tiny-grpo's step: the README's table ("Seed 000's GRPO in
# TRL's terms"), field by field in GRPOConfig's names.
SEED_000_TINY_GRPO = {
    "num_generations": 8,  # group_size
    "generation_batch_size": 128,  # rollouts_per_step 16 x group_size 8: one round
    "beta": 0.01,  # kl_weight
    "epsilon": 0.2,  # clip_eps
    "loss_type": "grpo",  # masked_mean(loss, mask, dim=-1).mean(): per sequence, then over sequences
    "scale_rewards": "group",  # group_advantages
    "max_grad_norm": 1.0,  # max_norm
    "num_iterations": 1,  # epochs_per_step
    "learning_rate": 1e-5,
    "lr_scheduler_type": "constant",
    "temperature": 0.8,
    "max_completion_length": 1024,
    "max_steps": 800,  # 100 rounds of 8 updates
}
SEED_000_LAYOUT = {"per_update": 16, "updates_per_generation": 8}  # 8 updates of 16 completions a round
# Where TRL's defaults change tiny-grpo's algorithm, seed 000 takes tiny-grpo's choice (docs/training.md,
# "Seed 000's step against tiny-grpo"): the plain k3 KL, no vLLM importance-sampling correction, the
# old log-probs without dropout, and every weight trained (no PEFT config).
SEED_000_TRL_DEFAULTS_TODAY = {
    "use_bias_correction_kl": False,  # tiny-grpo's approx_kl_divergence: plain k3
    "vllm_importance_sampling_correction": False,  # tiny-grpo: none
    "disable_dropout": True,  # tiny-grpo: old log-probs in eval mode
    "mask_truncated_completions": False,  # tiny-grpo trains on truncated completions too
    "importance_sampling_level": "token",  # tiny-grpo's ratio is per token
}
SEED_000_PEFT_TODAY = None  # tiny-grpo: every weight

# Seed 002 (config/seed-002-self-play.yaml): lr 2e-5, 90 steps, 2 generations, 8 completions per
# device, vLLM context 2048.
SEED_002 = {"learning_rate": 2e-5, "max_steps": 90, "num_generations": 2, "vllm_max_model_length": 2048,
            "beta": 0.0, "loss_type": "dapo"}  # fmt: skip
# Seed 004 (config/scaling-binary-bonus.yaml): lr 2e-6, per-device batch 1 x accumulation 8,
# a checkpoint every 100 steps, all weights under ZeRO-3 beside a vLLM server.
SEED_004 = {"learning_rate": 2e-6, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8,
            "save_steps": 100, "max_steps": 100, "vllm_mode": "server", "vllm_max_model_length": 8192}  # fmt: skip


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    destination = copy_workflow(tmp_path_factory.mktemp("trainer_config"))
    (destination / "slurm").symlink_to("profiles/slurm")
    return destination


def train_commands(workdir: Path, name: str) -> list[str]:
    """The shell command of every `train` job the dry run of `name` plans."""
    profile, configfiles = SHIPPED[name]
    extra = ["--configfile", *configfiles] if configfiles else []
    result = subprocess.run([SNAKEMAKE, "--profile", profile, "-n", "-p", "results/report.html", *extra],
                            cwd=workdir, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    blocks = re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", result.stdout)
    return [re.search(r"^Shell command: (.*)$", b, re.MULTILINE).group(1)
            for b in blocks if re.search(r"^rule train:", b, re.MULTILINE)]  # fmt: skip


def without_redirect(command: str) -> str:
    """The command up to its log redirect (`> LOG 2>&1`)."""
    return re.sub(r" > \S+ 2>&1\s*$", "", command)


def train_job_argv(command: str) -> tuple[list[str], int, str]:
    """train_job's arguments, the launcher's process count and its --config_file."""
    words = shlex.split(without_redirect(command))
    start = words.index("execrl.training.train_job") + 1
    return words[start:], int(words[words.index("--num_processes") + 1]), words[words.index("--config_file") + 1]


def printed(workdir: Path, command: str, capsys) -> dict:
    argv, processes, accelerate_config = train_job_argv(command)
    argv += ["--print-trainer-config", "--processes", str(processes),
             "--accelerate-config", str(workdir / accelerate_config)]  # fmt: skip
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        train_job.main(argv)
    finally:
        os.chdir(cwd)
    return json.loads(capsys.readouterr().out)


class Plans(dict):
    """Each shipped config's training commands, from one dry run of it when first asked for."""

    def __init__(self, workdir: Path):
        super().__init__()
        self.workdir = workdir

    def __missing__(self, name: str) -> list[str]:
        self[name] = train_commands(self.workdir, name)
        return self[name]


@pytest.fixture(scope="module")
def plans(workdir):
    return Plans(workdir)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_training_job_prints_its_complete_trainer_config(workdir, plans, name, capsys):
    from trl import DPOConfig, GRPOConfig

    commands = plans[name]
    assert commands
    for command in commands:
        shown = printed(workdir, command, capsys)
        cls = DPOConfig if shown["method"] == "dpo" else GRPOConfig
        assert shown["trainer_config_class"] == cls.__name__
        # every field, defaults included
        assert set(shown["trainer_config"]) == {f.name for f in __import__("dataclasses").fields(cls)}
        launch = shown["launch"]
        assert launch["processes"] == int(re.search(r"--num_processes (\d+)", command).group(1))
        assert launch["per_update"] == launch["micro_batch"] * launch["accumulation"] * launch["processes"]
        if cls is GRPOConfig:  # the round the job samples on its processes, not the printing process's one
            trainer = shown["trainer_config"]
            assert trainer["generation_batch_size"] == launch["micro_batch"] * launch["processes"] * trainer["steps_per_generation"]
        assert (shown["peft"] is None) is ('"lora": null' in command)
        assert (launch["zero_stage"] == 3) is ("zero3" in command)


def seed_jobs(workdir, plans, name, capsys) -> list[dict]:
    return [printed(workdir, command, capsys) for command in plans[name]]


def test_seed_000_is_tiny_grpos_step_where_the_readme_says_so(workdir, plans, capsys):
    jobs = seed_jobs(workdir, plans, "config.yaml", capsys)
    assert {j["method"] for j in jobs} == {"grpo", "srrl"}
    for job in jobs:
        trainer, launch = job["trainer_config"], job["launch"]
        assert {k: trainer[k] for k in SEED_000_TINY_GRPO} == SEED_000_TINY_GRPO, job["method"]
        assert {k: launch[k] for k in SEED_000_LAYOUT} == SEED_000_LAYOUT
        assert {k: trainer[k] for k in SEED_000_TRL_DEFAULTS_TODAY} == SEED_000_TRL_DEFAULTS_TODAY
        assert job["peft"] is SEED_000_PEFT_TODAY and job["finetuning"] == "full"
        assert trainer["use_vllm"] and launch["vllm_mode"] == "colocate"


def test_seed_002_trains_with_its_documented_values(workdir, plans, capsys):
    jobs = seed_jobs(workdir, plans, "seed-002-self-play.yaml", capsys)
    assert {j["method"] for j in jobs} == {"code_game", "exec", "spiral"}
    for job in jobs:
        trainer, launch = job["trainer_config"], job["launch"]
        assert {k: trainer[k] for k in SEED_002} == SEED_002, job["method"]
        assert launch["processes"] == 1
        # 8 completions per device and round: 4 prompts x 2 generations, in one update
        assert trainer["generation_batch_size"] == 8 and launch["per_update"] == 8, job["method"]
        assert launch["micro_batch"] * launch["accumulation"] == 8


def test_seed_004_trains_with_its_documented_values(workdir, plans, capsys):
    jobs = seed_jobs(workdir, plans, "scaling-binary-bonus.yaml", capsys)
    assert len(jobs) == 5 and {j["method"] for j in jobs} == {"grpo"}
    for job in jobs:
        trainer, launch = job["trainer_config"], job["launch"]
        assert {k: trainer[k] for k in SEED_004} == SEED_004
        assert (launch["micro_batch"], launch["accumulation"], launch["processes"]) == (1, 8, 7)
        assert job["peft"] is None and job["finetuning"] == "full" and launch["zero_stage"] == 3


@pytest.mark.parametrize("name", SHIPPED)
def test_every_online_jobs_rollouts_sample_as_its_configs_evaluation(workdir, plans, name, capsys):
    """The GRPOConfig each planned job prints samples with the config's generation settings, the
    ones its candidates are generated with."""
    from execrl.config import merged_config
    from execrl.generation.sampling import SamplingSettings

    repo = Path(train_job.__file__).parents[3]
    config = merged_config([repo / f for f in SHIPPED[name][1]])  # over config/config.yaml
    evaluation = SamplingSettings.of(config["generation"]).trl_args()
    online = [job for job in seed_jobs(workdir, plans, name, capsys) if job["method"] != "dpo"]
    assert online
    for job in online:
        assert {key: job["trainer_config"][key] for key in evaluation} == evaluation, job["method"]


def test_a_planned_command_line_prints_its_config_with_the_flag_appended(workdir, plans):
    """The embedded default's command line as the dry run prints it, under `accelerate launch`."""
    command = next(c for c in plans["embedded default"] if " -m execrl.training.train_job grpo " in c)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(train_job.__file__).parents[1]), os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
    result = subprocess.run(["bash", "-c", without_redirect(command) + " --print-trainer-config"],
                            cwd=workdir, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    shown = json.loads(result.stdout)
    assert shown["method"] == "grpo" and shown["trainer_config_class"] == "GRPOConfig"
    assert shown["launch"]["launcher_source"] == "accelerate launch environment"
    assert shown["launch"]["processes"] == 1 and shown["launch"]["zero_stage"] is None
    assert not (workdir / "results" / "checkpoints").exists()  # nothing trained, nothing written


def test_printing_loads_no_model_and_fails_on_bad_settings_naming_the_key(capsys):
    argv = ["grpo", "--model", "/nonexistent/model", "--settings", json.dumps({"grpo": {"beta": 0.0}}),
            "--data", "x.jsonl", "--eval-problems", "y.jsonl", "--output", "o", "--metrics", "m.jsonl",
            "--checkpoint-root", "c", "--run-name", "r", "--print-trainer-config"]  # fmt: skip
    with pytest.raises(SystemExit):
        train_job.main(argv)
    assert "settings: missing section" in capsys.readouterr().err


# Non-default values of settings that only TRL or PEFT act on, each over the embedded default: what
# the train job's printed config must carry (TRL and PEFT apply them; their own tests cover how).
TRAINER_SETTINGS = {
    "grpo": {"epsilon": 0.3, "num_iterations": 2, "scale_rewards": "batch", "use_vllm": True,
             "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.45,
             "vllm_importance_sampling_clip_min": 0.5},
    "dpo": {"max_length": 96, "gradient_checkpointing": True},
    "lora": {"r": 4, "lora_alpha": 12, "lora_dropout": 0.1, "target_modules": ["q_proj", "v_proj"]},
}  # fmt: skip


def test_settings_only_trl_and_peft_act_on_reach_their_configs(workdir, capsys):
    """Each value of TRAINER_SETTINGS, none of them a default of execrl's or TRL's, is the value
    the planned train job hands to GRPOConfig, DPOConfig or PEFT's LoraConfig."""
    import yaml

    overlay = workdir / "config" / "trainer-settings.yaml"
    overlay.write_text(yaml.safe_dump(TRAINER_SETTINGS))
    result = subprocess.run([SNAKEMAKE, "--profile", "profiles/local", "-n", "-p", "results/report.html",
                             "--configfile", EMBEDDED, str(overlay)],
                            cwd=workdir, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    blocks = re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", result.stdout)
    commands = [re.search(r"^Shell command: (.*)$", b, re.MULTILINE).group(1)
                for b in blocks if re.search(r"^rule train:", b, re.MULTILINE)]  # fmt: skip
    jobs = {job["method"]: job for job in (printed(workdir, command, capsys) for command in commands)}
    assert {"dpo", "grpo", "srrl"} <= set(jobs)
    for method in ("grpo", "srrl"):
        trainer = jobs[method]["trainer_config"]
        assert {key: trainer[key] for key in TRAINER_SETTINGS["grpo"]} == TRAINER_SETTINGS["grpo"], method
    dpo = jobs["dpo"]["trainer_config"]
    assert {key: dpo[key] for key in TRAINER_SETTINGS["dpo"]} == TRAINER_SETTINGS["dpo"]
    for job in jobs.values():
        peft = job["peft"]
        assert {key: peft[key] for key in ("r", "lora_alpha", "lora_dropout")} == {
            key: TRAINER_SETTINGS["lora"][key] for key in ("r", "lora_alpha", "lora_dropout")}, job["method"]
        assert sorted(peft["target_modules"]) == TRAINER_SETTINGS["lora"]["target_modules"], job["method"]
