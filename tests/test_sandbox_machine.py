"""Verdicts that do not depend on the machine, the job that started the executor, or the
candidates a worker judged before: the run's time zone, core count and stack, and the judge's
interpreter state (docs/sandbox.md, "Isolation and limits")."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from execrl.problems import Problem
from execrl.sandbox import Executor

SRC = Path(__file__).resolve().parents[1] / "src"

OBSERVE = r"""
import datetime, os, resource, time, _thread
print(os.environ.get("TZ"), time.tzname[0], datetime.datetime.fromtimestamp(0).date(), os.cpu_count(),
      len(os.sched_getaffinity(0)), resource.getrlimit(resource.RLIMIT_STACK)[0], _thread.stack_size(),
      os.environ.get("OPENBLAS_NUM_THREADS"))
"""

# A memoised top-down DP 20,000 deep: every level passes through C (lru_cache), so how deep it
# gets is the C stack's size, not the recursion limit.
DEEP = """
import sys
from functools import lru_cache
sys.setrecursionlimit(10 ** 6)

@lru_cache(maxsize=None)
def ways(n):
    return 1 if n <= 1 else (ways(n - 1) + ways(n - 2)) % 1_000_000_007
"""


def _ways(n: int) -> int:
    a, b = 1, 1
    for _ in range(n - 1):
        a, b = b, (a + b) % 1_000_000_007
    return b


LAUNCHED = f"""
import json, sys
sys.path.insert(0, {str(SRC)!r})
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.programs import run_programs
deep = Problem(id="deep", prompt="x", test_type="assert", tests=["assert ways(10) == 89", "assert ways(20000) == {_ways(20000)}"])
with Executor(workers=1, limits=ExecutionLimits(timeout_s=10, memory_mb=1024)) as ex:
    seen = run_programs(ex, [{OBSERVE!r}])[0].stdout
    result = ex.run(deep, {DEEP!r})
print(json.dumps({{"seen": seen, "deep": [result.status, [t["status"] for t in result.test_outcomes]]}}))
"""


def launched(stack: int, tz: str) -> dict:
    """What a run sees, and the deep DP's verdict, from an executor started by a process with
    this stack limit and TZ (a shell's `ulimit -s`, a cluster node's local time)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_STACK, (stack, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    out = subprocess.run([sys.executable, "-c", LAUNCHED], capture_output=True, text=True, timeout=300,
                         preexec_fn=limit, env={"TZ": tz, "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_run_sees_the_same_machine_whatever_started_the_executor():
    small = launched(8 << 20, "Asia/Tokyo")
    large = launched(resource.RLIM_INFINITY, "America/New_York")
    # UTC, 4 cores, an 8 MiB stack for the main thread and every thread, one BLAS thread
    assert small["seen"] == large["seen"] == "UTC0 UTC 1970-01-01 4 4 8388608 8388608 1\n"
    # so a deep recursion through C crashes (or passes) alike: before, it passed under `ulimit -s unlimited`
    assert small["deep"] == large["deep"] == ["error", ["pass", "error"]]


def tokyo_zone_file(path: Path) -> Path:
    """A TZif file of a fixed UTC+9 zone named JST (RFC 8536, version 1: one local time type, no
    transitions), so the test needs no tzdata."""
    import struct

    counts = struct.pack(">6l", 0, 0, 0, 0, 1, 4)  # isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
    path.write_bytes(b"TZif" + b"\0" * 16 + counts + struct.pack(">lBB", 9 * 3600, 0, 0) + b"JST\0")
    return path


def test_local_time_is_utc_on_a_host_set_to_another_zone(tmp_path):
    """A host's local time reaches the run through the /etc bound into its private root: a cluster
    node set to Tokyo time turned timestamp 0 into 1970-01-01 09:00. The host is set to Tokyo in a
    mount namespace of the test's own (`unshare -m`, a zone file bound over /etc/localtime, or
    over a copy of /etc where the host has none); nothing outside it changes."""
    if os.geteuid() != 0:
        pytest.skip("the private root, through which the host's /etc reaches a run, needs root (as unshare -m)")
    zone = tokyo_zone_file(tmp_path / "Tokyo")
    script = (f"import sys, time, datetime; sys.path.insert(0, {str(SRC)!r})\n"
              "from execrl.sandbox import Executor\nfrom execrl.sandbox.programs import run_programs\n"
              "with Executor(workers=1) as ex:\n"
              "    seen = run_programs(ex, ['import datetime; print(datetime.datetime.fromtimestamp(0))'])[0].stdout\n"
              "print(time.tzname[0], datetime.datetime.fromtimestamp(0), '|', seen.strip())\n")
    set_zone = (f"if [ -e /etc/localtime ]; then mount --bind {zone} /etc/localtime; "
                f"else cp -a /etc {tmp_path}/etc && cp {zone} {tmp_path}/etc/localtime && mount --bind {tmp_path}/etc /etc; fi")
    out = subprocess.run(["unshare", "-m", "sh", "-c", f"{set_zone} && exec \"$0\" -c \"$1\"", sys.executable, script],
                         capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "JST 1970-01-01 09:00:00 | 1970-01-01 00:00:00"  # the host is in Tokyo, the run in UTC


def test_a_default_sized_pool_runs_as_on_a_small_host():
    """The standard library sizes its pools by the core count; against the fixed max_processes a
    pool of one process per core failed on a many-core host only."""
    pool = Problem(id="pool", prompt="x", test_type="assert", tests=["assert total(100) == 4950"])
    code = ("from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor\n"
            "def total(n):\n"
            "    with ThreadPoolExecutor() as t, ProcessPoolExecutor() as p:\n"
            "        return sum(t.map(int, range(n))) + 0 * sum(p.map(abs, range(4)))\n")
    with Executor(workers=1) as ex:
        assert ex.run(pool, code).status == "pass"
        # the tests see the same machine as the program
        assert ex.run(Problem(id="cores", prompt="x", test_type="assert",
                              tests=["import os, time\nassert os.cpu_count() == 4 and time.tzname[0] == 'UTC'"]),
                      "x = 1").status == "pass"


SETS_THE_JUDGE = ("from decimal import getcontext, DefaultContext\ngetcontext().prec = 6\nDefaultContext.prec = 6\n"
                  "import sys, os, time\nsys.setrecursionlimit(400)\nos.environ['TZ'] = 'JST-9'\ntime.tzset()\n"
                  "import numpy\nnumpy.seterr(all='raise')\nnumpy.set_printoptions(precision=2)")
SEES_A_FRESH_JUDGE = [
    "from decimal import Decimal\nassert third(1) == Decimal(1) / Decimal(3)",
    "import sys\nassert sys.getrecursionlimit() != 400",
    "import time\nassert time.tzname[0] == 'UTC' and time.localtime(0).tm_hour == 0",
    "import numpy\nassert numpy.geterr()['divide'] == 'warn' and str(numpy.array([1 / 3])) == '[0.33333333]'",
]


@pytest.mark.parametrize("workers", [1, 2])
def test_another_problems_setup_does_not_change_the_next_verdict(workers):
    """One judge serves every problem of its worker: a setup that sets the decimal precision (its
    own context's and the default every new context copies), the recursion limit, the time zone,
    numpy's error and print settings is undone before the next candidate. Before, the correct
    candidate of `third` failed when judged after `six_digits`."""
    six_digits = Problem(id="six", prompt="x", test_type="assert", setup_code=SETS_THE_JUDGE,
                         tests=["from decimal import Decimal\nassert str(Decimal(2) / Decimal(3)) == '0.666667' and third"])
    third = Problem(id="third", prompt="x", test_type="assert", tests=SEES_A_FRESH_JUDGE)
    code = "from decimal import Decimal\ndef third(x):\n    return Decimal(x) / Decimal(3)\n"
    with Executor(workers=workers) as ex:
        alone = ex.run(third, code)
        batch = [r.status for r in ex.run_batch([(six_digits, code)] * 2 + [(third, code)] * 4)]
    assert alone.status == "pass", alone.error_message
    assert batch == ["pass"] * 2 + ["pass"] * 4


def test_a_tests_unseeded_draws_are_the_same_for_every_candidate_and_run():
    """HumanEval/53's check draws its inputs with the module-level `random`, unseeded: a wrong
    candidate passed or failed by chance, and by what the candidates before it drew. Now each
    problem's draws come from its key."""
    code = "def lucky(x):\n    return x >= 0.5\n"  # right for half the draws
    for draw in ("import random\nx = random.random()", "import numpy\nx = float(numpy.random.random())"):
        coin = Problem(id="coin", prompt="x", test_type="assert", tests=[f"{draw}\nassert lucky(x)"])
        verdicts = []
        for _ in range(2):  # the first candidate of a fresh judge draws as the later ones do
            with Executor(workers=2) as ex:
                verdicts.append([r.status for r in ex.run_batch([(coin, code)] * 12)])
        assert len(set(verdicts[0])) == 1 and verdicts[0] == verdicts[1], draw


def test_every_candidate_finds_the_tests_standard_library_imports_loaded():
    """A test's imports ran inside the first candidate's budget of each judge and were free for
    the rest, so a candidate near its limit could time out only where it came first. Now the
    judge imports them (standard library and numpy) before each candidate's budget starts: the
    test sees `colorsys` loaded before its own import runs, for the first candidate as for the
    later ones (before, nothing imported it ahead of the test, and the assertion failed)."""
    loaded = Problem(id="loaded", prompt="x", test_type="assert",
                     tests=["import sys\nassert 'colorsys' in sys.modules\n"
                            "import colorsys\nassert double(colorsys.ONE_THIRD) == 2 / 3"])  # fmt: skip
    with Executor(workers=1) as ex:
        statuses = [r.status for r in ex.run_batch([(loaded, "def double(x):\n    return 2 * x\n")] * 3)]
    assert statuses == ["pass"] * 3


def test_a_test_import_that_exits_is_the_candidates_error_not_the_judges_death():
    """`import venv.__main__` calls `sys.exit` as it loads. The judge does not import a `__main__`
    module ahead of the tests (nor does a SystemExit from an import ahead of them end the judge):
    each candidate gets the test's own SystemExit, as in plain Python, and no worker is retried."""
    exits = Problem(id="exits", prompt="x", test_type="assert",
                    tests=["assert double(2) == 4", "import venv.__main__\nassert double(1) == 2"])
    with Executor(workers=1) as ex:
        results = ex.run_batch([(exits, "def double(x):\n    return 2 * x\n")] * 2)
        retries = ex.retries
    assert [(r.status, r.error_type, r.tests_passed) for r in results] == [("error", "SystemExit", 1)] * 2
    assert retries == 0
