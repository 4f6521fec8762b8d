"""What a config's methods train with: the settings a training job gets, assembled from the config.

A config's methods are the registry's (`execrl.methods`) and its `method_variants`, each trained as
a registry method (`registry_name`) with the shared sections as that method reads them: its
`method_overrides`, then the variant's own `overrides` (`method_overrides`, `method_section`).
`training_settings` is everything that decides what a training job learns, before its seed: the
sections of the method's registry row, overrides applied, its rollouts' sampling
(`method_generation`), and `lora`. The workflow passes it to the `train` rule as params
(workflow/rules/settings.smk), the preflight and the memory plan read it, and the result paths
digest it (`execrl.run_paths`, the trained segment), so a settings change reruns its training.
`training_runtime` is how a job runs without changing what it learns (how often it saves, whether
it recomputes activations): out of every digest, the train rule hands it over as resources.
"""

from __future__ import annotations

import copy

from execrl.config import RUNTIME_SETTINGS, without_runtime_settings
from execrl.methods import Method, with_variants


def method_rows(config: dict) -> dict[str, Method]:
    """The registry's methods plus the config's `method_variants`, each a row of its base method
    under the variant's name."""
    return with_variants(config.get("method_variants", {}))


def registry_name(config: dict, method: str) -> str:
    """The registry method a config's method name trains as (a variant's base, or itself)."""
    variant = config.get("method_variants", {}).get(method)
    return variant["method"] if variant else method


def method_overrides(config: dict, method: str) -> dict[str, dict]:
    """SECTION → KEY → value a method trains with in place of the shared sections: its base's
    `method_overrides`, then the variant's own `overrides`."""
    base = registry_name(config, method)
    merged = copy.deepcopy(config.get("method_overrides", {}).get(base, {}))
    variant = config.get("method_variants", {}).get(method, {})
    for section, values in variant.get("overrides", {}).items():
        merged[section] = {**merged.get(section, {}), **values}
    return merged


def method_section(config: dict, method: str, section: str) -> dict:
    """One shared section as `method` reads it (its overrides applied)."""
    return {**config[section], **method_overrides(config, method).get(section, {})}


def prompt_settings(config: dict, model: str) -> dict:
    """The prompt with the model's reasoning format (the params of every prompting rule)."""
    return {**config["prompt"], "reasoning_format": config["models"][model]["reasoning_format"]}


def method_generation(config: dict, method: str) -> dict:
    """The `generation` section as `method` samples with it (its rollouts and its candidates): a
    variant's sampling overrides laid over it, runtime keys left out."""
    generation = without_runtime_settings(config)["generation"]
    return {**generation, **method_overrides(config, method).get("generation", {})}


BACKEND_ONLY_GENERATION_KEYS = {"vllm": ("vllm",), "transformers": ("batch_size",)}
"""Generation keys only one backend reads: `generation.vllm` (how vLLM loads the model) and
`generation.batch_size` (prompts per batch of transformers' `generate`; vLLM schedules its own)."""


def backend_generation(config: dict, method: str) -> dict:
    """`method_generation` less the keys its backend ignores: what sampling candidates reads, so
    a key the backend never reads neither moves a result path nor reruns sampling."""
    generation = method_generation(config, method)
    ignored = {key for backend, keys in BACKEND_ONLY_GENERATION_KEYS.items() if backend != generation["backend"]
               for key in keys}
    return {key: value for key, value in generation.items() if key not in ignored}


def training_settings(config: dict, method: str, model: str) -> dict:
    """Everything that decides what `method`'s training job learns, before its seed: the sections
    of its registry row (overrides applied) and `lora` (null when the model trains all weights)."""
    result = without_runtime_settings(config)
    row = method_rows(config)[method]
    settings = {
        section: prompt_settings(config, model) if section == "prompt" else result[section] for section in row.settings
    }
    for section, values in method_overrides(config, method).items():
        if section != "generation":  # the sampling distribution reaches training through its rollouts
            settings[section] = {**settings[section], **without_runtime_keys(section, values)}
    if "grpo" in settings:
        from execrl.training.grpo_settings import rollout_settings

        settings["grpo"] = without_unused_vllm_keys(rollout_settings(settings["grpo"], method_generation(config, method)))
    if "dpo" in settings:
        cuts = interval_cuts(method_generation(config, method))
        if cuts:  # none by default, so a DPO run's digest moves only where a cut is set
            settings["dpo"] = {**settings["dpo"], "eval_sampling": cuts}
    full_weight = config["models"][model]["finetuning"] == "full"
    settings["lora"] = None if full_weight else config["lora"]
    return settings


INTERVAL_CUTS = ("top_k", "top_p", "min_p", "repetition_penalty", "use_model_generation_config")
"""The `generation` section's cuts (and whether the model's generation config sets them), which
DPO's interval evaluation samples with as GRPO's and SRRL's do (at its own `eval_temperature`)."""


def interval_cuts(generation: dict) -> dict:
    """The cuts of `generation` that differ from no cut (`SamplingSettings`' defaults)."""
    from execrl.generation.sampling import SamplingSettings

    neutral = SamplingSettings()
    return {key: generation[key] for key in INTERVAL_CUTS if key in generation and generation[key] != getattr(neutral, key)}


def without_unused_vllm_keys(grpo: dict) -> dict:
    """`grpo` less vLLM's keys (`vllm_*`) where vLLM does not generate (`use_vllm: false`): they
    decide nothing then (TRL reads them only with vLLM), so a change of theirs reruns no training."""
    return grpo if grpo.get("use_vllm") else {key: value for key, value in grpo.items() if not key.startswith("vllm_")}


TRAINING_RUNTIME_KEYS = RUNTIME_SETTINGS["dpo"]
"""Keys of a training section (`dpo`, and `grpo` besides its vLLM server's) that change how a job
runs, not what it learns (`save_steps`, `gradient_checkpointing`): the train job gets them as
options of their own."""


def without_runtime_keys(section: str, values: dict) -> dict:
    """A section's (or an override's) values less its RUNTIME_SETTINGS."""
    return {key: value for key, value in values.items() if key not in RUNTIME_SETTINGS.get(section, ())}


def training_section(config: dict, method: str) -> str:
    """The section that sizes and steps `method`'s training: `grpo` (online methods) or `dpo`."""
    return "grpo" if "grpo" in method_rows(config)[method].settings else "dpo"


def samples_test_split(config: dict, method: str) -> bool:
    """Whether `method`'s training job samples the test split: its interval evaluation runs
    (`eval_every` of its training section above 0). Only then is the test file the job's input,
    so an edited test file reruns no training that never reads it."""
    return method_section(config, method, training_section(config, method))["eval_every"] > 0


def training_runtime(config: dict, method: str) -> dict:
    """`save_steps` and `gradient_checkpointing` of `method`'s training section, its overrides
    applied: what the train job and the preflight run with, out of every digest."""
    values = method_section(config, method, training_section(config, method))
    return {key: values[key] for key in TRAINING_RUNTIME_KEYS}


def with_training_runtime(settings: dict, config: dict, method: str) -> dict:
    """`settings` (sections by name) with `method`'s training section carrying its
    `training_runtime` again: what the memory plan and the preflight size a job with."""
    section = training_section(config, method)
    return {**settings, section: {**settings[section], **training_runtime(config, method)}}


def token_budget_source(config: dict, method: str) -> str | None:
    """The method whose tokens bound this one (GRPO, for SRRL under a token budget: `srrl.budget:
    generated_tokens` or `total_tokens`)."""
    from execrl.training.token_budget import TOKEN_BUDGETS

    if registry_name(config, method) != "srrl" or method_section(config, method, "srrl")["budget"] not in TOKEN_BUDGETS:
        return None
    return "grpo"
