"""The config schema describes every key it accepts (config/README.md promises it): a property at
any depth, inside a section, a named entry's sub-schema (`additionalProperties`,
`patternProperties`), a list's `items` or a conditional `then`/`else`, has a non-empty
`description`."""

import json

from execrl.config import SCHEMA as SCHEMA_PATH

SCHEMA = json.loads(SCHEMA_PATH.read_text())

# Sub-schemas that define keys a config may hold. `if` is left out: it only tests a value
# (`{"adapter": {"const": "builtin"}}`), it defines no key of its own.
NESTED = ("additionalProperties", "items", "then", "else")
COMBINED = ("allOf", "anyOf", "oneOf")


def undescribed(schema, path=""):
    """Dotted paths of the properties under `schema` without a non-empty description; `*` stands
    for any name of an `additionalProperties` mapping, `[]` for a list's items."""
    if isinstance(schema, list):
        return [found for sub in schema for found in undescribed(sub, path)]
    if not isinstance(schema, dict):
        return []
    found = []
    for name, sub in schema.get("properties", {}).items():
        where = f"{path}.{name}" if path else name
        description = sub.get("description") if isinstance(sub, dict) else None
        if not (isinstance(description, str) and description.strip()):
            found.append(where)
        found += undescribed(sub, where)
    for pattern, sub in schema.get("patternProperties", {}).items():
        found += undescribed(sub, f"{path}.<{pattern}>")
    for key in NESTED:
        if key in schema:
            step = {"additionalProperties": "*", "items": "[]"}.get(key, key)
            found += undescribed(schema[key], f"{path}.{step}" if path else step)
    for key in COMBINED:
        if key in schema:
            found += undescribed(schema[key], path)
    return found


def test_every_property_of_the_config_schema_has_a_description():
    missing = undescribed(SCHEMA)
    assert not missing, f"{len(missing)} config key(s) without a description in {SCHEMA_PATH}: {missing}"


def test_the_walk_finds_an_undescribed_key_at_every_depth():
    schema = {
        "properties": {
            "section": {
                "description": "described",
                "properties": {"flat": {"type": "integer"}, "blank": {"type": "string", "description": "  "}},
            },
            "named": {
                "description": "described",
                "additionalProperties": {"properties": {"inner": {"type": "number"}}},
                "patternProperties": {"^x": {"properties": {"patterned": {}}}},
            },
            "listed": {
                "description": "described",
                "items": {"properties": {"element": {"type": "string"}}},
            },
            "conditional": {
                "description": "described",
                "if": {"properties": {"tested": {"const": 1}}},
                "then": {"properties": {"narrowed": {"type": "string"}}},
                "anyOf": [{"properties": {"alternative": {}}}],
            },
        }
    }
    assert sorted(undescribed(schema)) == sorted([
        "section.flat",
        "section.blank",
        "named.*.inner",
        "named.<^x>.patterned",
        "listed.[].element",
        "conditional.then.narrowed",
        "conditional.alternative",
    ])
