"""The shipped experiment configs: the values each one runs with once merged, and what its dry
run plans on a Slurm cluster (offline: no job runs, nothing is downloaded)."""

import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import EMBEDDED, MBPP_DIR, REPO, SNAKEMAKE, copy_workflow
from execrl.config import merged_config, without_runtime_settings
from execrl.datasets import load_split
from execrl.training.grpo import GRPOSettings
from execrl.planning.memory_plan import training_job_layout
from execrl.run_paths import readable

CONFIGS = {
    "config.yaml": [],  # the analysis: GRPO vs SRRL on MBPP
    "mbpp-taco-dpo-grpo.yaml": ["config/mbpp-taco-dpo-grpo.yaml"],
    "scaling-binary-bonus.yaml": ["config/scaling-binary-bonus.yaml"],
    "seed-002-self-play.yaml": ["config/seed-002-self-play.yaml"],
}


def merged(name: str) -> dict:
    return merged_config([REPO / f for f in CONFIGS[name]], base=REPO / "config" / "config.yaml")


def leaves(tree: dict, prefix: tuple = ()) -> dict[tuple, object]:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def test_the_analysis_is_seed_000s_experiment():
    config = merged("config.yaml")
    assert config["experiment"]["methods"] == ["base", "grpo", "srrl"]
    assert config["experiment"]["seeds"] == [0, 1, 2]
    assert config["experiment"]["eval_splits"] == ["test"]
    assert config["models"]["qwen2.5-3b-instruct"]["source"] == "Qwen/Qwen2.5-3B-Instruct"
    grpo = config["grpo"]
    assert (grpo["num_generations"], grpo["prompts_per_step"], grpo["learning_rate"]) == (8, 16, 1e-5)
    assert (grpo["max_completion_length"], grpo["train_problems"]) == (1024, 50)
    assert config["generation"]["temperature"] == 0.8  # GRPO's rollouts' too
    assert config["generation"]["max_new_tokens"] == 1024
    assert config["evaluation"]["max_problems"] is None  # every test problem


def test_mbpp_test_split_has_500_problems_and_all_are_evaluated():
    config = merged("config.yaml")
    mbpp = config["datasets"]["mbpp"]
    problems = load_split(adapter="mbpp", split=mbpp["test_split"], source=str(MBPP_DIR / "mbpp.jsonl"), subset=mbpp["subset"]).problems
    assert len(problems) == 500
    assert config["evaluation"]["max_problems"] is None


def test_offline_against_online_rl_on_two_datasets():
    config = merged("mbpp-taco-dpo-grpo.yaml")
    assert config["experiment"]["methods"] == ["base", "dpo", "grpo"]
    assert config["experiment"]["datasets"] == ["mbpp", "taco-verified"]
    assert config["datasets"]["taco-verified"]["source"] == "likaixin/TACO-verified"
    assert config["models"]["qwen2.5-3b-instruct"]["finetuning"] == "lora"
    assert config["generation"]["max_new_tokens"] == 2048 and config["grpo"]["max_completion_length"] == 2048
    assert config["grpo"]["train_problems"] is None and config["dpo"]["max_length"] == 3072
    # the analysis' GRPO step (seed 000's tiny-grpo step), as its comment says
    grpo = config["grpo"]
    assert (grpo["beta"], grpo["loss_type"], grpo["steps_per_generation"], grpo["max_steps"]) == (0.01, "grpo", 8, 800)


def test_scaling_across_sizes_in_seed_004s_layout_with_reasoning_for_the_large_models():
    config = merged("scaling-binary-bonus.yaml")
    models = config["models"]
    for name in config["experiment"]["models"]:
        large = models[name]["params_b"] > 10
        assert models[name]["finetuning"] == "full" and models[name]["training_processes"] == 7, name
        assert models[name]["reasoning_format"] is large, name
        layout = training_job_layout(config, name, "grpo")
        # seed 004: ZeRO-3 on 7 processes beside one vLLM server GPU, per-device batch 1 x accumulation 8
        assert (layout.zero_stage, layout.processes, layout.server_gpus) == (3, 7, 1), name
        assert (layout.micro_batch, layout.accumulation) == (1, 8), name
        assert layout.offload_optimizer is (name == "qwen2.5-32b-instruct"), name
    assert config["grpo"]["vllm_max_model_length"] == 8192 and config["grpo"]["save_steps"] == 100
    assert config["grpo"]["learning_rate"] == 2e-6 and config["generation"]["temperature"] == 0.8
    assert (config["grpo"]["eval_every"], config["grpo"]["eval_problems"], config["grpo"]["eval_samples"]) == (25, 15, 4)
    assert config["rewards"]["fraction_perfect"] == 1.0 and config["rewards"]["binary"] == 0.0
    assert config["rewards"]["max_tests"] == 3
    assert config["grpo"]["vllm_mode"] == "server"
    grpo = config["grpo"]
    assert (grpo["beta"], grpo["loss_type"], grpo["steps_per_generation"], grpo["max_steps"]) == (0.0, "dapo", 8, 100)
    assert GRPOSettings(**without_runtime_settings(config)["grpo"]).trl_args(7)["per_device_train_batch_size"] == 1


def test_seed_004_says_it_runs_on_python_and_where_sft_checkpoints_go():
    """Seed 004 trains q programs; its config and report say the method runs on Python here, and
    where a user's own SFT checkpoints go."""
    config = merged("scaling-binary-bonus.yaml")
    notes = " ".join(config["report"]["method_notes"].split())
    assert "seed 004's method on Python" in notes and "q (kdb+)" in notes and "models.NAME.source" in notes
    text = (REPO / "config" / "scaling-binary-bonus.yaml").read_text()
    assert "no free q" in text and "models.NAME.source" in text
    readme = " ".join((REPO / "config" / "README.md").read_text().split())
    assert "seed 004's method on Python" in readme and "models.NAME.source" in readme


def test_seed_002s_methods_with_its_settings():
    config = merged("seed-002-self-play.yaml")
    assert config["experiment"]["methods"] == ["base", "exec", "code_game", "spiral"]
    assert config["experiment"]["models"] == ["qwen2.5-1.5b"]
    assert config["models"]["qwen2.5-1.5b"]["source"] == "Qwen/Qwen2.5-1.5B"  # the base model, not Instruct
    grpo = config["grpo"]
    assert (grpo["learning_rate"], grpo["max_steps"], grpo["num_generations"]) == (2e-5, 90, 2)
    settings = GRPOSettings(**without_runtime_settings(config)["grpo"])
    assert settings.per_device_batch(processes=1) == 8  # seed 002's per-device batch, on its one GPU
    assert (grpo["vllm_max_model_length"], grpo["vllm_server_gpu_memory_utilization"]) == (2048, 0.85)
    assert grpo["vllm_mode"] == "colocate" and grpo["vllm_gpu_memory_utilization"] == 0.3  # shares the GPU (see the config)
    # TRL's GRPO step, not seed 000's tiny-grpo step from config/config.yaml
    assert (grpo["beta"], grpo["loss_type"], grpo["steps_per_generation"]) == (0.0, "dapo", None)
    assert (grpo["eval_every"], grpo["eval_temperature"]) == (20, 0.2)
    assert config["generation"]["temperature"] == 1.0  # seed 002's rollouts', and so the evaluation's
    assert config["exec"] == {"printed": 1.0, "silent": 0.5, "syntax_error": -0.5, "error": -1.0, "timeout": -1.0}
    assert config["spiral"]["game"] == "tictactoe" and config["spiral"]["observation"] == "full"
    assert config["code_game"]["opponent"] == "base"


def test_seed_002_trains_each_method_on_one_gpu_with_its_own_settings(workdir):
    jobs = planned_jobs(dry_run(workdir, CONFIGS["seed-002-self-play.yaml"]))
    train = {j["wildcards"]["method"]: j for j in jobs if j["rule"] == "train"}
    assert set(train) == {"exec", "code_game", "spiral"}
    workers = merged("seed-002-self-play.yaml")["execution"]["workers"]
    for method, job in train.items():
        assert (job["resources"]["gpu"], job["resources"]["processes"]) == ("1", "1"), method
        assert int(job["resources"]["cpus_per_task"]) == 8 + workers, method  # online: sandbox workers beside it
        assert "ddp.yaml --mixed_precision bf16 --num_processes 1 " in job["shell"] and " -m execrl.training.train_job " + method in job["shell"]
        assert '"learning_rate": 2e-05' in job["shell"] and '"max_steps": 90' in job["shell"]
    assert '"code_game": {' in train["code_game"]["shell"] and '"exec": {' in train["code_game"]["shell"]
    assert '"spiral": {' in train["spiral"]["shell"] and '"code_game"' not in train["spiral"]["shell"]
    figures = {j["wildcards"].get("method") for j in jobs if j["rule"] == "plot_method_metrics"}
    assert figures == {"exec", "code_game", "spiral"}


@pytest.mark.parametrize("name", CONFIGS)
def test_no_hub_experiment_gets_a_tiny_model_value(name):
    """The tiny model's values live only in the embedded default: a hub experiment gets the
    schema's, sized for real models."""
    config = merged(name)
    assert config["grpo"]["max_completion_length"] >= 1024
    assert config["generation"]["max_new_tokens"] >= 1024
    assert config["dpo"]["max_length"] >= 2048
    assert config["grpo"]["learning_rate"] <= 5e-5  # the tiny model trains at 5e-4
    assert config["evaluation"]["max_problems"] is None
    assert all(config["models"][m]["source"] != "tiny" for m in config["experiment"]["models"])


def test_the_embedded_default_inherits_nothing_from_the_analysis():
    """Every setting config/config.yaml makes is made again by the embedded default, so the
    analysis a user edits never changes the embedded run (datasets and models it defines are
    merely unused)."""
    analysis = leaves(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    embedded = leaves(yaml.safe_load((REPO / EMBEDDED).read_text()))
    inherited = [key for key in analysis if key[0] not in ("datasets", "models") and key not in embedded]
    assert not inherited, f"set by config/config.yaml but not by {EMBEDDED}: {inherited}"
    config = merged_config([REPO / EMBEDDED], base=REPO / "config" / "config.yaml")
    own = yaml.safe_load((REPO / EMBEDDED).read_text())["grpo"]["max_completion_length"]
    assert own != yaml.safe_load((REPO / "config" / "config.yaml").read_text())["grpo"]["max_completion_length"]
    assert config["experiment"]["models"] == ["tiny"] and config["grpo"]["max_completion_length"] == own


def test_runtime_settings_are_left_out_of_what_decides_results():
    config = merged("config.yaml")
    result = without_runtime_settings(config)
    assert "workers" not in result["execution"] and not result["wandb"]
    assert result["execution"]["timeout_s"] == config["execution"]["timeout_s"]


def test_the_merged_config_command_prints_what_a_run_gets(tmp_path):
    out = subprocess.run(
        [str(Path(SNAKEMAKE).with_name("python")), "-m", "execrl.config", "--configfile", "config/scaling-binary-bonus.yaml"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    printed = yaml.safe_load(out)
    assert printed == merged("scaling-binary-bonus.yaml")
    assert printed["grpo"]["eval_temperature"] == 0.2  # a schema default, filled in
    # A repeated flag is refused, as the workflow refuses it, instead of printing the last one's files.
    repeated = subprocess.run(
        [str(Path(SNAKEMAKE).with_name("python")), "-m", "execrl.config", "--configfile", EMBEDDED,
         "--configfile", ".test/config/two-seeds.yaml"],
        cwd=REPO, capture_output=True, text=True,
    )
    assert repeated.returncode == 2 and "--configfile is given 2 times" in repeated.stderr, repeated.stderr


@pytest.mark.parametrize("overlay", sorted(p.name for p in (REPO / ".test" / "config").glob("*.yaml") if p.name != "config.yaml"))
def test_each_cpu_overlay_validates_over_the_embedded_default_and_names_its_command(overlay):
    path = REPO / ".test" / "config" / overlay
    config = merged_config([REPO / EMBEDDED, path], base=REPO / "config" / "config.yaml")
    assert config["experiment"]["methods"]
    assert f"make report OVERLAYS=.test/config/{overlay}" in path.read_text()


@pytest.mark.parametrize("overlay, method", [("srrl-token-budget.yaml", "srrl"), ("srrl-budgets.yaml", "srrl_tokens")])
def test_the_token_budget_overlays_let_the_budget_stop_srrl_not_max_steps(overlay, method):
    """SRRL samples fewer completion tokens per step than GRPO (0.94× in the committed summary's
    `token_budget`), so at GRPO's max_steps it would stop short of GRPO's tokens: the overlays give it
    a cap that the budget reaches first, everything else of GRPO's section unchanged."""
    from execrl.training_settings import method_section

    config = merged_config([REPO / EMBEDDED, REPO / ".test/config" / overlay], base=REPO / "config" / "config.yaml")
    srrl, grpo = method_section(config, method, "grpo"), method_section(config, "grpo", "grpo")
    assert method_section(config, method, "srrl")["budget"] == "generated_tokens"
    assert srrl["max_steps"] >= 1.5 * grpo["max_steps"]
    assert {**srrl, "max_steps": grpo["max_steps"]} == grpo
    fields = {k: v for k, v in srrl.items() if k in GRPOSettings.__dataclass_fields__}
    assert GRPOSettings(**fields).trl_args(1)["lr_scheduler_type"] == "constant"  # a higher cap changes nothing before the stop


def test_seed_002s_cpu_overlay_trains_its_methods_on_the_tiny_model():
    config = merged_config([REPO / EMBEDDED, REPO / ".test/config/seed-002.yaml"], base=REPO / "config" / "config.yaml")
    assert config["experiment"]["methods"] == ["base", "exec", "code_game", "spiral"]
    assert config["models"]["tiny-games"]["source"] == "tiny"
    assert config["code_game"]["silent_loses"] is True
    overrides = config["method_overrides"]
    assert set(overrides) == {"code_game", "spiral"} and overrides["spiral"]["grpo"]["prompts_per_step"] == 16


# ---------------------------------------------------------------- dry runs


# Snakemake's command line, which on leaving prints the training libraries the planning imported:
# planning reads settings, not trainers (one import of TRL's GRPOTrainer pulls vLLM and
# transformers and takes most of a dry run's time).
HEAVY = ("torch", "trl", "vllm", "transformers", "deepspeed", "peft")
SNAKEMAKE_REPORTING_IMPORTS = f"""
import atexit, sys
atexit.register(lambda: print("imported while planning:", *sorted({{m.split(".")[0] for m in sys.modules}} & {set(HEAVY)}), file=sys.stderr))
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def planning(workdir: Path, configfiles: list[str], *args: str) -> subprocess.CompletedProcess:
    extra = ["--configfile", *configfiles] if configfiles else []
    return subprocess.run(
        [sys.executable, "-c", SNAKEMAKE_REPORTING_IMPORTS, "--profile", "slurm", "-n", "-p", "results/report.html",
         *extra, *args],
        cwd=workdir, capture_output=True, text=True, timeout=300,
    )


def dry_run(workdir: Path, configfiles: list[str], *args: str) -> str:
    result = planning(workdir, configfiles, *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    destination = copy_workflow(tmp_path_factory.mktemp("configs"))
    (destination / "slurm").symlink_to("profiles/slurm")
    return destination


def planned_jobs(output: str) -> list[dict]:
    """Every planned job: rule, wildcards, resources and shell command."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", output):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.MULTILINE)
        if not rule:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.MULTILINE)
        resources = re.search(r"^\s+resources: (.*)$", block, re.MULTILINE)
        threads = re.search(r"^\s+threads: (\d+)$", block, re.MULTILINE)
        shell = re.search(r"^Shell command: (.*)$", block, re.MULTILINE)
        jobs.append(
            {
                "rule": rule.group(1),
                # path segments carry a digest of their settings (execrl.run_paths): compared by name
                "wildcards": {k: readable(v) for k, v in (i.split("=", 1) for i in wildcards.group(1).split(", "))}
                if wildcards else {},
                "resources": dict(i.split("=", 1) for i in resources.group(1).split(", ") if "=" in i) if resources else {},
                "shell": shell.group(1) if shell else "",
                "threads": int(threads.group(1)) if threads else 1,
            }
        )
    return jobs


@pytest.mark.parametrize("name", CONFIGS)
def test_dry_run_plans_every_method_with_gpus_and_staging(workdir, name):
    config = merged(name)
    jobs = planned_jobs(dry_run(workdir, CONFIGS[name]))
    trained = Counter(j["wildcards"]["method"] for j in jobs if j["rule"] == "train")
    evaluated = Counter((j["wildcards"]["method"], j["wildcards"]["split"]) for j in jobs if j["rule"] == "evaluate_pass_at_k")
    experiment = config["experiment"]
    runs = len(experiment["datasets"]) * len(experiment["models"]) * len(experiment["seeds"])
    for method in experiment["methods"]:
        for split in experiment["eval_splits"]:
            assert evaluated[method, split] == runs, (method, split)
        assert trained[method] == (0 if method == "base" else runs), method
    staged = {j["wildcards"]["staged"] for j in jobs if j["rule"] == "stage_model"}
    assert staged == set(experiment["models"])
    for job in jobs:
        gpus = int(job["resources"].get("gpu", 0))
        if job["rule"] in ("train", "generate_candidates", "sample_refinements"):
            assert gpus >= 1, job
            assert job["resources"]["nodes"] == "1", job  # a job's GPUs on one node
            assert "resources/models/" in job["shell"] or job["rule"] != "train"
        else:
            assert gpus == 0, job
    for job in (j for j in jobs if j["rule"] == "train"):
        assert job["shell"].startswith("HF_HUB_OFFLINE=1 ") and " accelerate launch " in f" {job['shell']}"


def test_large_models_train_all_weights_under_zero3_beside_a_vllm_server(workdir):
    jobs = planned_jobs(dry_run(workdir, CONFIGS["scaling-binary-bonus.yaml"]))
    train = {j["wildcards"]["model"]: j for j in jobs if j["rule"] == "train"}
    largest = train["qwen2.5-32b-instruct"]
    assert largest["resources"]["gpu"] == "8" and largest["resources"]["processes"] == "7"
    assert "execrl.generation.vllm_server" in largest["shell"] and "--gpus 1 " in largest["shell"]
    # 32.8B x 16 bytes over 7 processes is 75 GB of state per GPU: the plan offloads it to the host
    assert "zero3.yaml --mixed_precision bf16 --offload_optimizer_device cpu --num_processes 7 " in largest["shell"]
    assert "--gpu-memory-utilization 0.9 --max-model-len 8192 -- " in largest["shell"]  # the server owns its GPU
    workers = merged("scaling-binary-bonus.yaml")["execution"]["workers"]
    # 8 CPUs per GPU and the sandbox workers of each process would be 120: the node has 96
    assert 8 * 8 + 7 * workers > 96 and int(largest["resources"]["cpus_per_task"]) == 96
    assert int(largest["resources"]["sandbox_workers"]) == workers == 8  # 2 CPUs per GPU and 80 left for them
    # 524 GB of offloaded optimizer state (16 bytes per parameter) + 16 GB per GPU + 4 GB per billion
    assert int(largest["resources"]["mem_mb"]) == pytest.approx(783_400, abs=100)
    assert '"lora": null' in largest["shell"]
    for model, job in train.items():  # seed 004's layout for every size
        assert (job["resources"]["gpu"], job["resources"]["processes"], job["resources"]["nodes"]) == ("8", "7", "1")
        assert "zero3.yaml" in job["shell"] and '"lora": null' in job["shell"], model
        assert " --micro-batch 1 --accumulation 8 " in job["shell"], model
    assert not [j for j in jobs if j["rule"] == "merge_adapter"]  # all weights: nothing to merge


def test_seed_000s_refinement_prompt_shows_the_execution_trace():
    """Seed 000's refinement prompt (config/config.yaml) carries a real failure's trace, beside the
    problem, the failed code, the error and the failed test, and asks for an analysis and a fix."""
    from execrl.problems import Problem
    from execrl.prompting import PromptConfig
    from execrl.sandbox import Executor
    from execrl.refinement import refinement_message
    from execrl.training.srrl import SRRLSettings

    config = merged("config.yaml")
    settings = SRRLSettings(**config["srrl"])
    prompt_config = PromptConfig(template=config["prompt"]["template"], num_tests_shown=config["prompt"]["num_tests_shown"])
    problem = Problem(id="t/1", prompt="Write halve(x).", test_type="assert",
                      tests=["assert halve(4) == 2", "assert halve(0) == 0"], entry_point="halve")
    code = "def helper(x):\n    return 2 * x // x\n\ndef halve(x):\n    return x // helper(x)"
    with Executor(workers=1) as executor:
        (result,) = executor.run_batch([(problem, code)])
    result = result.to_dict()
    assert result["status"] == "error" and "helper" in result["trace"]
    message = refinement_message(problem, code, result, settings, prompt_config)
    frames = [line.strip() for line in result["trace"].splitlines() if line.strip().startswith("File ")]
    assert frames and all(frame in message for frame in frames)
    assert not any(frame in refinement_message(problem, code, result, SRRLSettings(), prompt_config) for frame in frames)
    for section in ("## Original problem", "Write halve(x).", "## Failed code", "return x // helper(x)",
                    "## Execution result", "ZeroDivisionError", "Failed test: assert halve(0) == 0",
                    "Execution trace:", "Analyse the error"):
        assert section in message, section


def test_seed_000s_grpo_is_tiny_grpos_step_in_trls_terms(tmp_path):
    """config/config.yaml's GRPO reaches TRL's GRPOConfig as tiny-grpo's step: KL weight 0.01 on the
    plain k3 estimate, clipping 0.2, per-sequence averaging, gradient clipping at 1.0, no dropout,
    no importance-sampling correction, full weights, and each round of 16 prompts x 8 completions
    split into mini-batches of 16 completions, one update each."""
    from trl import GRPOConfig

    from execrl.training.common import device_kwargs

    settings = GRPOSettings(**without_runtime_settings(merged("config.yaml"))["grpo"])
    args = GRPOConfig(output_dir=str(tmp_path), **settings.trl_args(processes=1), use_vllm=False, report_to=[],
                      **device_kwargs())
    assert (args.beta, args.epsilon, args.loss_type, args.scale_rewards) == (0.01, 0.2, "grpo", "group")
    assert args.max_grad_norm == 1.0 and args.num_iterations == 1
    assert args.generation_batch_size == 128 and args.per_device_train_batch_size == 16
    assert args.steps_per_generation == 8 and args.gradient_accumulation_steps == 1
    assert args.max_steps == 800  # 100 generation rounds
    # where TRL's defaults would change the algorithm, tiny-grpo's choice: plain k3 KL, old log-probs
    # without dropout, no vLLM importance-sampling correction, and every weight trained
    assert (args.use_bias_correction_kl, args.disable_dropout, args.vllm_importance_sampling_correction) == (False, True, False)
    assert merged("config.yaml")["models"]["qwen2.5-3b-instruct"]["finetuning"] == "full"


def partitions_fitting(job: dict) -> list[str]:
    """The partitions of the shipped partitions.yaml snakemake-executor-plugin-slurm would submit a
    planned job to: those its own scoring accepts (a score above 0)."""
    from snakemake_executor_plugin_slurm.partitions import read_partition_file

    fake = SimpleNamespace(resources=job["resources"], threads=job["threads"], name=job["rule"])
    partitions = read_partition_file(REPO / "profiles" / "slurm" / "partitions.yaml")
    return [p.name for p in partitions if (p.score_job_fit(fake) or 0) > 0]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_training_job_fits_its_gpus_and_runs_the_plan(workdir, name):
    """Each training job asks Slurm for the memory plan's GPUs on one node, with host memory for
    what it offloads, and its command carries the plan's dtype, micro-batch, accumulation and offload.
    Every job of the config fits a partition of the shipped partitions.yaml (GPUs, memory, CPUs)."""
    config = merged(name)
    config["cluster"]["partitions"] = str(REPO / config["cluster"]["partitions"])
    result = planning(workdir, CONFIGS[name])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported while planning:\n" in result.stderr, result.stderr[-300:]  # none of HEAVY
    for job in planned_jobs(result.stdout):
        if job["rule"] not in ("stage_model", "prepare_dataset"):  # local rules: never submitted
            fitting = partitions_fitting(job)
            assert fitting, job["resources"]
            gpus = int(job["resources"].get("gpu", 0))
            assert fitting == ["gpu"] if gpus else "cpu" in fitting, (job["rule"], job["resources"], fitting)
    jobs = [j for j in planned_jobs(result.stdout) if j["rule"] == "train"]
    assert jobs
    for job in jobs:
        model, method = job["wildcards"]["model"], job["wildcards"]["method"]
        layout = training_job_layout(config, model, method)
        assert layout.plan.fits and layout.plan.total_gb <= layout.plan.gpu_memory_gb, (model, method)
        if layout.server_plan is not None:
            assert layout.server_plan.fits
        resources, shell = job["resources"], job["shell"]
        assert (int(resources["gpu"]), int(resources["processes"]), resources["nodes"]) == (layout.gpus, layout.processes, "1")
        # host memory and CPUs: the plan's, within the node's
        assert int(resources["mem_mb"]) == math.ceil(layout.host_gb * 1000) >= layout.plan.host_gb * 1000
        assert layout.host_gb <= layout.node.memory_gb == 1000 and int(resources["cpus_per_task"]) == layout.cpus <= 96
        assert int(resources["sandbox_workers"]) == (layout.sandbox_workers or config["execution"]["workers"])
        assert f" --num_processes {layout.processes} " in shell
        assert f" --micro-batch {layout.micro_batch} --accumulation {layout.accumulation} " in shell
        assert f" --mixed_precision {layout.plan.dtype} " in shell
        assert ("--offload_optimizer_device cpu" in shell) is layout.offload_optimizer
        assert (" zero3.yaml " in shell.replace("/", " ")) is (layout.zero_stage == 3)
        if layout.server_gpus:
            assert re.search(rf"execrl\.generation\.vllm_server --model resources/models/{re.escape(model)}-[0-9a-f]{{6}} --gpus {layout.server_gpus} ", shell)
            assert f"--max-model-len {config['grpo']['vllm_max_model_length']} --" in shell
            assert "EXECRL_VLLM_SERVER_LOG=logs/train/" in shell
        # ...and the dry run shows the plan: GB per GPU by term, micro-batch x accumulation, GPUs, offload
        assert f"memory plan of {model}/{method}: {layout.describe()}" in result.stderr
    for job in planned_jobs(result.stdout):
        if job["rule"] == "merge_adapter":
            assert job["resources"].get("gpu", "0") == "0", job  # merged on the CPU


def test_a_job_that_fits_no_node_stops_the_planning_naming_its_numbers(workdir):
    (workdir / "profiles" / "slurm" / "partitions-40gb.yaml").write_text(yaml.safe_dump({"partitions": {
        "gpu40": {"max_gpu": 8, "max_mem_mb": 1000000, "available_gpu_models": ["a100_40gb"]},
        "gpu80": {"max_gpu": 8, "max_mem_mb": 1000000, "available_gpu_models": ["a100_80gb"]},
    }}))
    (workdir / "config" / "unfit.yaml").write_text(yaml.safe_dump({
        "experiment": {"models": ["qwen2.5-32b-instruct"], "methods": ["base", "grpo"]},
        "grpo": {"beta": 0.0, "vllm_mode": "server"},
        "models": {"qwen2.5-32b-instruct": {
            "source": "Qwen/Qwen2.5-32B-Instruct", "params_b": 32.8, "finetuning": "full",
            "training_processes": 1, "gpu_model": "a100_40gb",
        }},
        "cluster": {"partitions": "profiles/slurm/partitions-40gb.yaml"},
    }))
    result = planning(workdir, ["config/unfit.yaml"])
    assert result.returncode != 0
    message = " ".join((result.stdout + result.stderr).split())
    assert "models.qwen2.5-32b-instruct (Qwen/Qwen2.5-32B-Instruct), method grpo" in message
    assert "does not fit even at micro-batch 1 with the optimizer offloaded" in message
    assert "of 42.9 GB per GPU" in message and "a larger GPU (models.qwen2.5-32b-instruct.gpu_model: a100_80gb" in message  # 40960 MiB
    assert "or models.qwen2.5-32b-instruct.training_processes: " in message
    assert "(node: partition gpu40: 8 x a100_40gb (40 GB), host memory 1000 GB, CPUs unlimited" in message


def test_a_node_without_the_host_memory_for_the_offloaded_state_stops_the_planning(workdir):
    """32B all-weights GRPO offloads its optimizer state; a 512 GB node cannot hold it."""
    (workdir / "profiles" / "slurm" / "partitions-512gb.yaml").write_text(yaml.safe_dump({"partitions": {
        "gpu": {"max_gpu": 8, "max_mem_mb": 512000, "max_cpus_per_task": 64, "available_gpu_models": ["h100"]},
    }}))
    (workdir / "config" / "small-host.yaml").write_text(yaml.safe_dump({
        "experiment": {"models": ["qwen2.5-32b-instruct"], "methods": ["base", "grpo"]},
        "models": {"qwen2.5-32b-instruct": {"source": "Qwen/Qwen2.5-32B-Instruct", "params_b": 32.8, "finetuning": "full"}},
        "cluster": {"partitions": "profiles/slurm/partitions-512gb.yaml"},
    }))
    result = planning(workdir, ["config/small-host.yaml"])
    assert result.returncode != 0
    message = " ".join((result.stdout + result.stderr).split())
    assert "models.qwen2.5-32b-instruct (Qwen/Qwen2.5-32B-Instruct), method grpo" in message
    assert re.search(r"needs \d+ GB of host memory \(\d+ GB for \d GPUs and 32.8B of weights, 524 GB of offloaded "
                     r"optimizer state\) of the node's 512 GB, and at least \d+ CPUs of its 64", message), message[-2000:]


def test_a_gpu_the_cuda_13_torch_cannot_run_stops_the_planning(workdir):
    """torch 2.13.0 from PyPI is a CUDA 13 build: no V100 (compute capability 7.0), driver R580+."""
    (workdir / "config" / "v100.yaml").write_text(yaml.safe_dump({
        "models": {"qwen2.5-3b-instruct": {"gpu_model": "v100"}},
        "cluster": {"partitions": "profiles/slurm/partitions-v100.yaml"},
    }))
    (workdir / "profiles" / "slurm" / "partitions-v100.yaml").write_text(yaml.safe_dump({"partitions": {
        "gpu": {"max_gpu": 8, "available_gpu_models": ["v100"]},
    }}))
    result = planning(workdir, ["config/v100.yaml"])
    assert result.returncode != 0
    message = " ".join((result.stdout + result.stderr).split())
    assert "models.qwen2.5-3b-instruct (Qwen/Qwen2.5-3B-Instruct)" in message
    assert "models.qwen2.5-3b-instruct.gpu_model: v100 " \
           "(compute capability 7, cluster.gpu_types.v100) cannot run torch 2.13.0 from PyPI, a CUDA 13 build " \
           "(NVIDIA driver R580 or newer), which needs compute capability 7.5 or newer" in message
    assert "set models.qwen2.5-3b-instruct.gpu_model to a newer GPU type" in message
