"""`dpo.loss_type`, `dpo.loss_weights` and `dpo.beta` change the loss DPO trains on (TRL's
DPOTrainer): at the first step the LoRA policy is its reference (the adapter's B starts at zero),
so each pair's margin is 0 and each loss type's value is known in closed form."""

import json
import math

import pytest

from conftest import build_tiny_model
from execrl.prompting import PromptConfig
from execrl.training.dpo import DPOSettings, train_dpo
from execrl.training.lora import LoRASettings

PAIRS = [
    {"prompt": f"Write f(x) returning x + {i}.\n", "chosen": f"def f(x):\n    return x + {i}\n",
     "rejected": f"def f(x):\n    return x - {i}\n"}
    for i in range(4)
]
LORA = LoRASettings(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p[k] for p in PAIRS for k in ("prompt", "chosen", "rejected")] * 20)


def first_loss(tiny, tmp_path, **dpo) -> float:
    settings = DPOSettings(per_device_train_batch_size=2, num_train_epochs=1, max_length=64, save_steps=100,
                           gradient_checkpointing=False, eval_every=0, learning_rate=1e-3, **dpo)
    train_dpo(tiny, PAIRS, settings, LORA, tmp_path / "checkpoints", tmp_path / "adapter", tmp_path / "metrics.jsonl",
              eval_problems=[], prompt_config=PromptConfig(), executor=None)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return next(r["loss"] for r in records if "loss" in r)


@pytest.mark.parametrize(
    "dpo, expected",
    [
        ({"loss_type": ["sigmoid"]}, math.log(2)),  # -log sigmoid(0)
        ({"loss_type": ["hinge"]}, 1.0),  # relu(1 - beta * 0)
        ({"loss_type": ["ipo"], "beta": 0.1}, (1 / (2 * 0.1)) ** 2),  # (0 - 1 / (2 beta))^2
        ({"loss_type": ["ipo"], "beta": 0.5}, 1.0),
        ({"loss_type": ["sigmoid", "hinge"], "loss_weights": [0.25, 0.75]}, 0.25 * math.log(2) + 0.75),
    ],
    ids=["sigmoid", "hinge", "ipo-beta-0.1", "ipo-beta-0.5", "weighted-sigmoid-hinge"],
)
def test_the_first_steps_loss_is_the_loss_types_value_at_a_zero_margin(tiny, tmp_path, dpo, expected):
    assert first_loss(tiny, tmp_path, **dpo) == pytest.approx(expected, rel=1e-3)


def losses(tiny, tmp_path, **dpo) -> list[float]:
    settings = DPOSettings(per_device_train_batch_size=2, num_train_epochs=2, max_length=64, save_steps=100,
                           gradient_checkpointing=False, eval_every=0, **dpo)
    train_dpo(tiny, PAIRS, settings, LORA, tmp_path / "checkpoints", tmp_path / "adapter", tmp_path / "metrics.jsonl",
              eval_problems=[], prompt_config=PromptConfig(), executor=None)
    return [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
            if "loss" in json.loads(line)]


def test_the_learning_rate_moves_the_policy_from_its_reference(tiny, tmp_path):
    """`dpo.learning_rate`: at 0 the policy stays its reference and every step's loss is -log sigmoid(0);
    at 0.1 the later steps' losses fall below it (the chosen completions gain on the rejected)."""
    still = losses(tiny, tmp_path / "still", learning_rate=0.0)
    moving = losses(tiny, tmp_path / "moving", learning_rate=0.1)
    assert len(still) == len(moving) == 4
    assert still == pytest.approx([math.log(2)] * 4, rel=1e-4)
    assert moving[0] == pytest.approx(math.log(2), rel=1e-3) and all(x < math.log(2) - 1e-3 for x in moving[1:])
