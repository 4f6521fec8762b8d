"""How often a training job saves and whether it recomputes activations change how it runs, not
what it learns (`execrl.config.RUNTIME_SETTINGS`): a job trains to the same bits either way. So
neither is in a result path or in the checkpoint folder's key; the train rule hands them to the
job as options of their own (`--save-steps`, `--gradient-checkpointing`), and a change reruns
nothing (tests/test_run_paths_workflow.py). The 2-process GRPO job's case is in
tests/test_training_resume.py, beside the uninterrupted run it compares with."""

import copy
import hashlib
import json

import pytest
from safetensors.torch import load_file

import test_training_resume as resume
from execrl.prompting import PromptConfig
from execrl.training import train_job
from execrl.training.dpo import DPOSettings, train_dpo
from test_dpo_loss import LORA, PAIRS, tiny  # noqa: F401 (tiny: a fixture)


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
