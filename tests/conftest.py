import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _mbpp_dir() -> Path:
    """MBPP's files: `EXECRL_MBPP_DIR`, else `../shared/data/mbpp` beside the checkout, else this
    machine's shared folder (for a checkout elsewhere, e.g. under /tmp)."""
    if os.environ.get("EXECRL_MBPP_DIR"):
        return Path(os.environ["EXECRL_MBPP_DIR"])
    beside = REPO.parent / "shared" / "data" / "mbpp"
    return beside if beside.exists() else Path("/work/shared/data/mbpp")


MBPP_DIR = _mbpp_dir()
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
EMBEDDED = ".test/config/config.yaml"
"""The embedded default; test configs are laid over it (`--configfile EMBEDDED config/test.yaml`)."""


def copy_workflow(destination: Path) -> Path:
    """A private copy of the workflow and configs, so a test run never touches the checkout's results."""
    for name in ("workflow", "config", "profiles", ".test"):
        shutil.copytree(REPO / name, destination / name)
    return destination


def planned_jobs_of(workdir: Path, *configfiles: str, target: str = "results/report.html") -> dict:
    """Output path -> {rule, params, directory, input} of every job the configs' DAG has (forced), read
    from Snakemake's own DAG by `tests/workflow_plan.py` in a process of its own (no job runs)."""
    import json

    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "workflow_plan.py"), str(workdir), target, *configfiles],
        cwd=workdir, capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        raise AssertionError(f"planning {' '.join(configfiles)} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout)


def run_snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # Shell rules find `accelerate` and `python` where the tests' interpreter lives.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PATH": path}
    result = subprocess.run(
        [SNAKEMAKE, "--cores", "2", *args], cwd=workdir, capture_output=True, text=True, env=env, timeout=1800
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}")
    return result


def segments(workdir: Path, *configfiles: str):
    """The path segments (execrl.run_paths) of the config `--configfile configfiles` gives in `workdir`."""
    from execrl.config import merged_config
    from execrl.run_paths import RunSegments

    return RunSegments(merged_config([workdir / f for f in configfiles], base=workdir / "config" / "config.yaml"))


def dpo_paths(workdir: Path, configfile: str) -> dict[str, str]:
    """Where the embedded default's DPO run (builtin, tiny, seed 0) writes under `configfile`."""
    runs = segments(workdir, EMBEDDED, configfile)
    trained = runs.run("builtin", "tiny", "dpo", "trained")
    return {
        "pairs": f"results/rl_data/{runs.dataset['builtin']}/{runs.model['tiny']}/{runs.rl_data['tiny']}/0/pairs.jsonl",
        "trained": f"results/models/{trained}/0/trained",
        "metrics": f"results/training/{trained}/0/metrics.jsonl",
        "log": f"logs/train/{trained}/0.log",
        "checkpoints": f"results/checkpoints/{trained}/0",
    }


@pytest.fixture
def workflow_copy(tmp_path):
    return copy_workflow(tmp_path)


def build_tiny_model(root: Path, texts: list[str]) -> str:
    """A one-layer model with a tokenizer trained on `texts`: enough to train and sample in seconds."""
    from execrl.models.tiny_model import TinyModelConfig, init_model, train_tokenizer

    train_tokenizer(texts, 300, root / "tokenizer")
    config = TinyModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64)
    init_model(root / "tokenizer", config, seed=0, out_dir=root / "model")
    return str(root / "model")
