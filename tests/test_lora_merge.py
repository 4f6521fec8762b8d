"""Merging an adapter on the CPU, in the base checkpoint's own dtype (the merge job asks for no GPU)."""

import torch

from conftest import build_tiny_model
from execrl.training.lora import merge_adapter


def test_merge_on_cpu_keeps_the_base_dtype_and_the_adapters_outputs(tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = build_tiny_model(tmp_path, ["def f(x):\n    return x + 1\n"] * 20)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    model.save_pretrained(tmp_path / "bf16")  # a base checkpoint stored in bf16, as the hub's are
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "bf16")
    adapted = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    adapted.save_pretrained(tmp_path / "adapter")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "adapter")

    merge_adapter(str(tmp_path / "bf16"), tmp_path / "adapter", tmp_path / "merged")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype="auto")
    assert merged.dtype == torch.bfloat16
    tokens = torch.tensor([[1, 5, 9, 3]])
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tmp_path / "bf16", dtype=torch.float32), tmp_path / "adapter"
    )
    with torch.no_grad():
        expected = reference(tokens).logits
        got = merged.to(torch.float32)(tokens).logits
    assert torch.allclose(got, expected, atol=0.05), (got - expected).abs().max()
