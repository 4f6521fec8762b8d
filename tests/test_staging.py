"""Staging a hub model for offline jobs: what reaches huggingface_hub's `snapshot_download`
(checked against its real signature), and that a staged folder loads with the hub offline."""

import inspect
import os
import shutil
import subprocess
import sys

import huggingface_hub
import pytest

from conftest import build_tiny_model
from execrl.models import staging


def test_stage_model_asks_for_the_weights_config_and_tokenizer_at_the_revision(tmp_path, monkeypatch):
    source = build_tiny_model(tmp_path / "hub", ["def f(x):\n    return x\n"] * 20)
    seen = {}
    real = inspect.signature(inspect.unwrap(huggingface_hub.snapshot_download))

    def snapshot_download(*args, **kwargs):
        seen.update(real.bind(*args, **kwargs).arguments)
        # The hub's files land in local_dir, as the real call does.
        shutil.copytree(source, kwargs["local_dir"], dirs_exist_ok=True)
        return str(kwargs["local_dir"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    destination = tmp_path / "resources" / "models" / "m"
    staging.stage_model("org/model", destination, revision="abc123", cache_dir=str(tmp_path / "cache"))
    assert seen["repo_id"] == "org/model" and seen["revision"] == "abc123"
    assert seen["cache_dir"] == str(tmp_path / "cache") and seen["local_dir"] == destination
    assert "*.safetensors" in seen["allow_patterns"] and "*.json" in seen["allow_patterns"]
    # A job loads it with the hub offline.
    code = "from transformers import AutoModelForCausalLM as M; M.from_pretrained(__import__('sys').argv[1])"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-c", code, str(destination)], check=True, env=env)


def test_a_repository_without_a_model_config_fails_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda **kwargs: str(kwargs["local_dir"]))
    with pytest.raises(FileNotFoundError, match="org/data-only@main has no config.json"):
        staging.stage_model("org/data-only", tmp_path / "m")
