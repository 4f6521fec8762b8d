"""The report's token budget against what TRL's GRPOTrainer really sampled: two GRPO and two SRRL
steps on a tiny random model, every generation recorded, the metrics file read back by the report
(generated tokens from execrl's num_generated_tokens, prompt tokens the rest of TRL's num_tokens)."""

import pytest

from conftest import build_tiny_model
from execrl.training.grpo import GRPOSettings, train_grpo
from execrl.training.lora import LoRASettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.report import budget
from execrl.training.rewards import RewardSettings
from execrl.sandbox import Executor
from execrl.training.srrl import SRRLRollout, SRRLSettings

PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f(x) returning x + {i}.", test_type="assert",
            tests=[f"assert f(1) == {1 + i}", f"assert f(2) == {2 + i}"], entry_point="f",
            reference=f"def f(x):\n    return x + {i}\n")
    for i in range(6)
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p.prompt + "\n" + p.reference for p in PROBLEMS] * 20)


@pytest.mark.parametrize("method", ["grpo", "srrl"])
def test_tokens_as_trl_counts_them(tiny_model, tmp_path, monkeypatch, method):
    from trl import GRPOTrainer

    generated, rolled = [], []
    original_generate, original_rollout = GRPOTrainer._generate, SRRLRollout.rollout

    def recording_generate(self, *args, **kwargs):
        output = original_generate(self, *args, **kwargs)
        generated.append(output[:2])  # prompt_ids, completion_ids of every completion
        return output

    def recording_rollout(self, *args, **kwargs):
        output = original_rollout(self, *args, **kwargs)
        rolled.append(output)
        return output

    monkeypatch.setattr(GRPOTrainer, "_generate", recording_generate)
    monkeypatch.setattr(SRRLRollout, "rollout", recording_rollout)
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=2, max_completion_length=16,
                            save_steps=100, gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False,
                            eval_every=0, temperature=1.0)
    metrics = tmp_path / "results" / "training" / "toy" / "tiny" / method / "0" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    with Executor(workers=1) as executor:
        train_grpo(tiny_model, PROBLEMS, PROBLEMS[:2], PromptConfig(template="{prompt}\nTest: {tests}\n", num_tests_shown=1),
                   settings, RewardSettings(binary=1.0), LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
                   executor, tmp_path / "checkpoints", tmp_path / "adapter", metrics,
                   srrl=SRRLSettings(refine_share=0.5) if method == "srrl" else None)

    prompt_tokens = sum(len(ids) for prompts, _ in generated for ids in prompts)
    completion_tokens = sum(len(ids) for _, completions in generated for ids in completions)
    (run,) = budget.token_budget([metrics], {"prompts_per_step": 2, "num_generations": 4}).to_dict("records")
    assert run["completions"] == sum(len(completions) for _, completions in generated) == 16
    assert run["tokens"] == prompt_tokens + completion_tokens  # TRL's num_tokens: each completion with its prompt
    # execrl's num_generated_tokens: the completion tokens alone, exactly; the prompt tokens the difference.
    assert run["completion_tokens"] == completion_tokens
    assert run["prompt_tokens"] == prompt_tokens
    if method == "srrl":
        # TRL counted the rollout's own prompts: refinements with their (longer) refinement prompts.
        assert [list(ids) for output in rolled for ids in output["prompt_ids"]] == [
            list(ids) for prompts, _ in generated for ids in prompts
        ]
        kinds = [kind for output in rolled for kind in output["sample_kind"]]
        assert "c2" in kinds  # a random model fails, so refinements were sampled
        first = [len(ids) for output in rolled for ids, kind in zip(output["prompt_ids"], output["sample_kind"], strict=True) if kind == "c1"]
        assert run["mean_prompt_length"] > sum(first) / len(first)
