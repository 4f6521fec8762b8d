"""One source of defaults: the config schema. Every settings dataclass a config section becomes
has the schema's default for each key they share, so a job given a partial section, a test,
and a run from the workflow all mean the same thing."""

import dataclasses
import json

import pytest

from execrl.training.code_game_settings import CodeGameSettings
from execrl.config import SCHEMA as SCHEMA_PATH
from execrl.training.dpo import DPOSettings
from execrl.generation import GenerationSettings
from execrl.training.grpo import GRPOSettings
from execrl.training.lora import LoRASettings
from execrl.training.exec_reward import ExecRewardSettings
from execrl.prompting import PromptConfig
from execrl.training.rewards import RewardSettings
from execrl.sandbox import ExecutionLimits
from execrl.training.sft import SFTSettings
from execrl.training.spiral import SPIRALSettings
from execrl.training.srrl import SRRLSettings
from execrl.watch.monitor import WatchSettings
from execrl.watch.plus_tests import PlusTestSettings

SCHEMA = json.loads(SCHEMA_PATH.read_text())

SECTIONS = {
    ("grpo",): GRPOSettings,
    ("dpo",): DPOSettings,
    ("lora",): LoRASettings,
    ("rewards",): RewardSettings,
    ("srrl",): SRRLSettings,
    ("exec",): ExecRewardSettings,
    ("code_game",): CodeGameSettings,
    ("spiral",): SPIRALSettings,
    ("prompt",): PromptConfig,
    ("generation",): GenerationSettings,
    ("execution",): ExecutionLimits,
    ("plus_tests",): PlusTestSettings,
    ("watch",): WatchSettings,
    ("tiny_model", "sft"): SFTSettings,
}


def schema_properties(path: tuple[str, ...]) -> dict:
    node = SCHEMA
    for key in path:
        node = node["properties"][key]
    return node["properties"]


def dataclass_default(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        # YAML has no tuples: a tuple default is the schema's list.
        return list(field.default) if isinstance(field.default, tuple) else field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


@pytest.mark.parametrize("path, settings", SECTIONS.items(), ids=[".".join(p) for p in SECTIONS])
def test_dataclass_defaults_are_the_schemas(path, settings):
    properties = schema_properties(path)
    shared = [f for f in dataclasses.fields(settings) if f.name in properties and "default" in properties[f.name]]
    assert shared, f"{settings.__name__} shares no key with the schema's {'.'.join(path)}"
    drift = {
        f.name: (dataclass_default(f), properties[f.name]["default"])
        for f in shared
        if dataclass_default(f) != properties[f.name]["default"]
    }
    assert not drift, f"{settings.__name__} defaults differ from the schema's (dataclass, schema): {drift}"


@pytest.mark.parametrize("path, settings", SECTIONS.items(), ids=[".".join(p) for p in SECTIONS])
def test_every_schema_default_builds_its_settings(path, settings):
    """A section made only of the schema's defaults is a valid settings object."""
    properties = schema_properties(path)
    names = {f.name for f in dataclasses.fields(settings)}
    settings(**{k: v["default"] for k, v in properties.items() if k in names and "default" in v})


# The JSON Schema 2020-12 keywords the schema may use; any other key of a subschema is a typo
# or a description split by a comma (which a YAML flow mapping once did four times).
KEYWORDS = {
    "$schema", "$id", "$ref", "$comment", "definitions", "description", "title", "type", "enum", "const",
    "default", "examples", "properties", "additionalProperties", "patternProperties", "required",
    "minProperties", "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format",
    "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "propertyNames", "dependentRequired",
}


def subschemas(schema: dict, path: str = "#"):
    yield path, schema
    for key in ("properties", "definitions", "patternProperties"):
        for name, sub in schema.get(key, {}).items():
            yield from subschemas(sub, f"{path}/{key}/{name}")
    for key in ("additionalProperties", "items", "not", "if", "then", "else", "propertyNames"):
        if isinstance(schema.get(key), dict):
            yield from subschemas(schema[key], f"{path}/{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key, [])):
            yield from subschemas(sub, f"{path}/{key}/{i}")


def test_the_schema_uses_only_json_schema_keywords_and_describes_in_strings():
    unknown = {path: sorted(set(sub) - KEYWORDS) for path, sub in subschemas(SCHEMA) if set(sub) - KEYWORDS}
    assert not unknown, f"keys that are not JSON Schema keywords: {unknown}"
    not_text = [path for path, sub in subschemas(SCHEMA) if "description" in sub and not isinstance(sub["description"], str)]
    assert not not_text, f"descriptions that are not strings: {not_text}"
