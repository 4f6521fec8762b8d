"""GRPO/SRRL through TRL's trainer on a tiny random model: what reaches the loss, and sampling."""

import pytest
import torch

from conftest import build_tiny_model
from execrl.training.grpo import GRPOSettings, generate_with_merged_adapter, train_grpo
from execrl.training.lora import LoRASettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.training.rewards import RewardSettings
from execrl.sandbox import Executor
from execrl.training.srrl import SRRLRollout, SRRLSettings

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
    # To the bit: merging in place and unmerging would leave w + Δ - Δ, rounded away from w.
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_length_chunked_scoring_matches_trl_on_mixed_prompt_lengths(tiny_model, tmp_path):
    """Rows scored in length-sorted chunks, each cut to its own width, get TRL's log-probs and
    entropies back in their own order, and gradients flow to the adapter."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from execrl.training.grpo import LengthChunkedGRPOTrainer

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

    from execrl.training.grpo import uses_rotary_positions

    assert uses_rotary_positions(Qwen2Config()) and uses_rotary_positions(LlamaConfig())
    assert not uses_rotary_positions(GPT2Config())


def bos_prepending_tokenizer():
    """A tokenizer whose post-processor prepends a BOS, as Llama's, Gemma's and Mistral's do."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, "a": 3, "b": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def test_grpo_and_vllm_tokenize_a_templated_prompt_as_the_evaluation_does():
    """The chat template's text starts with the BOS already: GRPO's rollouts (TRL's default adds
    special tokens) and vLLM (given text, it adds them too) would see two, SRRL's rollouts and the
    transformers evaluation one. All now get the ids of `add_special_tokens=False`."""
    from types import SimpleNamespace

    from execrl.generation.vllm_backend import token_prompts
    from execrl.training.grpo import CountingGRPOTrainer

    tokenizer = bos_prepending_tokenizer()
    text = "<s> a b"
    assert tokenizer(text)["input_ids"] == [0, 0, 3, 4]  # what TRL's and vLLM's defaults would give
    evaluation = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert evaluation == [0, 3, 4]
    ids, images, fields = CountingGRPOTrainer._tokenize_prompts(SimpleNamespace(processing_class=tokenizer), [text, text])
    assert ids == [evaluation, evaluation] and images is None and fields == {}
    assert token_prompts(tokenizer, [text]) == [{"prompt_token_ids": evaluation}]


def test_full_weight_training_without_deepspeed_loads_fp32(tiny_model, tmp_path):
    """Adam's small steps would round away on bf16 weights; LoRA keeps the checkpoint's dtype."""
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    from execrl.training.common import load_model

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


# ------------------------------------------------- TRL settings that change tiny-grpo's algorithm


def settings_trainer(tiny_model, tmp_path, lora_dropout: float = 0.0, **grpo):
    """A GRPOTrainer built from GRPOSettings through `execrl.training.trainer_config` (as train_grpo builds
    it), on the tiny model with a LoRA adapter; nothing is sampled."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from execrl.training.trainer_config import grpo_config

    peft = LoRASettings(r=4, lora_alpha=8, lora_dropout=lora_dropout, target_modules=["q_proj", "v_proj"]).peft_config()
    peft.init_lora_weights = False  # an adapter that already changes the output, so its dropout shows
    settings = GRPOSettings(num_generations=2, prompts_per_step=2, max_completion_length=8, use_vllm=False,
                            gradient_checkpointing=False, eval_every=0, **grpo)  # fmt: skip
    args = grpo_config(settings, processes=1, reward_weights=[1.0], checkpoint_dir=tmp_path / "checkpoints")
    torch.manual_seed(0)
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "x"}] * 4),
        processing_class=AutoTokenizer.from_pretrained(tiny_model),
        peft_config=peft,
    )


def loss_inputs(trainer, advantages, seed: int = 0) -> dict:
    """One training batch as `_generate_and_score_completions` hands it to the loss: random prompt
    and completion ids, and reference log-probs away from the policy's (so the KL is not 0)."""
    generator = torch.Generator().manual_seed(seed)
    rows, vocab = len(advantages), trainer.processing_class.vocab_size
    prompt_ids = torch.randint(3, vocab, (rows, 5), generator=generator)
    completion_ids = torch.randint(3, vocab, (rows, 6), generator=generator)
    ones = torch.ones_like
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, torch.cat([prompt_ids, completion_ids], 1), ones(torch.cat([prompt_ids, completion_ids], 1)), 6
        )
    return {"prompt_ids": prompt_ids, "prompt_mask": ones(prompt_ids), "completion_ids": completion_ids,
            "completion_mask": ones(completion_ids), "advantages": torch.tensor(advantages, dtype=torch.float32),
            "ref_per_token_logps": logps + 0.5 * torch.randn(logps.shape, generator=generator)}  # fmt: skip


def loss_and_gradient(trainer, inputs) -> tuple[float, torch.Tensor]:
    trainer.model.train()
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1  # as the training loop sets it for each update
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    grads = [p.grad.flatten() for n, p in trainer.model.named_parameters() if p.requires_grad and p.grad is not None]
    return loss.item(), torch.cat(grads)


def dropout_probabilities(model) -> list[float]:
    return [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]


def test_disable_dropout_zeroes_the_trained_models_dropout(tiny_model, tmp_path):
    """grpo.disable_dropout reaches GRPOConfig and sets every dropout of the trained model (LoRA's
    included) to 0, so two forward passes in train mode agree, as tiny-grpo's eval-mode old
    log-probs agree with its first update's; TRL's default keeps LoRA's dropout 0.05."""
    kept = settings_trainer(tiny_model, tmp_path / "kept", lora_dropout=0.05)
    off = settings_trainer(tiny_model, tmp_path / "off", lora_dropout=0.05, disable_dropout=True)
    assert (kept.args.disable_dropout, off.args.disable_dropout) == (False, True)
    assert 0.05 in dropout_probabilities(kept.model)
    assert dropout_probabilities(off.model) and set(dropout_probabilities(off.model)) == {0.0}
    for trainer, same in ((kept, False), (off, True)):
        inputs = loss_inputs(trainer, [1.0, -1.0])
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        trainer.model.train()
        with torch.no_grad():
            first, second = (trainer._get_per_token_logps_and_entropies(trainer.model, ids, torch.ones_like(ids), 6)[0]
                             for _ in range(2))  # fmt: skip
        assert torch.equal(first, second) is same


def test_bias_corrected_kl_changes_the_kl_gradient_not_its_value(tiny_model, tmp_path):
    """grpo.use_bias_correction_kl reaches GRPOConfig; on-policy the ratio is 1, so the loss is the
    same, but TRL's default multiplies the k3 KL by the differentiable ratio and its gradient is
    another than tiny-grpo's plain k3 (advantages 0: the gradient is the KL term's alone)."""
    corrected = settings_trainer(tiny_model, tmp_path / "corrected", beta=0.1, loss_type="grpo")
    plain = settings_trainer(tiny_model, tmp_path / "plain", beta=0.1, loss_type="grpo", use_bias_correction_kl=False)
    assert (corrected.args.use_bias_correction_kl, plain.args.use_bias_correction_kl) == (True, False)
    plain.model.load_state_dict(corrected.model.state_dict())
    inputs = loss_inputs(corrected, [0.0, 0.0])
    corrected_loss, corrected_grad = loss_and_gradient(corrected, inputs)
    plain_loss, plain_grad = loss_and_gradient(plain, inputs)
    assert corrected_loss == pytest.approx(plain_loss, rel=1e-5) and plain_loss > 0
    assert not torch.allclose(corrected_grad, plain_grad, rtol=1e-3, atol=1e-7)


def test_vllm_importance_sampling_correction_weights_the_loss_when_on(tiny_model, tmp_path):
    """grpo.vllm_importance_sampling_correction and its mode and bounds reach GRPOConfig; with vLLM
    sampling, TRL's loss multiplies each completion's token losses by the ratio its generation step
    computed (0: a sequence masked for a ratio above clip_max), and without the correction it does
    not. The ratio is given here as vLLM's sampling would hand it over (no vLLM runs in this test)."""
    on = settings_trainer(tiny_model, tmp_path / "on", loss_type="grpo", vllm_importance_sampling_clip_max=2.0)
    off = settings_trainer(tiny_model, tmp_path / "off", loss_type="grpo", vllm_importance_sampling_correction=False,
                           vllm_importance_sampling_mode="token_truncate")  # fmt: skip
    assert (on.args.vllm_importance_sampling_correction, on.args.vllm_importance_sampling_mode) == (True, "sequence_mask")
    assert (on.args.vllm_importance_sampling_clip_max, on.args.vllm_importance_sampling_clip_min) == (2.0, None)
    assert (off.args.vllm_importance_sampling_correction, off.args.vllm_importance_sampling_mode) == (False, "token_truncate")
    off.model.load_state_dict(on.model.state_dict())
    for trainer in (on, off):
        trainer.use_vllm = True  # as a trainer sampling with vLLM
    inputs = {**loss_inputs(on, [1.0, -1.0]), "importance_sampling_ratio": torch.tensor([[1.0], [0.0]])}
    masked, _ = loss_and_gradient(on, inputs)
    uncorrected, _ = loss_and_gradient(off, inputs)
    first_only, _ = loss_and_gradient(off, {**inputs, **{k: inputs[k][:1] for k in inputs if k != "ref_per_token_logps"},
                                            "ref_per_token_logps": inputs["ref_per_token_logps"][:1]})  # fmt: skip
    # the masked second completion leaves the loss: what is left is half the first one's loss
    assert masked == pytest.approx(first_only / 2, rel=1e-4)
    assert masked != pytest.approx(uncorrected, rel=1e-3)


def test_importance_sampling_mode_outside_trls_fails_naming_the_key():
    with pytest.raises(ValueError, match="grpo.vllm_importance_sampling_mode"):
        GRPOSettings(vllm_importance_sampling_mode="sequence_clip")
