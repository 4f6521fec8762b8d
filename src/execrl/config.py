"""Experiment configs: how they are layered, checks a JSON schema cannot express, and which
settings cannot change a result.

A run's config is built the way Snakemake builds it: the schema's defaults (sized for hub
models), under `config/config.yaml` (the analysis a user edits), under each `--configfile`
in order. `python -m execrl.config [--configfile F ...]` prints the merged result.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = Path("config") / "config.yaml"
"""Relative to the working directory, as in the Snakefile."""
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.json"

RUNTIME_SETTINGS = {
    "execution": ("workers",),
    "wandb": ("mode", "project"),
    "grpo": (
        "vllm_server_gpus",
        "vllm_server_gpu_memory_utilization",
        "vllm_server_timeout_s",
        "save_steps",
        "gradient_checkpointing",
    ),
    "dpo": ("save_steps", "gradient_checkpointing"),
    "preflight": ("required",),
}
"""Settings kept out of every result path's digest and checkpoint key. Logging, parallelism,
checkpointing (how often a training job saves; whether it recomputes activations: a run trains to
the same bits either way, `tests/test_training_runtime.py`) and `preflight.required` cannot change
a result and never reach a rule's `params:`, so changing them reruns no result (the memory plan
still reads `gradient_checkpointing`; where the plan changes, the train job's params do). The
vLLM server's GPUs and memory share are the exception: in server mode they reach the train job's command (`params.vllm_server`), since the server's tensor parallelism (the
memory plan may raise it above `vllm_server_gpus`) and its KV cache can change what vLLM samples;
a change there reruns training at the same path (`tests/test_cluster.py`)."""


class ConfigError(ValueError):
    """A config problem, named by its key."""


def without_runtime_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The config less RUNTIME_SETTINGS: what may decide a result."""
    result = copy.deepcopy(config)
    for section, keys in RUNTIME_SETTINGS.items():
        for key in keys:
            result.get(section, {}).pop(key, None)
    return result


_HUB_MODEL_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")

PLACEMENT_SECTIONS = ("staging", "cluster")
"""Where a run is staged and planned: the Hugging Face download cache and the cluster's nodes.
Neither is in a result path's digest; the cluster reaches a training job only through the memory
plan's command (micro-batch, ZeRO stage, dtype, process count), which is in that job's params."""


def shown_in_report(result_config: dict[str, Any]) -> dict[str, Any]:
    """The configuration the report prints: the result config less PLACEMENT_SECTIONS, so that
    moving the download cache or editing the partition file rewrites no report, and less what the
    experiment does not run (`left_out_of_report`), which an overlay inherits from the config
    laid under it, and less the sections left empty (those that hold only RUNTIME_SETTINGS, which
    the result config has already lost)."""
    shown = {section: value for section, value in result_config.items() if section not in PLACEMENT_SECTIONS}
    experiment = shown["experiment"]
    for section in ("datasets", "models"):
        shown[section] = {name: value for name, value in shown[section].items() if name in experiment[section]}
    for key in left_out_of_report(result_config):
        section, _, name = key.partition(".")
        if name.endswith("*"):  # every key of the section that starts so
            shown[section] = {k: v for k, v in shown[section].items() if not k.startswith(name[:-1])}
        elif name:
            shown[section] = {k: v for k, v in shown[section].items() if k != name}
        else:
            shown.pop(section, None)
    # a section all of whose keys are runtime settings (`wandb`, `preflight`) would print as `{}`
    return {section: value for section, value in shown.items() if value != {}}


def left_out_of_report(result_config: dict[str, Any]) -> list[str]:
    """What no job of the experiment's grid reads, as `section` or `section.key`: the sections of
    methods it does not run (a section is read if a method it runs reads it, or, for `srrl`,
    `code_game` and `spiral`, if the tiny model's warm start writes examples of theirs), method
    variants and overrides of methods it does not run, `tiny_model` without a tiny model,
    `generation.vllm` where the generation backend is not vLLM, and `grpo.vllm_*` where no method it
    runs generates with vLLM in training (`grpo.use_vllm`, a method's override of it included)."""
    from execrl.methods import with_variants

    # each method's sections, a variant's those of the method it trains as
    settings = {name: row.settings for name, row in with_variants(result_config.get("method_variants") or {}).items()}
    methods = result_config["experiment"]["methods"]
    read = {"prompt", "execution"}.union(*(settings.get(name, ()) for name in methods))
    models = result_config.get("models", {})
    tiny = any(model_kind(models[name]["source"]) == "tiny" for name in result_config["experiment"]["models"]
               if name in models)
    sft = result_config.get("tiny_model", {}).get("sft", {}) if tiny else {}
    read |= {section for section, share in (("srrl", "refinement_share"), ("code_game", "code_game_share"),
                                            ("spiral", "game_examples")) if sft.get(share)}
    left = [section for section in dict.fromkeys(s for sections in settings.values() for s in sections)
            if section in result_config and section not in read]
    if not tiny and "tiny_model" in result_config:
        left.append("tiny_model")
    for section in ("method_variants", "method_overrides"):
        left += [f"{section}.{name}" for name in result_config.get(section) or {} if name not in methods]
    generation = result_config.get("generation", {})
    if "vllm" in generation and generation.get("backend") != "vllm":
        left.append("generation.vllm")
    if "grpo" in read and "grpo" not in left and not _trains_with_vllm(result_config, methods):
        left.append("grpo.vllm_*")
    return left


def _trains_with_vllm(result_config: dict[str, Any], methods: list[str]) -> bool:
    """Whether a method of `methods` generates with vLLM in training: `grpo.use_vllm`, or its own
    override of it (`method_overrides`, a variant's `overrides`)."""
    if result_config.get("grpo", {}).get("use_vllm"):
        return True
    variants = result_config.get("method_variants") or {}
    overrides = [result_config.get("method_overrides", {}).get(name, {}) for name in methods]
    overrides += [variants[name].get("overrides", {}) for name in methods if name in variants]
    overrides += [result_config.get("method_overrides", {}).get(variants[name]["method"], {}) for name in methods
                  if name in variants]  # fmt: skip
    return any(o.get("grpo", {}).get("use_vllm") for o in overrides)


def model_kind(source: str) -> str:
    """`tiny` (built by the workflow), `local` (a folder on disk) or `hub` (staged before use)."""
    if source == "tiny":
        return "tiny"
    if source.startswith(("/", "./", "../", "~")) or Path(source).expanduser().exists():
        return "local"
    # A hub id is `name` or `organization/name`; a path of more parts can only be a folder.
    return "hub" if _HUB_MODEL_ID.fullmatch(source) else "local"


def _check_overrides(config: dict, where: str, method, sections: dict) -> None:
    """SECTION → KEY overrides of `method` (a registry row): sections it reads, keys the section has.
    Every method samples, so any may override `generation`'s sampling distribution (SAMPLING_KEYS);
    the base model reads nothing else."""
    from execrl.generation.sampling import SAMPLING_KEYS

    for section, values in sections.items():
        if section == "generation":
            unknown = sorted(set(values) - set(SAMPLING_KEYS))
            if unknown:
                raise ConfigError(
                    f"{where}.generation: {', '.join(unknown)} cannot differ between methods "
                    f"(a variant may set the sampling distribution's keys: {', '.join(SAMPLING_KEYS)})"
                )
            continue
        if section not in method.settings:
            reads = ", ".join((*method.settings, "generation"))
            raise ConfigError(f"{where}.{section}: {method.name} does not read {section!r} (it reads {reads})")
        unknown = sorted(set(values) - set(config.get(section, {})))
        if unknown:
            raise ConfigError(f"{where}.{section}: unknown key(s) {', '.join(unknown)}")
        # One vLLM server setup per run: the plan, the job's resources and the server's command read it from `grpo`.
        server = sorted(key for key in values if key.startswith("vllm_server_"))
        if section == "grpo" and server:
            raise ConfigError(
                f"{where}.grpo: {', '.join(server)} cannot differ between methods (the vLLM server's GPUs, "
                f"memory share and start-up wait are the run's): set grpo.{server[0]}"
            )


def _section_everywhere(config: dict[str, Any], section: str) -> list[tuple[str, Any]]:
    """A section as the config gives it, and as each method variant and method override does,
    with the path that names it."""
    places = [(section, config.get(section))]
    places += [(f"method_variants.{name}.overrides.{section}", (variant or {}).get("overrides", {}).get(section))
               for name, variant in (config.get("method_variants") or {}).items()]
    places += [(f"method_overrides.{name}.{section}", (overrides or {}).get(section))
               for name, overrides in (config.get("method_overrides") or {}).items()]
    return [(path, value) for path, value in places if isinstance(value, dict)]


def repeated_configfile_flags(argv: list[str]) -> str | None:
    """The error for a command line that gives `--configfile` more than once, or None. Snakemake
    keeps only the last flag's files, so `--configfile a.yaml --configfile b.yaml` would run
    config/config.yaml's analysis under b.yaml alone, without a word."""
    flags = ("--configfile", "--configfiles")
    given = [arg for arg in argv if arg in flags or arg.startswith(tuple(f"{flag}=" for flag in flags))]
    if len(given) < 2:
        return None
    return (
        f"--configfile is given {len(given)} times, and Snakemake keeps only the last one's files: "
        "give every file after one flag, in order (--configfile A.yaml B.yaml)"
    )


def check_retired(config: dict[str, Any]) -> None:
    """Values this version retired, named with what replaces them. Runs before the schema's check,
    whose message would only list the values it knows."""
    # The code game's settings module, not the game: neither the game nor the sandbox is imported.
    from execrl.training.code_game_settings import POLICY_OPPONENT_RETIRED
    from execrl.training.token_budget import RETIRED

    for path, srrl in _section_everywhere(config, "srrl"):
        if srrl.get("budget") in RETIRED:
            raise ConfigError(RETIRED[srrl["budget"]].replace("srrl.budget", f"{path}.budget", 1))
    for path, code_game in _section_everywhere(config, "code_game"):
        if code_game.get("opponent") == "policy":
            raise ConfigError(POLICY_OPPONENT_RETIRED.replace("code_game", path, 1))


def check_references(config: dict[str, Any]) -> None:
    """Every name the experiment grid uses is defined, every method another one's settings need is
    run, and templates use known fields only."""
    from execrl.methods import METHODS

    from execrl.training.token_budget import TOKEN_BUDGETS

    experiment = config["experiment"]
    variants = config.get("method_variants", {})
    for name, variant in variants.items():
        if name in METHODS:
            raise ConfigError(f"method_variants.{name}: {name!r} is a registry method; give the variant a name of its own")
        base = variant["method"]
        if base not in METHODS:
            raise ConfigError(f"method_variants.{name}.method: {base!r} is not a method (methods: {', '.join(METHODS)})")
        if not METHODS[base].trained and set(variant.get("overrides", {})) != {"generation"}:
            raise ConfigError(
                f"method_variants.{name}: a variant of {base!r}, which trains nothing, differs only in how it "
                "samples: give it overrides.generation and nothing else"
            )
        _check_overrides(config, f"method_variants.{name}.overrides", METHODS[base], variant.get("overrides", {}))
    for name in experiment["methods"]:
        if name not in METHODS and name not in variants:
            raise ConfigError(
                f"experiment.methods names {name!r}, which is not a method (methods: {', '.join(METHODS)}; "
                f"variants: {', '.join(variants) or 'none'})"
            )
    for pair in config.get("report", {}).get("comparisons", []):
        for name in pair:
            if name not in experiment["methods"]:
                raise ConfigError(
                    f"report.comparisons names {name!r} in {pair}, which experiment.methods does not run "
                    f"(methods: {', '.join(experiment['methods'])})"
                )
        if pair[0] == pair[1]:
            raise ConfigError(f"report.comparisons compares {pair[0]!r} with itself")
    for method, sections in config.get("method_overrides", {}).items():
        if method not in METHODS or not METHODS[method].trained:
            raise ConfigError(f"method_overrides names {method!r}, which is not a trained method (methods: {', '.join(METHODS)})")
        _check_overrides(config, f"method_overrides.{method}", METHODS[method], sections)
    if "spiral" in experiment["methods"]:
        grpo = {**config.get("grpo", {}), **config.get("method_overrides", {}).get("spiral", {}).get("grpo", {})}
        if grpo.get("use_vllm") and grpo.get("vllm_mode") == "server":
            raise ConfigError(
                "spiral with grpo.vllm_mode: server - self-play samples each process's game turns as its games "
                "need them, but vLLM's server mode samples collectively, the same number on every process: "
                "use vllm_mode: colocate for spiral (method_overrides.spiral.grpo.vllm_mode)"
            )
    for name in experiment["methods"]:
        base = variants.get(name, {}).get("method", name)
        srrl = {**config.get("srrl", {}), **variants.get(name, {}).get("overrides", {}).get("srrl", {})}
        if base == "srrl" and srrl.get("budget") in TOKEN_BUDGETS and "grpo" not in experiment["methods"]:
            raise ConfigError(
                f"{name} with srrl.budget: {srrl['budget']} stops SRRL at the tokens GRPO used, but experiment.methods "
                f"does not run grpo (methods: {', '.join(experiment['methods'])}): add grpo, or set srrl.budget: completions"
            )
    for section, key in (("datasets", "datasets"), ("models", "models")):
        for name in experiment[key]:
            if name not in config[section]:
                known = ", ".join(sorted(config[section])) or "none"
                raise ConfigError(
                    f"experiment.{key} names {name!r}, which is not defined under `{section}:` (defined: {known})"
                )
    template = config.get("prompt", {}).get("template")
    if template is not None:
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as error:
            raise ConfigError(f"prompt.template is not a valid format string: {error}") from error
        unknown = fields - {"prompt", "tests", "entry_point"}
        if unknown:
            raise ConfigError(f"prompt.template uses unknown field(s) {sorted(unknown)}; use {{prompt}}, {{tests}}, {{entry_point}}")
    from execrl.datasets import SettingError, check_definition, check_splits_apart

    # Whether anything learns from a dataset: an RL method, or a tiny model's warm start.
    learns = any(METHODS[variants.get(name, {}).get("method", name)].trained for name in experiment["methods"]) or any(
        model_kind(config["models"][name]["source"]) == "tiny" for name in experiment["models"] if name in config["models"]
    )
    # DPO's pairs are a passing and a failing candidate of one problem, from the base model's samples.
    if any(variants.get(name, {}).get("method", name) == "dpo" for name in experiment["methods"]):
        samples = config["generation"]["num_samples"]
        if samples < 2:
            raise ConfigError(
                f"generation.num_samples: {samples} sample per problem gives DPO no preference pair (a pair is a "
                f"passing and a failing sample of one problem, from the base model's samples); DPO needs at least 2"
            )
    for name in experiment["datasets"]:
        # What the first job (prepare_dataset) would refuse; its split names are checked as the
        # DAG asks for them (workflow: get_dataset_source_files), since unused splits may be absent.
        try:
            check_definition(config["datasets"][name])
            if learns:
                check_splits_apart(config["datasets"][name])
        except SettingError as error:
            raise ConfigError(f"datasets.{name}.{error.key}: {error}") from None
    for name in experiment["models"]:
        model = config["models"][name]
        source = model["source"]
        # A local model is read where it lies: a typo would otherwise surface in the first job as
        # transformers' complaint about a malformed hub id.
        if source.startswith("~"):
            raise ConfigError(
                f"models.{name}.source: {source!r}: `~` is not expanded; give the folder as "
                f"{str(Path(source).expanduser())!r}"
            )
        if model_kind(source) == "local":
            check_local_model(name, model)
        if model.get("finetuning") == "full" and model_kind(source) == "tiny":
            raise ConfigError(f"models.{name}.finetuning: full is for hub or local models; tiny models train LoRA adapters")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")
"""Files of which a saved tokenizer holds at least one (``save_pretrained``'s, or a vocabulary)."""


def check_local_model(name: str, model: dict) -> None:
    """A local model folder holds what sampling and training read: its config and its tokenizer
    (transformers builds an empty tokenizer from a folder without one, and sampling then fails
    on empty prompts). A hub revision means nothing for it."""
    source = model["source"]
    folder = Path(source)
    hint = "a local model is a folder saved by save_pretrained, the tokenizer's beside the model's"
    if not (folder / "config.json").is_file():
        what = "has no config.json" if folder.is_dir() else "does not exist"
        raise ConfigError(
            f"models.{name}.source: the local model folder {source!r} {what} ({hint}; a hub model is "
            f"named as organization/name)"
        )
    if not any((folder / file).is_file() for file in TOKENIZER_FILES):
        raise ConfigError(
            f"models.{name}.source: the local model folder {source!r} holds no tokenizer (none of "
            f"{', '.join(TOKENIZER_FILES)}; {hint}: `tokenizer.save_pretrained(folder)`)"
        )
    if model.get("revision") is not None:
        raise ConfigError(
            f"models.{name}.revision: {model['revision']!r} names a hub revision, and {source!r} is a local "
            f"folder, read as it is: remove the revision (its files are the jobs' inputs, so new weights rerun them)"
        )


def local_model_files(folder: str) -> list[str]:
    """The files of a local model folder (its top level, hidden files left out): the inputs of the
    jobs that read it, so that new weights or a new tokenizer in the same folder rerun them."""
    return sorted(str(path) for path in Path(folder).iterdir() if path.is_file() and not path.name.startswith("."))


def unestimated_ks(config: dict[str, Any]) -> str | None:
    """A note when `evaluation.k` asks for more than the samples every method draws per problem
    (one `generation.num_samples` for all): pass@k needs k samples, so the report leaves such a k
    out. Said when the DAG is built."""
    samples = config["generation"]["num_samples"]
    above = [k for k in config["evaluation"]["k"] if k > samples]
    if not above:
        return None
    named = ", ".join(f"pass@{k}" for k in above)
    return (f"evaluation.k: {named} cannot be estimated from {samples} samples per problem "
            f"(generation.num_samples); the report leaves {'it' if len(above) == 1 else 'them'} out")


def schema_error(error: BaseException) -> ConfigError | None:
    """A schema violation as one line naming the key, or None where `error` (jsonschema's
    ValidationError, or Snakemake's WorkflowError raised over one) is not one. jsonschema's own text,
    which Snakemake prints, holds the whole schema and the whole config: thousands of lines, with
    the key among the first few."""
    # Snakemake raises its WorkflowError while handling the ValidationError (its context). Known
    # by its fields, not imported: the report's environment, which imports this module, has no
    # jsonschema.
    cause = next((e for e in (error, error.__cause__, error.__context__)
                  if type(e).__name__ == "ValidationError" and hasattr(e, "absolute_path")), None)
    if cause is None:
        return None
    key = ".".join(str(part) for part in cause.absolute_path) or "the config's top level"
    message = cause.message if len(cause.message) <= 300 else cause.message[:300] + " ..."
    return ConfigError(f"{key}: {message} (the schema: {SCHEMA.relative_to(REPO)})")


def validated(config: dict[str, Any], validate) -> None:
    """`validate(config)` (Snakemake's, which fills in the schema's defaults), a schema violation
    raised as `schema_error`'s one line. The defaults are filled in first, each a copy of its own:
    Snakemake's validate gives every entry missing a default the schema's one object, so the
    builtin `holdout` an `if`/`then` adds to one data set's `options: {}` appeared in every other
    data set given without options (and failed there as an unknown option)."""
    fill_defaults(config, json.loads(SCHEMA.read_text()))
    try:
        validate(config)
    except Exception as error:  # Snakemake wraps the violation in a WorkflowError
        short = schema_error(error)
        if short is None:
            raise
        raise short from None


def merged_config(configfiles: list[str | Path] = (), base: str | Path = DEFAULT_CONFIG) -> dict[str, Any]:
    """The config a run with these `--configfile`s gets: validated, defaults filled in."""
    from snakemake.utils import update_config, validate

    config: dict[str, Any] = {}
    for path in [base, *configfiles]:
        update_config(config, read_config_file(path))
    validated(config, lambda c: validate(c, schema=str(SCHEMA)))
    config = plain_dicts(config)
    check_references(config)
    return config


def plain_dicts(value: Any) -> Any:
    """`value` with every mapping a plain dict. Snakemake reads a JSON schema with
    `object_pairs_hook=OrderedDict`, so the defaults `validate` fills in are OrderedDicts: their
    repr (which Snakemake records to see a rule's params change) and YAML dumps differ from a
    dict's."""
    if isinstance(value, dict):
        return {k: plain_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_dicts(v) for v in value]
    return value


def load_config(configfiles: list[Path], base: Path) -> dict:
    """The config a workflow run with these `--configfile`s gets (`merged_config`);
    where Snakemake is not installed (the offline GPU node) the files laid over one another with
    the schema's defaults filled in as Snakemake fills them, not validated."""
    try:
        import snakemake.utils  # noqa: F401
    except ImportError:
        return merged_without_snakemake(configfiles, base)
    return merged_config(configfiles, base=base)


def merged_without_snakemake(configfiles: list[Path], base: Path) -> dict:
    config: dict = {}
    for path in [base, *configfiles]:
        _lay_over(config, read_config_file(path))
    fill_defaults(config, json.loads(SCHEMA.read_text()))
    check_references(config)
    return config


def read_config_file(path: str | Path) -> dict[str, Any]:
    """One config file's sections; a file that is missing, not YAML, or not a mapping of sections
    raises ConfigError naming the file (and the line where YAML stopped)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()}: run from the repository root)"
        raise ConfigError(f"{path}: no such config file{where}")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        tab = " (YAML indents with spaces, not tabs)" if "'\\t'" in str(getattr(error, "problem", "")) else ""
        raise ConfigError(f"{path}: not valid YAML: {at}{getattr(error, 'problem', None) or error}{tab}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (experiment:, datasets:, ...), "
                          f"got a {type(loaded).__name__}")
    return loaded


def _lay_over(config: dict, overlay: dict) -> None:
    """Snakemake's update_config: mappings merged key by key, anything else replaced."""
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _lay_over(config[key], value)
        else:
            config[key] = copy.deepcopy(value)


def fill_defaults(instance, schema: dict) -> None:
    """Every missing property that has a `default` in `schema`, recursively (what Snakemake's
    `validate(set_default=True)` adds)."""
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    for key, sub in properties.items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            fill_defaults(instance[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in properties:
                fill_defaults(value, extra)
    if "if" in schema and _matches_constants(instance, schema["if"]):
        fill_defaults(instance, schema.get("then", {}))


def _matches_constants(instance: dict, condition: dict) -> bool:
    """Whether `instance` meets an `if` of the form the schema uses (properties with a `const`); any
    other form is refused, so that a schema change cannot leave defaults silently unfilled."""
    if set(condition) != {"properties"} or any(set(sub) != {"const"} for sub in condition["properties"].values()):
        raise NotImplementedError(f"fill_defaults reads only `if: {{properties: {{KEY: {{const: ...}}}}}}`, not {condition}")
    return all(key not in instance or instance[key] == sub["const"] for key, sub in condition["properties"].items())



def main(argv: list[str] | None = None) -> None:
    import yaml

    parser = argparse.ArgumentParser(
        prog="python -m execrl.config", description="Print the merged config an experiment runs with."
    )
    parser.add_argument("--configfile", nargs="*", default=[], help="overlays, in Snakemake's order")
    # The workflow refuses a repeated flag; printing one flag's files would show a config no run gets.
    repeated = repeated_configfile_flags(sys.argv[1:] if argv is None else argv)
    if repeated:
        parser.error(repeated)
    args = parser.parse_args(argv)
    try:
        merged = merged_config(args.configfile)
    except ConfigError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    yaml.safe_dump(merged, sys.stdout, sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    main()
