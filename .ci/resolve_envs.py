#!/usr/bin/env python3
"""Resolve the GPU install and every conda environment's pip section against the package registry.

    python .ci/resolve_envs.py [--jobs N] [--json FILE] [target ...]

Targets: `gpu` (the project with its `gpu` and `slurm` extras, as the README installs it on a
cluster) and one per workflow/envs/*.yaml (`env:generate`, ...); all by default. Each is resolved
with `pip install --dry-run --ignore-installed --report`, which downloads no package: pip reads
each wheel's metadata through HTTP range requests (`--use-feature=fast-deps`; the registry serves
no separate metadata files), so the multi-GB CUDA wheels stay where they are. It fails, naming
the pins, when

- the pins do not resolve together (pip's conflict, and which pinned requirements meet in it), or
- a package resolves to another version than the project pins: a target's own pins win, and a
  package the target does not pin must resolve to pyproject.toml's pin (say, the torch that vLLM
  brings into generate.yaml).

Resolution is against the registry only: wheels on this machine's disk (`find-links`, `file://`
indexes) and local constraint files are left out, since a cluster does not have them (a local
CPU build of torch would otherwise stand in for the CUDA one).

Each environment file's conda packages (the compilers, python, pip) are targets too
(`conda:train`, ...), solved against the file's channels with `create --dry-run --json` of the
first of micromamba, mamba or conda on PATH. Where none is, they are reported as not resolved,
which fails the run only with `--require-conda`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
# The extras a cluster install gets; the dev extra is for tests and is resolved by `make env`.
PROJECT_EXTRAS = ("gpu", "slurm")
# pip settings kept from the environment and pip's configuration: where the registry is and how
# to reach it. Everything else (find-links, constraints, local indexes, no-index) is dropped.
KEPT_SETTINGS = ("index-url", "extra-index-url", "cert", "client-cert", "trusted-host", "proxy", "timeout", "default-timeout", "retries")


@dataclass
class Target:
    name: str
    requirements: list[str]
    """What pip is asked to install."""
    pins: dict[str, str]
    """Canonical name → version the target pins itself."""
    expected: dict[str, str] = field(default_factory=dict)
    """Canonical name → version the project pins, for packages the target does not pin."""
    python: str | None = None
    """The Python (major.minor) the target is for."""


@dataclass
class Result:
    target: Target
    returncode: int
    output: str
    resolved: dict[str, str]
    seconds: float
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- targets


def exact_pins(lines: list[str]) -> dict[str, str]:
    """Canonical name → version of every `name==version` requirement (extras and markers aside)."""
    pins = {}
    for line in lines:
        requirement = Requirement(line)
        exact = [s for s in requirement.specifier if s.operator == "=="]
        if len(exact) == 1 and "*" not in exact[0].version:
            pins[canonicalize_name(requirement.name)] = exact[0].version
    return pins


def project_lines(repo: Path, extras: tuple[str, ...]) -> list[str]:
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return lines


def project_pins(repo: Path) -> dict[str, str]:
    """Every pin of the project a cluster install sees: core dependencies, `cpu` aside."""
    return exact_pins(project_lines(repo, PROJECT_EXTRAS))


def env_file_python(spec: dict) -> str | None:
    for dependency in spec.get("dependencies", []):
        if isinstance(dependency, str) and re.fullmatch(r"python\s*=+\s*[\d.]+", dependency):
            return dependency.split("=")[-1].strip()
    return None


def targets(repo: Path = REPO) -> list[Target]:
    pins = project_pins(repo)
    envs = sorted((repo / "workflow" / "envs").glob("*.yaml"))
    pythons = {env_file_python(yaml.safe_load(path.read_text())) for path in envs} - {None}
    found = [
        Target(
            name="gpu",
            requirements=[f"{repo}[{','.join(PROJECT_EXTRAS)}]"],
            pins=pins,
            python=pythons.pop() if len(pythons) == 1 else None,
        )
    ]
    for path in envs:
        spec = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        own = exact_pins(pip)
        found.append(
            Target(
                name=f"env:{path.stem}",
                requirements=list(pip),
                pins=own,
                expected={k: v for k, v in pins.items() if k not in own},
                python=env_file_python(spec),
            )
        )
    return found


# ---------------------------------------------------------------------------- pip


def pip_settings(environ: dict[str, str] | None = None, python: str = sys.executable) -> dict[str, str]:
    """The `PIP_*` variables that point pip at the registry, from the environment and pip's
    configuration files; `file:` locations are left out."""
    environ = dict(os.environ if environ is None else environ)
    settings: dict[str, str] = {}
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, env=environ)
    for line in listed.stdout.splitlines():
        match = re.fullmatch(r"(global|install|:env:)\.([\w-]+)='(.*)'", line.strip())
        if match and match.group(2) in KEPT_SETTINGS:
            settings[match.group(2)] = match.group(3)
    for name in KEPT_SETTINGS:
        variable = "PIP_" + name.upper().replace("-", "_")
        if variable in environ:
            settings[name] = environ[variable]
    result = {}
    for name, value in settings.items():
        if name in ("index-url", "extra-index-url"):
            value = " ".join(url for url in value.split() if not url.startswith("file:"))
            if not value:
                continue
        result["PIP_" + name.upper().replace("-", "_")] = value
    return result


def pip_environment(settings: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in environ.items() if not k.startswith("PIP_")}
    env.update(settings)
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def pip_command(requirements: list[str], report: Path, extra_args: list[str] = (), python: str = sys.executable) -> list[str]:
    return [
        python, "-m", "pip", "install", "--dry-run", "--ignore-installed",
        "--use-feature=fast-deps", "--progress-bar=off", "--report", str(report),
        *extra_args, *requirements,
    ]  # fmt: skip


def resolve(target: Target, env: dict[str, str], extra_args: list[str] = (), timeout: float = 900) -> Result:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resolve-") as tmp:
        report = Path(tmp) / "report.json"
        try:
            done = subprocess.run(
                pip_command(target.requirements, report, extra_args),
                capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp,
            )  # fmt: skip
            returncode, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            returncode, output = -1, f"pip did not finish in {timeout:.0f} s\n{expired.stdout or ''}{expired.stderr or ''}"
        resolved = {}
        if returncode == 0 and report.is_file():
            for item in json.loads(report.read_text()).get("install", []):
                resolved[canonicalize_name(item["metadata"]["name"])] = item["metadata"]["version"]
    result = Result(target, returncode, output, resolved, time.monotonic() - start)
    result.problems = problems(result)
    return result


# ---------------------------------------------------------------------------- conda

CONDA_SOLVERS = ("micromamba", "mamba", "conda")


@dataclass
class CondaTarget:
    name: str
    channels: list[str]
    specs: list[str]
    """The file's conda dependencies (`gcc=14`), its pip section aside."""


def conda_targets(repo: Path = REPO) -> list[CondaTarget]:
    found = []
    for path in sorted((repo / "workflow" / "envs").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        channels = [c for c in spec.get("channels", []) if c != "nodefaults"]
        specs = [d for d in spec["dependencies"] if isinstance(d, str)]
        found.append(CondaTarget(f"conda:{path.stem}", channels, specs))
    return found


def conda_solver(which=shutil.which) -> str | None:
    """The first conda solver on PATH (micromamba, mamba, conda), or None."""
    for name in CONDA_SOLVERS:
        found = which(name)
        if found:
            return found
    return None


def conda_command(solver: str, target: CondaTarget, prefix: Path) -> list[str]:
    """A dry run of creating the environment at `prefix` (nothing is downloaded or written)."""
    command = [solver, "create", "--dry-run", "--json", "--yes", "--override-channels", "--prefix", str(prefix)]
    for channel in target.channels:
        command += ["--channel", channel]
    return command + target.specs


def conda_linked(output: str) -> dict[str, str]:
    """Name → version of what a `create --dry-run --json` answer links (conda's and micromamba's form)."""
    try:
        answer = json.loads(output)
    except json.JSONDecodeError:
        return {}
    return {item["name"]: str(item["version"]) for item in answer.get("actions", {}).get("LINK", [])}


def conda_problems(target: CondaTarget, returncode: int, output: str) -> list[str]:
    if returncode != 0:
        try:
            message = json.loads(output).get("message") or output
        except json.JSONDecodeError:
            message = output
        return [f"{target.name}: {' '.join(target.specs)} do not solve from {', '.join(target.channels)}:\n  "
                + "\n  ".join(str(message).strip().splitlines()[-15:])]
    linked = conda_linked(output)
    found = []
    for spec in target.specs:
        name, _, version = spec.partition("=")
        got = linked.get(name)
        if got is None:
            found.append(f"{target.name}: {spec} is asked for but the solution has no {name}")
        elif version and got != version and not got.startswith(version.rstrip("*").rstrip(".") + "."):
            found.append(f"{target.name}: {name} solves to {got}, not {spec}")
    return found


def resolve_conda(target: CondaTarget, solver: str, timeout: float = 900) -> Result:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="resolve-conda-") as tmp:
        try:
            done = subprocess.run(conda_command(solver, target, Path(tmp) / "env"), capture_output=True, text=True,
                                  timeout=timeout, cwd=tmp)
            returncode, output = done.returncode, done.stdout or done.stderr
        except subprocess.TimeoutExpired:
            returncode, output = -1, f"{solver} did not finish in {timeout:.0f} s"
    result = Result(target, returncode, output, conda_linked(output) if returncode == 0 else {}, time.monotonic() - start)
    result.problems = conda_problems(target, returncode, output)
    return result


# ---------------------------------------------------------------------------- verdicts


def same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def problems(result: Result) -> list[str]:
    target = result.target
    if result.returncode != 0:
        return [conflict_message(target, result.output)]
    found = []
    for name, pinned in sorted(target.pins.items()):
        got = result.resolved.get(name)
        if got is None:
            found.append(f"{name}=={pinned} is pinned but pip installs no {name}")
        elif not same_version(got, pinned):
            found.append(f"{name} resolves to {got}, but {target.name} pins {name}=={pinned}")
    for name, pinned in sorted(target.expected.items()):
        got = result.resolved.get(name)
        if got is not None and not same_version(got, pinned):
            found.append(f"{name} resolves to {got} (brought in by other packages), but pyproject.toml pins {name}=={pinned}")
    return found


CAUSE = re.compile(r"^\s+(?:The user requested (?P<requested>.+)|(?P<who>\S+) (?P<version>\S+) depends on (?P<dependency>.+))$")


def conflict_lines(output: str) -> list[tuple[str, str]]:
    """(who, requirement) from pip's "The conflict is caused by:" block; who is `requested` for
    what was asked for directly."""
    lines = output.splitlines()
    causes = []
    for start, line in enumerate(lines):
        if line.strip() != "The conflict is caused by:":
            continue
        for cause in lines[start + 1 :]:
            match = CAUSE.match(cause)
            if not match:
                break
            if match.group("requested"):
                causes.append(("requested", match.group("requested").strip()))
            else:
                causes.append((f"{match.group('who')} {match.group('version')}", match.group("dependency").strip()))
    return causes


def parse_dependency(text: str) -> tuple[str, SpecifierSet] | None:
    """`numpy<3 and >=2.4.5; python_version < "3.14"` (pip's wording) → (numpy, <3,>=2.4.5)."""
    text = text.split(";")[0].strip()
    match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)", text)
    if not match:
        return None
    try:
        specifier = SpecifierSet(",".join(part.strip() for part in match.group(3).split(" and ") if part.strip()))
    except Exception:
        return None
    return canonicalize_name(match.group(1)), specifier


def disjoint(a: SpecifierSet, b: SpecifierSet) -> bool:
    """No version meets both, judged on the versions their bounds name (and just above them)."""
    if not len(a) or not len(b):  # a bare name takes any version
        return False
    probes = set()
    for specifier in (*a, *b):
        version = specifier.version.rstrip(".*")
        probes |= {version, version + ".0.1"}
    return not any(a.contains(p, prereleases=True) and b.contains(p, prereleases=True) for p in probes)


def clashes(causes: list[tuple[str, str]]) -> list[str]:
    """Pairs of constraints on one package that no version meets together."""
    by_package: dict[str, list[tuple[str, str, SpecifierSet]]] = {}
    for who, text in causes:
        parsed = parse_dependency(text)
        if parsed:
            by_package.setdefault(parsed[0], []).append((who, text.split(";")[0].strip(), parsed[1]))
    found, seen = [], set()
    for entries in by_package.values():
        for i, (who_a, text_a, spec_a) in enumerate(entries):
            for who_b, text_b, spec_b in entries[i + 1 :]:
                key = (who_a.split()[0], who_b.split()[0])
                if key in seen or key[0] == key[1] or not disjoint(spec_a, spec_b):
                    continue
                seen.add(key)
                found.append(f"{describe(who_a, text_a)} but {describe(who_b, text_b)}")
    return found


def describe(who: str, requirement: str) -> str:
    return f"the pin {requirement}" if who == "requested" else f"{who} requires {requirement}"


def conflict_message(target: Target, output: str) -> str:
    causes = conflict_lines(output)
    header = f"{target.name}: the pins do not resolve together"
    parts = [header]
    if causes:
        for clash in clashes(causes):
            parts.append(f"  conflict: {clash}")
        named = set()
        for who, text in causes:
            parsed = parse_dependency(text) if who == "requested" else None
            named.add(parsed[0] if parsed else canonicalize_name(who.split()[0]))
        pinned = sorted(named & set(target.pins))
        if pinned:
            parts.append("  pinned here and named in the conflict: " + ", ".join(f"{name}=={target.pins[name]}" for name in pinned))
    errors = [line for line in output.splitlines() if line.startswith("ERROR:") or line.strip() == "The conflict is caused by:" or CAUSE.match(line)]
    parts.append("  pip says:")
    parts += ["    " + line.strip() for line in (errors or output.strip().splitlines()[-15:])]
    return "\n".join(parts)


# ---------------------------------------------------------------------------- main

SHOWN = ("torch", "vllm", "trl", "transformers", "tokenizers", "peft", "accelerate", "deepspeed", "datasets", "huggingface-hub", "numpy", "pandas")


def summary(result: Result) -> str:
    if result.problems:
        return f"FAIL {result.target.name} ({result.seconds:.0f} s)"
    names = [s.partition("=")[0] for s in result.target.specs] if isinstance(result.target, CondaTarget) else SHOWN
    shown = [f"{name} {result.resolved[name]}" for name in names if name in result.resolved]
    return f"ok   {result.target.name} ({result.seconds:.0f} s, {len(result.resolved)} packages): " + ", ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="target", help="gpu, env:generate, ... (default: all)")
    parser.add_argument("--jobs", type=int, default=3, help="resolutions at a time (default 3)")
    parser.add_argument("--json", type=Path, help="write the time and every target's resolved versions here")
    parser.add_argument("--require-conda", action="store_true",
                        help="fail when no conda solver is on PATH to resolve the conda:* targets")
    args = parser.parse_args(argv)

    chosen, chosen_conda = targets(), conda_targets()
    if args.names:
        known = [t.name for t in chosen + chosen_conda]
        unknown = set(args.names) - set(known)
        if unknown:
            parser.error(f"unknown targets {sorted(unknown)}; known: {known}")
        chosen = [t for t in chosen if t.name in args.names]
        chosen_conda = [t for t in chosen_conda if t.name in args.names]
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    wrong = sorted({t.python for t in chosen if t.python and t.python != here})
    if wrong:
        print(f"resolve_envs: the environments are for Python {', '.join(wrong)}; run this with it (this is {here})", file=sys.stderr)
        return 2

    env = pip_environment(pip_settings())
    start = time.monotonic()
    # The big resolutions first, so that the small ones fill in beside them.
    chosen.sort(key=lambda t: -len(t.pins) - 100 * any(n in t.pins for n in ("vllm", "deepspeed")))
    solver = conda_solver()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda t: resolve(t, env), chosen))
        if solver:
            results += list(pool.map(lambda t: resolve_conda(t, solver), chosen_conda))
    results.sort(key=lambda r: r.target.name)
    for result in results:
        print(summary(result))
    unresolved = [] if solver else chosen_conda
    for target in unresolved:
        print(f"NOT RESOLVED {target.name}: no {', '.join(CONDA_SOLVERS)} on PATH to solve {' '.join(target.specs)}")
    failed = [r for r in results if r.problems]
    for result in failed:
        print(file=sys.stderr)
        for problem in result.problems:
            print(problem if "\n" in problem else f"{result.target.name}: {problem}", file=sys.stderr)
    elapsed = time.monotonic() - start
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        record = {"commit": commit, "elapsed_s": round(elapsed, 1), "jobs": args.jobs, "cores": len(os.sched_getaffinity(0)),
                  "targets": {r.target.name: {"seconds": round(r.seconds, 1), "failed": bool(r.problems),
                                              "resolved": r.resolved} for r in results},
                  "conda_not_resolved": [t.name for t in unresolved]}  # fmt: skip
        args.json.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"resolved {len(results)} targets against the registry in {elapsed:.0f} s: "
          + ("all pins hold" if not failed else f"{len(failed)} failed")
          + (f"; {len(unresolved)} conda targets not resolved (no conda solver)" if unresolved else ""))  # fmt: skip
    return 1 if failed or (unresolved and args.require_conda) else 0


if __name__ == "__main__":
    sys.exit(main())
