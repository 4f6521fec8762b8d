"""A model given as a local folder: checked before any job, and its files are the inputs of the
jobs that read it, so new weights in the same folder rerun them."""

import os
import time

import pytest
import yaml

from conftest import EMBEDDED, build_tiny_model, run_snakemake
from execrl.config import ConfigError, check_local_model, local_model_files


def _folder(tmp_path, *files):
    folder = tmp_path / "model"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("{}")
    return str(folder)


def test_a_local_model_folder_needs_its_tokenizer(tmp_path):
    folder = _folder(tmp_path, "config.json", "model.safetensors")
    with pytest.raises(ConfigError, match=r"models\.mine\.source: .* holds no tokenizer .*tokenizer\.save_pretrained"):
        check_local_model("mine", {"source": folder})
    (tmp_path / "model" / "tokenizer.json").write_text("{}")
    check_local_model("mine", {"source": folder})


def test_a_revision_means_nothing_for_a_local_folder(tmp_path):
    folder = _folder(tmp_path, "config.json", "tokenizer_config.json")
    with pytest.raises(ConfigError, match=r"models\.mine\.revision: 'v1' names a hub revision"):
        check_local_model("mine", {"source": folder, "revision": "v1"})


def test_the_files_of_a_local_folder_are_its_top_level_files(tmp_path):
    folder = _folder(tmp_path, "config.json", "tokenizer.json", ".lock")
    (tmp_path / "model" / "checkpoint-1").mkdir()
    assert local_model_files(folder) == [f"{folder}/config.json", f"{folder}/tokenizer.json"]


def test_new_weights_in_a_local_folder_rerun_the_jobs_that_read_it(workflow_copy, tmp_path):
    model = build_tiny_model(tmp_path / "local", ["def f(x):\n    return x + 1\n"] * 50)
    overlay = {
        "experiment": {"models": ["mine"], "methods": ["base"], "eval_splits": ["test"]},
        "models": {"mine": {"source": model, "params_b": 0.001}},
        "generation": {"num_samples": 1, "max_new_tokens": 8},
        "evaluation": {"max_problems": 2, "k": [1]},
    }
    (workflow_copy / "config" / "local.yaml").write_text(yaml.safe_dump(overlay))
    args = ("results/report.html", "--until", "generate_candidates", "--configfile", EMBEDDED, "config/local.yaml")
    run_snakemake(workflow_copy, *args)
    assert "rule generate_candidates:" not in run_snakemake(workflow_copy, "-n", *args).stdout

    # the same bytes again rerun nothing (Snakemake compares an updated input's checksum)...
    weights = f"{model}/model.safetensors"
    later = time.time() + 5
    os.utime(weights, (later, later))
    assert "rule generate_candidates:" not in run_snakemake(workflow_copy, "-n", *args).stdout
    # ...new weights in the same folder do
    data = bytearray(open(weights, "rb").read())
    data[-1] ^= 1  # the last weight's last byte
    open(weights, "wb").write(bytes(data))
    os.utime(weights, (later, later))
    replanned = run_snakemake(workflow_copy, "-n", *args).stdout
    assert "rule generate_candidates:" in replanned and "model.safetensors" in replanned


def test_config_readmes_local_model_example_is_a_config_the_workflow_accepts(tmp_path):
    """config/README.md's "Your own model" example, its folder made here: accepted over the
    embedded default with a tokenizer in the folder, refused without one."""
    import re
    from pathlib import Path

    from execrl.config import merged_config

    repo = Path(__file__).resolve().parents[1]
    section = (repo / "config" / "README.md").read_text().split("## Your own model", 1)[1]
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    folder = _folder(tmp_path, "config.json", "tokenizer.json")
    example["models"]["mine"]["source"] = folder
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump(example))
    config = merged_config([repo / EMBEDDED, overlay], base=repo / "config" / "config.yaml")
    assert config["models"]["mine"]["finetuning"] == "lora" and config["experiment"]["models"] == ["mine"]
    os.remove(f"{folder}/tokenizer.json")
    with pytest.raises(ConfigError, match="holds no tokenizer"):
        merged_config([repo / EMBEDDED, overlay], base=repo / "config" / "config.yaml")


def test_the_reports_configuration_shows_only_what_the_experiment_runs(tmp_path):
    """An overlay naming its own data set and model: the report's configuration holds those, not
    the data sets, models and tiny-model shape of the config laid under it."""
    from pathlib import Path

    from execrl.config import merged_config, shown_in_report, without_runtime_settings

    repo = Path(__file__).resolve().parents[1]
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"experiment": {"models": ["mine"], "methods": ["base"]},
                                       "models": {"mine": {"source": _folder(tmp_path, "config.json", "tokenizer.json"),
                                                           "params_b": 1.5}}}))
    base = repo / "config" / "config.yaml"
    embedded = shown_in_report(without_runtime_settings(merged_config([repo / EMBEDDED], base=base)))
    assert set(embedded["models"]) == {"tiny"} and set(embedded["datasets"]) == {"builtin"} and "tiny_model" in embedded
    mine = shown_in_report(without_runtime_settings(merged_config([repo / EMBEDDED, overlay], base=base)))
    assert set(mine["models"]) == {"mine"} and set(mine["datasets"]) == {"builtin"} and "tiny_model" not in mine
    assert "staging" not in mine and "cluster" not in mine
