"""LoRA adapters (PEFT): their settings, and merging them into the base model."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoRASettings:
    """Low-rank adapters trained in place of the full model."""

    r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )

    def peft_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


def merge_adapter(base_model: str, adapter_dir: str | Path, output_dir: str | Path) -> None:
    """Fold the adapter into the base weights: a plain model folder transformers and vLLM load.

    On the CPU, in the base checkpoint's own dtype (the workflow's merge job asks for no GPU)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_model, dtype="auto", device_map="cpu")
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(output_dir), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(output_dir))
