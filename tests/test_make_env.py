"""`make env`'s install plan (`make -n`): CPU torch from PyTorch's CPU wheel index, checked by resolving the
plan's own pip command with the installed pip against local stand-in indexes (nothing is downloaded)."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def plan(*variables: str) -> list[str]:
    """The commands `make env` runs (every one: -B), with `variables` set on make's command line."""
    result = subprocess.run(["make", "-n", "-B", "env", *variables], cwd=REPO, capture_output=True, text=True, check=True)
    return [line for line in result.stdout.splitlines() if line and not line.startswith("#")]


def torch_install(commands: list[str]) -> list[str]:
    (line,) = [c for c in commands if re.search(r"pip install .*'torch==", c)]
    return shlex.split(line)


def pinned_torch() -> str:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = extras["cpu"]
    return pin


def test_torch_comes_first_from_the_cpu_index_at_pyprojects_pin():
    commands = plan()
    words = torch_install(commands)
    assert words[words.index("--extra-index-url") + 1] == CPU_INDEX
    assert words[-1] == pinned_torch() == "torch==2.13.0"
    assert "--no-deps" in words and words[words.index("--retries") + 1] == "0"
    torch_step = next(i for i, c in enumerate(commands) if "'torch==" in c)
    project_step = next(i for i, c in enumerate(commands) if "-e '.[cpu,cpu-engines,dev]'" in c)
    check_step = next(i for i, c in enumerate(commands) if "is a CUDA build" in c)
    assert torch_step < check_step < project_step
    # Where a local wheel provides CPU torch, the index can be left out.
    assert "--extra-index-url" not in torch_install(plan("TORCH_INDEX="))


def wheel_index(root, versions: dict[str, list[str]]):
    """A PEP 503 index at `root` holding stand-in torch wheels: version → its Requires-Dist."""
    import zipfile

    project = root / "torch"
    project.mkdir(parents=True)
    links = []
    for version, requires in versions.items():
        name = f"torch-{version}-py3-none-any.whl"
        info = f"torch-{version}.dist-info"
        files = {
            "torch/__init__.py": "",
            f"{info}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: " + version + "\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
            f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        }
        files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
        with zipfile.ZipFile(project / name, "w") as archive:
            for path, text in files.items():
                archive.writestr(path, text)
        links.append(f'<a href="{name}">{name}</a>')
    (project / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    return root.as_uri()


@pytest.fixture
def indexes(tmp_path):
    """(a stand-in PyPI whose torch is a CUDA build, a stand-in of PyTorch's CPU index)."""
    pypi = wheel_index(tmp_path / "pypi", {"2.13.0": ["cuda-toolkit==13.0.3", "filelock"]})
    cpu = wheel_index(tmp_path / "cpu", {"2.13.0+cpu": ["filelock"]})
    return pypi, cpu


def resolved_torch(words: list[str], pypi: str, tmp_path) -> str:
    """The torch version the plan's pip command installs with `pypi` as the main index (a dry run)."""
    start = words.index("install") + 1
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report),
               "--index-url", pypi, *words[start:]]
    # Only the indexes given: none of this machine's pip configuration (its local wheels).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=120)
    (install,) = json.loads(report.read_text())["install"]
    return install["metadata"]["version"]


def test_the_plan_resolves_the_pin_to_the_cpu_build(indexes, tmp_path):
    pypi, cpu = indexes
    assert resolved_torch(torch_install(plan(f"TORCH_INDEX={cpu}")), pypi, tmp_path) == "2.13.0+cpu"
    # Without the extra index the same pin is PyPI's CUDA build.
    assert resolved_torch(torch_install(plan("TORCH_INDEX=")), pypi, tmp_path) == "2.13.0"
    # An index that cannot be reached is passed over (one try), and the check below stops the CUDA build.
    assert resolved_torch(torch_install(plan("TORCH_INDEX=http://127.0.0.1:9/simple")), pypi, tmp_path) == "2.13.0"


@pytest.mark.parametrize("version, requires, stopped", [("2.13.0", ["cuda-toolkit==13.0.3"], True),
                                                        ("2.13.0+cpu", ["filelock"], False)])
def test_the_check_stops_a_cuda_build(tmp_path, version, requires, stopped):
    (check,) = [c for c in plan() if "is a CUDA build" in c]
    site = tmp_path / "site"
    info = site / f"torch-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    words = shlex.split(check)
    result = subprocess.run([sys.executable, *words[1:]], env={**os.environ, "PYTHONPATH": str(site)},
                            capture_output=True, text=True)
    assert (result.returncode != 0) == stopped
    if stopped:
        assert "torch 2.13.0 is a CUDA build (it requires cuda-toolkit==13.0.3)" in result.stderr
        assert CPU_INDEX in result.stderr
