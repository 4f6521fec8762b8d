"""The LoRA weight sync to vLLM (execrl.generation.weight_sync) against TRL 1.16's, which merges the adapter
into the bf16 base weights and unmerges it again on every sync."""

import copy

import pytest
import torch

from execrl.generation.weight_sync import vllm_generation_class

SYNCS = 100


@pytest.fixture(scope="module")
def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


def lora_model(seed=0, **lora):
    """A small bf16 Llama with a LoRA adapter whose B is not zero (as after some training)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    base = LlamaForCausalLM(config).to(torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"],
                                            lora_dropout=0.0, task_type="CAUSAL_LM", **lora))
    train_step(model, torch.Generator().manual_seed(seed))
    return model


def train_step(model, generator, size=0.02):
    """Move the adapter as an optimizer step would (the base stays frozen)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.add_(size * torch.randn(param.shape, generator=generator).to(param.dtype))


def generation(cls, model, accelerator):
    """A `VLLMGeneration` of class `cls` with only what its weight walk reads (no vLLM engine)."""
    from trl.distributed import DistributedBackend

    instance = object.__new__(cls)
    instance.model = model
    instance._dist = DistributedBackend(accelerator)
    return instance


def base_weights(model):
    return {name: param.detach().clone() for name, param in model.named_parameters() if "lora_" not in name}


def sync_repeatedly(cls, model, accelerator, syncs=SYNCS):
    """`syncs` syncs of `model` through `cls`'s weight walk, the adapter moving between them."""
    sync = generation(cls, model, accelerator)
    generator = torch.Generator().manual_seed(1)
    for _ in range(syncs):
        train_step(model, generator)
        for _name, _tensor in sync._iter_named_params():
            pass


def test_base_weights_stay_bit_identical_over_100_syncs_in_bf16(accelerator):
    from trl.generation.vllm_generation import VLLMGeneration

    model = lora_model()
    trl_model = copy.deepcopy(model)
    before = base_weights(model)
    sync_repeatedly(vllm_generation_class(), model, accelerator)
    after = base_weights(model)
    assert after.keys() == before.keys()
    assert [name for name in before if not torch.equal(after[name], before[name])] == []
    # The same syncs through TRL's merge-and-unmerge move the frozen base (what this guards against).
    sync_repeatedly(VLLMGeneration, trl_model, accelerator)
    moved = [name for name, weight in base_weights(trl_model).items() if not torch.equal(weight, before[name])]
    assert "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight" in moved


def test_weights_sent_equal_the_merged_model_and_trls_merge(accelerator):
    from trl.generation.vllm_generation import VLLMGeneration

    model = lora_model(seed=3)
    sent = dict(generation(vllm_generation_class(), model, accelerator)._iter_named_params())
    merged = copy.deepcopy(model).merge_and_unload()
    expected = dict(merged.named_parameters())
    assert sent.keys() == expected.keys()
    assert all(sent[name].dtype == torch.bfloat16 for name in sent)
    assert [name for name in sent if not torch.equal(sent[name], expected[name])] == []
    # The adapted layers really differ from the base (the comparison is not between base weights).
    assert not torch.equal(sent["model.layers.1.mlp.up_proj.weight"], model.base_model.model.model.layers[1].mlp.up_proj.base_layer.weight)
    # And equal, bit for bit, what TRL's in-place merge sends.
    trl_model = copy.deepcopy(model)
    trls = {name: tensor.clone() for name, tensor in generation(VLLMGeneration, trl_model, accelerator)._iter_named_params()}
    assert trls.keys() == sent.keys()
    assert [name for name in sent if not torch.equal(sent[name], trls[name])] == []


def test_a_model_loaded_with_the_weights_sent_generates_as_the_merged_model(accelerator):
    """What vLLM loads (the weights sent) generates what the merged model generates."""
    from transformers import LlamaForCausalLM

    model = lora_model(seed=5)
    sync_repeatedly(vllm_generation_class(), model, accelerator, syncs=3)
    sent = dict(generation(vllm_generation_class(), model, accelerator)._iter_named_params())
    merged = copy.deepcopy(model).merge_and_unload().eval()
    loaded = LlamaForCausalLM(merged.config).to(torch.bfloat16).eval()
    loaded.load_state_dict(sent, strict=True)
    prompt = torch.tensor([[1, 5, 9, 13, 2]])
    kwargs = {"max_new_tokens": 12, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        expected = merged.generate(prompt, **kwargs)
        assert torch.equal(loaded.generate(prompt, **kwargs), expected)
        with model.disable_adapter():  # the adapter changes what is generated
            assert not torch.equal(model.generate(input_ids=prompt, **kwargs), expected)


def test_a_lora_variant_is_refused_by_name(accelerator):
    model = lora_model(use_dora=True)
    with pytest.raises(NotImplementedError, match=r"layers\.0\.self_attn\.q_proj.*DoRA"):
        dict(generation(vllm_generation_class(), model, accelerator)._iter_named_params())
