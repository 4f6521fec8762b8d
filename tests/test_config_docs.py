"""The config is documented as it is read.

The schema describes every key it accepts (config/README.md promises it): a property at any depth,
inside a section, a named entry's sub-schema (`additionalProperties`, `patternProperties`), a
list's `items` or a conditional `then`/`else`, has a non-empty `description`. The dataset
examples of docs/datasets.md are configs the workflow accepts, and load the splits they name."""

import json
import re

import yaml
from conftest import MBPP_DIR, REPO

from execrl.config import SCHEMA as SCHEMA_PATH, merged_config
from execrl.datasets import load_split

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


def dataset_examples() -> list[dict]:
    """The YAML blocks of docs/datasets.md's "Your own data set in a config", in order."""
    text = (REPO / "docs" / "datasets.md").read_text()
    section = text.split("**Your own data set in a config.**")[1].split("**Malformed rows.**")[0]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def run_example(example: dict, source, tmp_path) -> tuple[str, dict]:
    """The example laid over the embedded default, its source pointed at `source`: the dataset's
    name and its entry in the merged, validated config."""
    (name,) = example["datasets"]
    example["datasets"][name]["source"] = str(source)
    overlay = tmp_path / f"{name}.yaml"
    overlay.write_text(yaml.safe_dump(example))
    config = merged_config([REPO / ".test" / "config" / "config.yaml", overlay], base=REPO / "config" / "config.yaml")
    assert config["experiment"]["datasets"] == [name]
    return name, config["datasets"][name]


def loaded(dataset: dict, split_key: str):
    return load_split(
        adapter=dataset["adapter"], split=dataset[split_key], source=dataset["source"], subset=dataset["subset"],
        options=dataset["options"], on_malformed=dataset["on_malformed"],
    )


def test_the_jsonl_example_reads_one_file_per_split(tmp_path):
    jsonl, _ = dataset_examples()
    folder = tmp_path / "mine"
    folder.mkdir()
    for split, numbers in (("train", range(3)), ("test", range(10, 12))):
        rows = [{"id": f"mine/{n}", "prompt": f"Return {n}.", "test_type": "assert", "tests": [f"assert f() == {n}"]}
                for n in numbers]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    _, dataset = run_example(jsonl, folder, tmp_path)
    assert dataset["adapter"] == "jsonl"
    assert [p.id for p in loaded(dataset, "train_split").problems] == ["mine/0", "mine/1", "mine/2"]
    assert [p.id for p in loaded(dataset, "test_split").problems] == ["mine/10", "mine/11"]


def test_the_mbpp_example_reads_the_upstream_folder(tmp_path):
    _, mbpp = dataset_examples()
    assert (MBPP_DIR / "mbpp.jsonl").is_file(), f"MBPP's upstream files are expected in {MBPP_DIR}"
    _, dataset = run_example(mbpp, MBPP_DIR, tmp_path)
    train, test = loaded(dataset, "train_split"), loaded(dataset, "test_split")
    # docs/datasets.md's table: task ids 601-974 and 11-510 of the full file.
    assert (train.manifest["subset"], train.manifest["n_problems"], test.manifest["n_problems"]) == ("full", 374, 500)


def test_the_staging_command_of_docs_cluster_runs_every_rule_that_reaches_the_hub():
    """docs/cluster.md's staging command (`--until ...`) names every local rule of the data and
    model rules (the only rules that reach the hub); one left out would fail later on a compute
    node, offline."""
    hub_rules = re.search(r"^localrules:\n((?:    \w+,\n)+)", (REPO / "workflow/rules/data.smk").read_text(), re.M)
    assert hub_rules, "workflow/rules/data.smk declares no localrules"
    staged = re.search(r"results/report\.html --until ([\w ]+)`", (REPO / "docs/cluster.md").read_text())
    assert staged, "docs/cluster.md shows no staging command"
    assert set(staged.group(1).split()) == set(re.findall(r"\w+", hub_rules.group(1)))
