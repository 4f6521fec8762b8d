import sys

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from execrl.compute import pin_cpu_kernels
from execrl.config import (
    check_references,
    check_retired,
    local_model_files,
    model_kind,
    plain_dicts,
    repeated_configfile_flags,
    unestimated_ks,
    validated,
)
from execrl.datasets import SettingError, source_files
from execrl.methods import RULES, trained_methods
from execrl.run_paths import METHOD_LEVELS, RunSegments
from execrl.training_settings import (
    method_overrides,
    method_section,
    registry_name,
    samples_test_split,
    token_budget_source,
    training_runtime,
)

if repeated := repeated_configfile_flags(sys.argv):
    raise WorkflowError(repeated)
check_retired(config)
# a violation in one line naming the key, not jsonschema's dump of the schema and the config
validated(config, lambda c: validate(c, schema="../schemas/config.schema.json"))
# The schema's defaults arrive as OrderedDicts: plain dicts keep params' reprs as recorded.
config.update(plain_dicts(config))
check_references(config)
if note := unestimated_ks(config):
    logger.warning(note)
# Before any job starts: every job inherits the CPU kernel pin (execrl.compute), whoever runs
# Snakemake and wherever (a cluster node's Snakemake parses this again).
pin_cpu_kernels(config["compute"]["cpu_kernels"])

EXPERIMENT = config["experiment"]
# Path segments: each config name with a digest of the settings that make its results differ
# (execrl.run_paths), so experiments whose settings differ never share a path.
SEGMENTS = RunSegments(config)
METHOD_ROWS = SEGMENTS.rows
TRAINED = trained_methods(EXPERIMENT["methods"], METHOD_ROWS)
TRAINABLE = sorted({seg for seg in SEGMENTS.trained.values()})
DATASET_OF = {seg: name for name, seg in SEGMENTS.dataset.items()}
MODEL_OF = {
    seg: name
    for level in (SEGMENTS.tokenizer, SEGMENTS.init, SEGMENTS.model)
    for name, seg in level.items()
}
STAGED_OF = {seg: name for name, seg in SEGMENTS.staged.items()}
METHOD_OF = {
    seg: method
    for level in METHOD_LEVELS
    for (_, method), seg in getattr(SEGMENTS, level).items()
}


def one_of(values):
    return "|".join(map(re.escape, sorted(values)))


wildcard_constraints:
    dataset=one_of(DATASET_OF),
    model=one_of(MODEL_OF),
    staged=one_of(STAGED_OF),
    method=one_of(METHOD_OF),
    pairs=one_of(SEGMENTS.rl_data.values()),
    plus=re.escape(SEGMENTS.plus),
    seed=r"\d+",
    split="warmup|train|test",


def dataset_name(wildcards):
    return DATASET_OF[wildcards.dataset]


def model_name(wildcards):
    return MODEL_OF[wildcards.model]


def method_name(wildcards):
    """The config's name of the job's method (a registry method or a variant)."""
    return METHOD_OF[wildcards.method]


def method_row(wildcards):
    return METHOD_ROWS[method_name(wildcards)]


def registry_method(wildcards):
    """The registry method the job's method trains as (a variant's base)."""
    return registry_name(config, method_name(wildcards))


def variants_run():
    """Variant → the method it varies, for the method variants the experiment runs."""
    return {
        name: registry_name(config, name)
        for name in EXPERIMENT["methods"]
        if name in config["method_variants"]
    }


def srrl_runs():
    """SRRL and its method variants, as the experiment runs them."""
    return [m for m in EXPERIMENT["methods"] if registry_name(config, m) == "srrl"]


##### targets #####


def get_final_output():
    return ["results/report.html", "results/summary.json", "results/summary.md"]


def expand_runs(pattern, level, methods=None, **fixed):
    """`pattern` over the experiment's datasets, models, methods and seeds, as path segments:
    a method's segment at `level` (execrl.run_paths.METHOD_LEVELS: the kind of output).
    """
    segments = getattr(SEGMENTS, level)
    paths = []
    for dataset in EXPERIMENT["datasets"]:
        for model in EXPERIMENT["models"]:
            for method in EXPERIMENT["methods"] if methods is None else methods:
                paths += expand(
                    pattern,
                    dataset=SEGMENTS.dataset[dataset],
                    model=SEGMENTS.model[model],
                    method=segments[model, method],
                    seed=EXPERIMENT["seeds"],
                    **fixed,
                )
    return paths


def get_all_evaluations():
    return expand_runs(
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.json",
        "scored",
        split=EXPERIMENT["eval_splits"],
    )


def get_all_plus_evaluations():
    return expand_runs(
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.plus.json",
        "scored_plus",
        split=EXPERIMENT["eval_splits"],
    )


def get_plus_test_manifests():
    """The held-out tests' manifests of every evaluated split, and of the train split where the
    reward-hacking watch ran on its held-out tests (its false-positive floor stands beside the
    watch's hard-coding rates, evaluated on train or not)."""
    splits = list(EXPERIMENT["eval_splits"])
    if get_watched_metrics() and "train" not in splits:
        splits.append("train")
    return expand(
        "results/data/{dataset}/{plus}/{split}.manifest.json",
        plus=SEGMENTS.plus,
        dataset=[SEGMENTS.dataset[d] for d in EXPERIMENT["datasets"]],
        split=splits,
    )


def get_all_diversity():
    return expand_runs(
        "results/analysis/diversity/{dataset}/{model}/{method}/{seed}/{split}.tsv",
        "judged",
        split=EXPERIMENT["eval_splits"],
    )


def get_training_metrics(methods=None):
    wanted = TRAINED if methods is None else [m for m in methods if m in TRAINED]
    return expand_runs(
        "results/training/{dataset}/{model}/{method}/{seed}/metrics.jsonl",
        "trained",
        wanted,
    )


def get_watched_metrics():
    """The training metrics of the methods the reward-hacking watch follows."""
    return get_training_metrics(
        [m for m in TRAINED if "watch" in METHOD_ROWS[m].settings]
    )


def get_main_split_annotations():
    """Every run's annotations on the main split, on the visible and on base + held-out tests."""
    # The report's main split (execrl.report.summary.main_split): test when evaluated.
    split = (
        "test" if "test" in EXPERIMENT["eval_splits"] else EXPERIMENT["eval_splits"][0]
    )
    return expand_runs(
        "results/annotations/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
        "judged",
        split=[split],
    ) + expand_runs(
        "results/annotations/{dataset}/{model}/{method}/{seed}/{split}.plus.jsonl",
        "judged_plus",
        split=[split],
    )


def get_method_metrics(wildcards):
    """The training metrics of one method's runs (its own figure's input)."""
    return get_training_metrics([wildcards.method])


def get_warm_start_metrics():
    return expand(
        "results/training/{dataset}/{model}/sft/metrics.jsonl",
        dataset=[SEGMENTS.dataset[d] for d in EXPERIMENT["datasets"]],
        model=[SEGMENTS.model[m] for m in EXPERIMENT["models"] if is_tiny_model(m)],
    )


def get_rl_manifests():
    if not any(METHOD_ROWS[m].data == "pairs" for m in TRAINED):
        return []
    paths = []
    for model in EXPERIMENT["models"]:
        paths += expand(
            "results/rl_data/{dataset}/{model}/{pairs}/{seed}/manifest.json",
            dataset=[SEGMENTS.dataset[d] for d in EXPERIMENT["datasets"]],
            model=SEGMENTS.model[model],
            pairs=SEGMENTS.rl_data[model],
            seed=EXPERIMENT["seeds"],
        )
    return paths


def get_refinement_samples():
    """c2s of the SRRL model and, for comparison, the base model on the same refinement prompts."""
    if "srrl" not in EXPERIMENT["methods"]:
        return []
    return expand_runs(
        "results/analysis/refinements/{dataset}/{model}/{method}/{seed}.jsonl",
        "refined",
        ["srrl", "base"],
    )


##### datasets #####


def dataset_config(wildcards):
    return config["datasets"][dataset_name(wildcards)]


def get_dataset_source_files(wildcards):
    """The local files prepare_dataset reads (none for a hub dataset or the builtin suite): a
    missing one, or a split its adapter has not, fails the plan naming the dataset's key; an edited
    one reruns the job."""
    try:
        return source_files(dataset_config(wildcards), get_split_key(wildcards))
    except SettingError as error:
        raise WorkflowError(
            f"datasets.{dataset_name(wildcards)}.{error.key}: {error}"
        ) from None


def get_problems(wildcards):
    return f"results/data/{wildcards.dataset}/{wildcards.split}.jsonl"


def get_alternatives(wildcards):
    return f"results/data/{wildcards.dataset}/{wildcards.split}.alternatives.json"


def get_plus_problems(wildcards):
    return f"results/data/{wildcards.dataset}/{SEGMENTS.plus}/{wildcards.split}.jsonl"


def get_warmup_problems(wildcards):
    """What a tiny model's tokenizer and warm start learn from (the dataset's `warmup_split`)."""
    return f"results/data/{wildcards.dataset}/warmup.jsonl"


def get_train_problems(wildcards):
    return f"results/data/{wildcards.dataset}/train.jsonl"


def get_test_problems(wildcards):
    return f"results/data/{wildcards.dataset}/test.jsonl"


def get_interval_eval_problems(wildcards):
    """The test split, for a training job whose interval evaluation samples it; nothing for one
    whose `eval_every` is 0 (an edited test file then reruns no training)."""
    if not samples_test_split(config, method_name(wildcards)):
        return []
    return get_test_problems(wildcards)


##### models #####


def model_config(wildcards):
    return config["models"][model_name(wildcards)]


def staged_config(wildcards):
    return config["models"][STAGED_OF[wildcards.staged]]


def staged_setting(key):
    """A params function returning one setting of the staged model."""

    def get(wildcards):
        return staged_config(wildcards)[key]

    return get


# tiny (built here), local (a folder) or hub (staged by `stage_model` before any job uses it).
MODEL_KINDS = {name: model_kind(m["source"]) for name, m in config["models"].items()}


def is_tiny_model(name):
    return MODEL_KINDS[name] == "tiny"


def is_hub_model(name):
    return MODEL_KINDS[name] == "hub"


def is_full_weight(wildcards):
    return model_config(wildcards)["finetuning"] == "full"


def get_base_model(wildcards):
    """The folder of the model before any RL: built, staged from the hub, or given."""
    name = model_name(wildcards)
    if is_tiny_model(name):
        return f"results/models/{wildcards.dataset}/{wildcards.model}/base"
    if is_hub_model(name):
        return f"resources/models/{SEGMENTS.staged[name]}"
    return model_config(wildcards)["source"]


def get_base_model_input(wildcards):
    """The base model as an input: a folder the workflow makes, or a local folder's files (new
    weights in the same folder rerun what read the old ones)."""
    if is_tiny_model(model_name(wildcards)) or is_hub_model(model_name(wildcards)):
        return get_base_model(wildcards)
    return local_model_files(get_base_model(wildcards))


def get_policy_model(wildcards):
    """The folder a method samples from: the base model (for it and its variants), a merged
    adapter, or full weights."""
    if registry_method(wildcards) == "base":
        return get_base_model(wildcards)
    trained = SEGMENTS.trained[model_name(wildcards), method_name(wildcards)]
    run = f"results/models/{wildcards.dataset}/{wildcards.model}/{trained}/{wildcards.seed}"
    return f"{run}/trained" if is_full_weight(wildcards) else f"{run}/merged"


def get_policy_model_input(wildcards):
    if registry_method(wildcards) == "base":
        return get_base_model_input(wildcards)
    return get_policy_model(wildcards)


def get_training_data(wildcards):
    """What the method trains on: preference pairs, the train split's problems with their held-out
    tests (methods the reward-hacking watch follows), or the train split's problems."""
    method = method_row(wildcards)
    if method.data == "pairs":
        pairs = SEGMENTS.rl_data[model_name(wildcards)]
        return f"results/rl_data/{wildcards.dataset}/{wildcards.model}/{pairs}/{wildcards.seed}/pairs.jsonl"
    if "watch" in method.settings:
        return f"results/data/{wildcards.dataset}/{SEGMENTS.plus}/train.jsonl"
    return get_train_problems(wildcards)


def get_token_budget_source(wildcards):
    """GRPO's metrics of the same dataset, model and seed, when SRRL trains until it has used as
    many tokens as GRPO did (a token budget of `srrl.budget`); nothing otherwise."""
    source = token_budget_source(config, method_name(wildcards))
    if source is None:
        return []
    trained = SEGMENTS.trained[model_name(wildcards), source]
    return f"results/training/{wildcards.dataset}/{wildcards.model}/{trained}/{wildcards.seed}/metrics.jsonl"


def get_base_annotations(wildcards):
    """The base model's train-split annotations beside the job's run (RL data, refinement prompts)."""
    base = SEGMENTS.judged[model_name(wildcards), "base"]
    return f"results/annotations/{wildcards.dataset}/{wildcards.model}/{base}/{wildcards.seed}/train.jsonl"


def run_at(wildcards, level):
    """The job's run (dataset/model/method) with the method's segment at `level`."""
    method = getattr(SEGMENTS, level)[model_name(wildcards), method_name(wildcards)]
    return f"{wildcards.dataset}/{wildcards.model}/{method}/{wildcards.seed}"


def get_candidates(wildcards):
    return f"results/candidates/{run_at(wildcards, 'sampled')}/{wildcards.split}.jsonl"


def get_annotations(wildcards):
    return f"results/annotations/{run_at(wildcards, 'judged')}/{wildcards.split}.jsonl"


def get_plus_annotations(wildcards):
    path = f"results/annotations/{run_at(wildcards, 'judged_plus')}"
    return f"{path}/{wildcards.split}.plus.jsonl"


def get_tokenizer(wildcards):
    tokenizer = SEGMENTS.tokenizer[model_name(wildcards)]
    return f"results/models/{wildcards.dataset}/{tokenizer}/tokenizer"


def get_init_model(wildcards):
    init = SEGMENTS.init[model_name(wildcards)]
    return f"results/models/{wildcards.dataset}/{init}/init"


##### report #####


def get_method_variants():
    """The config's method variants the experiment runs (the report's scripts look each up as
    the method it trains as); one it does not run changes no output."""
    return {
        name: variant
        for name, variant in config["method_variants"].items()
        if name in EXPERIMENT["methods"]
    }


def get_method_overrides():
    """Each method's own values of the shared sections (a variant's with its base's), by name."""
    return {m: method_overrides(config, m) for m in EXPERIMENT["methods"]}


def get_report_grpo():
    """The grpo section the report's rules read (steps, prompts and generations per step, to count
    tokens and samples), less vLLM's settings, which no report figure or table reads."""
    return {
        key: value
        for key, value in RESULT_CONFIG["grpo"].items()
        if not key.startswith("vllm_")
    }


def get_report_figures():
    """The figures the report shows, by name; some only when the grid has what they plot."""
    figures = {
        "pass_at_k": "results/plots/pass_at_k.png",
        "outcomes": "results/plots/outcomes.png",
        "diversity": "results/plots/diversity.png",
        "cost": "results/plots/cost.png",
    }
    if "base" in EXPERIMENT["methods"] and TRAINED:
        figures["per_problem"] = "results/plots/per_problem.png"
    if TRAINED:
        figures["training_steps"] = "results/plots/training_steps.png"
        figures["training_samples"] = "results/plots/training_samples.png"
    if "srrl" in EXPERIMENT["methods"]:
        figures["srrl"] = "results/plots/srrl_c1_c2.png"
    for method in TRAINED:
        if METHOD_ROWS[method].panels:
            figures[f"method_{method}"] = f"results/plots/methods/{method}.png"
    if get_watched_metrics():
        figures["reward_hacking"] = "results/plots/reward_hacking.png"
    if get_warm_start_metrics():
        figures["warm_start"] = "results/plots/warm_start.png"
    return figures


def get_evaluated_split_manifests():
    """The manifests of the evaluated splits (what they share with training's, for the report)."""
    return expand(
        "results/data/{dataset}/{split}.manifest.json",
        dataset=[SEGMENTS.dataset[name] for name in EXPERIMENT["datasets"]],
        split=EXPERIMENT["eval_splits"],
    )


def get_prepared_split_problems():
    """Every split the experiment prepares, per dataset: the evaluated ones, train when
    a method trains, warmup when a tiny model warm-starts (for the report: what the
    evaluated splits share with the others)."""
    splits = set(EXPERIMENT["eval_splits"])
    if TRAINED:
        splits.add("train")
    if any(is_tiny_model(name) for name in EXPERIMENT["models"]):
        splits.add("warmup")
    return expand(
        "results/data/{dataset}/{split}.jsonl",
        dataset=[SEGMENTS.dataset[name] for name in EXPERIMENT["datasets"]],
        split=sorted(splits),
    )


def get_prepared_split_manifests():
    """The manifests of every split the experiment prepares (the rows each left out)."""
    return [
        path.removesuffix(".jsonl") + ".manifest.json"
        for path in get_prepared_split_problems()
    ]


def get_report_inputs(wildcards):
    inputs = {
        "pass_at_k": "results/tables/pass_at_k.tsv",
        "curves": "results/tables/pass_at_k_ci.tsv",
        "comparison": "results/tables/vs_base.tsv",
        "comparisons": "results/tables/comparisons.tsv",
        "outcomes": "results/tables/outcomes.tsv",
        "per_problem": "results/tables/per_problem.tsv",
        "diversity": "results/tables/diversity.tsv",
        "cost": "results/tables/cost.tsv",
        "plus": "results/tables/pass_at_k_plus.tsv",
        "plus_manifests": "results/tables/plus_tests.tsv",
        "annotations": get_main_split_annotations(),
        "refinements": get_refinement_samples(),
        "manifests": get_rl_manifests(),
        "data_manifests": get_evaluated_split_manifests(),
        "split_manifests": get_prepared_split_manifests(),
        "split_problems": get_prepared_split_problems(),
        "metrics": get_training_metrics(),
        **{f"fig_{name}": path for name, path in get_report_figures().items()},
    }
    if TRAINED:
        inputs["training"] = "results/tables/training.tsv"
    return inputs
