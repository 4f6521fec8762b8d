from snakemake.utils import validate

from execrl.config import check_references
from execrl.resources import stage_resources

validate(config, schema="../schemas/config.schema.yaml")
check_references(config)

EXPERIMENT = config["experiment"]
METHODS = ("base", "dpo", "grpo", "srrl")


wildcard_constraints:
    dataset="|".join(map(re.escape, config["datasets"])),
    model="|".join(map(re.escape, config["models"])),
    method="|".join(METHODS),
    seed=r"\d+",
    split="train|test",


##### target functions #####


def get_final_output():
    return ["results/report.html", "results/summary.json", "results/summary.md"]


def get_all_evaluations():
    return expand(
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.json",
        dataset=EXPERIMENT["datasets"],
        model=EXPERIMENT["models"],
        method=EXPERIMENT["methods"],
        seed=EXPERIMENT["seeds"],
        split=EXPERIMENT.get("eval_splits", ["test"]),
    )


def get_all_annotations():
    return [
        path.replace("results/eval/", "results/annotations/").replace(".json", ".jsonl")
        for path in get_all_evaluations()
    ]


def get_all_benchmarks():
    # Snakemake writes these only after jobs finish; the report reads what exists.
    return []


##### dataset helpers #####


def dataset_config(wildcards):
    return config["datasets"][wildcards.dataset]


def dataset_setting(key):
    """A params function returning one setting of the job's dataset."""

    def get(wildcards):
        return dataset_config(wildcards)[key]

    return get


def get_split_name(wildcards):
    """The dataset's own name for the train/test role a path asks for."""
    return dataset_config(wildcards)[f"{wildcards.split}_split"]


def get_problems(wildcards):
    return f"results/data/{wildcards.dataset}/{wildcards.split}.jsonl"


def get_train_problems(wildcards):
    return f"results/data/{wildcards.dataset}/train.jsonl"


##### model helpers #####


def model_config(wildcards):
    return config["models"][wildcards.model]


def is_tiny(wildcards):
    return model_config(wildcards)["source"] == "tiny"


def get_base_model_dir(wildcards):
    """A locally built model's folder; hub and local-path models need no rule."""
    if is_tiny(wildcards):
        return f"results/models/{wildcards.dataset}/{wildcards.model}/base"
    return []


def get_base_model_path(wildcards):
    """Folder or hub id of the model before any RL."""
    return get_base_model_dir(wildcards) or model_config(wildcards)["source"]


def get_policy_model(wildcards):
    """Folder or hub id of the model a method samples from."""
    if wildcards.method != "base":
        return f"results/models/{wildcards.dataset}/{wildcards.model}/{wildcards.method}/{wildcards.seed}/merged"
    return get_base_model_dir(wildcards)


def get_policy_model_path(wildcards):
    return get_policy_model(wildcards) or model_config(wildcards)["source"]


##### settings passed through params #####


def get_prompt_settings(wildcards=None):
    return dict(config["prompt"])


def get_generation_settings(wildcards):
    settings = {k: v for k, v in config["generation"].items() if k != "backend"}
    settings["seed"] = int(wildcards.seed)
    return settings


def get_tiny_model_settings(wildcards=None):
    return {
        k: v for k, v in config["tiny_model"].items() if k not in ("sft", "vocab_size")
    }


def get_sft_settings(wildcards=None):
    return dict(config["tiny_model"]["sft"])


def get_refinement_prompt_settings(wildcards=None):
    """The SRRL settings that shape a refinement prompt: a change to SRRL's others (the c2
    share) leaves the tiny model's warm start and the base model's refinement samples alone.
    """
    used = ("feedback_tests", "refinement_template", "max_trace_chars")
    return {key: config["srrl"][key] for key in used if key in config["srrl"]}


def get_sft_refinement_settings(wildcards=None):
    """Refinement-prompt settings of the warm start's refinement examples (none when unused)."""
    if not config["tiny_model"]["sft"].get("refinement_share"):
        return None
    return get_refinement_prompt_settings()


def get_interval_eval_problems(wildcards):
    return f"results/data/{wildcards.dataset}/test.jsonl"


def get_grpo_settings(wildcards):
    return {**config["grpo"], "seed": int(wildcards.seed)}


def get_dpo_settings(wildcards):
    return {**config["dpo"], "seed": int(wildcards.seed)}


##### resources #####


def resource(stage, key):
    """A resource callable for a rule: sized from the model in the job's wildcards."""

    def get(wildcards, attempt):
        params_b = (
            config["models"][wildcards.model]["params_b"]
            if "model" in wildcards.keys()
            else 0.0
        )
        return stage_resources(stage, params_b, attempt)[key]

    return get


def gpu_model(wildcards):
    """The GPU type to request, or nothing for models small enough to run on CPU."""
    if stage_resources("generate", model_config(wildcards)["params_b"])["gpu"] == 0:
        return ""
    return model_config(wildcards).get("gpu_model") or ""


##### report helpers #####

# The resource stage of each rule (see `resource()` above), for GPU hours in the cost table.
RULE_STAGES = {
    "prepare_dataset": "data",
    "train_tokenizer": "data",
    "init_tiny_model": "data",
    "sft_tiny_model": "train",
    "generate_candidates": "generate",
    "annotate_candidates": "execute",
    "evaluate_pass_at_k": "data",
    "build_rl_dataset": "data",
    "train_dpo": "train",
    "train_grpo": "train",
    "train_srrl": "train",
    "merge_adapter": "merge",
    "sample_refinements": "generate",
}
# c2 samples per refinement prompt in the report's examples.
REFINEMENT_SAMPLES = 4


def trained_methods():
    return [m for m in EXPERIMENT["methods"] if m != "base"]


def get_training_metrics(methods=None):
    return expand(
        "results/training/{dataset}/{model}/{method}/{seed}/metrics.jsonl",
        dataset=EXPERIMENT["datasets"],
        model=EXPERIMENT["models"],
        method=(
            trained_methods()
            if methods is None
            else [m for m in methods if m in trained_methods()]
        ),
        seed=EXPERIMENT["seeds"],
    )


def get_warm_start_metrics():
    tiny = [m for m in EXPERIMENT["models"] if config["models"][m]["source"] == "tiny"]
    return expand(
        "results/training/{dataset}/{model}/sft/metrics.jsonl",
        dataset=EXPERIMENT["datasets"],
        model=tiny,
    )


def get_rl_manifests():
    if "dpo" not in EXPERIMENT["methods"]:
        return []
    return expand(
        "results/rl_data/{dataset}/{model}/{seed}/manifest.json",
        dataset=EXPERIMENT["datasets"],
        model=EXPERIMENT["models"],
        seed=EXPERIMENT["seeds"],
    )


def get_refinement_samples():
    """c2s of the SRRL model and, for comparison, the base model on the same refinement prompts."""
    if "srrl" not in EXPERIMENT["methods"]:
        return []
    return expand(
        "results/analysis/refinements/{dataset}/{model}/{method}/{seed}.jsonl",
        dataset=EXPERIMENT["datasets"],
        model=EXPERIMENT["models"],
        method=["srrl", "base"],
        seed=EXPERIMENT["seeds"],
    )


def get_refinement_generation_settings(wildcards):
    return {**get_generation_settings(wildcards), "num_samples": REFINEMENT_SAMPLES}


def get_all_diversity():
    return [
        path.replace("results/eval/", "results/analysis/diversity/").replace(
            ".json", ".tsv"
        )
        for path in get_all_evaluations()
    ]


def get_model_sizes():
    return {name: config["models"][name]["params_b"] for name in EXPERIMENT["models"]}


def get_report_figures():
    """The figures the report shows, by name; some only when the grid has what they plot."""
    figures = {
        "pass_at_k": "results/plots/pass_at_k.png",
        "outcomes": "results/plots/outcomes.png",
        "diversity": "results/plots/diversity.png",
        "cost": "results/plots/cost.png",
    }
    if "base" in EXPERIMENT["methods"] and trained_methods():
        figures["per_problem"] = "results/plots/per_problem.png"
    if trained_methods():
        figures["training_steps"] = "results/plots/training_steps.png"
        figures["training_samples"] = "results/plots/training_samples.png"
    if "srrl" in EXPERIMENT["methods"]:
        figures["srrl"] = "results/plots/srrl_c1_c2.png"
    if get_warm_start_metrics():
        figures["warm_start"] = "results/plots/warm_start.png"
    return figures


def get_report_inputs(wildcards):
    inputs = {
        "pass_at_k": "results/tables/pass_at_k.tsv",
        "curves": "results/tables/pass_at_k_ci.tsv",
        "comparison": "results/tables/vs_base.tsv",
        "outcomes": "results/tables/outcomes.tsv",
        "per_problem": "results/tables/per_problem.tsv",
        "diversity": "results/tables/diversity.tsv",
        "cost": "results/tables/cost.tsv",
        "refinements": get_refinement_samples(),
        "manifests": get_rl_manifests(),
        **{f"fig_{name}": path for name, path in get_report_figures().items()},
    }
    if trained_methods():
        inputs["training"] = "results/tables/training.tsv"
    return inputs
