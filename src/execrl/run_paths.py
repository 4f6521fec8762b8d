"""Result paths that encode the settings that make a result differ.

Every path segment that stands for settings carries a short digest of the result-changing
settings of the jobs writing under it: `results/eval/builtin-3f2a9c/tiny-81d0e4/srrl-5b7c11/0/...`.
The upstream segment already encodes upstream settings, so each digest covers only what its own
level adds. Two experiments whose settings differ therefore write different paths (they coexist,
and switching between them reruns nothing), and two that agree share every path. Settings that
cannot change a result (`execrl.config.RUNTIME_SETTINGS`, resources, a model's GPU type) never
enter a digest.

Levels and what their digest covers:

- dataset `{name}-{digest}`: the dataset's own settings, the held-out tests' settings and the
  sandbox limits they are made under (`results/data/...`).
- model `{name}-{digest}`: the model's settings and, for a `tiny` model, its architecture and
  warm start (`results/models/{dataset}/{model}/{tokenizer,init,base}`).
- staged model `{name}-{digest}`: a hub model's source and revision (`resources/models/...`).
- RL data `pairs-{digest}`: the base model's evaluation segment and `rl_data`.
- trained method `{name}-{digest}`: what the training job learns from (its settings object, its
  data, the token budget's source): `results/{models,training}/.../{method}/{seed}`.
- evaluated method `{name}-{digest}`: the trained segment (or none for `base`) and the settings of
  sampling, execution and scoring: `results/{candidates,annotations,eval,analysis}/...`.

`readable(segment)` gives the config name back; the report shows only config names.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from execrl.config import without_runtime_settings
from execrl.methods import METHODS, Method

DIGEST_LENGTH = 6
_SEGMENT = re.compile(rf"^(?P<name>.+)-(?P<digest>[0-9a-f]{{{DIGEST_LENGTH}}})$")

MODEL_RESOURCE_KEYS = ("gpu_model",)
"""Model keys that only place a job (the GPU type it asks for): never in a digest."""

EVALUATION_SECTIONS = ("generation", "prompt", "evaluation")
"""Shared sections every evaluated method's sampling and scoring read."""


def digest(settings: Any) -> str:
    """A short stable digest of JSON-able settings (key order does not matter)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


def segment(name: str, settings: Any) -> str:
    return f"{name}-{digest(settings)}"


def readable(value: str) -> str:
    """The config name of a path segment (`builtin-3f2a9c` → `builtin`); other values as given."""
    match = _SEGMENT.match(value)
    return match["name"] if match else value


# ---------------------------------------------------------------- method variants


def method_rows(config: dict) -> dict[str, Method]:
    """The registry's methods plus the config's `method_variants`, each a row of its base method
    under the variant's name."""
    rows = dict(METHODS)
    for name, variant in config.get("method_variants", {}).items():
        base = METHODS[variant["method"]]
        rows[name] = Method(**{**base.__dict__, "name": name, "variant_of": base.name})
    return rows


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


# ---------------------------------------------------------------- what each level's jobs read


def prompt_settings(config: dict, model: str) -> dict:
    """The prompt with the model's reasoning format (the params of every prompting rule)."""
    return {**config["prompt"], "reasoning_format": config["models"][model]["reasoning_format"]}


def refinement_prompt_settings(config: dict) -> dict:
    """The SRRL settings that shape a refinement prompt (the rest, e.g. the c2 share, do not)."""
    return {key: config["srrl"][key] for key in ("feedback_tests", "refinement_template", "max_trace_chars")}


def warm_start_extras(config: dict) -> dict:
    """The refinement, code-game and game settings a tiny model's warm start reads (none when
    its share of those examples is zero)."""
    sft = config["tiny_model"]["sft"]
    extras = {"refinement": None, "code_game": None, "game": None}
    if sft.get("refinement_share"):
        extras["refinement"] = refinement_prompt_settings(config)
    if sft.get("code_game_share"):
        extras["code_game"] = {key: config["code_game"][key] for key in ("program_template", "opponent_template")}
    if sft.get("game_examples"):
        extras["game"] = {key: config["spiral"][key] for key in ("game", "answer_pattern", "answer_template", "observation")}
    return extras


def training_settings(config: dict, method: str, model: str) -> dict:
    """Everything that decides what `method`'s training job learns, before its seed: the sections
    of its registry row (overrides applied) and `lora` (null when the model trains all weights)."""
    result = without_runtime_settings(config)
    row = method_rows(config)[method]
    settings = {
        section: prompt_settings(config, model) if section == "prompt" else result[section] for section in row.settings
    }
    for section, values in method_overrides(config, method).items():
        settings[section] = {**settings[section], **values}
    full_weight = config["models"][model]["finetuning"] == "full"
    settings["lora"] = None if full_weight else config["lora"]
    return settings


def token_budget_source(config: dict, method: str) -> str | None:
    """The method whose sampled tokens bound this one (GRPO, for SRRL under `srrl.budget: tokens`)."""
    if registry_name(config, method) != "srrl" or method_section(config, method, "srrl")["budget"] != "tokens":
        return None
    return "grpo"


def dataset_settings(config: dict, dataset: str) -> dict:
    result = without_runtime_settings(config)
    return {
        "dataset": config["datasets"][dataset],
        "plus_tests": config.get("plus_tests"),
        "memory_mb": result["execution"].get("memory_mb"),
    }


def model_settings(config: dict, model: str) -> dict:
    entry = {k: v for k, v in config["models"][model].items() if k not in MODEL_RESOURCE_KEYS}
    settings = {"model": entry}
    if entry["source"] == "tiny":
        settings["tiny_model"] = config["tiny_model"]
        settings["prompt"] = prompt_settings(config, model)
        settings["warm_start"] = warm_start_extras(config)
    return settings


def staged_settings(config: dict, model: str) -> dict:
    entry = config["models"][model]
    return {"source": entry["source"], "revision": entry.get("revision")}


def evaluation_settings(config: dict, model: str) -> dict:
    """What sampling, executing and scoring a policy's candidates (and its refinement examples) read."""
    result = without_runtime_settings(config)
    generation = result["generation"]
    return {
        "generation": generation,
        "prompt": prompt_settings(config, model),
        "evaluation": result["evaluation"],
        "execution": result["execution"],
        "refinement": refinement_prompt_settings(config),
        "refinement_prompts": config.get("report", {}).get("refinement_prompts"),
    }


# ---------------------------------------------------------------- segments of one config


class RunSegments:
    """The path segments of one config's datasets, models and methods, and their names back."""

    def __init__(self, config: dict):
        self.config = config
        self.rows = method_rows(config)
        experiment = config["experiment"]
        self.dataset = {name: segment(name, dataset_settings(config, name)) for name in config["datasets"]}
        self.model = {name: segment(name, model_settings(config, name)) for name in config["models"]}
        self.staged = {name: segment(name, staged_settings(config, name)) for name in config["models"]}
        methods = list(dict.fromkeys([*experiment["methods"], "base", *self._budget_sources(experiment["methods"])]))
        self.rl_data: dict[str, str] = {}
        self.trained: dict[tuple[str, str], str] = {}
        self.evaluated: dict[tuple[str, str], str] = {}
        for model in config["models"]:
            self.evaluated[model, "base"] = segment("base", {"evaluation": evaluation_settings(config, model)})
            self.rl_data[model] = segment("pairs", {"base": self.evaluated[model, "base"], "rl_data": config["rl_data"]})
            for method in methods:
                if method != "base" and self.rows[method].trained:
                    self._trained(model, method)
            for method in methods:
                if method != "base":
                    self.evaluated[model, method] = segment(
                        method,
                        {
                            "trained": self.trained.get((model, method)),
                            "evaluation": evaluation_settings(config, model),
                        },
                    )

    def _budget_sources(self, methods):
        return [s for m in methods if (s := token_budget_source(self.config, m)) is not None]

    def _trained(self, model: str, method: str) -> str:
        if (model, method) not in self.trained:
            source = token_budget_source(self.config, method)
            self.trained[model, method] = segment(
                method,
                {
                    "method": registry_name(self.config, method),
                    "settings": training_settings(self.config, method, model),
                    "pairs": self.rl_data[model] if self.rows[method].data == "pairs" else None,
                    "token_budget_from": self._trained(model, source) if source else None,
                },
            )
        return self.trained[model, method]

    def names(self) -> dict[str, str]:
        """Every segment → its config name (the report's map)."""
        mapping = {}
        for table in (self.dataset, self.model, self.staged):
            mapping.update({seg: name for name, seg in table.items()})
        for table in (self.trained, self.evaluated):
            mapping.update({seg: method for (_, method), seg in table.items()})
        mapping.update({seg: "pairs" for seg in self.rl_data.values()})
        return mapping
