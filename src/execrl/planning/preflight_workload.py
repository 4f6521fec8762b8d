"""What a preflight job trains on: a model folder with random weights from the model's config (no
weights downloaded) and a tokenizer trained here on filler words, and prompts and preference pairs
of filler words at the planned lengths.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

# --- the model: random weights from a config, and a tokenizer built here -------------------------------------


# The tokenizer of a model built here: byte-level BPE trained on the filler words prompts are made
# of (execrl.models.tiny_model.train_tokenizer, as the workflow's tiny model). A hub model's vocabulary is
# larger; ids the random model samples beyond the tokenizer's decode to nothing.
TOKENIZER_VOCAB = 4096


def filler_tokenizer(vocab_size: int, out_dir: Path):
    """A tokenizer trained on `words` text, saved to `out_dir`. No tokenizer is downloaded."""
    from execrl.models.tiny_model import train_tokenizer

    return train_tokenizer([words(400, seed) for seed in range(64)], vocab_size, out_dir)


def tokens_per_word(model_dir: Path) -> float:
    """How many tokens the model's tokenizer makes of one filler word (to size prompts)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    sample = words(2000, 12345)
    return len(tokenizer(sample)["input_ids"]) / 2000


def model_config_of(source: str, configs_dir: Path | None):
    """The transformers config of a hub model: `configs_dir/config.json` (a staged model's folder),
    `configs_dir/SOURCE/config.json` (configs carried to an offline GPU node; an -Instruct model
    shares its base's shape), else the hub's (AutoConfig)."""
    from transformers import AutoConfig

    if configs_dir is not None:
        if (configs_dir / "config.json").is_file():
            return AutoConfig.from_pretrained(str(configs_dir))
        for name in (source, source.removesuffix("-Instruct")):
            path = configs_dir / name / "config.json"
            if path.is_file():
                return AutoConfig.from_pretrained(str(path.parent))
    return AutoConfig.from_pretrained(source)


def build_model(config: dict, model: str, out_dir: Path, configs_dir: Path | None) -> Path:
    """A model folder with random weights and a tokenizer of its vocabulary size, for `model`."""
    import torch
    from transformers import AutoModelForCausalLM

    if (out_dir / "config.json").is_file():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = config["models"][model]
    if spec["source"] == "tiny":
        from execrl.models.tiny_model import TinyModelConfig, init_model

        fields = {f.name for f in dataclasses.fields(TinyModelConfig)}
        shape = TinyModelConfig(**{k: v for k, v in config["tiny_model"].items() if k in fields})
        filler_tokenizer(shape.vocab_size, out_dir)
        init_model(out_dir, shape, seed=0, out_dir=out_dir)
        return out_dir
    model_config = model_config_of(spec["source"], configs_dir)
    tokenizer = filler_tokenizer(min(TOKENIZER_VOCAB, model_config.vocab_size), out_dir)
    model_config.update({"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                         "pad_token_id": tokenizer.pad_token_id})
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # initialised where it is fast; saved in the config's dtype
        weights = AutoModelForCausalLM.from_config(model_config, dtype=torch.bfloat16)
    weights.save_pretrained(str(out_dir))
    del weights
    if device == "cuda":
        torch.cuda.empty_cache()
    return out_dir


# --- the data: prompts and pairs at the planned length ----------------------------------------------------------


# Filler words of letters only (Qwen2's tokenizer splits digits one by one).
FILLER = ["".join(chr(97 + (i * 7 + k * 11) % 26) for k in range(3 + i % 3)) + chr(97 + i // 26 % 26) for i in range(300)]


def words(count: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    return " ".join(rng.choice(FILLER) for _ in range(max(count, 1)))


def write_problems(path: Path, count: int, prompt_words: int) -> Path:
    """`count` assert-tested problems whose prompts are `prompt_words` filler words long."""
    with path.open("w") as handle:
        for i in range(count):
            handle.write(json.dumps({
                "id": f"preflight-{i}", "prompt": words(prompt_words, i), "test_type": "assert",
                "tests": ["assert f() == 1"], "entry_point": "f",
            }) + "\n")
    return path


def write_pairs(path: Path, count: int, length_words: int) -> Path:
    """`count` preference pairs: a prompt of `length_words` // 2 filler words, completions of
    `length_words` (longer than DPO's max_length, which truncates them to it)."""
    with path.open("w") as handle:
        for i in range(count):
            handle.write(json.dumps({
                "prompt": words(length_words // 2, i), "chosen": words(length_words, 1000 + i),
                "rejected": words(length_words, 2000 + i),
            }) + "\n")
    return path
