"""Result paths that encode the settings that make a result differ.

Every path segment that stands for settings carries a short digest of the result-changing
settings of the jobs writing under it: `results/eval/builtin-3f2a9c/tiny-81d0e4/srrl-5b7c11/0/...`.
The upstream segment already encodes upstream settings, so each digest covers only what its own
level adds. Two experiments whose settings differ therefore write different paths (they coexist,
and switching between them reruns nothing), and two that agree share every path. Settings that
cannot change a result (`execrl.config.RUNTIME_SETTINGS`, resources, a model's placement:
`MODEL_PLACEMENT_KEYS`) never enter a digest.

Levels and what their digest covers:

- dataset `{name}-{digest}`: the dataset's own settings (`results/data/{dataset}/...`).
- held-out tests `plus-{digest}`: their settings and the sandbox memory cap they are made under
  (`results/data/{dataset}/{plus}/{split}.jsonl`).
- model `{name}-{digest}`, one per level: a tiny model's tokenizer, its initialisation, then the
  model every later job uses (its warm start; a hub or local model's own settings).
- staged model `{name}-{digest}`: a hub model's source and revision (`resources/models/...`).
- RL data `pairs-{digest}`: the base model's judged segment and `rl_data`.
- method `{name}-{digest}`, one per level (METHOD_LEVELS): trained (what the training job learns
  from: its settings (`execrl.training_settings`), its data, the token budget's source), then sampled, judged, scored
  and refined, each adding the settings of the rule that writes it.

`readable(segment)` gives the config name back; the report shows only config names.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from execrl.config import without_runtime_settings
from execrl.training_settings import (
    backend_generation,
    method_rows,
    prompt_settings,
    registry_name,
    token_budget_source,
    training_settings,
)

DIGEST_LENGTH = 6
_SEGMENT = re.compile(rf"^(?P<name>.+)-(?P<digest>[0-9a-f]{{{DIGEST_LENGTH}}})$")

MODEL_PLACEMENT_KEYS = ("gpu_model", "params_b", "training_processes")
"""Model keys that place and size its jobs (the GPU type, the size the resources are planned
from, the training processes): never in a digest. Where the memory plan they feed changes what a
training job computes (its micro-batch, ZeRO stage, dtype, DPO's process count), that reaches the
train job through its params, and a change reruns it in place."""

MODEL_TRAINING_KEYS = ("finetuning",)
"""Model keys only training reads: in the trained digest (`training_settings`'s `lora`), not the
model's, so a change retrains and leaves the base model's samples where they are."""


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


# ---------------------------------------------------------------- what each level's jobs read


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


def dataset_settings(config: dict, dataset: str) -> dict:
    return {"dataset": config["datasets"][dataset]}


def plus_settings(config: dict) -> dict:
    """What the held-out tests are made with: their settings and the sandbox's memory cap."""
    return {"plus_tests": config.get("plus_tests"), "memory_mb": config["execution"].get("memory_mb")}


def staged_settings(config: dict, model: str) -> dict:
    entry = config["models"][model]
    return {"source": entry["source"], "revision": entry.get("revision")}


def model_levels(config: dict, model: str) -> dict[str, dict]:
    """The settings each level of a model's folders adds: a tiny model's tokenizer, its random
    initialisation, then the model as every later job uses it (its warm start; a hub or local
    model's own settings)."""
    entry = {
        key: value
        for key, value in config["models"][model].items()
        if key not in MODEL_PLACEMENT_KEYS + MODEL_TRAINING_KEYS
    }
    # The CPU kernels (execrl.compute) change every number a model computes from its first
    # weights on: they enter at the first level that runs torch.
    kernels = config.get("compute", {}).get("cpu_kernels", "avx2")
    if entry["source"] != "tiny":
        return {"tokenizer": {}, "init": {}, "model": {"model": entry, "cpu_kernels": kernels}}
    tiny = config["tiny_model"]
    return {
        "tokenizer": {"vocab_size": tiny["vocab_size"], "prompt": prompt_settings(config, model)},
        "init": {
            **{key: value for key, value in tiny.items() if key not in ("sft", "vocab_size")},
            "cpu_kernels": kernels,
        },
        "model": {"model": entry, "sft": tiny["sft"], "warm_start": warm_start_extras(config)},
    }


def sampling_settings(config: dict, model: str, method: str = "base") -> dict:
    """What sampling a policy's candidates reads (generate_candidates)."""
    result = without_runtime_settings(config)
    return {
        "generation": backend_generation(config, method),
        "prompt": prompt_settings(config, model),
        "max_problems": result["evaluation"]["max_problems"],
    }


def scoring_settings(config: dict) -> dict:
    """What pass@k of executed candidates reads (evaluate_pass_at_k)."""
    return {"k": config["evaluation"]["k"], "max_problems": config["evaluation"]["max_problems"]}


def refinement_settings(config: dict, model: str, method: str = "base") -> dict:
    """What sampling the report's refinement examples reads (sample_refinements)."""
    return {
        "sampling": sampling_settings(config, model, method),
        "refinement": refinement_prompt_settings(config),
        "prompts": config.get("report", {}).get("refinement_prompts"),
    }


# ---------------------------------------------------------------- segments of one config


METHOD_LEVELS = ("trained", "sampled", "judged", "judged_plus", "scored", "scored_plus", "refined")
"""A method's segments, one per kind of output (each digest covers its parent's segment):
trained (results/models/.../trained, results/training), sampled (results/candidates), judged
(results/annotations/...{split}.jsonl, results/analysis/diversity), judged_plus
(...{split}.plus.jsonl), scored (results/eval/...{split}.json), scored_plus (...{split}.plus.json),
refined (results/analysis/refinements)."""


class RunSegments:
    """The path segments of one config's datasets, models and methods, and their names back.

    A segment is `{config name}-{digest}`; a model and a method have one per level of output, so
    a change reruns only the outputs whose settings it changes (a new k rescores, it does not
    sample again)."""

    def __init__(self, config: dict):
        self.config = config
        self.rows = method_rows(config)
        experiment = config["experiment"]
        self.dataset = {name: segment(name, dataset_settings(config, name)) for name in config["datasets"]}
        self.plus = segment("plus", plus_settings(without_runtime_settings(config)))
        self.staged = {name: segment(name, staged_settings(config, name)) for name in config["models"]}
        self.tokenizer, self.init, self.model = {}, {}, {}
        for name in config["models"]:
            levels = model_levels(config, name)
            self.tokenizer[name] = segment(name, levels["tokenizer"])
            self.init[name] = segment(name, {"tokenizer": self.tokenizer[name], **levels["init"]})
            self.model[name] = segment(name, {"init": self.init[name], **levels["model"]})
        methods = list(dict.fromkeys([*experiment["methods"], "base", *self._budget_sources(experiment["methods"])]))
        limits = without_runtime_settings(config)["execution"]
        self.rl_data: dict[str, str] = {}
        for level in METHOD_LEVELS:
            setattr(self, level, {})
        for model in config["models"]:
            for method in ["base", *(m for m in methods if m != "base")]:
                if method != "base" and self.rows[method].trained:
                    self._trained(model, method)
                self.sampled[model, method] = segment(
                    method, {"trained": self.trained.get((model, method)), **sampling_settings(config, model, method)}
                )
                judged = self.sampled[model, method]
                self.judged[model, method] = segment(method, {"sampled": judged, "limits": limits})
                self.judged_plus[model, method] = segment(
                    method, {"sampled": judged, "limits": limits, "plus": self.plus}
                )
                self.scored[model, method] = segment(
                    method, {"judged": self.judged[model, method], **scoring_settings(config)}
                )
                self.scored_plus[model, method] = segment(
                    method, {"judged": self.judged_plus[model, method], **scoring_settings(config)}
                )
                self.refined[model, method] = segment(
                    method,
                    {
                        "trained": self.trained.get((model, method)),
                        "attempts": self.judged[model, "base"],
                        "limits": limits,
                        **refinement_settings(config, model, method),
                    },
                )
                if method == "base":
                    self.rl_data[model] = segment(
                        "pairs", {"base": self.judged[model, "base"], "rl_data": config["rl_data"]}
                    )

    def _budget_sources(self, methods):
        return [s for m in methods if (s := token_budget_source(self.config, m)) is not None]

    def _trained(self, model: str, method: str) -> str:
        if (model, method) not in self.trained:
            row = self.rows[method]
            source = token_budget_source(self.config, method)
            self.trained[model, method] = segment(
                method,
                {
                    "method": registry_name(self.config, method),
                    "settings": training_settings(self.config, method, model),
                    "pairs": self.rl_data[model] if row.data == "pairs" else None,
                    # methods the reward-hacking watch follows train on the held-out tests too
                    "plus": self.plus if "watch" in row.settings else None,
                    "token_budget_from": self._trained(model, source) if source else None,
                },
            )
        return self.trained[model, method]

    def run(self, dataset: str, model: str, method: str, level: str = "scored") -> str:
        """`{dataset}/{model}/{method}` of one run as path segments, at one of METHOD_LEVELS."""
        return f"{self.dataset[dataset]}/{self.model[model]}/{getattr(self, level)[model, method]}"

    def experiment_segments(self) -> set[str]:
        """The segments the experiment's own jobs that compute results write under (its data sets,
        models and methods): the cost table's. `refined` is left out: only the report's refinement
        samples write under it, and the cost table does not count the report's jobs, so a report
        setting reruns nothing of it."""
        experiment = self.config["experiment"]
        models = experiment["models"]
        found = {self.plus, *(self.dataset[d] for d in experiment["datasets"])}
        for table in (self.staged, self.tokenizer, self.init, self.model, self.rl_data):
            found.update(table[m] for m in models if m in table)
        for level in (level for level in METHOD_LEVELS if level != "refined"):
            found.update(seg for (model, _), seg in getattr(self, level).items() if model in models)
        return found

    def names(self) -> dict[str, str]:
        """Every segment → its config name (the report's map)."""
        mapping = {self.plus: "plus"}
        for table in (self.dataset, self.staged, self.tokenizer, self.init, self.model):
            mapping.update({seg: name for name, seg in table.items()})
        for level in METHOD_LEVELS:
            mapping.update({seg: method for (_, method), seg in getattr(self, level).items()})
        mapping.update({seg: "pairs" for seg in self.rl_data.values()})
        return mapping
