"""The memory plan's activation terms against a real TRL 1.16 trainer step on the CPU.

One micro-batch through execrl's GRPO trainer (LengthChunkedGRPOTrainer) and TRL's DPOTrainer,
both with TRL's fused, chunked LM head, at a small Qwen2 shape with random weights, fp32 on the
CPU. The peak of each term comes from torch's profiler (profile_memory: every allocation and free
of torch's CPU allocator, in time order; execrl.planning.memory_measure says how the step is cut into
terms). Each term within 25% of the plan's (execrl.planning.architecture.Architecture.activation_bytes with
the CPU's fp32 and TRL's torch fallback of the Triton kernel). On a GPU, tests/test_gpu.py.
"""

import pytest

from execrl.planning.memory_measure import StepShape, measure_cpu_step, planned_activation_bytes
from execrl.planning.architecture import Architecture
from execrl.planning.training_plan import GRPO_SCORE_CHUNKS

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


# A full-weight step whose head's weight dominates (a vocabulary of 4 × 32768 tiles, hidden 512)
# and few tokens, so that what the head's backward holds of the weight's gradient decides its peak.
WIDE_HEAD = Architecture(hidden_size=512, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                         intermediate_size=1024, vocab_size=131072, tie_word_embeddings=True)


def test_a_16_bit_full_weight_step_holds_the_heads_gradient_twice(tmp_path):
    """DPO with all weights in bf16 (as on a GPU; here on the CPU): the head's backward returns its
    weight's gradient cast from the fp32 accumulator while that is alive, vocab × hidden × 2 bytes
    beside vocab × hidden × 4. An fp32 step has no such copy, which is why the fp32 test above
    could not see it; the plan without it is short by more than 25% here, as on the GPU."""
    shape = StepShape("dpo", micro_batch=1, prompt_length=4, completion_length=12, lora=False, cpu_dtype="bfloat16")
    measured = measure_cpu_step(WIDE_HEAD, shape, tmp_path)
    planned = planned_activation_bytes(WIDE_HEAD, shape, on_cpu=True)
    ratios = {term: measured[MEASURED_AS[term]] / planned[term] for term in planned if planned[term]}
    assert all(0.75 <= ratio <= 1.25 for ratio in ratios.values()), (ratios, measured, planned)
    # Beyond the 32768-wide bf16 buffer and the fp32 accumulators (32 rows: 2 × 16 tokens), the head's
    # peak is the cast of the gradients, larger than any copy made inside the loop over tiles.
    rows, vocab, hidden = 32, WIDE_HEAD.vocab_size, WIDE_HEAD.hidden_size
    held = rows * 32768 * 2 + (rows + vocab) * hidden * 4
    fold = rows * 32768 * (7 * 4 + 1 + 4)
    products = rows * 32768 * 4 + 32768 * hidden * 4
    cast = (rows + vocab) * hidden * 2
    assert measured["lm_head"] - held == pytest.approx(cast, rel=0.05)
    assert cast > max(fold, products)
    # A plan of the buffer, the accumulators and the fold alone (the fp32 step's) is short by more than 25%.
    assert measured["lm_head"] / (held + fold) > 1.25
