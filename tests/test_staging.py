"""Staging a hub model for offline jobs: what reaches huggingface_hub's `snapshot_download`
(checked against its real signature), that a staged folder loads with the hub offline, and that
the hub's refusals (answered by a local server as the hub answers them) name the setting."""

import http.server
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import threading

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


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers every request as the Hugging Face hub answers for an error: its status and the
    X-Error-Code header huggingface_hub reads to choose the exception it raises."""

    answers = {"missing": (404, "RepoNotFound"), "gated": (403, "GatedRepo"), "norev": (404, "RevisionNotFound")}

    def do_GET(self):
        kind = next((k for k in self.answers if f"/{k}" in self.path), "missing")
        status, code = self.answers[kind]
        body = json.dumps({"error": code}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def _stage_against(endpoint, repo_id, tmp_path, revision=None):
    """Runs stage_model in a fresh interpreter (huggingface_hub reads HF_ENDPOINT when imported)."""
    code = (
        "import sys\nfrom execrl.models.staging import stage_model, StagingError\n"
        "try:\n    stage_model(sys.argv[1], sys.argv[2], revision=sys.argv[3] or None, "
        "cache_dir=sys.argv[4], setting='models.qwen.source')\n"
        "except StagingError as error:\n    print(error)\n    sys.exit(3)\n"
    )
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "5",
           "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_HOME": str(tmp_path / "home")}
    env.pop("HF_TOKEN", None)
    args = [repo_id, str(tmp_path / "staged"), revision or "", str(tmp_path / "cache")]
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def fake_hub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("repo_id", "revision", "expected"),
    [
        ("org/missing", None, "models.qwen.source: 'org/missing' is not a model repository on the Hugging Face hub"),
        ("org/gated", None, "models.qwen.source: 'org/gated' is gated on the Hugging Face hub: accept its terms"),
        ("org/norev", "v9", "models.qwen.revision: 'org/norev' has no revision 'v9' on the Hugging Face hub"),
    ],
    ids=["missing", "gated", "unknown-revision"],
)
def test_a_hub_refusal_names_the_setting_and_what_to_change(fake_hub, tmp_path, repo_id, revision, expected):
    run = _stage_against(fake_hub, repo_id, tmp_path, revision)
    assert run.returncode == 3, run.stdout + run.stderr
    assert expected in run.stdout
    if repo_id == "org/missing":  # a relative folder written like a hub id: the message says how to write it
        assert "a local model folder is written as a path (./org/missing" in run.stdout


def test_an_unreachable_hub_says_where_stage_model_must_run(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on: the connection is refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = _stage_against(f"http://127.0.0.1:{port}", "org/model", tmp_path)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "models.qwen.source: 'org/model': the Hugging Face hub cannot be reached from this machine" in run.stdout
    assert "ConnectError" in run.stdout and "stage_model runs where Snakemake runs" in run.stdout
