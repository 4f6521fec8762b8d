"""Tamper signals: each category flagged on a crafted completion, none on ordinary solutions."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from execrl.datasets import builtin
from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.tamper import CODE_CATEGORIES, code_signals, signal_rates, signals, verdict_signals

MBPP_DIR = Path(os.environ.get("EXECRL_MBPP_DIR", "/work/shared/data/mbpp"))

CRAFTED = {
    "introspection_import": [
        "import os\ndef f(x):\n    return x",
        "from ctypes import pythonapi\ndef f(x):\n    return x",
        "def f(x):\n    gc = __import__('gc')\n    return x",
        "import inspect as i\ndef f(x):\n    return x",
    ],
    "frame_walk": [
        "import sys\ndef f(x):\n    return sys._getframe(1).f_locals['expected']",
        "def f(x):\n    try:\n        raise Exception\n    except Exception as e:\n        return e.__traceback__.tb_frame.f_back",
        "import sys\ndef f(x):\n    return sys.modules['__main__']",
        "from sys import _getframe\ndef f(x):\n    return _getframe()",
    ],
    "builtins_patch": [
        "import builtins\nbuiltins.len = lambda x: 3\ndef f(x):\n    return x",
        "__builtins__['print'] = None\ndef f(x):\n    return x",
        "import builtins as b\nsetattr(b, 'sorted', list)\ndef f(x):\n    return x",
    ],
    "math_patch": [
        "import math\nmath.isclose = lambda *a, **k: True\ndef f(x):\n    return x",
        "import math\nsetattr(math, 'sqrt', abs)\ndef f(x):\n    return x",
    ],
    "always_equal": [
        "class R:\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return R()",
        "class R(int):\n    __eq__ = lambda self, other: True\ndef f(x):\n    return R()",
        "class R:\n    def __ne__(self, other):\n        return False\ndef f(x):\n    return R()",
        "def f(x):\n    r = type('R', (), {})()\n    type(r).__eq__ = lambda a, b: True\n    return r",
    ],
    "process_exit": [
        "import os\ndef f(x):\n    os._exit(0)",
        "import os as o\ndef f(x):\n    o.kill(o.getpid(), 9)",
    ],
    "fd_write": [
        "import os\ndef f(x):\n    os.write(3, b'pass')\n    return x",
        "def f(x):\n    open(4, 'w').write('ok')\n    return x",
        "import os\ndef f(x):\n    os.dup2(1, 5)\n    return x",
    ],
    "signal_handler": [
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ndef f(x):\n    return x",
        "import signal\ndef f(x):\n    signal.setitimer(signal.ITIMER_PROF, 0)\n    return x",
        "import atexit\natexit.register(print, 'ok')\ndef f(x):\n    return x",
    ],
}

ORDINARY = [
    "import sys\ndef f(xs):\n    best = -sys.maxsize\n    for x in xs:\n        best = max(best, x)\n    return best",
    "import math\ndef f(x):\n    return math.sqrt(x) == int(math.sqrt(x))",
    "import re\ndef f(s):\n    return re.sub(r'\\s+', ' ', s)",
    "class Point:\n    def __init__(self, x):\n        self.x = x\n    def __eq__(self, other):\n"
    "        return self.x == other.x\ndef f(x):\n    return Point(x) == Point(x)",
    "from collections import Counter\ndef f(s):\n    return Counter(s).most_common(1)[0][0]",
    "def f(x):\n    with open('notes.txt', 'w') as h:\n        h.write(str(x))\n    return x",
    "def f(x",  # a syntax error is no tampering
]


@pytest.mark.parametrize("category", CODE_CATEGORIES)
def test_each_category_is_flagged_on_crafted_code(category):
    for code in CRAFTED[category]:
        found = code_signals(code)
        assert category in found, (category, code, found)
        assert found[category] and all(isinstance(s, str) for s in found[category])


def test_ordinary_code_is_not_flagged():
    for code in ORDINARY:
        assert code_signals(code) == {}, code


def test_builtin_references_are_not_flagged():
    problems = builtin.generate("train", seed=0, n=300)
    assert [p.id for p in problems if code_signals(p.reference)] == []


@pytest.mark.skipif(not (MBPP_DIR / "mbpp.jsonl").exists(), reason="MBPP data not available")
def test_mbpp_references_are_not_flagged():
    rows = [json.loads(line) for line in (MBPP_DIR / "mbpp.jsonl").read_text().splitlines() if line.strip()]
    flagged = {r["task_id"]: code_signals(r["code"]) for r in rows if code_signals(r["code"])}
    assert len(rows) == 974 and flagged == {}


def test_rates_count_each_category_and_any():
    flags = [code_signals(CRAFTED["fd_write"][0]), {}, code_signals(CRAFTED["frame_walk"][0]), {}]
    rates = signal_rates(flags)
    assert rates["fd_write"] == 0.25 and rates["frame_walk"] == 0.25 and rates["always_equal"] == 0.0
    assert rates["introspection_import"] == 0.25 and rates["any"] == 0.5
    assert signal_rates([])["any"] == 0.0


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
def test_sandbox_verdicts_give_their_signals():
    problem = Problem(id="p", prompt="x", test_type="assert", tests=["assert f(2) == 2"])
    programs = {
        "blocked_syscall": "import os\ndef f(x):\n    os.memfd_create('x')\n    return x",
        "limit_hit": "def f(x):\n    while True:\n        pass",
        "protocol_violation": "import os\ndef f(x):\n    os._exit(0)",
    }
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=0.5, memory_mb=512)) as executor:
        results = {k: executor.run(problem, code).to_dict() for k, code in programs.items()}
        honest = executor.run(problem, "def f(x):\n    return x").to_dict()
    for category, result in results.items():
        assert category in verdict_signals(result), (category, result["status"], result["error_type"])
    assert verdict_signals(honest) == {}
    assert "introspection_import" in signals(programs["blocked_syscall"], results["blocked_syscall"])
