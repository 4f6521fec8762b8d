"""The memory plan's architecture terms, checked against figures from the models' published shapes."""

import json

import pytest

from execrl.cluster.memory_plan import (
    SHIPPED_CONFIGS,
    GIB,
    architecture,
    gpu_memory_bytes,
    vllm_server_kv_cache_bytes,
)

# Published parameter counts of the Qwen2.5 Instruct models (billions, from their model cards' totals).
PUBLISHED_PARAMETERS_B = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54,
    "Qwen/Qwen2.5-3B-Instruct": 3.09,
    "Qwen/Qwen2.5-7B-Instruct": 7.61,
    "Qwen/Qwen2.5-14B-Instruct": 14.7,
    "Qwen/Qwen2.5-32B-Instruct": 32.5,
}


@pytest.mark.parametrize("source", sorted(PUBLISHED_PARAMETERS_B))
def test_parameter_count_matches_published_size(source):
    counted = architecture(source).parameters() / 1e9
    assert counted == pytest.approx(PUBLISHED_PARAMETERS_B[source], rel=0.02)


def test_32b_full_context_kv_cache_is_8_gib_per_sequence():
    arch = architecture("Qwen/Qwen2.5-32B-Instruct")
    assert vllm_server_kv_cache_bytes(arch, max_model_len=32768, concurrent_sequences=1) == 8 * GIB
    # Halving max_model_len halves the cache the server must hold.
    assert vllm_server_kv_cache_bytes(arch, 16384, 1) == 4 * GIB


def test_local_config_json_wins_over_the_shipped_copy(tmp_path):
    shipped = json.loads(SHIPPED_CONFIGS.read_text())["Qwen/Qwen2.5-1.5B"]
    (tmp_path / "config.json").write_text(json.dumps({**shipped, "num_hidden_layers": 2}))
    assert architecture("Qwen/Qwen2.5-1.5B", tmp_path).num_hidden_layers == 2
    assert architecture("Qwen/Qwen2.5-1.5B").num_hidden_layers == 28


def test_unknown_model_names_the_shipped_ones():
    with pytest.raises(ValueError, match="Qwen/Qwen2.5-1.5B"):
        architecture("org/unknown-model")


def test_checkpointed_activations_grow_with_micro_batch_and_length():
    arch = architecture("Qwen/Qwen2.5-3B-Instruct")
    one = arch.checkpointed_activation_bytes(1, 2048)
    assert arch.checkpointed_activation_bytes(2, 2048) == 2 * one
    assert arch.checkpointed_activation_bytes(1, 4096) == 2 * one
    # The figure: layer inputs alone for 168 sequences of 2048 tokens at 3B are ~50 GB.
    layer_inputs = 168 * 2048 * arch.hidden_size * 2 * arch.num_hidden_layers
    assert layer_inputs / 1e9 == pytest.approx(50.7, rel=0.02)
    assert arch.checkpointed_activation_bytes(168, 2048) > layer_inputs


def test_gpu_models_memory_and_bf16():
    assert gpu_memory_bytes("V100") == (32e9, False)
    assert gpu_memory_bytes("H200")[0] == 141e9
    assert gpu_memory_bytes(None) == gpu_memory_bytes("A100-80")
    with pytest.raises(ValueError, match="T4"):
        gpu_memory_bytes("T4")
