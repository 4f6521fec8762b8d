"""Experiments never overwrite each other: over the shipped overlays, a path two configs both plan
has the same params in both, and switching back to a config after another plans no job but the
report's."""

import re

import pytest

from conftest import EMBEDDED, copy_workflow, planned_jobs_of, run_snakemake

OVERLAYS = {
    "default": [],
    "seed-002": [".test/config/seed-002.yaml"],
    "srrl-token-budget": [".test/config/srrl-token-budget.yaml"],
    "srrl-budgets": [".test/config/srrl-budgets.yaml"],
    "srrl-groups": [".test/config/srrl-groups.yaml"],
    "two-seeds": [".test/config/two-seeds.yaml"],
    "hackable-reward": [".test/config/hackable-reward.yaml"],
    "base-only": [".test/config/base-only.yaml"],
}
REPORT_LEVEL = ("results/tables/", "results/plots/", "results/report.html", "results/summary.")
"""The experiment's own view (tables, figures, the report): rewritten by whichever experiment ran
last, by design; everything else is a result and lives under settings-named segments."""


def plan(workdir, name, *more_overlays):
    """Output path → {rule, params, directory} of every job the config's DAG has (forced)."""
    return planned_jobs_of(workdir, EMBEDDED, *OVERLAYS[name], *more_overlays)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("plans"))


@pytest.fixture(scope="module")
def plans(workdir):
    return {name: plan(workdir, name) for name in OVERLAYS}


def results(plan_of):
    return {path: job for path, job in plan_of.items() if not path.startswith(REPORT_LEVEL)}


@pytest.mark.parametrize("other", [name for name in OVERLAYS if name != "default"])
def test_a_path_two_configs_plan_has_the_same_params_in_both(plans, other):
    for first, second in (("default", other), ("seed-002", other)):
        if first == second:
            continue
        shared = results(plans[first]).keys() & results(plans[second]).keys()
        differing = {
            path: (plans[first][path]["params"], plans[second][path]["params"])
            for path in shared
            if plans[first][path]["params"] != plans[second][path]["params"]
        }
        assert differing == {}, f"{first} and {second} write these paths with different params"


def test_the_overlays_that_change_settings_write_elsewhere_and_share_the_rest(plans):
    default = results(plans["default"])
    # seed 002 changes the data set's size: nothing of the default's is reused (its data differ)
    assert not default.keys() & results(plans["seed-002"]).keys()
    # the token budget changes SRRL only (both groupings: the variant lies over srrl's section):
    # every other result is the default's own
    budget = results(plans["srrl-token-budget"])
    changed = {p for p in default if "/srrl-" in p or "/srrl_separate-" in p}
    assert {path for path in default.keys() - budget.keys()} == changed
    # the srrl-groups overlay runs SRRL's two groupings side by side: the variant trains on paths of
    # its own, and the report compares it with srrl
    cool = {"base_low_temp": "base"}
    assert plans["default"]["results/tables/comparisons.tsv"]["params"]["variants"] == cool
    assert plans["srrl-groups"]["results/tables/comparisons.tsv"]["params"]["variants"] == {**cool, "srrl_separate": "srrl"}
    assert plans["srrl-budgets"]["results/tables/comparisons.tsv"]["params"]["variants"] == {**cool, "srrl_tokens": "srrl"}
    groups = results(plans["srrl-groups"])
    separate = {p for p in groups if "/srrl_separate-" in p}
    assert {p for p in separate if p.startswith("results/training/")}
    assert default.keys() < groups.keys() and groups.keys() - default.keys() == separate
    # both budgets side by side: the default's results, plus the variant's
    budgets = results(plans["srrl-budgets"])
    assert default.keys() < budgets.keys()
    assert all("/srrl_tokens-" in path for path in budgets.keys() - default.keys())


def test_the_low_temperature_control_samples_the_base_model_cooler(plans):
    """base_low_temp's candidates: the base model's folder, the default's sampling settings but
    for the temperature, under segments of its own."""
    sampling = {
        path.split("/")[4].split("-")[0] + "/" + path.rsplit("/", 1)[1]: job["params"]
        for path, job in plans["default"].items()
        if job["rule"] == "generate_candidates"
    }
    for split in ("train.jsonl", "test.jsonl"):
        base, cool = sampling[f"base/{split}"], sampling[f"base_low_temp/{split}"]
        assert cool["model_path"] == base["model_path"]
        assert base["generation"]["temperature"] == 1.0 and cool["generation"]["temperature"] == 0.2
        assert {**cool["generation"], "temperature": 1.0} == base["generation"]
    # its annotations, scores and the report's comparison with base follow from them
    assert any("/base_low_temp-" in path for path in plans["default"] if path.startswith("results/eval/"))


def materialize(workdir, name, *more_overlays):
    """Pretend the config ran: create its outputs that are missing (empty files and folders) and let
    `snakemake --touch` record each job's metadata (params, inputs, code) as a finished run does."""
    for path, job in plan(workdir, name, *more_overlays).items():
        target = workdir / path
        if target.exists():
            continue
        if job["directory"]:
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    run_snakemake(workdir, "--touch", "results/report.html", "--configfile", EMBEDDED, *OVERLAYS[name], *more_overlays)


def planned_outputs(workdir, name, *more_overlays):
    """What a dry run of the config (and `more_overlays` over it) would run, as (rule, output) lines."""
    result = run_snakemake(
        workdir, "-n", "results/report.html", "--configfile", EMBEDDED, *OVERLAYS[name], *more_overlays
    )
    text = result.stdout + result.stderr
    if "Nothing to be done" in text:
        return []
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(?:[ \t]+(?!output:)\S.*\n)*?[ \t]+output: (\S+)", text, re.MULTILINE)
    stats = text.split("Job stats:")[1].split("total")[0]
    assert len(jobs) == sum(int(n) for n in re.findall(r"^\w+\s+(\d+)$", stats, re.MULTILINE))
    return jobs


@pytest.mark.parametrize("other", ["seed-002", "srrl-token-budget", "srrl-budgets"])
def test_switching_back_plans_nothing_but_the_report(tmp_path, other):
    """default → other → default: the last dry run plans only report-level jobs.

    Limit: the jobs are marked done with `snakemake --touch` over placeholder outputs, not run,
    so this checks Snakemake's rerun triggers (missing outputs, modification times, params, the
    set of inputs, code) on the metadata a run would leave, not the jobs' contents."""
    workdir = copy_workflow(tmp_path)
    materialize(workdir, "default")
    assert all(output.startswith(REPORT_LEVEL) for _, output in planned_outputs(workdir, "default"))
    materialize(workdir, other)
    after_other = planned_outputs(workdir, "default")
    assert after_other, "the dry run listed no job at all (the report lists the experiment that ran last)"
    assert [(rule, output) for rule, output in after_other if not output.startswith(REPORT_LEVEL)] == []
    # and the other experiment's results are still there for it: switching again plans only its report
    after_default = planned_outputs(workdir, other)
    assert [(rule, output) for rule, output in after_default if not output.startswith(REPORT_LEVEL)] == []


@pytest.mark.parametrize(
    "overlay, replanned",
    [
        # a model's placement (execrl.run_paths.MODEL_PLACEMENT_KEYS): on the CPU no training command
        # changes; the cost table prices GPU hours by it, and the report shows that table
        (
            {"models": {"tiny": {"params_b": 0.004, "training_processes": 1, "gpu_model": "a100"}}},
            ["summarize_cost", "render_report"],
        ),
        # checkpointing (execrl.config.RUNTIME_SETTINGS): the train job gets it as options, not params
        ({"grpo": {"save_steps": 7, "gradient_checkpointing": True}, "dpo": {"save_steps": 7, "gradient_checkpointing": True}}, []),
        # logging and the sandbox's parallelism (RUNTIME_SETTINGS)
        ({"execution": {"workers": 1}, "wandb": {"mode": "offline", "project": "elsewhere"}}, []),
        # where models are staged and the partition file (execrl.config.PLACEMENT_SECTIONS)
        ({"staging": {"cache_dir": "/elsewhere/hf-cache"}}, []),
        ({"cluster": {"partitions": "elsewhere/partitions.yaml"}}, []),
        # sections no job of the grid reads (execrl.config.left_out_of_report): the methods it does
        # not run, a variant it does not run, vLLM's settings under the transformers backend
        (
            {"spiral": {"games_per_step": 8}, "code_game": {"win": 2.0}, "exec": {"printed": 0.5},
             "method_variants": {"srrl_separate": {"method": "srrl", "overrides": {"srrl": {"refine_share": 0.25}}}},
             "generation": {"vllm": {"gpu_memory_utilization": 0.5}}},
            [],
        ),
        # vLLM's settings of training where no method generates with vLLM (`grpo.use_vllm: false`):
        # out of the training digest and the report's configuration
        ({"grpo": {"vllm_gpu_memory_utilization": 0.5, "vllm_importance_sampling_clip_max": 2.0}}, []),
    ],
    ids=["placement", "checkpointing", "logging-and-workers", "staging", "cluster", "unread-sections", "vllm-off"],
)
def test_settings_that_change_no_result_rerun_none(tmp_path, overlay, replanned):
    """Changed over a finished run, they plan no job but those whose output shows them."""
    import yaml

    workdir = copy_workflow(tmp_path)
    materialize(workdir, "default")
    (workdir / "config" / "runtime.yaml").write_text(yaml.safe_dump(overlay))
    planned = planned_outputs(workdir, "default", "config/runtime.yaml")
    assert sorted(rule for rule, _ in planned) == sorted(replanned)


def test_an_edited_test_split_reruns_only_the_training_that_samples_it(tmp_path):
    """DPO without its interval evaluation (`dpo.eval_every: 0`) never reads the test split: a
    changed test file replans GRPO's and SRRL's training (their interval evaluation samples it)
    and the test split's own jobs, and not DPO's training."""
    import yaml

    workdir = copy_workflow(tmp_path)
    (workdir / "config" / "no-dpo-interval.yaml").write_text(yaml.safe_dump({"dpo": {"eval_every": 0}}))
    materialize(workdir, "default", "config/no-dpo-interval.yaml")
    (test_split,) = (workdir / "results" / "data").glob("builtin-*/test.jsonl")
    test_split.write_text('{"edited": true}\n')
    planned = planned_outputs(workdir, "default", "config/no-dpo-interval.yaml")
    trained = {re.search(r"/(\w+)-\w+/\d+/", output).group(1)
               for rule, output in planned if rule == "train"}
    assert trained == {"grpo", "srrl"}
    assert any(rule == "generate_candidates" and "/test" in output for rule, output in planned)


def test_the_watchs_floor_is_measured_where_the_train_split_is_not_evaluated(plans):
    """The hackable overlay evaluates the test split only; its GRPO run is watched on the train
    split's held-out tests, so their manifest (the false-positive floor beside the watch's rates)
    is an input of the plus-test table as in the default, which evaluates train too."""
    train_manifest = re.compile(r"results/data/[^/]+/[^/]+/train\.manifest\.json$")
    for name in ("hackable-reward", "default"):
        inputs = plans[name]["results/tables/plus_tests.tsv"]["input"]
        assert [path for path in inputs if train_manifest.match(path)], name
