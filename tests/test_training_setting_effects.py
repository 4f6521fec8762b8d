"""Training settings change what they name, on real steps of the tiny model: the reward-hacking
watch's switch (`watch.enabled`), GRPO's optimiser (`grpo.learning_rate`, `grpo.max_grad_norm`)
and the tiny model's warm start (`tiny_model.sft.*`)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from conftest import build_tiny_model
from execrl.datasets.builtin import generate
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor
from execrl.training.grpo import GRPOSettings, train_grpo
from execrl.training.lora import LoRASettings
from execrl.training.online_task import OnlineTask
from execrl.training.rewards import RewardSettings
from execrl.watch.monitor import WatchSettings

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f(x) returning x + {i}.", test_type="assert",
            tests=[f"assert f(1) == {1 + i}"], entry_point="f", reference=f"def f(x):\n    return x + {i}\n")
    for i in range(4)
]  # fmt: skip
CONFIG = PromptConfig(template="{prompt}\n", num_tests_shown=0, chat_template="never")
LORA = LoRASettings(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p.prompt + "\n" + p.reference for p in PROBLEMS] * 20)


def one_grpo_step(tiny_model, out, task=None, watch=None, **grpo) -> list[dict]:
    """One GRPO step of 2 prompts x 4 completions; the metrics records it wrote."""
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=1, max_completion_length=12, save_steps=100,
                            gradient_checkpointing=False, use_vllm=False, eval_every=0, temperature=1.0, **grpo)  # fmt: skip
    torch.manual_seed(0)
    with Executor(workers=1) as executor:
        train_grpo(tiny_model, PROBLEMS, [], CONFIG, settings, RewardSettings(binary=1.0), LORA, executor,
                   out / "checkpoints", out / "adapter", out / "metrics.jsonl", watch=watch, task=task)  # fmt: skip
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------------ watch.enabled


@linux_only
def test_the_watch_logs_its_rates_every_step_only_when_enabled(tiny_model, tmp_path):
    """`watch.enabled`: on, the step's record holds the watch's tamper rates and hard-coding counts;
    off, it holds none of the watch's metrics, and the step's other metrics are still logged."""
    def step_record(enabled: bool) -> dict:
        records = one_grpo_step(tiny_model, tmp_path / str(enabled), watch=WatchSettings(enabled=enabled), learning_rate=1e-3)
        (step,) = [r for r in records if "loss" in r]
        return step

    on, off = step_record(True), step_record(False)
    assert {"watch/tamper/any", "watch/hard_coding_checked", "watch/hard_coding_flagged"} <= set(on)
    assert not [name for name in off if name.startswith("watch/")]
    assert any(name.startswith("rewards/") for name in off) and "loss" in off


# ------------------------------------------------------------------- grpo.learning_rate, max_grad_norm


class LengthReward(OnlineTask):
    """Reward = the completion's length in characters: completions of a random model differ in
    length, so every group has advantages that are not 0 and the step has a gradient."""

    def reward_functions(self):
        def length(completions, **kwargs):
            return [float(len(c if isinstance(c, str) else c[-1]["content"])) for c in completions]

        return [length], [1.0]


def trained_lora_b(tiny_model, out, **grpo) -> torch.Tensor:
    """Every LoRA B weight after one step (they start at 0, so this is the step's update)."""
    from safetensors.torch import load_file

    records = one_grpo_step(tiny_model, out, task=LengthReward(), **grpo)
    assert any(r.get("grad_norm", 0) > 0 for r in records)  # the step had a gradient to apply
    weights = load_file(out / "adapter" / "adapter_model.safetensors")
    return torch.cat([w.flatten() for name, w in weights.items() if "lora_B" in name])


@linux_only
def test_the_learning_rate_sizes_grpos_update(tiny_model, tmp_path):
    """`grpo.learning_rate`: Adam's first update moves each LoRA B weight by about the learning rate
    (the gradient's sign times it), so ten times the rate moves the adapter ten times as far."""
    slow = trained_lora_b(tiny_model, tmp_path / "slow", learning_rate=1e-4)
    fast = trained_lora_b(tiny_model, tmp_path / "fast", learning_rate=1e-3)
    assert slow.abs().max() == pytest.approx(1e-4, rel=0.05)
    assert fast.abs().max() == pytest.approx(1e-3, rel=0.05)


@linux_only
def test_max_grad_norm_clips_grpos_gradient(tiny_model, tmp_path):
    """`grpo.max_grad_norm`: clipped to a norm far below Adam's epsilon (1e-8), the first update is
    that norm over epsilon times the learning rate instead of the learning rate itself."""
    loose = trained_lora_b(tiny_model, tmp_path / "loose", learning_rate=1e-3, max_grad_norm=1.0e6)
    clipped = trained_lora_b(tiny_model, tmp_path / "clipped", learning_rate=1e-3, max_grad_norm=1e-12)
    assert loose.abs().max() == pytest.approx(1e-3, rel=0.05)
    assert 0 < clipped.abs().max() < 1e-6


# ---------------------------------------------------------------------------------- tiny_model.sft


WARMUP = generate("warmup", seed=0, n=24)


def warm_start(tiny_model, out, **sft) -> tuple[list[dict], str]:
    """The tiny model's warm start (`run_sft`) on 24 warmup problems, one epoch of batches of 2 unless
    `sft` says otherwise: its metrics records and the model it wrote."""
    from execrl.training.sft import SFTSettings, run_sft

    settings = {"num_train_epochs": 1, "per_device_train_batch_size": 2, **sft}
    run_sft(tiny_model, WARMUP, CONFIG, SFTSettings(**settings), out / "model", out / "metrics.jsonl")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()], str(out / "model")


def optimizer_steps(records: list[dict]) -> int:
    (summary,) = [r for r in records if "train_loss" in r]
    return summary["step"]


def weights(model_path: str) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_path).state_dict()


@pytest.fixture(scope="module")
def one_epoch(tiny_model, tmp_path_factory):
    return warm_start(tiny_model, tmp_path_factory.mktemp("one_epoch"))


def test_epochs_and_batch_size_set_the_warm_starts_optimizer_steps(tiny_model, tmp_path, one_epoch):
    """24 examples in batches of 2 make 12 steps an epoch: `num_train_epochs` 2 makes 24 steps,
    `per_device_train_batch_size` 4 makes 6."""
    assert optimizer_steps(one_epoch[0]) == 12
    assert optimizer_steps(warm_start(tiny_model, tmp_path / "two_epochs", num_train_epochs=2)[0]) == 24
    assert optimizer_steps(warm_start(tiny_model, tmp_path / "batch_4", per_device_train_batch_size=4)[0]) == 6


def test_the_learning_rate_moves_the_warm_started_weights(tiny_model, tmp_path, one_epoch):
    """`learning_rate` 0 leaves every weight of the tiny model as it was; the default moves them."""
    before = weights(tiny_model)
    still = weights(warm_start(tiny_model, tmp_path / "still", learning_rate=0.0)[1])
    moved = weights(one_epoch[1])
    assert all(torch.equal(before[name], still[name]) for name in before)
    assert not all(torch.equal(before[name], moved[name]) for name in before)


def test_max_length_truncates_the_warm_starts_examples(tiny_model, tmp_path, one_epoch):
    """`max_length` 140 cuts the examples longer than 140 tokens (prompts of 39 to 136 tokens here,
    whole examples of up to about 200): the 20 examples of the first 10 steps train on at most
    140 tokens each, fewer than they hold whole (`num_tokens`, logged at step 10), and no example
    is lost (each keeps part of its completion, so the epoch still has 12 steps)."""
    def tokens_at_step_10(records):
        (record,) = [r for r in records if r["step"] == 10 and "num_tokens" in r]
        return record["num_tokens"]

    cut = warm_start(tiny_model, tmp_path / "cut", max_length=140)[0]
    assert tokens_at_step_10(cut) <= 140 * 2 * 10 and tokens_at_step_10(cut) < tokens_at_step_10(one_epoch[0])
    assert optimizer_steps(cut) == 12


def test_a_max_length_shorter_than_every_prompt_fails_naming_the_key(tiny_model, tmp_path):
    """Every prompt here has 39 tokens or more: at 32 no example keeps a completion token, and the
    warm start stops before training, naming the setting, instead of on TRL's empty dataset."""
    with pytest.raises(ValueError, match=r"tiny_model\.sft\.max_length is 32 tokens, but the shortest .* has 39"):
        warm_start(tiny_model, tmp_path / "none_left", max_length=32)
