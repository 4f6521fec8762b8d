"""Assert, stdio and call modes; verdict fields; API, threads, annotation and CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from execrl.problems import Problem, write_problems
from execrl.sandbox import ExecutionLimits, ExecutionResult, Executor, annotate_candidates
from execrl.sandbox.codec import DecodeError, decode
from execrl.sandbox.judge import call_equal, stdio_equal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=2, limits=ExecutionLimits(timeout_s=2.0)) as executor:
        yield executor


def assert_problem(tests, setup="", pid="t/assert"):
    return Problem(id=pid, prompt="task", test_type="assert", tests=tests, setup_code=setup)


# --------------------------------------------------------------------------------------
# assert mode
# --------------------------------------------------------------------------------------

def test_partial_credit_and_first_failure_trace(ex):
    p = assert_problem(["assert sq(2) == 4", "assert sq(3) == 9", "assert sq(-1) == 1"])
    r = ex.run(p, "def sq(x):\n    return x * x if x > 0 else -1\n")
    assert (r.status, r.tests_passed, r.tests_total) == ("fail", 2, 3)
    assert [o["status"] for o in r.test_outcomes] == ["pass", "pass", "fail"]
    assert r.error_type == "AssertionError"
    assert r.error_message == "expected 1, got -1"
    assert r.trace.splitlines()[0] == "assert sq(-1) == 1"
    d = r.to_dict()
    assert set(d) == {"status", "tests_passed", "tests_total", "test_outcomes", "error_type", "error_message",
                      "trace", "cpu_time_s", "wall_time_s"}
    assert d["test_outcomes"][2] == {"index": 2, "status": "fail", "error_type": "AssertionError",
                                     "message": "expected 1, got -1"}
    assert ExecutionResult.from_dict(json.loads(json.dumps(d))).status == "fail"


def test_statuses(ex):
    p = assert_problem(["assert f(1) == 1", "assert f(2) == 2"])
    syntax = ex.run(p, "def f(x)\n    return x\n")
    assert syntax.status == "syntax_error" and syntax.error_type == "SyntaxError"
    assert "line 1" in syntax.trace and all(o["status"] == "not_run" for o in syntax.test_outcomes)
    error = ex.run(p, "def f(x):\n    return [][x]\n")
    assert error.status == "error" and error.error_type == "IndexError"
    assert 'File "<solution>", line 2, in f' in error.trace and "return [][x]" in error.trace
    load = ex.run(p, "import does_not_exist\n")
    assert load.status == "error" and load.error_type == "ModuleNotFoundError"
    name = ex.run(p, "def g(x):\n    return x\n")
    assert name.status == "error" and name.error_type == "NameError"
    mem = ex.run(p, "def f(x):\n    return len(bytearray(10**12))\n")
    assert mem.status == "error" and mem.error_type == "MemoryError"
    ok = ex.run(p, "def f(x):\n    return x\n")
    assert ok.status == "pass" and ok.cpu_time_s > 0 and ok.wall_time_s >= ok.cpu_time_s * 0.5


def test_setup_code_and_shadowed_builtins(ex):
    setup = "root = Node(1)\nroot.left = Node(2)\n"
    p = assert_problem(["assert depth(root) == 2"], setup=setup)
    code = ("class Node:\n    def __init__(self, v):\n        self.v, self.left, self.right = v, None, None\n"
            "def depth(n):\n    return 0 if n is None else 1 + max(depth(n.left), depth(n.right))\n")
    assert ex.run(p, code).status == "pass"
    # a program that defines its own `sum` gets it, as Python would (MBPP task 126)
    p2 = assert_problem(["assert sum(10, 15) == 6", "assert sorted([3, 1]) == [1, 3]"])
    assert ex.run(p2, "def sum(a, b):\n    return 6 if (a, b) == (10, 15) else 0\n").status == "pass"


def test_compound_asserts_are_judged_outside(ex):
    p = assert_problem([
        "assert math.isclose(area(2), 12.566, rel_tol=0.001)",
        "assert set(pair(3)) == {1, 2}",
        "assert sorted(pair(3), reverse=True) == [2, 1]",
        "assert isinstance(area(1), float)",
        "assert not is_odd(2)",
        "assert is_odd(3)",
        "assert pair(3) != [9]",
        "assert list(map(is_odd, [1, 2])) == [True, False]",
        "assert len(pair(3)) == 2 and pair(3)[0] == 1",
    ])
    code = ("import math\ndef area(r):\n    return math.pi * r * r\n"
            "def pair(n):\n    return (1, 2)\n"
            "def is_odd(n):\n    return n % 2 == 1\n")
    r = ex.run(p, code)
    assert r.status == "pass", r
    # the same tests cannot be passed by rigging the comparison
    rigged = ("import math, builtins\nmath.isclose = lambda *a, **k: True\nbuiltins.isinstance = lambda *a: True\n"
              "class E:\n    def __eq__(s, o): return True\n    def __ne__(s, o): return False\n"
              "    def __bool__(s): return True\n    def __iter__(s): return iter([1, 2])\n"
              "    def __len__(s): return 2\n    def __getitem__(s, i): return 1\n    __hash__ = object.__hash__\n"
              "def area(r):\n    return E()\ndef pair(n):\n    return E()\ndef is_odd(n):\n    return E()\n")
    bad = ex.run(p, rigged)
    assert bad.status != "pass"
    assert bad.tests_passed <= 2  # set(E()) and sorted(E()) legitimately iterate to [1, 2]


def test_subclasses_are_compared_as_plain_values(ex):
    p = assert_problem(["assert point() == (1, 2)", "assert counts('aab') == {'a': 2, 'b': 1}",
                        "assert gen() == [1, 2]"])
    code = ("from collections import namedtuple, Counter\nP = namedtuple('P', 'x y')\n"
            "def point():\n    return P(1, 2)\n"
            "def counts(s):\n    return Counter(s)\n"
            "def gen():\n    return (i for i in (1, 2))\n")
    r = ex.run(p, code)
    # namedtuple == tuple and Counter == dict hold in Python; a generator never equals a list
    assert [o["status"] for o in r.test_outcomes] == ["pass", "pass", "fail"]


def test_in_child_asserts(ex):
    p = assert_problem(["x = f(3)\nassert x == 6", "for i in range(3):\n    assert f(i) == 2 * i",
                        "assert all(f(i) == 2 * i for i in range(4))"])
    assert ex.run(p, "def f(x):\n    return 2 * x\n").status == "pass"
    rigged = ("class E:\n    def __eq__(s, o): return True\n    __hash__ = object.__hash__\n"
              "def f(x):\n    return E()\n")
    r = ex.run(p, rigged)
    assert r.status == "fail" and r.tests_passed == 0
    wrong = ex.run(p, "def f(x):\n    return 2 * x + 1\n")
    assert wrong.status == "fail" and wrong.error_type == "AssertionError"


def test_lingering_thread_does_not_delay_a_pass(ex):
    p = assert_problem(["assert f() == 1"])
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()\n"
            "def f():\n    threading.Thread(target=time.sleep, args=(60,)).start()\n    return 1\n")
    start = time.monotonic()
    r = ex.run(p, code)
    assert r.status == "pass"
    assert time.monotonic() - start < 2


def test_imports_from_the_interpreter_work_in_the_sandbox(ex):
    p = assert_problem(["assert f() == 8"])
    code = ("import collections, math, re, heapq, itertools\n"
            "import json, statistics, fractions, decimal, datetime, bisect, functools, string, typing\n"
            "def f():\n"
            "    c = collections.Counter('aab')\n"
            "    h = [3, 1]; heapq.heapify(h)\n"
            "    return (c['a'] + h[0] + len(re.findall('a', 'aa')) + len(list(itertools.permutations([1, 2])))\n"
            "            + int(math.sqrt(1)) - int(statistics.mean([1, 1])) + int(fractions.Fraction(1, 1)))\n")
    r = ex.run(p, code)
    assert r.status == "pass", r


def test_output_is_captured_with_a_cap():
    lim = ExecutionLimits(timeout_s=2.0, max_output_bytes=1000)
    with Executor(workers=1, limits=lim) as small:
        p = assert_problem(["assert f() == 1"])
        r = small.run(p, "import sys\nprint('hello')\nprint('x' * 5000)\nprint('oops', file=sys.stderr)\n"
                         "def f():\n    return 1\n")
        assert r.status == "pass"
        assert r.stdout.startswith("hello\n") and len(r.stdout) == 1000
        assert r.stderr == "oops\n"


def test_hash_seed_is_fixed(ex):
    p = assert_problem(["assert order() == order()"])
    code = "def order():\n    return list({'apple', 'pear', 'fig', 'kiwi', 'plum'})\n"
    r1, r2 = ex.run(p, code), ex.run(p, code)
    assert r1.status == r2.status == "pass"
    probe = assert_problem(["assert order() == 0"])
    a, b = ex.run(probe, code), ex.run(probe, code)
    assert a.error_message == b.error_message  # the same set order in every child


# --------------------------------------------------------------------------------------
# stdio mode
# --------------------------------------------------------------------------------------

def stdio_problem(cases):
    return Problem(id="t/stdio", prompt="task", test_type="stdio",
                   tests=[{"input": i, "output": o} for i, o in cases])


def test_stdio_comparisons(ex):
    p = stdio_problem([("1 2\n", "3\n"), ("2 2\n", "4"), ("5 5\n", "10  \n\n")])
    assert ex.run(p, "a, b = map(int, input().split())\nprint(a + b)\n").status == "pass"
    floats = stdio_problem([("1 3\n", "0.3333333\n"), ("2 3\n", "0.666667 x\n")])
    r = ex.run(floats, "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a / b, 'x' if a == 2 else '')\n")
    assert r.status == "pass", r
    wrong = ex.run(p, "a, b = map(int, input().split())\nprint(a * b)\n")
    assert (wrong.status, wrong.tests_passed) == ("fail", 1)
    assert "Input:\n1 2" in wrong.trace and "Expected output:\n3" in wrong.trace and "Got:\n2" in wrong.trace
    assert wrong.error_type == "WrongAnswer"


def test_stdio_exits_errors_and_timeouts(ex):
    p = stdio_problem([("1\n", "1\n"), ("2\n", "2\n")])
    assert ex.run(p, "import sys\nprint(input())\nsys.exit(0)\n").status == "pass"
    assert ex.run(p, "print(input())\nexit()\n").status == "pass"
    nonzero = ex.run(p, "import sys\nprint(input())\nsys.exit(3)\n")
    assert nonzero.status == "error" and nonzero.error_type == "SystemExit"
    hard = ex.run(p, "import os, sys\nprint(input()); sys.stdout.flush()\nos._exit(0)\n")
    assert hard.status == "error" and hard.error_type == "ProcessExited"
    crash = ex.run(p, "x = int(input())\nprint(1 // (x - 1))\n")
    assert crash.status == "error" and crash.error_type == "ZeroDivisionError"
    assert ex.run(p, "print(input(\n").status == "syntax_error"
    slow = ex.run(p, "x = input()\nwhile x == '2': pass\nprint(x)\n")
    assert slow.status == "timeout" and [o["status"] for o in slow.test_outcomes] == ["pass", "timeout"]


def test_stdio_equal_unit():
    assert stdio_equal("1 2\n3\n", "1 2\n3")
    assert stdio_equal("  a  \n b\n", "a\nb")
    assert stdio_equal("0.1000001", "0.1")
    assert not stdio_equal("0.11", "0.1")
    assert not stdio_equal("1 2", "1 2 3")
    assert not stdio_equal("", "1")


# --------------------------------------------------------------------------------------
# call mode
# --------------------------------------------------------------------------------------

def call_problem(tests, entry="solve"):
    return Problem(id="t/call", prompt="task", test_type="call", entry_point=entry,
                   tests=[{"args": a, "expected": e} for a, e in tests])


def test_call_function_and_solution_class(ex):
    p = call_problem([([[1, 2, 3]], 6), ([[]], 0), ([[0.1, 0.2]], 0.3)])
    assert ex.run(p, "def solve(xs):\n    return sum(xs)\n").status == "pass"
    cls = "class Solution:\n    def solve(self, xs):\n        return sum(xs)\n"
    assert ex.run(p, cls).status == "pass"
    wrong = ex.run(p, "def solve(xs):\n    return len(xs)\n")
    assert wrong.status == "fail" and wrong.error_type == "WrongAnswer"
    assert wrong.trace.startswith("solve([1, 2, 3])") and "expected 6, got 3" in wrong.trace
    missing = ex.run(p, "def other(xs):\n    return 0\n")
    assert missing.status == "error" and missing.error_type == "NameError"
    boom = ex.run(p, "def solve(xs):\n    return xs[5]\n")
    assert boom.status == "error" and boom.error_type == "IndexError"


def test_call_tuples_tolerance_and_argument_isolation(ex):
    p = call_problem([([[3, 1, 2]], [1, 2, 3]), ([[3, 1, 2]], [1, 2, 3]), ([1.0, 3.0], 0.3333333)], entry="f")
    code = ("def f(xs, b=None):\n"
            "    if b is not None:\n        return xs / b\n"
            "    xs.sort()\n    out = tuple(xs)\n    xs.append(99)\n    return out\n")
    r = ex.run(p, code)
    assert r.status == "pass", r  # tuple == list, float tolerance, and test 2 got fresh arguments
    rigged = "class E:\n    def __eq__(s, o): return True\ndef f(*a):\n    return E()\n"
    bad = ex.run(p, rigged)
    assert bad.status == "fail" and bad.tests_passed == 0


def test_call_equal_unit():
    assert call_equal((1, 2), [1, 2])
    assert call_equal([1.0000001], [1.0])
    assert not call_equal([1.1], [1.0])
    assert not call_equal("1", 1)
    assert call_equal({"a": (1,)}, {"a": [1]})


def test_codec_rejects_malformed_values():
    assert decode({"t": [1, {"l": ["x"]}]}) == (1, ["x"])
    assert decode({"s": [1, 2]}) == {1, 2}
    assert decode({"i": "-ff"}) == -255
    for bad in ({"s": [{"l": []}]}, {"q": 1}, {"l": 1}, {"b": "zz"}, [1], {"l": [], "t": []}):
        with pytest.raises(DecodeError):
            decode(bad)
    deep: object = 1
    for _ in range(500):
        deep = {"l": [deep]}
    with pytest.raises(DecodeError):
        decode(deep)


# --------------------------------------------------------------------------------------
# API: batches, threads, annotation, CLI
# --------------------------------------------------------------------------------------

def test_run_batch_keeps_order_and_shows_progress(ex, capsys):
    probs = [assert_problem([f"assert f() == {i}"], pid=f"t/{i}") for i in range(40)]
    items = [(p, f"def f():\n    return {i if i % 3 else -1}\n") for i, p in enumerate(probs)]
    rs = ex.run_batch(items, progress=True)
    assert [r.status for r in rs] == ["fail" if i % 3 == 0 else "pass" for i in range(40)]
    assert "40/40" in capsys.readouterr().err
    assert ex.run_batch([]) == []


def test_executor_is_thread_safe(ex):
    probs = [assert_problem([f"assert f() == {i}"], pid=f"th/{i}") for i in range(8)]
    errors, out = [], {}

    def worker(k):
        try:
            for i, p in enumerate(probs):
                want = (k + i) % 2 == 0
                r = ex.run(p, f"def f():\n    return {i if want else -5}\n")
                out[(k, i)] = (r.status == "pass") == want
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(out) == 48 and all(out.values())


def test_annotate_candidates(ex):
    probs = {"t/a": assert_problem(["assert f() == 1"], pid="t/a")}
    cands = [{"problem_id": "t/a", "sample_index": 0, "code": "def f():\n    return 1\n", "completion": "x"},
             {"problem_id": "t/a", "sample_index": 1, "code": "def f(:\n", "completion": "y"}]
    out = annotate_candidates(probs, cands, ex)
    assert [a["status"] for a in out] == ["pass", "syntax_error"]
    assert out[0]["completion"] == "x" and out[0]["tests_total"] == 1
    with pytest.raises(KeyError):
        annotate_candidates(probs, [{"problem_id": "nope", "code": ""}], ex)


def test_cli(tmp_path):
    probs = [assert_problem(["assert f(2) == 4"], pid="cli/0"),
             Problem(id="cli/1", prompt="echo", test_type="stdio", tests=[{"input": "x\n", "output": "x\n"}])]
    write_problems(probs, tmp_path / "p.jsonl")
    cands = [{"problem_id": "cli/0", "sample_index": 0, "code": "def f(x):\n    return x * 2\n"},
             {"problem_id": "cli/0", "sample_index": 1, "code": "def f(x):\n    return x\n"},
             {"problem_id": "cli/1", "sample_index": 0, "code": "print(input())\n"}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "execrl.sandbox", "--problems", str(tmp_path / "p.jsonl"),
                           "--candidates", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "a.jsonl"),
                           "--workers", "1", "--timeout", "2", "--memory-mb", "512", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["pass", "fail", "pass"]
    assert json.loads(proc.stderr.strip().splitlines()[-1])["status_counts"] == {"fail": 1, "pass": 2}


def test_no_isolation_mode_still_judges():
    with Executor(workers=1, isolation="none", limits=ExecutionLimits(timeout_s=1)) as plain:
        assert plain.isolation["mode"] == "none"
        p = assert_problem(["assert f() == 1"])
        assert plain.run(p, "def f():\n    return 1\n").status == "pass"
        assert plain.run(p, "while True: pass\n").status == "timeout"
