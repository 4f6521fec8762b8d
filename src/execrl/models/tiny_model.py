"""A small causal LM built locally: a BPE tokenizer trained on task text and a Qwen2-architecture model.

It lets the whole workflow run on a laptop or CI with no hub access; a supervised warm start
(`execrl.training.sft`) then gives it a non-trivial baseline for RL to improve on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the locally built model (Qwen2 architecture)."""

    vocab_size: int = 512
    """Target BPE vocabulary size, special tokens included."""
    hidden_size: int = 192
    num_hidden_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 512


def train_tokenizer(texts: Iterable[str], vocab_size: int, out_dir: str | Path):
    """Train a byte-level BPE tokenizer on the given texts and save it as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        padding_side="left",
    )
    wrapped.save_pretrained(str(out_dir))
    return wrapped


def init_model(tokenizer_dir: str | Path, config: TinyModelConfig, seed: int, out_dir: str | Path):
    """Randomly initialise a Qwen2 causal LM sized for the tokenizer, deterministically for a seed."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(seed)
    model_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(model_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return model
