"""Staging hub models on the machine that reaches the hub, so that compute nodes need not.

The `stage_model` rule runs where Snakemake runs; it snapshots the model's weights, config
and tokenizer into `resources/models/{model}`, and every job then loads that folder with the
hub offline. Data sets are staged the same way by `prepare_dataset`, whose normalized files
are all a job reads.
"""

from __future__ import annotations

import os
from pathlib import Path

MODEL_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.py", "*.tiktoken"]
"""What a causal LM needs to load: configs, weights, tokenizer files, and remote code if any.
Other weight formats (PyTorch bins, GGUF, ONNX) a repository may also hold are skipped."""


def stage_model(repo_id: str, destination: str | Path, revision: str | None = None, cache_dir: str | None = None) -> Path:
    """Download `repo_id` at `revision` into `destination`, a folder `from_pretrained` loads offline."""
    from huggingface_hub import snapshot_download

    destination = Path(destination)
    snapshot_download(
        repo_id=repo_id,
        revision=revision,
        cache_dir=cache_dir,
        local_dir=destination,
        allow_patterns=MODEL_FILES,
    )
    if not (destination / "config.json").is_file():
        raise FileNotFoundError(f"{repo_id}@{revision or 'main'} has no config.json: not a transformers model")
    return destination


def work_offline() -> None:
    """Keep a job off the hub: it reads only staged files. Call before importing transformers."""
    os.environ["HF_HUB_OFFLINE"] = "1"
