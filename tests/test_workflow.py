"""The workflow end to end on a reduced embedded default, and what a config change reruns."""

import json
import re

import pytest
import yaml

from conftest import EMBEDDED, copy_workflow, run_snakemake, segments

pytestmark = pytest.mark.slow

REDUCED = {
    "experiment": {"name": "reduced", "methods": ["base"], "eval_splits": ["train", "test"]},
    "datasets": {"builtin": {"adapter": "builtin", "options": {"seed": 0, "n_warmup": 120, "n_train": 120, "n_test": 24}}},
    "tiny_model": {
        "vocab_size": 400,
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "max_position_embeddings": 1024,
        "sft": {"num_train_epochs": 1, "per_device_train_batch_size": 32},
    },
    "generation": {"num_samples": 4, "max_new_tokens": 24},
    "evaluation": {"k": [1, 2, 4]},
}

UPSTREAM_OF_GENERATION = {"prepare_dataset", "train_tokenizer", "init_tiny_model", "sft_tiny_model"}


def deep_update(base, overlay):
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = value
    return base


def planned_jobs(workdir, overlay=None):
    """Rule name → number of jobs a dry run plans, with an optional config overlay."""
    config = deep_update(json.loads(json.dumps(REDUCED)), overlay or {})
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(workdir, "-n", "results/report.html", "--configfile", EMBEDDED, "config/test.yaml")
    if "Nothing to be done" in result.stdout + result.stderr:
        return {}
    table = result.stdout.split("Job stats:")[1].split("total")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("run"))
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(REDUCED))
    run_snakemake(workdir, "results/report.html", "--configfile", EMBEDDED, "config/test.yaml")
    return workdir


def test_run_produces_report_from_its_own_numbers(finished_run):
    html = (finished_run / "results" / "report.html").read_text()
    summary = json.loads((finished_run / "results" / "summary.json").read_text())
    runs = segments(finished_run, EMBEDDED, "config/test.yaml")
    base = runs.run("builtin", "tiny", "base")
    evaluation = json.loads((finished_run / f"results/eval/{base}/0/test.json").read_text())
    assert evaluation["n_problems"] == 24 and evaluation["n_samples"] == 4
    assert sum(evaluation["status_counts"].values()) == 24 * 4
    test_pass_1 = next(
        row["mean"] for row in summary["pass_at_k"] if row["split"] == "test" and row["k"] == 1
    )
    assert test_pass_1 == pytest.approx(evaluation["pass_at_k"]["1"])
    assert f"{test_pass_1:.3f}" in html
    assert "data:image/png;base64," in html
    held_out = next(r for r in summary["held_out"] if r["method"] == "base")
    assert held_out["pass_at_k_base"] == pytest.approx(evaluation["pass_at_k"]["1"])
    plus_run = runs.run("builtin", "tiny", "base", "scored_plus")
    plus = json.loads((finished_run / f"results/eval/{plus_run}/0/test.plus.json").read_text())
    assert held_out["pass_at_k_plus"] == pytest.approx(plus["pass_at_k"]["1"])
    assert held_out["pass_at_k_plus"] <= held_out["pass_at_k_base"]
    assert 'id="held-out"' in html
    assert planned_jobs(finished_run) == {}


def test_the_tiny_model_is_built_to_the_configs_shape(finished_run):
    """Every `tiny_model` shape key (none of them TinyModelConfig's default here) is the built model's."""
    from transformers import AutoConfig, AutoTokenizer

    (model,) = (finished_run / "results" / "models").glob("builtin-*/tiny-*/base")
    built = AutoConfig.from_pretrained(model)
    shape = {key: value for key, value in REDUCED["tiny_model"].items() if key != "sft"}
    assert {key: getattr(built, key) for key in shape if key != "vocab_size"} == {
        key: value for key, value in shape.items() if key != "vocab_size"}
    assert len(AutoTokenizer.from_pretrained(model)) == built.vocab_size == shape["vocab_size"]


@pytest.mark.parametrize(
    "overlay, must_run, must_not_run",
    [
        ({"generation": {"temperature": 0.7}}, {"generate_candidates", "annotate_candidates", "evaluate_pass_at_k"}, UPSTREAM_OF_GENERATION),
        ({"generation": {"top_k": 5}}, {"generate_candidates", "annotate_candidates", "evaluate_pass_at_k"}, UPSTREAM_OF_GENERATION),
        (
            {"execution": {"timeout_s": 3}},
            {"annotate_candidates", "evaluate_pass_at_k"},
            UPSTREAM_OF_GENERATION | {"generate_candidates"},
        ),
        (
            {"evaluation": {"k": [1, 4]}},
            {"evaluate_pass_at_k", "render_report"},
            UPSTREAM_OF_GENERATION | {"generate_candidates", "annotate_candidates"},
        ),
        (
            {"tiny_model": {"sft": {"learning_rate": 0.001}}},
            {"sft_tiny_model", "generate_candidates", "render_report"},
            {"prepare_dataset", "train_tokenizer", "init_tiny_model"},
        ),
        (
            {"plus_tests": {"seed": 1}},
            {"make_plus_tests", "annotate_plus_tests", "evaluate_pass_at_k_plus", "summarize_plus_tests", "render_report"},
            UPSTREAM_OF_GENERATION | {"generate_candidates", "annotate_candidates", "evaluate_pass_at_k"},
        ),
        (
            {"plus_tests": {"hash_seeds": [1, 2]}},
            {"make_plus_tests", "annotate_plus_tests", "evaluate_pass_at_k_plus", "summarize_plus_tests", "render_report"},
            UPSTREAM_OF_GENERATION | {"prepare_alternatives", "generate_candidates", "annotate_candidates", "evaluate_pass_at_k"},
        ),
    ],
    ids=["temperature", "top-k", "timeout", "k", "sft-learning-rate", "plus-tests-seed", "plus-tests-hash-seeds"],
)
def test_config_change_reruns_only_what_it_invalidates(finished_run, overlay, must_run, must_not_run):
    planned = set(planned_jobs(finished_run, overlay))
    assert must_run <= planned
    assert not planned & must_not_run


def test_report_title_reruns_only_the_report(finished_run):
    assert set(planned_jobs(finished_run, {"report": {"title": "another title"}})) == {"render_report"}


def srrl_trained(workdir):
    """SRRL's trained adapter under the config in config/test.yaml."""
    run = segments(workdir, EMBEDDED, "config/test.yaml").run("builtin", "tiny", "srrl", "trained")
    return f"results/models/{run}/0/trained"


def grpo_metrics(workdir):
    run = segments(workdir, EMBEDDED, "config/test.yaml").run("builtin", "tiny", "grpo", "trained")
    return f"results/training/{run}/0/metrics.jsonl"


def planned_training(workdir, srrl):
    """The train jobs a dry run plans for SRRL's trained adapter, by method, with their commands."""
    config = deep_update(json.loads(json.dumps(REDUCED)), {"experiment": {"methods": ["base", "grpo", "srrl"]}, "srrl": srrl})
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(workdir, "-n", "-p", srrl_trained(workdir), "--configfile", EMBEDDED, "config/test.yaml")
    jobs = {}
    for block in re.split(r"^(?:local)?rule ", result.stdout, flags=re.MULTILINE)[1:]:
        if block.startswith("train:"):
            method = re.search(r"method=(\w+)", block).group(1)
            jobs[method] = block
    return jobs


def test_srrl_grouping_and_the_grpo_step_reach_srrls_train_job(workflow_copy):
    """srrl.groups, grpo.steps_per_generation and grpo.max_grad_norm are in the settings SRRL's train
    job gets (and so in its checkpoints' digest): changing one retrains SRRL."""
    config = deep_update(json.loads(json.dumps(REDUCED)), {
        "experiment": {"methods": ["base", "srrl"]},
        "srrl": {"groups": "separate"},
        "grpo": {"steps_per_generation": 2, "max_grad_norm": 0.5},
    })
    (workflow_copy / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(
        workflow_copy, "-n", "-p", srrl_trained(workflow_copy), "--configfile", EMBEDDED, "config/test.yaml"
    )
    (train,) = [block for block in re.split(r"^(?:local)?rule ", result.stdout, flags=re.MULTILINE) if block.startswith("train:")]
    assert '"groups": "separate"' in train
    assert '"steps_per_generation": 2' in train and '"max_grad_norm": 0.5' in train


@pytest.mark.parametrize("budget", ["generated_tokens", "total_tokens", "completions"])
def test_srrl_trains_after_grpo_only_under_a_token_budget(workflow_copy, budget):
    jobs = planned_training(workflow_copy, {"budget": budget})
    GRPO_METRICS = grpo_metrics(workflow_copy)
    if budget != "completions":
        assert set(jobs) == {"grpo", "srrl"}  # SRRL's budget is GRPO's run: it is planned first
        assert GRPO_METRICS in re.search(r"^\s+input: (.*)$", jobs["srrl"], re.MULTILINE).group(1)
        assert f"--token-budget-from {GRPO_METRICS}" in jobs["srrl"]
    else:
        assert set(jobs) == {"srrl"}
        assert "--token-budget-from" not in jobs["srrl"] and GRPO_METRICS not in jobs["srrl"]
