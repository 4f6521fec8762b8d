"""GRPO/SRRL through TRL's trainer on a tiny random model: what reaches the loss, and sampling."""

import pytest
import torch

from conftest import build_tiny_model
from execrl.grpo import GRPOSettings, generate_with_merged_adapter, train_grpo
from execrl.lora import LoRASettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.rewards import RewardSettings
from execrl.sandbox import Executor
from execrl.srrl import SRRLRollout, SRRLSettings

PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f(x) returning x + {i}.", test_type="assert",
            tests=[f"assert f(1) == {1 + i}", f"assert f(2) == {2 + i}"], entry_point="f",
            reference=f"def f(x):\n    return x + {i}\n")
    for i in range(6)
]
CONFIG = PromptConfig(template="{prompt}\nTest: {tests}\n", num_tests_shown=1)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p.prompt + "\n" + p.reference for p in PROBLEMS] * 20)


def test_c2_samples_reach_the_loss(tiny_model, tmp_path, monkeypatch):
    """One SRRL step: the refinements the rollout drew are rows of the batch TRL's loss sees."""
    from trl import GRPOTrainer

    rolled, seen = [], []
    original_rollout, original_loss = SRRLRollout.rollout, GRPOTrainer.compute_loss

    def recording_rollout(self, *args, **kwargs):
        output = original_rollout(self, *args, **kwargs)
        rolled.append(output)
        return output

    def recording_loss(self, model, inputs, *args, **kwargs):
        mask = inputs["completion_mask"].bool()
        seen.extend(row[m].tolist() for row, m in zip(inputs["completion_ids"], mask, strict=True))
        return original_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SRRLRollout, "rollout", recording_rollout)
    monkeypatch.setattr(GRPOTrainer, "compute_loss", recording_loss)
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=1, max_completion_length=16,
                            save_steps=100, gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False,
                            eval_every=0, temperature=1.0)
    with Executor(workers=1) as executor:
        train_grpo(tiny_model, PROBLEMS, PROBLEMS[:2], CONFIG, settings, RewardSettings(binary=1.0),
                   LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]), executor,
                   tmp_path / "checkpoints", tmp_path / "adapter", tmp_path / "metrics.jsonl",
                   srrl=SRRLSettings(refine_share=0.5))

    (output,) = rolled
    c2 = [ids for ids, kind in zip(output["completion_ids"], output["sample_kind"], strict=True) if kind == "c2"]
    assert c2, "a random model fails its first attempts, so the step must hold refinements"
    assert len(seen) == len(output["completion_ids"]) == 8
    # The loss sees exactly the rollout's completions (c1 and c2), one row each.
    assert sorted(map(list, output["completion_ids"])) == sorted(seen)
    assert (tmp_path / "adapter" / "adapter_config.json").exists()


def test_merged_adapter_sampling_matches_unmerged_and_leaves_weights(tiny_model):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    inputs = {"input_ids": torch.tensor([[3, 4, 5, 6]]), "max_new_tokens": 8, "do_sample": False}
    unmerged = model.generate(**inputs)
    generate_with_merged_adapter(model)
    merged = model.generate(**inputs)
    assert torch.equal(unmerged, merged)
    assert not any(layer.merged for layer in model.modules() if hasattr(layer, "merged_adapters"))
    after = model.state_dict()
    assert all(torch.allclose(before[k], after[k], atol=1e-6) for k in before)


def test_length_chunked_scoring_matches_trl_on_mixed_prompt_lengths(tiny_model, tmp_path):
    """Rows scored in length-sorted chunks, each cut to its own width, get TRL's log-probs and
    entropies back in their own order, and gradients flow to the adapter."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from execrl.grpo import LengthChunkedGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    trainer = LengthChunkedGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                        use_cpu=True, bf16=False, report_to=[]),
        train_dataset=Dataset.from_list([{"prompt": "x"}] * 4),
        processing_class=tokenizer,
        peft_config=LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]).peft_config(),
    )
    generator = torch.Generator().manual_seed(0)
    prompt_lengths, completion_width = [3, 17, 5, 30, 9, 2, 24], 6
    width = max(prompt_lengths)
    input_ids = torch.randint(3, tokenizer.vocab_size, (len(prompt_lengths), width + completion_width), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    for row, length in enumerate(prompt_lengths):
        input_ids[row, : width - length] = tokenizer.pad_token_id or 0
        attention_mask[row, : width - length] = 0
    attention_mask[1, -2:] = 0  # a completion that ended early

    model = trainer.model
    chunked = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, completion_width, compute_entropy=True)
    reference = GRPOTrainer._get_per_token_logps_and_entropies(
        trainer, model, input_ids, attention_mask, completion_width, compute_entropy=True
    )
    assert chunked[0].shape == reference[0].shape == (len(prompt_lengths), completion_width)
    assert torch.allclose(chunked[0], reference[0], atol=1e-4)
    assert torch.allclose(chunked[1], reference[1], atol=1e-4)
    chunked[0][attention_mask[:, -completion_width:].bool()].sum().backward()
    adapter_grads = [p.grad for name, p in model.named_parameters() if "lora_" in name and p.requires_grad]
    assert adapter_grads and any(g is not None and g.abs().sum() > 0 for g in adapter_grads)


def test_only_rotary_models_are_scored_in_chunks():
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    from execrl.grpo import uses_rotary_positions

    assert uses_rotary_positions(Qwen2Config()) and uses_rotary_positions(LlamaConfig())
    assert not uses_rotary_positions(GPT2Config())


def test_full_weight_training_without_deepspeed_loads_fp32(tiny_model, tmp_path):
    """Adam's small steps would round away on bf16 weights; LoRA keeps the checkpoint's dtype."""
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    from execrl.training import load_model

    AutoModelForCausalLM.from_pretrained(tiny_model).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to=[])
    assert args.deepspeed_plugin is None
    assert load_model(str(tmp_path / "bf16"), args, full_weight=True).dtype == torch.float32
    assert load_model(str(tmp_path / "bf16"), args, full_weight=False).dtype == torch.bfloat16


def test_tiny_grpo_step_several_updates_per_generation_round(tiny_model, tmp_path, monkeypatch):
    """tiny-grpo's step in TRL's terms: one generation round of prompts_per_step x num_generations
    completions feeds steps_per_generation updates on shuffled mini-batches, with the KL term
    (beta, so reference log-probs are computed), clipping, per-sequence averaging and gradient
    clipping reaching TRL's trainer."""
    from trl import GRPOTrainer

    rounds, batches, args = [], [], []
    original_generate, original_loss = GRPOTrainer._generate_and_score_completions, GRPOTrainer.compute_loss

    def recording_generate(self, inputs):
        output = original_generate(self, inputs)
        rounds.append(len(output["completion_ids"]))
        return output

    def recording_loss(self, model, inputs, *a, **kw):
        batches.append((len(inputs["completion_ids"]), inputs.get("ref_per_token_logps") is not None))
        args.append(self.args)
        return original_loss(self, model, inputs, *a, **kw)

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", recording_generate)
    monkeypatch.setattr(GRPOTrainer, "compute_loss", recording_loss)
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=4, max_completion_length=8,
                            save_steps=100, gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False,
                            eval_every=0, temperature=1.0, beta=0.01, epsilon=0.2, loss_type="grpo",
                            max_grad_norm=0.5, steps_per_generation=2, num_iterations=1)
    with Executor(workers=1) as executor:
        train_grpo(tiny_model, PROBLEMS, PROBLEMS[:2], CONFIG, settings, RewardSettings(binary=1.0),
                   LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]), executor,
                   tmp_path / "checkpoints", tmp_path / "adapter", tmp_path / "metrics.jsonl")
    assert rounds == [8, 8]  # 4 updates from 2 generation rounds of 2 prompts x 4 completions
    assert batches == [(4, True)] * 4  # each update: half a round, with the reference model's log-probs
    trl_args = args[0]
    assert (trl_args.beta, trl_args.epsilon, trl_args.loss_type) == (0.01, 0.2, "grpo")
    assert (trl_args.max_grad_norm, trl_args.steps_per_generation, trl_args.num_iterations) == (0.5, 2, 1)
    assert trl_args.generation_batch_size == 8
    # the report's completions per optimiser step count what was drawn
    from execrl.report.training import completions_per_step

    grpo = {"prompts_per_step": 2, "num_generations": 4, "steps_per_generation": 2}
    assert completions_per_step(grpo) * settings.max_steps == sum(rounds) == 16


def test_steps_per_generation_must_split_a_rounds_completions():
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, steps_per_generation=3)
    with pytest.raises(ValueError, match="grpo.steps_per_generation"):
        settings.per_device_batch(1)
    assert GRPOSettings(num_generations=8, prompts_per_step=16, steps_per_generation=8).per_device_batch(2) == 8
    assert GRPOSettings(num_generations=8, prompts_per_step=16).per_device_batch(2) == 64
