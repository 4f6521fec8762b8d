"""The sandbox's run-and-capture mode: programs run without tests, their output kept, and no
program can claim to have run when it did not (that claim is worth reward in `exec` and
`code_game`)."""

from __future__ import annotations

import sys
import time

import pytest

from execrl.sandbox import Executor
from execrl.sandbox.programs import PROGRAM_STATUSES, run_programs
from test_sandbox_hostile import CASES, LIMITS, OBSERVER, _host_ipc, _host_state, _leftovers, _render_case, sandbox  # noqa: F401

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.fixture
def executor(sandbox):  # noqa: F811 - the hostile suite's executor: its checks see no other workers
    return sandbox["ex"]


def run_one(executor, code: str, stdin: str = ""):
    return run_programs(executor, [code], stdin)[0]


@pytest.mark.parametrize(
    "code, status, printed",
    [
        ("print('hello')", "ran", True),
        ("x = 1 + 1", "ran", False),
        ("print('   ')\nprint()", "ran", False),
        ("def f():\n    return 1\n", "ran", False),
        ("import sys\nprint('bye')\nsys.exit(0)", "ran", True),
        ("import sys\nsys.stderr.write('only stderr')", "ran", False),
        ("def f(:\n    pass", "syntax_error", False),
        ("if True:\nprint(1)", "syntax_error", False),
        ("print(1)\n1 / 0", "error", False),
        ("input()", "error", False),
        ("import sys\nprint('a')\nsys.exit(3)", "error", False),
        ("while True:\n    pass", "timeout", False),
        ("import time\ntime.sleep(60)", "timeout", False),
    ],
)
def test_statuses(executor, code, status, printed):
    run = run_one(executor, code)
    assert run.status == status, run
    assert run.printed is printed
    assert (run.error_type is None) is (status == "ran")


def test_output_is_captured_with_stdin(executor):
    run = run_one(executor, "name = input()\nprint(f'hi {name}')\nprint(sum(range(10)))", stdin="ada\n")
    assert run.status == "ran" and run.stdout == "hi ada\n45\n" and not run.stdout_truncated


def test_results_keep_input_order_over_workers(executor):
    runs = run_programs(executor, [f"print({i} * {i})" for i in range(12)])
    assert [r.stdout for r in runs] == [f"{i * i}\n" for i in range(12)]


def test_large_output_is_capped_and_flagged(executor):
    run = run_one(executor, "print('x' * 1_000_000)")  # past file_size_mb it is an error
    assert run.status == "ran" and run.stdout_truncated
    assert 0 < len(run.stdout) <= LIMITS.max_output_bytes


def test_undecodable_output_is_replaced_not_fatal(executor):
    run = run_one(executor, "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')")
    assert run.status == "ran" and run.stdout.startswith("ok ") and "\ufffd" in run.stdout


# Programs built to be counted as having run (worth `printed` or a game win) when they did not.
FORGERIES = {
    "os._exit(0) after printing": "import os\nprint('done', flush=True)\nos._exit(0)",
    "killed by its own SIGKILL after printing": "import os, signal\nprint('done', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)",
    "excepthook turning an error into exit 0": (
        "import sys, os\nsys.excepthook = lambda *a: os._exit(0)\nprint('done', flush=True)\nraise ValueError('x')"
    ),
    "end-of-run record written with a token dug from the harness's frames": (
        "import os, sys\n"
        "token = None\nframe = sys._getframe()\n"
        "while frame is not None:\n"
        "    token = frame.f_locals.get('token', token)\n    frame = frame.f_back\n"
        "print('done', flush=True)\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.write(fd, f'[\"d\", 0, \"{token}\"]\\n'.encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)"
    ),
    **{
        f"end-of-run record written on every open descriptor, then {how}": (
            "import os, sys, gc\n"
            "token = None\nframe = sys._getframe()\n"
            "while frame is not None:\n"
            "    token = frame.f_locals.get('token', token)\n    frame = frame.f_back\n"
            "print('done', flush=True)\n"
            "for name in os.listdir('/proc/self/fd'):\n"
            "    if int(name) > 2:\n"
            "        try:\n"
            "            os.write(int(name), f'[\"d\", 0, \"{token}\"]\\n'.encode())\n"
            "        except OSError:\n"
            "            pass\n" + end
        )
        for how, end in {
            "loops forever": "while True:\n    pass\n",
            "kills itself": "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "exits with status 3": "os._exit(3)\n",
            "stops itself": "import signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
        }.items()
    },
    "atexit handler that never returns": "import atexit, time\nprint('done')\natexit.register(lambda: time.sleep(60))",
    "output flood that never ends": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
    "a fork bomb after printing": "import os\nprint('done', flush=True)\nwhile True:\n    os.fork()",
}


@pytest.mark.parametrize("name", FORGERIES)
def test_a_program_that_did_not_reach_its_end_did_not_run(executor, name):
    run = run_one(executor, FORGERIES[name])
    assert run.status in ("error", "timeout"), (name, run)
    assert not run.printed
    assert run_one(executor, "print('next')").stdout == "next\n"


# A program that forges the harness's end-of-run record: it digs the token out of the
# harness's frames, finds the result descriptor among its open descriptors (/proc/self/fd),
# and writes a well-formed record on every one of them; ``{end}`` then ends the run.
FORGE_END_OF_RUN = """import os, sys, signal, threading
def forge():
    token = None
    frame = sys._getframe()
    while frame is not None:
        token = frame.f_locals.get('token', token)
        frame = frame.f_back
    if token is None:  # in a thread: the main thread's frames hold it
        for frame in sys._current_frames().values():
            while frame is not None:
                token = frame.f_locals.get('token', token)
                frame = frame.f_back
    record = ('["d", 0, "%s"]\\n' % token).encode()
    for name in os.listdir('/proc/self/fd'):
        if int(name) > 2:
            try:
                os.write(int(name), record)
            except OSError:
                pass
print('done', flush=True)
{end}"""

FORGED_ENDS = {
    "then raises SystemExit(0)": "forge()\nraise SystemExit(0)\n",
    "from a thread, then the main thread raises": (
        "t = threading.Thread(target=forge)\nt.start()\nt.join()\nraise ValueError('unfinished')\n"),
    "from a thread, which then kills the process": (
        "def end():\n    forge()\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "threading.Thread(target=end).start()\nwhile True:\n    pass\n"),
    "then an error that excepthook turns into exit 0": (
        "sys.excepthook = lambda *a: os._exit(0)\nforge()\nraise ValueError('unfinished')\n"),
    "from a forked child, then the parent raises": (
        "pid = os.fork()\nif pid == 0:\n    forge()\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\nraise ValueError('unfinished')\n"),
    "then aborts": "forge()\nos.abort()\n",
}


@pytest.mark.parametrize("name", FORGED_ENDS)
def test_a_forged_end_of_run_record_does_not_make_a_run(sandbox, name):  # noqa: F811 - the hostile suite's fixture
    """The forged record counts for nothing: the run is an error (or timeout), not `ran`,
    nothing is left behind, and the next program runs normally."""
    ex: Executor = sandbox["ex"]
    code = FORGE_END_OF_RUN.replace("{end}", FORGED_ENDS[name])
    before, ipc_before = _host_state(sandbox["sentinel"]), _host_ipc()
    run = run_programs(ex, [code])[0]
    assert run.status in ("error", "timeout"), (name, run)
    assert not run.ran and not run.printed
    assert _leftovers(ex) == []
    assert _host_state(sandbox["sentinel"]) == before and _host_ipc() == ipc_before
    assert run_programs(ex, [OBSERVER + "print('clean')"])[0].stdout == "clean\n"


def test_a_background_process_cannot_write_into_a_later_run(executor):
    spawner = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(0.3)\n"
        "    print('leaked', flush=True)\n"
        "    os._exit(0)\n"
        "print('parent')\n"
    )
    first = run_one(executor, spawner)
    time.sleep(0.5)
    later = run_programs(executor, ["import time\ntime.sleep(0.5)\nprint('clean')"] * 2)
    assert first.status in PROGRAM_STATUSES
    assert [r.stdout for r in later] == ["clean\n", "clean\n"]


@pytest.mark.parametrize("name", CASES)
def test_hostile_corpus_in_run_mode_is_contained(sandbox, name):  # noqa: F811 - the hostile suite's fixture
    """Every hostile program, run as a program: a known status, bounded output, nothing left on
    the host or for the next program, and the worker unharmed."""
    ex: Executor = sandbox["ex"]
    code, _statuses, _problem = _render_case(name, sandbox)
    before, ipc_before = _host_state(sandbox["sentinel"]), _host_ipc()
    workers_before = {(h.proc.pid, h.forker_pid) for h in ex._handles}
    run = run_programs(ex, [code])[0]
    # its own limits ended it: a known status, and (below) the same worker, never replaced as a
    # stuck one is after the wall-clock budget plus the reply grace. How soon:
    # bench/sandbox_stop_time.py.
    assert run.status in PROGRAM_STATUSES
    assert len(run.stdout) <= 1 << 16
    assert _leftovers(ex) == []
    assert _host_state(sandbox["sentinel"]) == before
    assert _host_ipc() == ipc_before
    assert sandbox["listener"].connections == 0
    assert {(h.proc.pid, h.forker_pid) for h in ex._handles} == workers_before
    assert run_programs(ex, [OBSERVER + "print('clean')"])[0].stdout == "clean\n"
