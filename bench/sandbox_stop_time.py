"""How soon the sandbox's limits end programs that would not end by themselves, as a share of
the wall-clock budget the limits give them.

`make test` asserts no wall-clock time: the tests check that such programs get
their verdict from their own limits (a timeout, the tests not run after it), that their worker
was never replaced (the executor replaces one that has not answered by the candidate's
wall-clock budget plus ``REPLY_GRACE_S``) and no candidate was run twice. How soon is measured
here instead, where the tests once asserted a bound:

  hostile   the corpus of tests/hostile/, each against its ``# problem:``, with the hostile
            suite's limits (test_sandbox_hostile.py once allowed 10 s each);
  programs  the same corpus run as programs (``run_programs``; 10 s each);
  judge     the cases of test_sandbox_judge.py (``CASES``; 3 x the per-run limit + 2 s = 11 s);
  fifo      a test opening a FIFO the program made, for writing and for reading
            (test_sandbox_files.py; 1.5 + 5 + 3 s);
  thread    a pass whose threads sleep 60 s, past the run's backstop (test_sandbox_modes.py; 2 s).

Each case runs, then a correct program on the same worker: the baseline, measured in the same
run, of what a candidate there costs when nothing needs stopping. The figure is the case's wall
time less that baseline, as a share of the case's wall-clock budget, the executor's deadline
less its grace (the per-run limit of an ``assert`` or ``call`` candidate, ``candidate_wall`` of a
``stdio`` one). A program its run's limits end shows the limit it hit: a sleeping one about 1
(the per-run wall-clock limit), a looping one its CPU budget's share of it; a test blocked in
the judge (``fifo``) is ended by the worker's wait for the judge, the per-run limit plus the
forker's reaping grace (``REAP_GRACE_S``, 5 s): about 1 + 5 / 1.5 = 4.3 there. The bound a test
once asserted is printed as the same share, for comparison; ``respawns`` above 0 means the
executor gave up on a worker (after the budget plus ``REPLY_GRACE_S``, 20 s).

    PYTHONPATH=src .venv/bin/python bench/sandbox_stop_time.py [--groups hostile,judge] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the cases and limits of the tests named above

from execrl.problems import Problem  # noqa: E402
from execrl.sandbox import ExecutionLimits, Executor  # noqa: E402
from execrl.sandbox.limits import candidate_wall  # noqa: E402
from execrl.sandbox.programs import program_problem, program_run  # noqa: E402

GROUPS = ("hostile", "programs", "judge", "fifo", "thread")


def budget(limits: ExecutionLimits, problem: Problem) -> float:
    """The wall-clock time the executor waits for a candidate before its reply grace."""
    lim = limits.worker_limits()
    return candidate_wall(lim, len(problem.tests)) if problem.test_type == "stdio" else float(lim["wall"])


def timed(ex: Executor, problem: Problem, code: str, as_program: bool) -> tuple[float, str]:
    """Wall seconds of one candidate, and its status (a program's, for ``programs``)."""
    start = time.perf_counter()
    result = ex.run(problem, code)
    secs = time.perf_counter() - start
    return secs, program_run(result).status if as_program else result.status


def cases(group: str, hostile_env: dict):
    """(executor limits, [(name, problem, code, correct code, bound once asserted)]) of a group."""
    if group in ("hostile", "programs"):
        import test_sandbox_hostile as hostile

        rows = []
        for name in hostile.CASES:
            code, _statuses, problem_name = hostile._render_case(name, hostile_env)
            problem, good = hostile.PROBLEMS[problem_name]
            if group == "programs":
                problem, good = program_problem(), "print('clean')\n"
            rows.append((name, problem, code, good, 10.0))
        return hostile.LIMITS, rows
    if group == "judge":
        import test_sandbox_judge as judge

        bound = 3 * judge.LIMITS.wall_timeout_s + 2
        return judge.LIMITS, [(name, prob, program, correct, bound)
                              for name, (prob, program, _statuses, correct) in judge.CASES.items()]
    if group == "fifo":
        rows = []
        for mode in ("w", "r"):
            problem = Problem(id="p", prompt="p", test_type="assert", tests=[f"plant()\nopen('pipe', {mode!r})", "assert True"])
            rows.append((f"fifo_{mode}", problem, "import os\n\ndef plant():\n    os.mkfifo('pipe')\n",
                         "import os\n\ndef plant():\n    open('pipe', 'w').close()\n", 1.5 + 5 + 3))
        return ExecutionLimits(timeout_s=1, memory_mb=512, wall_timeout_s=1.5), rows
    if group == "thread":
        problem = Problem(id="p", prompt="p", test_type="assert", tests=["assert f() == 1"])
        code = ("import threading, time\n"
                "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                "def f():\n    threading.Thread(target=time.sleep, args=(60,)).start()\n    return 1\n")
        return ExecutionLimits(timeout_s=2.0), [("lingering_threads", problem, code, "def f():\n    return 1\n", 2.0)]
    raise ValueError(group)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    ap.add_argument("--json", type=Path, help="also write every row as JSON")
    args = ap.parse_args(argv)
    groups = [g for g in args.groups.split(",") if g]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average at start {os.getloadavg()[0]:.2f}")
    out = {"command": "python bench/sandbox_stop_time.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "load_average_start": os.getloadavg(), "groups": {}}
    with tempfile.TemporaryDirectory() as tmp:
        import test_sandbox_hostile as hostile

        sentinel = Path(tmp) / "expected_outputs.jsonl"
        sentinel.write_text('{"expected": 3}\n')
        os.environ["EXECRL_FAKE_SECRET"] = hostile.SECRET
        listener = hostile._Listener()
        env = {"sentinel": sentinel, "listener": listener}
        try:
            for group in groups:
                limits, rows = cases(group, env)
                results = []
                with Executor(workers=1, limits=limits) as ex:
                    for name, problem, code, good, bound in rows:
                        secs, status = timed(ex, problem, code, group == "programs")
                        base, base_status = timed(ex, problem, good, group == "programs")
                        wall = budget(limits, problem)
                        row = {"case": name, "status": status, "secs": round(secs, 3),
                               "baseline_secs": round(base, 3), "baseline_status": base_status,
                               "budget_secs": wall, "share_of_budget": round(max(secs - base, 0.0) / wall, 3),
                               "former_bound_share": round(bound / wall, 3)}
                        results.append(row)
                        print(f"{group:<9} {name:<40} {status:<12} {secs:7.3f} s  baseline {base:6.3f} s  "
                              f"budget {wall:5.1f} s  share {row['share_of_budget']:5.3f}  "
                              f"(former bound {row['former_bound_share']:.2f})", flush=True)
                    stats = ex.stats()
                worst = max(results, key=lambda r: r["share_of_budget"])
                print(f"{group:<9} largest share {worst['share_of_budget']:.3f} ({worst['case']}; former bound "
                      f"{worst['former_bound_share']:.2f}); respawns {stats['respawns']}, retries {stats['retries']}\n",
                      flush=True)
                out["groups"][group] = {"rows": results, "respawns": stats["respawns"], "retries": stats["retries"],
                                        "largest_share": worst["share_of_budget"]}
        finally:
            listener.close()
            os.environ.pop("EXECRL_FAKE_SECRET", None)
    out["load_average_end"] = os.getloadavg()
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
