"""The hostile corpus (tests/hostile/): every program is contained and none passes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import psutil
import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

HOSTILE_DIR = Path(__file__).parent / "hostile"
CASES = sorted(p.stem for p in HOSTILE_DIR.glob("*.py"))
SECRET = "execrl-fake-secret-7f3a9c"
ADD = Problem(id="hostile/add", prompt="Add two numbers.", test_type="assert",
              tests=["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(-1, 1) == 0"])
GOOD = "def add(a, b):\n    return a + b\n"

# The problems a hostile program can name on its `# problem:` line (default: add), each with
# a correct solution that must pass on the same worker right after the hostile program.
PROBLEMS = {
    "add": (ADD, GOOD),
    "area": (Problem(id="hostile/area", prompt="Area of a circle.", test_type="assert", setup_code="import math",
                     tests=["assert math.isclose(area(2), 12.566370614359172, rel_tol=1e-3)",
                            "assert math.isclose(area(1), 3.141592653589793, rel_tol=1e-3)"]),
             "import math\ndef area(r):\n    return math.pi * r * r\n"),
    "setup_helper": (Problem(id="hostile/setup", prompt="Three items.", test_type="assert",
                             setup_code="def check(xs):\n    return len(xs) == 3 and sorted(xs) == [1, 2, 3]\n",
                             tests=["assert check(items())", "assert len(items()) == 3"]),
                     "def items():\n    return [3, 1, 2]\n"),
    "setup_calls_program": (Problem(id="hostile/verify", prompt="Plus one.", test_type="assert",
                                    setup_code="def verify(x):\n    return inc(x) == x + 1\n",
                                    tests=["assert verify(1)", "assert all(verify(i) for i in range(5))"]),
                            "def inc(x):\n    return x + 1\n"),
    "replayed": (Problem(id="hostile/replayed", prompt="Double it.", test_type="assert",
                         tests=["x = f(3)\nassert x == 6", "assert all(f(i) == 2 * i for i in range(4))"]),
                 "def f(x):\n    return 2 * x\n"),
    "half": (Problem(id="hostile/half", prompt="Half.", test_type="call", entry_point="half",
                     tests=[{"args": [1], "expected": 0.5}, {"args": [3], "expected": 1.5}]),
             "def half(x):\n    return x / 2\n"),
    "judge_bomb": (Problem(id="hostile/bomb", prompt="Identity.", test_type="assert", setup_code="import math",
                           tests=["assert sum(range(f(3))) == 3", "assert 2 ** f(4) == 16",
                                  "assert len([0] * f(5)) == 5", "assert math.factorial(f(6)) == 720"]),
                   "def f(x):\n    return x\n"),
    "setup_module": (Problem(id="hostile/np", prompt="A pair.", test_type="assert", setup_code="import numpy as np",
                             tests=["assert np.allclose(pair(), [1.0, 2.0])"]),
                     "def pair():\n    return [1.0, 2.0]\n"),
    "judge_division_bomb": (Problem(id="hostile/bomb2", prompt="Small numbers.", test_type="assert",
                                    tests=["assert f(1) // f(2) == 2", "assert pow(3, f(1), f(2)) == 1",
                                           "assert divmod(f(1), f(2)) == (2, 0)", "assert round(f(1), -f(3)) == 0"]),
                            "def f(x):\n    return {1: 4, 2: 2, 3: 1000}[x]\n"),
    "echo": (Problem(id="hostile/echo", prompt="Echo.", test_type="stdio",
                     tests=[{"input": f"{k}\n", "output": f"{k}\n"} for k in range(6)]),
             "print(input())\n"),
}

OBSERVER = """import os, sys
def _leftovers():
    # the run's own directory, and the interpreter's (a virtualenv under /tmp is bound into the scratch /tmp)
    own = [os.getcwd(), sys.prefix, sys.base_prefix]
    found = [os.path.join(d, x) for d in ('/tmp', '/dev/shm', os.getcwd()) for x in os.listdir(d)
             if not any(p == os.path.join(d, x) or p.startswith(os.path.join(d, x) + os.sep) for p in own)]
    if os.getuid() != 0:  # hidepid=2: only the sandbox uid's processes are visible
        found += [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]
    for kind in ('shm', 'msg', 'sem'):
        with open('/proc/sysvipc/' + kind) as fh:
            found += fh.read().splitlines()[1:]
    try:
        with open('/proc/keys') as fh:
            found += [line for line in fh if 'execrl' in line]
    except OSError:
        pass
    for d in ('/tmp', '/dev/shm'):  # room to work
        with open(os.path.join(d, 'probe'), 'wb') as fh:
            fh.write(b'x' * 300000)
        os.unlink(os.path.join(d, 'probe'))
    return found
_LEFT = _leftovers()
if _LEFT:
    raise RuntimeError(f'left behind by the previous program: {_LEFT[:5]}')
"""
"""Prepended to the correct solution run after each hostile program: it passes only if no
file, process, IPC object or key of the previous run is visible and the scratch space is
usable."""
LIMITS = ExecutionLimits(timeout_s=0.5, wall_timeout_s=2.0, memory_mb=256, max_processes=16,
                         max_open_files=64, file_size_mb=4, max_output_bytes=1 << 16)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


class _Listener:
    """A TCP server on 127.0.0.1 that records whether anything ever connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    os.environ["EXECRL_FAKE_SECRET"] = SECRET
    sentinel_dir = tmp_path_factory.mktemp("sentinel")
    sentinel = sentinel_dir / "expected_outputs.jsonl"
    sentinel.write_text('{"expected": 3}\n')
    listener = _Listener()
    ex = Executor(workers=1, limits=LIMITS)
    try:
        yield {"ex": ex, "sentinel": sentinel, "listener": listener}
    finally:
        ex.close()
        listener.close()
        del os.environ["EXECRL_FAKE_SECRET"]


def _render(name: str, sandbox: dict) -> tuple[str, set[str]]:
    code, expected, _problem = _render_case(name, sandbox)
    return code, expected


def _render_case(name: str, sandbox: dict) -> tuple[str, set[str], str]:
    text = (HOSTILE_DIR / f"{name}.py").read_text()
    expect = next(line for line in text.splitlines() if line.startswith("# expect:"))
    problem = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# problem:")),
                   "add")
    code = (text.replace("__PORT__", str(sandbox["listener"].port))
            .replace("__SENTINEL__", str(sandbox["sentinel"]))
            .replace("__SECRET__", SECRET))
    return code, set(expect.split(":", 1)[1].split()), problem


def _host_ipc() -> dict:
    out = {}
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as fh:
            out[kind] = fh.read()
    return out


def _sandbox_uids(ex: Executor) -> set[int]:
    return {h.sandbox_uid for h in ex._handles if h.sandbox_uid is not None}


def _leftovers(ex: Executor) -> list[str]:
    """Processes a candidate may have left: anything running as a sandbox uid, or any
    descendant of this test process other than the workers (and their forkers and judges)."""
    uids = _sandbox_uids(ex)
    workers = {pid for h in ex._handles for pid in (h.proc.pid, h.forker_pid, h.judge_pid)}
    found = []
    for proc in psutil.process_iter(["pid", "uids", "name", "status"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real in uids:
                found.append(f"{proc.info['pid']} {proc.info['name']} uid={proc.info['uids'].real}")
        except psutil.Error:
            pass
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in workers and child.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{child.pid} {child.name()} (descendant)")
        except psutil.Error:
            pass
    return found


def _host_state(sentinel: Path) -> dict:
    site = Path(sysconfig.get_paths()["purelib"])
    watched = [site, Path(sys.base_prefix) / "lib", sentinel.parent, Path.cwd()]
    state = {"sentinel": (sentinel.exists(), sentinel.read_text() if sentinel.exists() else None)}
    for d in watched:
        state[str(d)] = sorted(os.listdir(d)) if d.is_dir() else None
    return state


@pytest.mark.parametrize("name", CASES)
def test_hostile_program_is_contained(sandbox, name):
    ex: Executor = sandbox["ex"]
    code, expected_statuses, problem_name = _render_case(name, sandbox)
    problem, good_code = PROBLEMS[problem_name]
    before = _host_state(sandbox["sentinel"])
    ipc_before = _host_ipc()
    workers_before = {(h.proc.pid, h.forker_pid) for h in ex._handles}
    result = ex.run(problem, code)

    assert result.status != "pass", result
    assert result.tests_passed < result.tests_total
    if problem is not ADD:  # these programs are built to pass nothing: no test may be forged
        assert result.tests_passed == 0, result
    assert result.status in expected_statuses, (result.status, result.error_type, result.error_message)
    # The candidate's own limits stopped it: its verdict above, and below the same worker, never
    # replaced (the executor replaces one that has not answered by the candidate's wall-clock
    # budget plus REPLY_GRACE_S). How soon: bench/sandbox_stop_time.py.
    if name == "stdio_sleep_per_test":
        # the per-candidate backstop ended it before its last tests (each sleeps 1.8 s of its 2 s)
        assert result.test_outcomes[-1]["status"] == "not_run", result.test_outcomes
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # writable as an annotation
    assert len(result.stdout) <= 1 << 16 and len(result.stderr) <= 1 << 16
    assert _leftovers(ex) == []
    assert _host_state(sandbox["sentinel"]) == before
    assert _host_ipc() == ipc_before
    assert sandbox["listener"].connections == 0
    # the worker survived (a candidate cannot signal it) and judges the next program correctly,
    # seeing nothing of the previous run
    assert {(h.proc.pid, h.forker_pid) for h in ex._handles} == workers_before
    assert ex.respawns == 0
    good = ex.run(problem, OBSERVER + good_code)
    assert good.status == "pass", good
    assert good.tests_passed == good.tests_total == len(problem.tests)


def test_timeouts_are_reported_as_timeouts(sandbox):
    ex: Executor = sandbox["ex"]
    for name in ("loop_in_function", "loop_at_import", "sleep_forever"):
        code, _ = _render(name, sandbox)
        r = ex.run(ADD, code)
        assert r.status == "timeout" and r.error_type == "Timeout", (name, r)
        assert r.test_outcomes[0]["status"] == "timeout"
        assert all(o["status"] == "not_run" for o in r.test_outcomes[1:])
    r = ex.run(ADD, (HOSTILE_DIR / "loop_in_function.py").read_text())
    assert r.cpu_time_s >= 0.4, "the CPU budget, not the wall clock, stopped it"


def test_cpu_time_is_summed_over_the_runs_processes(sandbox):
    """Eight forked spinners: killed once they used the budget together, and cpu_time_s
    reports all of it (it used to report the first process's 0.006 s)."""
    ex: Executor = sandbox["ex"]
    code, _ = _render("forked_spinners", sandbox)
    r = ex.run(ADD, code)
    assert (r.status, r.error_type) == ("timeout", "Timeout"), r
    assert LIMITS.timeout_s * 0.9 <= r.cpu_time_s <= LIMITS.timeout_s * 3, r.cpu_time_s


def test_files_left_behind_are_not_visible_to_the_next_program(sandbox):
    ex: Executor = sandbox["ex"]
    writer, _ = _render("leave_files_behind", sandbox)
    reader = ("import os\n"
              "LEAKED = any(os.path.exists(os.path.join(d, 'execrl-leak'))\n"
              "             for d in ('/tmp', '/dev/shm', os.getcwd(), os.path.expanduser('~')))\n"
              "def add(a, b):\n    return None if LEAKED else a + b\n")
    assert ex.run(ADD, writer).status == "fail"
    assert ex.run(ADD, reader).status == "pass"


def test_worker_environment_is_scrubbed(sandbox):
    ex: Executor = sandbox["ex"]
    for h in ex._handles:
        environ = Path(f"/proc/{h.proc.pid}/environ").read_bytes()
        assert SECRET.encode() not in environ
        assert b"EXECRL_FAKE_SECRET" not in environ


def test_a_killed_worker_is_replaced():
    with Executor(workers=1, limits=LIMITS) as ex:
        assert ex.run(ADD, GOOD).status == "pass"
        old = ex._handles[0].proc.pid
        os.kill(old, signal.SIGKILL)
        time.sleep(0.05)
        r = ex.run(ADD, GOOD)
        assert r.status == "pass"
        assert ex.respawns == 1
        assert ex._handles[0].proc.pid != old
        # a candidate running when its worker dies is retried on a fresh worker
        killer = threading.Timer(0.3, lambda: os.kill(ex._handles[0].proc.pid, signal.SIGKILL))
        killer.start()
        slow = "import time\nt = time.time()\nwhile time.time() - t < 0.45: pass\ndef add(a, b):\n    return a + b\n"
        assert ex.run(ADD, slow).status == "pass"
        killer.join()
        assert ex.respawns == 2


def test_a_killed_forker_is_replaced():
    with Executor(workers=1, limits=LIMITS) as ex:
        assert ex.run(ADD, GOOD).status == "pass"
        forker = ex._handles[0].forker_pid
        assert forker is not None
        os.kill(forker, signal.SIGKILL)
        time.sleep(0.05)
        assert ex.run(ADD, GOOD).status == "pass"
        assert ex.respawns == 1
        assert ex._handles[0].forker_pid != forker


def test_sandbox_isolation_report(sandbox):
    report = sandbox["ex"].isolation
    if os.geteuid() != 0:
        pytest.skip("full isolation needs root")
    assert report["mode"] == "root"
    assert report["network_isolated"] and report["private_root"]
    assert report["uid"] != 0
    assert report["seccomp"] and report["ipc_isolated"] and report["pid_namespace"]


def test_retries_are_counted_per_job():
    """Only the job a worker was running when it died is charged a retry: the jobs queued
    behind it are resubmitted as they were."""
    slow = "import time\nt = time.time()\nwhile time.time() - t < 5: pass\ndef add(a, b):\n    return a + b\n"
    with Executor(workers=1, limits=ExecutionLimits(timeout_s=10, memory_mb=256)) as ex:
        kills = []

        def killer() -> None:
            deadline = time.monotonic() + 60
            while len(kills) < 2 and time.monotonic() < deadline:
                h = ex._handles[0] if ex._handles else None
                try:
                    forker = psutil.Process(h.forker_pid) if h is not None and h.forker_pid else None
                    running = forker is not None and forker.children()
                except psutil.Error:
                    running = False
                if running and h.proc.pid not in kills:
                    time.sleep(0.2)  # the slow job is running
                    kills.append(h.proc.pid)
                    os.kill(h.proc.pid, signal.SIGKILL)
                time.sleep(0.01)

        thread = threading.Thread(target=killer)
        thread.start()
        results = ex.run_batch([(ADD, slow), (ADD, GOOD), (ADD, GOOD)])
        thread.join()
        assert len(kills) == 2
        assert [r.status for r in results] == ["error", "pass", "pass"]
        assert results[0].error_type == "WorkerCrashed"
        assert ex.respawns == 2


def test_no_run_process_outlives_a_killed_executor(tmp_path):
    """The executor killed outright (nobody left to sweep): the runs' PID namespace dies
    with its first process, the forker, and takes every process of every run with it."""
    marker = "1000.4242"
    script = ("import time\nfrom execrl.problems import Problem\nfrom execrl.sandbox import Executor, ExecutionLimits\n"
              "p = Problem(id='k', prompt='x', test_type='assert', tests=['assert f() == 1'])\n"
              "code = ('import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n'\n"
              f"        '    os.execv(\"/bin/sleep\", [\"sleep\", \"{marker}\"])\\n'\n"
              "        'time.sleep(100)\\ndef f():\\n    return 1\\n')\n"
              "with Executor(workers=1, limits=ExecutionLimits(timeout_s=30)) as ex:\n"
              "    print('ready', flush=True)\n"
              "    ex.run(p, code)\n")
    repo_src = Path(__file__).resolve().parents[1] / "src"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo_src)})

    def sleepers() -> list[int]:
        found = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if p.info["cmdline"] and marker in p.info["cmdline"]:
                    found.append(p.info["pid"])
            except psutil.Error:
                pass
        return found

    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not sleepers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleepers(), "the run never started its process"
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60  # a guard against a hang, not a speed claim: they die with the namespace
    while sleepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleepers() == []


def test_a_stuck_worker_is_replaced_within_its_deadline(monkeypatch):
    """A worker that stops answering (here: stopped) is replaced once the candidate's
    wall-clock budget plus the reply grace has passed; its candidate is retried."""
    import execrl.sandbox.executor as executor_module
    monkeypatch.setattr(executor_module, "REPLY_GRACE_S", 2.0)  # 20 s by default
    REPLY_GRACE_S = executor_module.REPLY_GRACE_S
    limits = ExecutionLimits(timeout_s=0.5, wall_timeout_s=1.0)
    waits = []  # (the clock when the executor started waiting, its deadline, how the wait ended)
    collect = executor_module._WorkerHandle.collect

    def recorded(handle, deadline):
        waits.append([time.monotonic(), deadline, "answered"])
        try:
            return collect(handle, deadline)
        except TimeoutError:
            waits[-1][2] = "timed out"
            raise

    monkeypatch.setattr(executor_module._WorkerHandle, "collect", recorded)
    with Executor(workers=1, limits=limits) as ex:
        assert ex.run(ADD, GOOD).status == "pass"
        stopped = ex._handles[0].proc.pid
        os.kill(stopped, signal.SIGSTOP)
        del waits[:]
        sent = time.monotonic()
        r = ex.run(ADD, GOOD)
        assert r.status == "pass" and ex.respawns == 1
        # The stopped worker's deadline was the wall-clock budget plus the grace, counted from
        # when the candidate was sent (between `sent` and the wait's start: whatever the load,
        # no elapsed time is compared with anything); the wait ended in a TimeoutError, which
        # the handle raises only once that deadline has passed (not its channel closing); the
        # candidate was then retried on the new worker, which answered.
        budget = 1.0 + REPLY_GRACE_S
        (began, deadline, ended), retried = waits[0], waits[1:]
        assert sent + budget <= deadline <= began + budget, (sent, began, deadline)
        assert ended == "timed out" and [w[2] for w in retried] == ["answered"], waits
        assert not psutil.pid_exists(stopped) or psutil.Process(stopped).status() == psutil.STATUS_ZOMBIE


# A forged end-of-run record, then a way out that makes the harness's own record fail: the run
# ends as `python solution.py` does (status 1), so it did not run (`ran`) and passes no test.
# The corpus program forges the record and closes every descriptor; the ways out below replace its
# final `raise`.
FORGE_THEN_FAIL = (HOSTILE_DIR / "forge_end_record_then_fail.py").read_text().rsplit('raise ValueError("not finished")', 1)[0]
FAILURES_AFTER_THE_FORGERY = {
    "raises": "raise ValueError('x')",
    "exits_3": "sys.exit(3)",
    "fails_an_import": "import no_such_module_anywhere",
    "exits_with_a_text": "sys.exit('bye')",
    "exits_with_a_float": "raise SystemExit(0.0)",
    "raises_in_a_function": "def f():\n    return 1 / 0\nf()",
}


@pytest.mark.parametrize("name", FAILURES_AFTER_THE_FORGERY)
def test_a_forged_end_record_then_a_failure_is_not_a_run(sandbox, name):
    from execrl.sandbox.programs import run_programs

    ex: Executor = sandbox["ex"]
    echo = PROBLEMS["echo"][0]
    code = FORGE_THEN_FAIL + FAILURES_AFTER_THE_FORGERY[name] + "\n"
    r = ex.run(echo, code)
    assert r.status == "error" and r.tests_passed == 0, (name, r.status, r.error_type)
    run = run_programs(ex, [code], stdin="5\n")[0]
    assert run.status == "error" and not run.ran, (name, run)
    assert _leftovers(ex) == []
    assert ex.run(echo, OBSERVER + PROBLEMS["echo"][1]).status == "pass"


EXIT_CODES = ["None", "0", "False", "True", "1", "256", "-256", "2 ** 64", "2 ** 63", "-2 ** 63", "0.0", "0j",
              "__import__('decimal').Decimal(0)", "__import__('numpy').int64(0)", "'0'", "(0,)", "[]",
              "type('I', (int,), {})(512)"]


@pytest.mark.parametrize("code", EXIT_CODES)
def test_system_exit_status_is_pythons(sandbox, code):
    """``raise SystemExit(code)`` at the end of a program: it ran exactly when ``python``
    exits with status 0 (None and ints modulo 256; anything else, even ``0.0``, is status 1)."""
    from execrl.sandbox.programs import run_programs

    program = f"print('out')\nraise SystemExit({code})\n"
    status = subprocess.run([sys.executable, "-c", program], capture_output=True).returncode
    run = run_programs(sandbox["ex"], [program])[0]
    assert run.ran is (status == 0), (code, status, run)
    assert run.status == ("ran" if status == 0 else "error")
