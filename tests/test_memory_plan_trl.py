"""The memory plan's activation terms against a real TRL 1.16 trainer step on the CPU.

One micro-batch through execrl's GRPO trainer (LengthChunkedGRPOTrainer) and TRL's DPOTrainer,
both with TRL's fused, chunked LM head, at a small Qwen2 shape with random weights, fp32 on the
CPU. The peak of each term comes from torch's profiler (profile_memory: every allocation and free
of torch's CPU allocator, in time order; execrl.planning.memory_measure says how the step is cut into
terms). Each term within 25% of the plan's (execrl.planning.memory_plan.Architecture.activation_bytes with
the CPU's fp32 and TRL's torch fallback of the Triton kernel). On a GPU, tests/test_gpu.py.
"""

import pytest

from execrl.planning.memory_measure import StepShape, measure_cpu_step, planned_activation_bytes
from execrl.planning.memory_plan import GRPO_SCORE_CHUNKS, Architecture

# 2 layers, GQA, a vocabulary below TRL's 32768-wide tile: small enough for seconds on a busy CPU.
SHAPE = Architecture(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=384, vocab_size=8192, tie_word_embeddings=True)
MEASURED_AS = {"saved_activations": "layer_inputs", "lm_head": "lm_head", "recompute": "recompute",
               "embedding_gradient": "embedding_gradient"}


def test_grpo_scores_in_the_chunks_the_plan_assumes():
    from execrl.training.grpo import LengthChunkedGRPOTrainer

    assert LengthChunkedGRPOTrainer.score_chunks == GRPO_SCORE_CHUNKS


@pytest.mark.parametrize(
    "shape",
    [
        # LoRA with dropout, checkpointed, 4 completions each scored on its own (GRPO's chunks)
        StepShape("grpo", micro_batch=4, prompt_length=32, completion_length=96, lora=True),
        # grpo.gradient_checkpointing: false: every layer's activations kept
        StepShape("grpo", micro_batch=4, prompt_length=32, completion_length=96, lora=True,
                  gradient_checkpointing=False),
        # full weights: the head's fp32 weight gradient, norms that train, the embedding's gradient,
        # a frozen reference
        StepShape("dpo", micro_batch=2, prompt_length=32, completion_length=96, lora=False),
    ],
    ids=["grpo-lora", "grpo-lora-no-checkpointing", "dpo-full"],
)
def test_activation_terms_match_a_real_trainer_step(tmp_path, shape):
    measured = measure_cpu_step(SHAPE, shape, tmp_path)
    planned = planned_activation_bytes(SHAPE, shape, on_cpu=True)
    ratios = {term: measured[MEASURED_AS[term]] / planned[term] for term in planned if planned[term]}
    assert all(0.75 <= ratio <= 1.25 for ratio in ratios.values()), (ratios, measured, planned)
    if not planned["embedding_gradient"]:  # LoRA: the embedding's weight makes no gradient
        assert measured["embedding_gradient"] == 0
    # The step's peak is the saved activations plus the largest backward term, not their sum.
    backward = max(planned["lm_head"], planned["recompute"], planned["embedding_gradient"])
    peak_planned = planned["saved_activations"] + backward
    assert 0.75 <= measured["step_peak"] / peak_planned <= 1.25, (measured, planned)
