"""How often a training job saves and whether it recomputes activations change how it runs, not
what it learns (`execrl.config.RUNTIME_SETTINGS`): a job trains to the same bits either way. So
neither is in a result path or in the checkpoint folder's key; the train rule hands them to the
job as options of their own (`--save-steps`, `--gradient-checkpointing`), and a change reruns
nothing (tests/test_run_paths_workflow.py)."""

import copy
import hashlib
import json
import os
import subprocess

import pytest
from safetensors.torch import load_file

import test_training_resume as resume
from execrl.prompting import PromptConfig
from execrl.training import train_job
from execrl.training.dpo import DPOSettings, train_dpo
from test_dpo_loss import LORA, PAIRS, tiny  # noqa: F401 (tiny: a fixture)
from test_training_resume import training_metrics, warm_tiny_model  # noqa: F401 (a fixture)


def tensors_digest(folder):
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.safetensors")):
        tensors = load_file(str(path))
        for name in sorted(tensors):
            digest.update(name.encode())
            digest.update(tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def dpo_run(tiny, root, lora, save_steps, gradient_checkpointing):
    settings = DPOSettings(per_device_train_batch_size=2, num_train_epochs=2, max_length=64, eval_every=0,
                           learning_rate=1e-2, save_steps=save_steps, gradient_checkpointing=gradient_checkpointing)
    train_dpo(tiny, PAIRS, settings, lora, root / "checkpoints", root / "trained", root / "metrics.jsonl",
              eval_problems=[], prompt_config=PromptConfig(), executor=None)
    losses = [r["loss"] for r in map(json.loads, (root / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    return losses, tensors_digest(root / "trained"), sorted(p.name for p in (root / "checkpoints").rglob("checkpoint-*"))


@pytest.mark.parametrize("lora", [LORA, None], ids=["lora", "full-weight"])
def test_dpo_trains_to_the_same_bits_whatever_it_saves_and_recomputes(tiny, tmp_path, lora):
    saving, saving_weights, saved = dpo_run(tiny, tmp_path / "a", lora, save_steps=1, gradient_checkpointing=True)
    plain, plain_weights, none_saved = dpo_run(tiny, tmp_path / "b", lora, save_steps=100, gradient_checkpointing=False)
    # the interval did change what the job wrote: the last two of every step's, or the last one only
    assert saved == ["checkpoint-3", "checkpoint-4"] and none_saved == ["checkpoint-4"]
    assert len(saving) == 4 and saving[-1] < saving[0]  # it learned something
    assert saving == plain
    assert saving_weights == plain_weights


def grpo_run(model, root, out, *options):
    command = resume.grpo_job(model, root, out)
    subprocess.run([*command, *options], env={**os.environ, "PYTHONHASHSEED": "0"}, check=True,
                   capture_output=True, timeout=900)
    checkpoints = sorted(p.parent.name for p in (out / "checkpoints").glob("grpo/*/checkpoint-*/trainer_state.json"))
    return training_metrics(out / "metrics.jsonl"), resume.weights_digest(out / "trained"), checkpoints


@pytest.mark.slow
def test_a_two_process_grpo_job_trains_to_the_same_bits_whatever_it_saves_and_recomputes(warm_tiny_model, tmp_path):
    """The settings save every 3 steps and keep activations; the options make the job save every
    1000 and recompute them: the same metrics at every step, the same adapter."""
    assert resume.GRPO_SETTINGS["grpo"]["save_steps"] == 3 and not resume.GRPO_SETTINGS["grpo"]["gradient_checkpointing"]
    settings_metrics, settings_weights, settings_checkpoints = grpo_run(warm_tiny_model, tmp_path, tmp_path / "a")
    option_metrics, option_weights, option_checkpoints = grpo_run(
        warm_tiny_model, tmp_path, tmp_path / "b", "--save-steps", "1000", "--gradient-checkpointing", "1"
    )
    # the last two of every third step and the last, or the last only
    assert settings_checkpoints == ["checkpoint-6", "checkpoint-8"] and option_checkpoints == ["checkpoint-8"]
    assert sum(record.get("reward_std", 0) > 0 for record in settings_metrics) >= 2, "no step had rewards to learn from"
    assert settings_metrics == option_metrics
    assert settings_weights == option_weights


def printed_config(capsys, method, settings, *options):
    argv = [method, "--model", "/nonexistent/model", "--settings", json.dumps(settings), "--data", "x.jsonl",
            "--eval-problems", "y.jsonl", "--output", "o", "--metrics", "m.jsonl", "--checkpoint-root", "c",
            "--run-name", "r", "--print-trainer-config", *options]
    train_job.main(argv)
    return json.loads(capsys.readouterr().out)


def test_the_options_reach_the_trainer_and_leave_the_checkpoint_folder(capsys):
    """--save-steps and --gradient-checkpointing set TRL's fields over the settings' own, and the
    checkpoint folder (keyed by --settings) stays where it was."""
    settings = copy.deepcopy(resume.GRPO_SETTINGS)
    settings["grpo"]["seed"] = 0
    plain = printed_config(capsys, "grpo", settings)
    optioned = printed_config(capsys, "grpo", settings, "--save-steps", "7", "--gradient-checkpointing", "1")
    assert (plain["trainer_config"]["save_steps"], plain["trainer_config"]["gradient_checkpointing"]) == (3, False)
    assert (optioned["trainer_config"]["save_steps"], optioned["trainer_config"]["gradient_checkpointing"]) == (7, True)
    assert optioned["trainer_config"]["output_dir"] == plain["trainer_config"]["output_dir"]
    off = printed_config(capsys, "grpo", {**settings, "grpo": {**settings["grpo"], "gradient_checkpointing": True}},
                         "--gradient-checkpointing", "0")
    assert off["trainer_config"]["gradient_checkpointing"] is False
