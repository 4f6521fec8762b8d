"""A bad config fails before any job, with one message naming the key."""

import re

import pytest
import yaml

from conftest import EMBEDDED, run_snakemake


def write_overlay(workdir, overlay):
    path = workdir / "config" / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return "config/overlay.yaml"


@pytest.mark.parametrize(
    "overlay, expected",
    [
        ({"generation": {"temprature": 0.5}}, "temprature"),
        ({"generation": {"num_samples": "eight"}}, "eight"),
        ({"experiment": {"datasets": ["nosuchdata"]}}, "nosuchdata"),
        ({"experiment": {"models": ["gpt-nothing"]}}, "gpt-nothing"),
        # a local model folder that is not there, or written with a `~` nothing expands
        ({"models": {"tiny": {"source": "/nonexistent/model"}}}, "models.tiny.source: the local model folder '/nonexistent/model' does not exist"),
        ({"models": {"tiny": {"source": "./config"}}}, "models.tiny.source: the local model folder './config' has no config.json"),
        ({"models": {"tiny": {"source": "~/models/qwen"}}}, "models.tiny.source: '~/models/qwen': `~` is not expanded"),
        # a relative folder of more parts than a hub id (organization/name) is a folder, not a hub id
        ({"models": {"tiny": {"source": "models/qwen/v1"}}}, "models.tiny.source: the local model folder 'models/qwen/v1' does not exist"),
        # what the first job (prepare_dataset) would refuse: a misspelled option, subset or split, a
        # local source that is not there, a jsonl folder without the split's file
        ({"datasets": {"builtin": {"options": {"n_trian": 5}}}}, "datasets.builtin.options: unknown option(s) ['n_trian'] for adapter 'builtin'"),
        ({"datasets": {"builtin": {"subset": "full"}}}, "datasets.builtin.subset: adapter 'builtin' takes no subset"),
        ({"datasets": {"builtin": {"test_split": "tset"}}}, "datasets.builtin.test_split: unknown split 'tset' for adapter 'builtin'"),
        (
            {"experiment": {"datasets": ["mine"]}, "datasets": {"mine": {"adapter": "jsonl", "source": "data/mine"}}},
            "datasets.mine.source: 'data/mine' does not exist (a local file or folder",
        ),
        (
            {"experiment": {"datasets": ["mbpp"]}, "datasets": {"mbpp": {"source": "data/mbpp/mbpp.jsonl"}}},
            "datasets.mbpp.source: 'data/mbpp/mbpp.jsonl' does not exist (a local path, and not a hub dataset id",
        ),
        (
            {"experiment": {"datasets": ["mine"]},
             "datasets": {"mine": {"adapter": "jsonl", "source": "./config", "train_split": "x", "test_split": "y"}}},
            "_split: './config' has no ",
        ),
        # training must not learn the problems evaluation scores
        ({"datasets": {"builtin": {"train_split": "test"}}}, "datasets.builtin.train_split: 'test' is also the test split"),
        (
            {"experiment": {"datasets": ["mine"]}, "datasets": {"mine": {"adapter": "jsonl", "source": "./config/config.yaml"}}},
            "datasets.mine.source: './config/config.yaml' is one .jsonl file, which is every split at once",
        ),
        # DPO's pairs need a passing and a failing sample of one problem
        ({"generation": {"num_samples": 1}}, "generation.num_samples: 1 sample per problem gives DPO no preference pair"),
        ({"experiment": {"methods": ["ppo"]}}, "ppo"),
        ({"prompt": {"template": "{prompt} {solution}"}}, "solution"),
        ({"datasets": {"builtin": {"adapter": "csv"}}}, "csv"),
        ({"srrl": {"budget": "flops"}}, "flops"),
        ({"method_overrides": {"ppo": {"grpo": {"epsilon": 0.3}}}}, "method_overrides names 'ppo'"),
        ({"method_overrides": {"dpo": {"grpo": {"epsilon": 0.3}}}}, "method_overrides.dpo.grpo: dpo does not read 'grpo'"),
        ({"method_overrides": {"grpo": {"grpo": {"lr": 0.1}}}}, "method_overrides.grpo.grpo: unknown key(s) lr"),
        (
            {"experiment": {"methods": ["base", "spiral"]}, "grpo": {"use_vllm": True, "vllm_mode": "server"}},
            "spiral with grpo.vllm_mode: server",
        ),
        # SRRL's token budget is what GRPO sampled: it cannot run without GRPO.
        ({"experiment": {"methods": ["base", "srrl"]}, "srrl": {"budget": "generated_tokens"}}, "srrl.budget: generated_tokens"),
        # The former budget `tokens` (prompt and completion tokens): the error names what replaces it.
        ({"srrl": {"budget": "tokens"}}, "srrl.budget: tokens is no longer a budget"),
        ({"method_variants": {"srrl_tokens": {"method": "srrl", "overrides": {"srrl": {"budget": "tokens"}}}}},
         "method_variants.srrl_tokens.overrides.srrl.budget: tokens is no longer a budget"),
    ],
)
def test_bad_config_fails_before_any_job(workflow_copy, overlay, expected):
    overlay_path = write_overlay(workflow_copy, overlay)
    result = run_snakemake(workflow_copy, "-n", "results/report.html", "--configfile", EMBEDDED, overlay_path, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert expected in output
    assert not re.search(r"^(local)?rule \w+:$", result.stdout, re.MULTILINE)  # no job was planned
    assert not (workflow_copy / "results").exists()


def test_default_config_plans(workflow_copy):
    result = run_snakemake(workflow_copy, "-n", "results/report.html")
    assert "render_report" in result.stdout


@pytest.mark.parametrize(
    "overlay, expected",
    [
        ({"genration": {"temperature": 0.5}}, "the config's top level: Additional properties are not allowed ('genration' was unexpected)"),
        ({"generation": {"temprature": 0.5}}, "generation: Additional properties are not allowed ('temprature' was unexpected)"),
        ({"generation": {"num_samples": "eight"}}, "generation.num_samples: 'eight' is not of type 'integer'"),
    ],
)
def test_a_schema_violation_is_one_line_naming_the_key(workflow_copy, overlay, expected):
    """Not jsonschema's text, which holds the whole schema and the whole config (thousands of lines)."""
    overlay_path = write_overlay(workflow_copy, overlay)
    result = run_snakemake(workflow_copy, "-n", "results/report.html", "--configfile", EMBEDDED, overlay_path, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and expected in output
    assert len(output.splitlines()) < 20, output[:2000]


def test_a_repeated_configfile_flag_fails_instead_of_dropping_files(workflow_copy):
    """Snakemake keeps only the last `--configfile`'s files: the embedded default given first
    would be dropped, and the dry run would plan the hub analysis under the overlay alone."""
    overlay_path = write_overlay(workflow_copy, {"experiment": {"seeds": [5]}})
    result = run_snakemake(workflow_copy, "-n", "results/report.html", "--configfile", EMBEDDED,
                           f"--configfile={overlay_path}", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "--configfile is given 2 times, and Snakemake keeps only the last one's files" in output
    assert not re.search(r"^(local)?rule \w+:$", result.stdout, re.MULTILINE)
    # one flag with both files plans the embedded default with the overlay's seed
    planned = run_snakemake(workflow_copy, "-n", "results/report.html", "--configfile", EMBEDDED, overlay_path)
    assert "model=tiny-" in planned.stdout and "seed=5" in planned.stdout


def test_a_builtin_data_set_without_options_beside_another_keeps_its_defaults_to_itself(tmp_path):
    """The builtin adapter's `holdout` default (an `if`/`then` of the schema) goes to the builtin
    data set's options alone, not to another data set also given without options."""
    from execrl.config import merged_config

    overlay = tmp_path / "suite.yaml"
    overlay.write_text("datasets: {suite: {adapter: builtin}}\n")  # beside config.yaml's mbpp, no options either
    config = merged_config([overlay])
    assert config["datasets"]["suite"]["options"] == {"holdout": "task"}
    assert config["datasets"]["mbpp"]["options"] == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("generation:\n  num_samples: 8\n    temperature: 0.7\n", r"not valid YAML: line 3, column 16: mapping values are not allowed here"),
        ("generation:\n\tnum_samples: 8\n", r"not valid YAML: line 2, column 1: .* \(YAML indents with spaces, not tabs\)"),
        ("- experiment\n- datasets\n", r"the top level must be a mapping of sections .*, got a list"),
    ],
    ids=["syntax", "tab", "list"],
)
def test_a_config_file_that_is_not_a_mapping_of_sections_is_named(tmp_path, text, message):
    from execrl.config import ConfigError, merged_config

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(overlay))}: {message}"):
        merged_config([overlay])


def test_the_merged_config_command_names_a_missing_file_in_one_line(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    missing = tmp_path / "missing.yaml"
    result = subprocess.run([sys.executable, "-m", "execrl.config", "--configfile", str(missing)],
                            cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"python -m execrl.config: error: {missing}: no such config file"
    elsewhere = subprocess.run([sys.executable, "-m", "execrl.config"], cwd=tmp_path, capture_output=True, text=True)
    assert elsewhere.returncode == 2 and "config/config.yaml: no such config file (relative to" in elsewhere.stderr


def test_a_k_above_the_samples_per_problem_is_said_when_the_dag_is_built(workflow_copy):
    """pass@k needs k samples per problem: a k above them is named in the dry run (the report
    leaves it out), and the embedded default, whose ks its samples cover, says nothing."""
    from execrl.config import merged_config, unestimated_ks

    overlay_path = write_overlay(workflow_copy, {"evaluation": {"k": [1, 12, 16]}})
    note = ("evaluation.k: pass@12, pass@16 cannot be estimated from 8 samples per problem "
            "(generation.num_samples); the report leaves them out")
    planned = run_snakemake(workflow_copy, "-n", "results/report.html", "--configfile", EMBEDDED, overlay_path)
    assert note in planned.stdout + planned.stderr
    embedded = merged_config([workflow_copy / EMBEDDED], base=workflow_copy / "config" / "config.yaml")
    assert unestimated_ks(embedded) is None
    assert unestimated_ks({**embedded, "evaluation": {**embedded["evaluation"], "k": [1, 9]}}).startswith(
        "evaluation.k: pass@9 cannot be estimated from 8 samples")
