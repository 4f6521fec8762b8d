"""Assert, stdio and call modes; verdict fields; API, threads, annotation and CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from execrl.problems import Problem, write_problems
from execrl.sandbox import ExecutionLimits, ExecutionResult, Executor, annotate_candidates
from execrl.sandbox._exchange import ProtocolError, _Exchange, _Side
from execrl.sandbox.host_judge import call_equal, stdio_equal

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
    # only what E legitimately does as the program defines it: iterate to [1, 2] (set, sorted),
    # have length 2 and item 1; its always-true __eq__ and the patched math/builtins count for nothing
    assert [k for k, o in enumerate(bad.test_outcomes) if o["status"] == "pass"] == [1, 2, 8]


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


def test_lingering_thread_does_not_delay_a_pass(ex, monkeypatch):
    p = assert_problem(["assert f() == 1"])
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()\n"
            "def f():\n    threading.Thread(target=time.sleep, args=(60,)).start()\n    return 1\n")
    # The threads sleep past the run's wall-clock backstop: a run that waited for them (as a
    # stdio program's end does, like `python`) would be killed by it. What the worker reports of
    # the run shows it exited by itself with status 0, so nothing waited for them.
    import execrl.sandbox.executor as executor_module

    assert ex.limits.worker_limits()["wall"] < 60
    replies, collect = [], executor_module._WorkerHandle.collect

    def recorded(handle, deadline):
        reply = collect(handle, deadline)
        replies.append(reply[0])
        return reply

    monkeypatch.setattr(executor_module._WorkerHandle, "collect", recorded)
    r = ex.run(p, code)
    assert r.status == "pass", (r.error_type, r.error_message)
    (run,) = replies[-1]["runs"]
    assert (run["exit"], run["signal"], run["wall_killed"]) == (0, None, False), run


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


def test_stdio_output_past_the_size_limit_never_passes(ex):
    """Only ``max_output_bytes`` of stdout are kept, so what follows is never seen: the right answer
    followed by padding and a wrong one (plain Python fails it) does not pass, and neither does a
    correct output longer than the limit (a stated difference); the differential bench's plain side
    compares the whole output."""
    from execrl.sandbox.differential import plain_verdict

    limits = ExecutionLimits(timeout_s=2.0, max_output_bytes=4096)
    p = stdio_problem([("3\n", "6\n")])
    padded = "import sys\nprint(int(input()) * 2)\nsys.stdout.write(' ' * 8000)\nprint('WRONG 12345')\n"
    r = ex.run(p, padded, limits)
    assert (r.status, r.error_type) == ("fail", "WrongAnswer") and "not judged" in r.error_message, r
    assert plain_verdict(p, padded, limits).status == "fail"
    long = stdio_problem([("2000\n", "".join(f"{i}\n" for i in range(2000)))])
    listing = "for i in range(int(input())):\n    print(i)\n"
    assert ex.run(long, listing, limits).status == "fail"
    assert ex.run(long, listing).status == "pass" and plain_verdict(long, listing, limits).status == "pass"


def test_stdio_equal_unit():
    assert stdio_equal("1 2\n3\n", "1 2\n3")
    assert stdio_equal("  a  \n b\n", "a\nb")
    assert stdio_equal("0.1000001", "0.1")
    assert not stdio_equal("0.11", "0.1")
    assert not stdio_equal("1 2", "1 2 3")
    assert not stdio_equal("", "1")


def test_stdio_digits_written_as_no_number_is_are_matched_as_text():
    """An integer token is matched by value (`7.0` for `7`), but one written with a leading zero
    or a plus is text whose digits are the answer (a binary string, a padded clock); `1_0` is
    not the 10 it parses to."""
    assert stdio_equal("7.0", "7") and stdio_equal("101", "101") and stdio_equal("-5", "-5")
    for wrong, expected in (("101", "00000101"), ("1.010000e+02", "00000101"), ("101.0", "00000101"),
                            ("9\n5", "09\n05"), ("5", "+5"), ("1_0", "10")):
        assert not stdio_equal(wrong, expected), (wrong, expected)
    assert stdio_equal("00000101", "00000101") and stdio_equal(" 09  05\n", "09 05")


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


def test_call_mode_judges_an_argument_changed_in_place_as_it_is_after_the_call(ex):
    """``x.sort(); return x`` returns the argument itself: plain Python compares the sorted list. The
    run's changes to the arguments reach the judge's copies, so the result is judged as changed (a
    correct program passes; one whose wrong change leaves tests' inputs equal to their expected values
    does not pass as if it had changed nothing)."""
    p = call_problem([([[3, 1, 2]], [1, 2, 3]), ([[5, 4]], [4, 5])], entry="f")
    for correct in ("def f(x):\n    x.sort()\n    return x\n",
                    "class Solution:\n    def f(self, nums):\n        nums.sort()\n        return nums\n",
                    "def f(x):\n    x.sort()\n    return [x][0]\n"):
        assert ex.run(p, correct).status == "pass", correct
    nested = call_problem([([[[2, 1], [4, 3]]], [1, 2])], entry="f")
    assert ex.run(nested, "def f(rows):\n    rows[0].sort()\n    return rows[0]\n").status == "pass"
    same = call_problem([([[1, 2, 3]], [1, 2, 3]), ([["a", "b"]], ["a", "b"])], entry="dedup")
    wrong = ex.run(same, "def dedup(xs):\n    xs.append(xs[0])\n    xs.reverse()\n    return xs\n")
    assert (wrong.status, wrong.tests_passed) == ("fail", 0) and "got [1, 3, 2, 1]" in wrong.trace


def test_tests_a_worker_cannot_receive_are_each_candidates_prepare_error(ex):
    """A test value JSON cannot hold, a stdio input that is not text: the candidate's error
    (``PrepareError``), before any worker sees it, and the batch and the worker go on."""
    good = call_problem([([3], 6)], entry="f")
    unsendable = [call_problem([([3], {1, 2})], entry="f"), call_problem([([b"x"], 1)], entry="f"),
                  stdio_problem([("\ud800x\n", "1"), ("a\n", "1")])]
    results = ex.run_batch([(p, "def f(x):\n    return x * 2\n") for p in unsendable]
                           + [(good, "def f(x):\n    return x * 2\n")])
    assert [(r.status, r.error_type) for r in results[:-1]] == [("error", "PrepareError")] * 3, results
    assert "not text" in results[2].error_message
    assert results[-1].status == "pass"


def test_call_mode_a_returned_iterator_equals_no_list(ex):
    """As under TACO's call harness (``output == expected``, a tuple read as a list): a map, a
    reversed list or a generator is not the list of its items."""
    p = call_problem([([3], [0, 1, 2])], entry="f")
    for lazy in ("def f(n):\n    return map(int, range(n))\n", "def f(n):\n    return reversed([2, 1, 0][:n])\n",
                 "def f(n):\n    yield from range(n)\n"):
        r = ex.run(p, lazy)
        assert (r.status, r.error_type) == ("fail", "WrongAnswer"), (lazy, r)
        assert "not a plain value" in r.error_message
    assert ex.run(p, "def f(n):\n    return tuple(range(n))\n").status == "pass"


def test_call_equal_unit():
    assert call_equal((1, 2), [1, 2])
    assert call_equal([1.0000001], [1.0])
    assert not call_equal([1.1], [1.0])
    assert not call_equal("1", 1)
    assert call_equal({"a": (1,)}, {"a": [1]})


def _decode(value):
    """A value as the judge decodes it from a run's message."""
    return _Side(-1).dec(value, _Exchange())


def test_value_protocol_rejects_malformed_values():
    assert _decode({"t": [1, {"l": ["x"]}]}) == (1, ["x"])
    assert _decode({"s": [1, 2]}) == {1, 2}
    assert _decode({"i": "-ff"}) == -255
    shared = _decode({"l": [{"l": []}, {"@": 1}]})
    assert shared == [[], []] and shared[0] is shared[1]  # identity travels with the value
    for bad in ({"s": [{"l": []}]}, {"q": 1}, {"l": 1}, {"b": "zz"}, [1], {"l": [], "t": []}, {"@": 5}):
        with pytest.raises(ProtocolError):
            _decode(bad)
    deep: object = 1
    for _ in range(5000):
        deep = {"l": [deep]}
    with pytest.raises((ProtocolError, RecursionError)):  # the judge turns either into a protocol violation
        _decode(deep)


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


# --------------------------------------------------------------------------------------
# Comparisons: integers exactly, floats with tolerance
# --------------------------------------------------------------------------------------

def test_integer_tokens_are_compared_exactly():
    assert not stdio_equal("1000000000", "1000000007")
    assert not stdio_equal("1 1000000000\n", "1 1000000007\n")
    assert stdio_equal("7.0", "7") and stdio_equal("+7", "7")
    assert stdio_equal("1000000000.0000001", "1000000000.0")  # a real float keeps its tolerance
    assert not call_equal(1000000000.0, 1000000007)
    assert not call_equal([1000000000], [1000000007])
    assert call_equal(3.0, 3) and call_equal([0.30000000000000004], [0.3])
    assert not call_equal(1 << 1100, 0.5)  # no OverflowError


def test_integer_outputs_through_the_executor(ex):
    p = stdio_problem([("x\n", "1000000007\n")])
    assert ex.run(p, "print(10**9)\n").status == "fail"
    assert ex.run(p, "print(10**9 + 7)\n").status == "pass"
    c = call_problem([([], 1000000007)], entry="f")
    assert ex.run(c, "def f():\n    return 1e9\n").status == "fail"
    assert ex.run(c, "def f():\n    return 1000000007\n").status == "pass"


# --------------------------------------------------------------------------------------
# Correct programs that used to fail
# --------------------------------------------------------------------------------------

FAST_IO = """import atexit, io, os, sys
class FastIO:
    def __init__(self):
        self.buffer = io.BytesIO()
    def write(self, s):
        self.buffer.write(s.encode())
    def flush(self):
        os.write(1, self.buffer.getvalue())
        self.buffer = io.BytesIO()
out = FastIO()
atexit.register(out.flush)
out.write(str(int(input()) * 2) + "\\n")
"""


def test_output_at_exit_and_from_threads_is_kept(ex):
    p = stdio_problem([("2\n", "4\n"), ("5\n", "10\n")])
    assert ex.run(p, FAST_IO).status == "pass"
    threaded = ("import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(1 << 26)\n"
                "def main():\n    print(int(input()) * 2)\nthreading.Thread(target=main).start()\n")
    assert ex.run(p, threaded).status == "pass"


def test_argv_and_cmdline_look_like_a_plain_program(ex):
    p = stdio_problem([("3\n", "3\n")])
    reads_argv = ("import sys\nsrc = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin\n"
                  "print(src.readline().strip())\n")
    assert ex.run(p, reads_argv).status == "pass"
    q = assert_problem(["assert leaked() == []"])
    code = ("import sys\n"
            "def leaked():\n"
            "    with open('/proc/self/cmdline', 'rb') as fh:\n"
            "        text = fh.read().decode(errors='replace') + repr(sys.argv) + repr(sys.orig_argv)\n"
            "    return [k for k in ('isolation', 'tmpfs_mb', 'seccomp', 'hash_seed', 'uid') if k in text]\n")
    r = ex.run(q, code)
    assert r.status == "pass", r


def test_third_party_packages_and_multiprocessing_work(ex):
    p = assert_problem(["assert f() == 6"])
    code = ("import numpy as np\nfrom multiprocessing import Pool\n"
            "def sq(x):\n    return x * x\n"
            "def f():\n    with Pool(2) as pool:\n        return int(np.sum(pool.map(sq, [1, 1, 2]))) \n")
    r = ex.run(p, code)
    assert r.status == "pass", r


def test_a_virtualenv_under_the_temp_dir_is_importable():
    import tempfile
    import venv
    root = Path(tempfile.mkdtemp(prefix="execrl-venv-", dir="/tmp"))  # mode 0700
    try:
        venv.EnvBuilder(system_site_packages=False, with_pip=False, symlinks=True).create(root)
        site = next(root.glob("lib/python*/site-packages"))
        (site / "execrl_probe_pkg").mkdir()
        (site / "execrl_probe_pkg" / "__init__.py").write_text("VALUE = 41\n")
        script = ("from execrl.problems import Problem\nfrom execrl.sandbox import Executor, WorkerStartError\n"
                  "p = Problem(id='v', prompt='x', test_type='assert', tests=['assert f() == 42'])\n"
                  "try:\n"
                  "    with Executor(workers=1) as ex:\n"
                  "        r = ex.run(p, 'import execrl_probe_pkg\\n'\n"
                  "                      'def f():\\n    return execrl_probe_pkg.VALUE + 1\\n')\n"
                  "    print(r.status, r.error_message)\n"
                  "except WorkerStartError as e:\n"
                  "    print('WorkerStartError', e)\n")

        def run() -> str:
            proc = subprocess.run([str(root / "bin" / "python"), "-c", script], capture_output=True, text=True,
                                  env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")}, timeout=120)
            assert proc.returncode == 0, proc.stderr
            return proc.stdout

        if os.geteuid() == 0:  # the sandbox uid cannot enter a 0700 directory: fail loudly at start-up
            out = run()
            assert out.startswith("WorkerStartError") and "not visible in the sandbox" in out, out
        root.chmod(0o755)
        out = run()
        assert out.split()[0] == "pass", out
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_a_padded_program_is_judged_quickly(ex):
    """42,000 lines of padding, 2,000 of them a comment that looks like a rebinding of the
    builtin the program redefines: judged like the unpadded program (its ``sum`` is the
    program's). How quickly, against plain ``python`` on the same program (a scan of the
    program's text that grows faster than the text would show there):
    ``bench/sandbox_throughput.py --sets padded``."""
    p = assert_problem(["assert sum(10, 15) == 6", "assert f(2) == 3"])
    code = "def sum(a, b):\n    return 6\n" + "\n" * 40000 + "# sum = x\n" * 2000 + "def f(x):\n    return x + 1\n"
    r = ex.run(p, code)
    assert r.status == "pass", r
    assert [o["status"] for o in r.test_outcomes] == ["pass", "pass"]


# --------------------------------------------------------------------------------------
# What the judge keeps: expected values, setup helpers, redefinitions
# --------------------------------------------------------------------------------------

SECRETS = ["888888", "555555", "444444", "123436", "424244", "7000021"]  # the last one: the control's
SCAN = (
    "import gc, hashlib, re, sys\n"
    f"DIGESTS = {[hashlib.sha256(x.encode()).hexdigest()[:16] for x in SECRETS]!r}\n"
    "def _hit(text):\n"
    "    # only digests are in the program: a secret's own text in memory is a leak\n"
    "    for m in re.finditer(rb'[0-9]{6,7}', text):\n"
    "        for k in (6, 7):\n"
    "            d = hashlib.sha256(m.group()[:k]).hexdigest()[:16]\n"
    "            if d in DIGESTS:\n"
    "                return m.group()[:k].decode()\n"
    "def _leaked():\n"
    "    try:\n"
    "        with open('/proc/self/maps') as fh, open('/proc/self/mem', 'rb', 0) as mem:\n"
    "            for line in fh:\n"
    "                span, perms = line.split()[:2]\n"
    "                if 'r' not in perms or 'vsyscall' in line or 'vvar' in line:\n"
    "                    continue\n"
    "                lo, hi = (int(x, 16) for x in span.split('-'))\n"
    "                try:\n"
    "                    mem.seek(lo)\n"
    "                    found = _hit(mem.read(hi - lo))\n"
    "                except (OSError, OverflowError, ValueError):\n"
    "                    continue\n"
    "                if found:\n"
    "                    return found\n"
    "    except OSError:\n"
    "        pass\n"
    "    texts = [repr(o)[:100000] for o in gc.get_objects()]\n"
    "    f = sys._getframe()\n"
    "    while f is not None:\n"
    "        texts.append(repr(f.f_locals)[:100000] + repr(f.f_globals)[:100000])\n"
    "        f = f.f_back\n"
    "    return _hit('\\n'.join(texts).encode())\n"
    "def _check():\n"
    "    found = _leaked()\n"
    "    if found is not None:\n"
    "        raise RuntimeError('found ' + found)\n"
)


def test_expected_values_never_reach_the_child(ex):
    """The candidate searches its whole process for the tests' expected values (and setup
    helpers that hold them): they are never there. The control shows the search finds a value
    that is in the process."""
    p = assert_problem(["x = f(3)\nexpected = 888888\nassert x == expected",
                        "assert all(f(i) == 2 * i + 555555 for i in range(4))",
                        "assert check(f(1)) and 444444 in f(2)",
                        "assert verify(3) and all(verify(i) for i in range(2))",
                        "CASE = {'in': 21, 'out': 123436}\nassert f(CASE['in']) == CASE['out']"],
                       setup=("def check(v):\n    return sorted(v) == [424244]\n"
                              "def verify(v):\n    return f(v) == v + 123436\n"))
    r = ex.run(p, SCAN + "def f(x):\n    _check()\n    return [x]\n")
    assert r.error_type != "RuntimeError", r  # none of the secrets was found
    assert r.status == "fail"
    control = ex.run(p, SCAN + "KEPT = str(7 * 1000003)\ndef f(x):\n    _check()\n    return [x]\n")
    assert control.error_type == "RuntimeError" and "7000021" in control.error_message, control


def test_setup_runs_in_the_judge(ex):
    setup = ("import math\nLIMIT = 3\ndef check(v):\n    return sorted(v) == list(range(LIMIT))\n"
             "root = Node(LIMIT)\n")
    p = assert_problem(["assert check(f(root))"], setup=setup)
    code = ("class Node:\n    def __init__(self, v):\n        self.v = v\n"
            "def f(node):\n    return [2, 0, 1][:node.v]\n")
    assert ex.run(p, code).status == "pass"
    rigged = "import builtins\nbuiltins.sorted = lambda *a, **k: [0, 1, 2]\n" + code.replace("[2, 0, 1]", "[7]")
    assert ex.run(p, rigged).status == "fail"


def test_redefinitions_come_from_the_syntax_tree(ex):
    p = assert_problem(["assert sum(10, 15) == 6", "assert f([3, 1]) == sorted([1, 3])"])
    # MBPP task 126: the program's own `sum` is the function under test
    assert ex.run(p, "def sum(a, b):\n    return 6\ndef f(x):\n    return sorted(x)\n").status == "pass"
    # a comment or a string mentioning a redefinition is not one
    commented = "# sum = lambda *a: 6\nS = 'sum = 1'\ndef f(x):\n    return sorted(x)\n"
    assert ex.run(p, commented).error_type == "TypeError"
    # a redefined builtin never decides the expected side of a test that calls the candidate
    rigged = "def sorted(x):\n    return 'same'\ndef sum(a, b):\n    return 6\ndef f(x):\n    return 'same'\n"
    r = ex.run(p, rigged)
    assert [o["status"] for o in r.test_outcomes] == ["pass", "fail"]


def test_replayed_tests_follow_python(ex):
    p = assert_problem([
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.size() == 1",
        "try:\n    f(-1)\nexcept ValueError:\n    pass\nelse:\n    assert False",
        "assert f(1) == 1 or f(-1) == 0",
        "for i in range(3):\n    assert f(i) == i",
        "assert [f(i) for i in range(3)] == [0, 1, 2]\nassert any(f(i) == 2 for i in range(5))",
    ])
    code = ("class Stack:\n    def __init__(self):\n        self.items = []\n"
            "    def push(self, x):\n        self.items.append(x)\n"
            "    def pop(self):\n        return self.items.pop()\n"
            "    def size(self):\n        return len(self.items)\n"
            "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n")
    r = ex.run(p, code)
    assert r.status == "pass", r
    wrong = ex.run(p, code.replace("return x\n", "return x + 1\n"))
    # f(1) == 1 is false, so Python evaluates f(-1), which raises
    assert [o["status"] for o in wrong.test_outcomes] == ["pass", "pass", "error", "fail", "fail"]
    assert wrong.error_type == "ValueError"
    assert wrong.test_outcomes[3]["message"] == "assertion is false: f(i) = 1"
    crash = ex.run(p, code.replace("raise ValueError('negative')", "raise KeyError('x')"))
    assert crash.test_outcomes[1]["status"] == "error" and crash.test_outcomes[1]["error_type"] == "KeyError"


def test_replayed_tests_with_their_own_functions_and_imports(ex):
    # the test's own functions run in the judge (their comparisons too); imports are the judge's
    p = assert_problem(["def check(n):\n    return f(n) == 2 * n\nassert check(3)\n"
                        "assert all(check(i) for i in range(3))",
                        "g = lambda x: f(x) == 2 * x\nassert g(4)",
                        "import math\nassert math.isclose(f(1), 2.0)\nassert f(2) == 4"])
    assert ex.run(p, "def f(x):\n    return 2 * x\n").status == "pass"
    rigged = ("import math\nmath.isclose = lambda *a, **k: True\n"
              "class E:\n    def __eq__(s, o): return True\n    __hash__ = object.__hash__\n"
              "def f(x):\n    return E()\n")
    assert ex.run(p, rigged).tests_passed == 0
    q = assert_problem(["x = f(3)\nassert x", "assert all(map(lambda i: f(i) == i, range(3)))\nassert f(0) == 0"])
    truthy = "class T:\n    def __bool__(self): return True\ndef f(x):\n    return T()\n"
    stop = "def f(x):\n    raise StopIteration\n"
    assert ex.run(q, truthy).tests_passed == 0 and ex.run(q, stop).tests_passed == 0
    assert ex.run(q, "def f(x):\n    return x\n").status == "pass"


def test_replies_are_capped():
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=2.0, max_output_bytes=2 << 20)) as big:
        p = stdio_problem([("x\n", "y\n")] * 40)
        # correct output padded with 2 MiB of newlines per test: 32 MiB per reply at most
        r = big.run(p, "import sys\nsys.stdout.write('y' + '\\n' * ((2 << 20) - 1))\n")
        assert r.status == "error" and r.error_type == "OutputLimitExceeded" and len(r.stdout) <= 64 << 10
        statuses = [o["status"] for o in r.test_outcomes]
        assert 10 <= statuses.count("pass") < 20 and statuses[-1] == "not_run"
        q = assert_problem(["assert f() == []"])
        # a result of 8 MiB crosses (results over MAX_VALUE_BYTES are an error naming it:
        # tests/test_sandbox_plain_python.py), and the test compares it
        r = big.run(q, "def f():\n    return list(range(1 << 20))\n")
        assert r.status == "fail" and r.error_message.startswith("expected [], got [0, 1, 2"), r.error_message


def test_judge_failures_are_the_candidates_error(ex):
    c = call_problem([([1], 0.5)], entry="half")
    items = [(c, "def half(x):\n    return 1 << 1100\n"), (c, "def half(x):\n    return x / 2\n")]
    assert [r.status for r in ex.run_batch(items)] == ["fail", "pass"]
    p = assert_problem(["assert f() == 1"])
    bad_syntax = ex.run(p, "x = '\ud800'\ndef f():\n    return 1\n")
    json.dumps(bad_syntax.to_dict(), ensure_ascii=False).encode("utf-8")


def test_cli_writes_annotations_for_hostile_candidates(tmp_path):
    probs = [assert_problem(["assert f() == 1"], pid="cli/a"),
             Problem(id="cli/c", prompt="half", test_type="call", entry_point="half",
                     tests=[{"args": [1], "expected": 0.5}])]
    write_problems(probs, tmp_path / "p.jsonl")
    cands = [{"problem_id": "cli/a", "sample_index": 0, "code": "def f():\n    raise ValueError('\\ud800')\n"},
             {"problem_id": "cli/a", "sample_index": 2, "code": "def f():\n    return '\ud800'\n"},
             {"problem_id": "cli/c", "sample_index": 0, "code": "def half(x):\n    return 1 << 1100\n"},
             {"problem_id": "cli/a", "sample_index": 1, "code": "def f():\n    return 1\n"}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    proc = subprocess.run([sys.executable, "-m", "execrl.sandbox", "--problems", str(tmp_path / "p.jsonl"),
                           "--candidates", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "a.jsonl"),
                           "--workers", "1", "--timeout", "2", "--no-progress"],
                          capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src")},
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["error", "syntax_error", "fail", "pass"]
    assert rows[1]["code"] == "def f():\n    return '\\ud800'\n"  # escaped, so the file could be written


# --------------------------------------------------------------------------------------
# The seccomp filter
# --------------------------------------------------------------------------------------

def test_seccomp_refuses_what_a_solution_never_needs(ex):
    from execrl.sandbox.seccomp import build_filter
    assert build_filter("x86_64") and build_filter("aarch64") and build_filter("mips") is None
    assert ex.isolation["seccomp"] is True
    p = assert_problem(["assert refused() == [1, 1, 1, 1, 1, 1, 1, 38]"])
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "def errno_of(ret):\n    return ctypes.get_errno() if ret == -1 else 0\n"
            "def refused():\n"
            "    out = [errno_of(libc.ptrace(16, os.getppid() or 1, 0, 0)),\n"
            "           errno_of(libc.shmget(0, 4096, 0o1600)), errno_of(libc.msgget(0, 0o1600)),\n"
            "           errno_of(libc.syscall(248, b'user', b'k', b'v', 1, -4)),\n"
            "           errno_of(libc.unshare(0x08000000)), errno_of(libc.syscall(319, b'm', 0)),\n"
            "           errno_of(libc.syscall(56, 0x8000 | 17, 0, 0, 0, 0)),\n"
            "           errno_of(libc.syscall(435, 0, 0))]\n"
            "    return out\n")
    r = ex.run(p, code)
    assert r.status == "pass", r


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_the_sandbox_refuses_to_start_off_linux(monkeypatch, platform):
    """Off Linux there are no namespaces, seccomp or prctl to confine a program with: the executor
    says so and starts no worker, instead of failing somewhere inside one (or running unconfined)."""
    from execrl.sandbox import WorkerStartError
    from execrl.sandbox import executor as executor_module

    spawned = []
    monkeypatch.setattr(executor_module.Executor, "_spawn", lambda self: spawned.append(self))
    monkeypatch.setattr(sys, "platform", platform)
    with pytest.raises(WorkerStartError, match=f"only on Linux .* this is '{platform}'"):
        Executor(workers=1)
    assert spawned == []
