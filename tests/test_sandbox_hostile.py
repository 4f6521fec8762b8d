"""The hostile corpus (tests/hostile/): every program is contained and none passes."""

from __future__ import annotations

import os
import signal
import socket
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
    text = (HOSTILE_DIR / f"{name}.py").read_text()
    expect = next(line for line in text.splitlines() if line.startswith("# expect:"))
    code = (text.replace("__PORT__", str(sandbox["listener"].port))
            .replace("__SENTINEL__", str(sandbox["sentinel"]))
            .replace("__SECRET__", SECRET))
    return code, set(expect.split(":", 1)[1].split())


def _sandbox_uids(ex: Executor) -> set[int]:
    return {h.sandbox_uid for h in ex._handles if h.sandbox_uid is not None}


def _leftovers(ex: Executor) -> list[str]:
    """Processes a candidate may have left: anything running as a sandbox uid, or any
    descendant of this test process other than the workers."""
    uids = _sandbox_uids(ex)
    workers = {h.proc.pid for h in ex._handles} | {h.forker_pid for h in ex._handles}
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
    code, expected_statuses = _render(name, sandbox)
    before = _host_state(sandbox["sentinel"])
    workers_before = {(h.proc.pid, h.forker_pid) for h in ex._handles}
    start = time.monotonic()
    result = ex.run(ADD, code)
    elapsed = time.monotonic() - start

    assert result.status != "pass", result
    assert result.tests_passed < result.tests_total
    assert result.status in expected_statuses, (result.status, result.error_type, result.error_message)
    assert elapsed < 10, "the limits must stop it quickly"
    assert _leftovers(ex) == []
    assert _host_state(sandbox["sentinel"]) == before
    assert sandbox["listener"].connections == 0
    # the worker survived (a candidate cannot signal it) and judges the next program correctly
    assert {(h.proc.pid, h.forker_pid) for h in ex._handles} == workers_before
    assert ex.respawns == 0
    good = ex.run(ADD, GOOD)
    assert good.status == "pass", good
    assert good.tests_passed == 3


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
