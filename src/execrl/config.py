"""Checks on an experiment config that a JSON schema cannot express."""

from __future__ import annotations

import string
from typing import Any


class ConfigError(ValueError):
    """A config problem, named by its key."""


def check_references(config: dict[str, Any]) -> None:
    """Every name the experiment grid uses is defined, and templates use known fields only."""
    experiment = config["experiment"]
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
    for name, dataset in config["datasets"].items():
        if dataset["adapter"] == "jsonl" and not dataset.get("source"):
            raise ConfigError(f"datasets.{name}.source is required for the jsonl adapter")
