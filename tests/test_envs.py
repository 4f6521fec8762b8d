"""The conda environments behind `--sdm conda`: every rule has one, each is pinned like
pyproject.toml, installs execrl itself, and holds every package its rules import.

Conda cannot run here (no conda channel is reachable), so these tests read the files.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "workflow" / "rules"
ENVS = REPO / "workflow" / "envs"

# Where an environment deliberately differs from pyproject.toml, and why.
EXCEPTIONS = {
    ("generate", "transformers"): "vllm 0.33.0 requires transformers<5.21.0",
}
# What packages not installed in the test venv bring with them (the rest is read from metadata).
NOT_INSTALLED_PROVIDES = {
    "vllm": {"torch", "transformers", "tokenizers", "numpy", "tqdm", "pyyaml", "safetensors", "huggingface-hub"},
    "deepspeed": {"torch", "numpy", "tqdm", "packaging", "psutil"},
}


def rule_blocks() -> dict[str, dict]:
    """Rule name → its file, script and conda env, from the .smk sources."""
    rules: dict[str, dict] = {}
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text()
        for match in re.finditer(r"^(rule (\w+)|use rule (\w+) as (\w+) with):\n((?:[ \t]+.*\n|\n)*)", text, re.MULTILINE):
            body = match.group(5)
            conda = re.search(r"^\s+conda:\s*(?:\n\s+)?\"([^\"]+)\"", body, re.MULTILINE)
            script = re.search(r"^\s+script:\s*(?:\n\s+)?\"([^\"]+)\"", body, re.MULTILINE)
            if match.group(2):
                rules[match.group(2)] = {
                    "file": path.name,
                    "conda": conda.group(1) if conda else None,
                    "script": script.group(1) if script else None,
                }
            else:  # `use rule A as B with:` inherits what it does not override
                parent = dict(rules.get(match.group(3)) or {})
                parent.update({k: v for k, v in {"conda": conda and conda.group(1)}.items() if v})
                rules[match.group(4)] = {**parent, "file": path.name}
    return rules


def env_spec(name: str) -> dict:
    return yaml.safe_load((ENVS / f"{name}.yaml").read_text())


def pip_requirements(name: str) -> list[Requirement]:
    deps = env_spec(name)["dependencies"]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    return [Requirement(line) for line in pip]


def pyproject_requirements() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra, deps in project["optional-dependencies"].items():
        if extra != "dev":
            lines += deps
    return {canonicalize_name(Requirement(line).name): Requirement(line) for line in lines}


def env_names() -> list[str]:
    return sorted(p.stem for p in ENVS.glob("*.yaml"))


def test_every_rule_that_runs_code_has_an_existing_env():
    rules = rule_blocks()
    assert {"prepare_dataset", "generate_candidates", "annotate_candidates", "train_dpo", "render_report"} <= set(rules)
    for name, rule in rules.items():
        if not rule.get("script"):
            continue
        assert rule["conda"], f"rule {name} ({rule['file']}) has no conda: directive"
        env = (RULES / rule["conda"]).resolve()
        assert env.parent == ENVS and env.is_file(), f"rule {name}: {rule['conda']} is not a file in workflow/envs"


@pytest.mark.parametrize("name", env_names())
def test_env_is_pinned_like_pyproject(name):
    spec = env_spec(name)
    assert "conda-forge" in spec["channels"]
    conda_deps = [d for d in spec["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda_deps and "pip" in conda_deps
    project = pyproject_requirements()
    for requirement in pip_requirements(name):
        pins = [s for s in requirement.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(requirement.specifier) == 1, f"{name}: {requirement} is not pinned"
        version = pins[0].version
        key = canonicalize_name(requirement.name)
        if (name, key) in EXCEPTIONS:
            assert key in project and not project[key].specifier.contains(version)
            continue
        if key in project:
            assert project[key].specifier.contains(version), f"{name}: {requirement} but pyproject.toml says {project[key]}"
            if any(s.operator == "==" for s in project[key].specifier):
                assert str(project[key].specifier) == str(requirement.specifier)


@pytest.mark.parametrize("name", env_names())
def test_env_installs_execrl_itself(name):
    deploy = ENVS / f"{name}.post-deploy.sh"
    assert deploy.is_file() and os.access(deploy, os.X_OK)
    script = deploy.read_text()
    assert script.startswith("#!/usr/bin/env bash")
    assert "pip install" in script and "--no-deps" in script and "--editable ." in script


# ---------------------------------------------------------------- imports a rule family needs


EXECRL = REPO / "src" / "execrl"


def execrl_module_file(module: str) -> Path | None:
    """The source file of an execrl module, found without importing it."""
    parts = module.split(".")[1:]
    base = EXECRL.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if parts and candidate.is_file():
            return candidate
    return None


def module_level(tree: ast.Module):
    """The nodes that run when a module is imported: everything outside function bodies."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


@cache
def direct_imports(path: Path, on_import_only: bool) -> tuple[frozenset[str], frozenset[Path]]:
    """Third-party top-level modules a file imports, and the execrl files it imports: all of
    them, or only those imported when the file itself is imported (not inside functions)."""
    third_party: set[str] = set()
    execrl_files: set[Path] = set()
    tree = ast.parse(path.read_text())
    for node in module_level(tree) if on_import_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "execrl":
                module_file = execrl_module_file(name)
                if module_file:
                    execrl_files.add(module_file)
            elif top not in sys.stdlib_module_names and top != "snakemake":
                third_party.add(top)
    return frozenset(third_party), frozenset(execrl_files)


@cache
def imports_of(script: Path) -> frozenset[str]:
    """Third-party top-level modules a rule's script may import: its own, and every import
    (also inside functions) of the execrl modules it reaches. execrl modules are reached
    through every import of the script and of the modules it imports itself, and beyond those
    only through imports that run on import: an import inside a function of a deeper module
    (say, the vLLM backend behind `get_backend`) is what that function's caller chooses."""
    found = set(direct_imports(script, False)[0])
    first = set(direct_imports(script, False)[1])
    seen: set[Path] = set()
    todo = list(first)
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        found |= direct_imports(current, False)[0]
        todo.extend(direct_imports(current, current not in first)[1] - seen)
    return frozenset(found)


@cache
def direct_requirements(distribution: str) -> frozenset[str]:
    key = canonicalize_name(distribution)
    if key in NOT_INSTALLED_PROVIDES:
        return frozenset(canonicalize_name(n) for n in NOT_INSTALLED_PROVIDES[key])
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return frozenset()
    return frozenset(
        canonicalize_name(r.name)
        for r in map(Requirement, requires)
        if not r.marker or r.marker.evaluate({"extra": ""})
    )


@cache
def provided_by(distribution: str) -> frozenset[str]:
    """A distribution and everything it requires, transitively (names canonical)."""
    names, todo = set(), [canonicalize_name(distribution)]
    while todo:
        current = todo.pop()
        if current not in names:
            names.add(current)
            todo.extend(direct_requirements(current) - names)
    return frozenset(names)


DISTRIBUTIONS = {k: [canonicalize_name(d) for d in v] for k, v in importlib.metadata.packages_distributions().items()}
DISTRIBUTIONS.setdefault("vllm", ["vllm"])
DISTRIBUTIONS.setdefault("deepspeed", ["deepspeed"])


@pytest.mark.parametrize("rule", sorted(name for name, rule in rule_blocks().items() if rule.get("script") and rule.get("conda")))
def test_env_holds_what_the_rule_imports(rule):
    info = rule_blocks()[rule]
    env = Path(info["conda"]).stem
    script = (RULES / info["script"]).resolve()
    available = set()
    for requirement in pip_requirements(env):
        available |= provided_by(requirement.name)
    missing = {
        module
        for module in imports_of(script)
        if not any(d in available for d in DISTRIBUTIONS.get(module, [canonicalize_name(module)]))
    }
    assert not missing, f"rule {rule} imports {sorted(missing)}, which workflow/envs/{env}.yaml does not install"
