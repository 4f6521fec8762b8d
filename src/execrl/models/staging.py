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


class StagingError(RuntimeError):
    """A hub model cannot be staged; the message names the setting and what to change."""


def stage_model(
    repo_id: str,
    destination: str | Path,
    revision: str | None = None,
    cache_dir: str | None = None,
    setting: str = "source",
) -> Path:
    """Download `repo_id` at `revision` into `destination`, a folder `from_pretrained` loads offline.
    `setting` names the config key that gave `repo_id` (models.NAME.source) in error messages."""
    from huggingface_hub import snapshot_download

    destination = Path(destination)
    try:
        snapshot_download(
            repo_id=repo_id,
            revision=revision,
            cache_dir=cache_dir,
            local_dir=destination,
            allow_patterns=MODEL_FILES,
        )
    except Exception as error:  # noqa: BLE001 - turned into a message naming the setting, or re-raised
        message = staging_failure(error, repo_id, revision, setting)
        if message is None:
            raise
        raise StagingError(message) from error
    if not (destination / "config.json").is_file():
        raise FileNotFoundError(f"{repo_id}@{revision or 'main'} has no config.json: not a transformers model")
    return destination


def staging_failure(error: BaseException, repo_id: str, revision: str | None, setting: str) -> str | None:
    """What to tell the user about huggingface_hub's `error`, or None for an error it does not
    explain (raised as it is). Checked most specific first: the hub's error classes subclass one
    another (a gated repository is also a missing one to a client without access)."""
    from huggingface_hub import errors

    revision_setting = setting.rsplit(".", 1)[0] + ".revision"
    where = f"{setting}: {repo_id!r}"
    local_hint = (
        f"a local model folder is written as a path (./{repo_id} or an absolute path; "
        f"nothing is at {str(Path(repo_id).absolute())!r})"
    )
    if isinstance(error, errors.GatedRepoError):
        return (
            f"{where} is gated on the Hugging Face hub: accept its terms on https://huggingface.co/{repo_id} "
            "and log in on this machine (`hf auth login`, or set HF_TOKEN)"
        )
    if isinstance(error, errors.RepositoryNotFoundError):
        return (
            f"{where} is not a model repository on the Hugging Face hub (or it is private: log in with "
            f"`hf auth login` or set HF_TOKEN); {local_hint}"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return f"{revision_setting}: {repo_id!r} has no revision {revision!r} on the Hugging Face hub (a branch, tag or commit)"
    if isinstance(error, errors.LocalEntryNotFoundError):
        cause = error.__cause__ or error.__context__
        reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(error).splitlines()[0]
        return (
            f"{where}: the Hugging Face hub cannot be reached from this machine ({reason}). stage_model runs "
            "where Snakemake runs: run it where the hub is reachable (or set HF_ENDPOINT to a mirror), "
            f"or download the model elsewhere and give its folder as {setting}; {local_hint}"
        )
    return None


def work_offline() -> None:
    """Keep a job off the hub: it reads only staged files. Call before importing transformers."""
    os.environ["HF_HUB_OFFLINE"] = "1"
