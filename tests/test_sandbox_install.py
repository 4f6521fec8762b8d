"""The sandbox from an installed copy of the package, in a virtual environment reached
through a symbolic link: its self-test passes and candidates import site-packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import execrl

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

PROGRAMS = textwrap.dedent("""
    import json, sys
    from execrl.problems import Problem
    from execrl.sandbox import ExecutionLimits, Executor
    import execrl
    problem = Problem(id="p", prompt="t", test_type="assert", tests=["assert f(2) == 4"])
    good = "import probe_pkg\\ndef f(x):\\n    return probe_pkg.double(x)\\n"
    peek = ("import importlib.util, os\\ndef f(x):\\n"
            "    spec = importlib.util.find_spec('execrl')\\n"
            "    tops = list(spec.submodule_search_locations or []) if spec else []\\n"
            "    return 4 if any(os.listdir(top) for top in tops if os.path.isdir(top)) else 0\\n")
    wrong = "import probe_pkg\\ndef f(x):\\n    return x\\n"
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=5)) as ex:
        rs = ex.run_batch([(problem, good), (problem, peek), (problem, wrong), (problem, good)])
        print(json.dumps({"file": execrl.__file__, "status": [r.status for r in rs],
                          "mode": ex.isolation.get("mode") if hasattr(ex, "isolation") else None,
                          "respawns": ex.respawns, "retries": ex.stats()["retries"]}))
""")


def _venv(where: Path, editable: bool) -> Path:
    """A virtual environment with execrl copied into site-packages (the layout a wheel or
    ``pip install .`` gives), or reached through a ``.pth`` file (an editable install), and a
    small third-party package."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(where)],
                   check=True)
    purelib = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    if editable:
        (purelib / "execrl_src.pth").write_text(str(Path(execrl.__file__).parents[1]) + "\n")
    else:
        shutil.copytree(Path(execrl.__file__).parent, purelib / "execrl",
                        ignore=shutil.ignore_patterns("__pycache__"))
    (purelib / "probe_pkg").mkdir()
    (purelib / "probe_pkg" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    return purelib


@pytest.mark.parametrize(("linked", "editable"), [(False, False), (True, False), (True, True)],
                         ids=["venv", "linked_venv", "linked_venv_editable"])
def test_installed_package_passes_the_self_test(tmp_path, linked, editable):
    """~0.6 s each: a venv without pip, the package copied in, one worker."""
    real = tmp_path / "scratch" / "envs" / "venv"
    purelib = _venv(real, editable)
    link_home = tmp_path / "home"
    link_home.mkdir()
    if linked:
        (link_home / ".venv").symlink_to(real)
    else:
        real.rename(link_home / ".venv")
        purelib = link_home / ".venv" / purelib.relative_to(real)
        real = link_home / ".venv"
    python = link_home / ".venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run([str(python), "-c", PROGRAMS], capture_output=True, text=True, env=env, timeout=240,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the installed copy ran, not this checkout, and through the link
    if not editable:
        assert got["file"].startswith(str(link_home / ".venv")), got
    assert str(purelib).startswith(str(real))
    # a correct program importing a site-packages module passes; the execrl package (the
    # harness, and the data sets' generators) is hidden although the site-packages around it
    # is visible; a wrong
    # program fails; the next correct one passes
    assert got["status"] == ["pass", "fail", "fail", "pass"], got
    assert (got["respawns"], got["retries"]) == (0, 0), got  # one worker answered every candidate
