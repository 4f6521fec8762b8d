"""Throughput of the sandbox executor against a subprocess-per-candidate baseline.

Runs both on the same inputs, in one process, one after the other, and reports wall time
(candidates/s, ms per candidate) and the CPU time all involved processes used per candidate
(less sensitive to other load on the machine):

  (a) 400 trivial passing programs (the per-candidate overhead);
  (b) the 974 MBPP reference solutions (and the same set without task 123, whose ~7 s of
      CPU puts a floor under any 2-worker wall time).

Three more sets run only when ``--sets`` names them; the first two carry timing claims the tests
made before `make test` stopped asserting on time:

  (c) ``humaneval``: the 164 HumanEval canonical solutions and 164 ``return None`` bodies
      (``tests/test_sandbox_humaneval.py`` once required the 328 in under 60 s on 2 workers);
  (d) ``padded``: 50 copies of the program of ``test_a_padded_program_is_judged_quickly``
      (42,000 lines of padding, 2,000 of them ``# sum = x``; the test once required under 1 s
      of the test process's CPU). Against ``trivial`` in the same run, the CPU ratio shows a
      scan of the program's text that grows faster than plain ``python``'s parse of it.
  (e) ``stdio``: 200 stdio programs, two tests each (the baseline runs ``python -c`` once per
      test and compares the output exactly).

The baseline is the common harness design: concatenate program + setup + tests, run
``python -c`` in a fresh interpreter per candidate (``--workers`` at a time), and call exit
code 0 a pass. Verdicts are compared as pass / not pass.

    PYTHONPATH=src .venv/bin/python bench/sandbox_throughput.py [--workers 2] [--mbpp PATH]

``--alternate OLD_SRC`` compares two versions of the sandbox in one run: the bench runs
itself in a fresh interpreter ``--rounds`` times with ``PYTHONPATH=OLD_SRC`` (e.g. ``git
archive <commit> src`` extracted somewhere) and as many times with this checkout's ``src``,
alternated (old, new, new, old, old, new, ...: each version as often first as second, so
that a drift in the machine's load favours neither), and ``--json`` gets every run. With
``--interleave N`` both versions run at once instead, each in a process of its own with its
own executor, and take turns every N candidates (which one goes first alternates), so that
the load of the moment weighs on both alike; the baseline then runs once per set and round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor

DEFAULT_MBPP = Path(os.environ.get("EXECRL_MBPP_DIR", "/work/shared/data/mbpp")) / "mbpp.jsonl"


def trivial_set(n: int = 400) -> list[tuple[Problem, str]]:
    items = []
    for i in range(n):
        p = Problem(id=f"trivial/{i}", prompt=f"Return x plus {i}.", test_type="assert",
                    tests=[f"assert f(1) == {1 + i}", f"assert f(0) == {i}", f"assert f(-{i}) == 0"])
        items.append((p, f"def f(x):\n    return x + {i}\n"))
    return items


def mbpp_set(path: Path) -> list[tuple[Problem, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(Problem(id=f"mbpp/{r['task_id']}", prompt=r["text"], test_type="assert", tests=r["test_list"],
                     setup_code=r["test_setup_code"], reference=r["code"]), r["code"]) for r in rows]


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _workers_cpu(ex: Executor) -> tuple[float, float]:
    """CPU seconds of the worker processes and of the candidate processes they reaped.

    Each worker is a controller plus its forker (a live child of the controller, which
    forks and reaps the candidates), so both levels are read: a live child's CPU is not yet
    in its parent's ``children_*`` times.
    """
    workers = candidates = 0.0
    for h in ex._handles:
        proc = psutil.Process(h.proc.pid)
        for p in (proc, *proc.children()):
            t = p.cpu_times()
            workers += t.user + t.system
            candidates += t.children_user + t.children_system
    return workers, candidates


def _cpu_snapshot(ex: Executor) -> tuple[float, float, float]:
    """(executor process, workers, candidates) CPU seconds so far."""
    return (_own_cpu(), *_workers_cpu(ex))


def baseline(items: list[tuple[Problem, str]], workers: int, timeout: float) -> tuple[list[bool], float, float]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}

    def one(item: tuple[Problem, str]) -> bool:
        problem, code = item
        if problem.test_type == "stdio":  # the program once per test, its output compared exactly
            return all(one_stdio(code, t["input"], t["output"]) for t in problem.tests)
        program = "\n".join([code, problem.setup_code, *problem.tests]) + "\n"
        try:
            proc = subprocess.run([sys.executable, "-c", program], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                  timeout=timeout, cwd="/tmp")
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0

    def one_stdio(code: str, given: str, expected: str) -> bool:
        try:
            proc = subprocess.run([sys.executable, "-c", code], input=given, capture_output=True, text=True,
                                  env=env, timeout=timeout, cwd="/tmp")
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0 and proc.stdout == expected

    cpu0 = _own_cpu() + _children_cpu()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        verdicts = list(pool.map(one, items))
    return verdicts, time.perf_counter() - start, _own_cpu() + _children_cpu() - cpu0


def sandbox(ex: Executor, items: list[tuple[Problem, str]]) -> tuple[list[bool], float, float, tuple]:
    cpu0 = _cpu_snapshot(ex)
    start = time.perf_counter()
    results = ex.run_batch(items)
    secs = time.perf_counter() - start
    parts = tuple(b - a for a, b in zip(cpu0, _cpu_snapshot(ex)))
    return [r.status == "pass" for r in results], secs, sum(parts), parts


def report(name: str, items, ex_run, base_run) -> dict:
    (ex_verdicts, ex_secs, ex_cpu, ex_parts), (base_verdicts, base_secs, base_cpu) = ex_run, base_run
    n = len(items)
    row = {
        "set": name, "n": n,
        "executor_cands_per_s": round(n / ex_secs, 1), "executor_ms_per_cand": round(1000 * ex_secs / n, 3),
        "baseline_cands_per_s": round(n / base_secs, 1), "baseline_ms_per_cand": round(1000 * base_secs / n, 3),
        "speedup": round(base_secs / ex_secs, 2),
        "executor_cpu_ms_per_cand": round(1000 * ex_cpu / n, 3),
        "baseline_cpu_ms_per_cand": round(1000 * base_cpu / n, 3),
        "cpu_ratio": round(base_cpu / ex_cpu, 2),
        "executor_cpu_ms_per_cand_by_process": {k: round(1000 * v / n, 3) for k, v in
                                                zip(("executor_process", "workers", "candidates"), ex_parts)},
        "executor_passes": sum(ex_verdicts), "baseline_passes": sum(base_verdicts),
        "verdicts_agree": ex_verdicts == base_verdicts,
        "disagreements": [items[i][0].id for i in range(n) if ex_verdicts[i] != base_verdicts[i]][:10],
    }
    print(f"{name:<22} n={n:<4} executor {row['executor_cands_per_s']:>8.1f} cand/s "
          f"{row['executor_ms_per_cand']:>7.3f} ms/cand | baseline {row['baseline_cands_per_s']:>7.1f} cand/s "
          f"{row['baseline_ms_per_cand']:>7.3f} ms/cand | speedup {row['speedup']:>5.2f}x | "
          f"passes {row['executor_passes']}/{row['baseline_passes']} | verdicts agree: {row['verdicts_agree']}")
    if row["disagreements"]:
        print(f"{'':<22} disagreements (first 10): {row['disagreements']}")
    print(f"{'':<22} CPU per candidate (all processes): executor {row['executor_cpu_ms_per_cand']:.3f} ms, "
          f"baseline {row['baseline_cpu_ms_per_cand']:.3f} ms, ratio {row['cpu_ratio']:.2f}x")
    by = row["executor_cpu_ms_per_cand_by_process"]
    print(f"{'':<22} executor CPU by process: executor process {by['executor_process']:.3f} ms, "
          f"workers {by['workers']:.3f} ms, candidates {by['candidates']:.3f} ms")
    return row


def alternate(args: argparse.Namespace, argv: list[str]) -> int:
    """Run this bench for the old and the new ``src`` in turn (see the module docstring)."""
    import statistics
    import tempfile

    new_src = Path(__file__).resolve().parents[1] / "src"
    versions = {"old": args.alternate.resolve(), "new": new_src}
    order = [("old", "new") if r % 2 == 0 else ("new", "old") for r in range(args.rounds)]
    order = [v for pair in order for v in pair]
    passed, skip = [], False
    for a in argv:  # this run's options, less the alternation's own
        if skip:
            skip = False
        elif a in ("--alternate", "--rounds", "--json"):
            skip = True
        elif not a.startswith(("--alternate=", "--rounds=", "--json=")):
            passed.append(a)
    runs, loads, counts = {}, {}, {"old": 0, "new": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for version in order:
            counts[version] += 1
            name = f"{version}-{counts[version]}"
            out = Path(tmp) / f"{name}.json"
            env = dict(os.environ, PYTHONPATH=str(versions[version]))
            start = os.getloadavg()
            print(f"== {name} (PYTHONPATH={versions[version]})", flush=True)
            subprocess.run([sys.executable, "-s", __file__, *passed, "--json", str(out)], env=env, check=True)
            runs[name] = json.loads(out.read_text())
            loads[name] = [round(x, 2) for x in (*start, *os.getloadavg())]
    summary = {}
    for row in runs["old-1"]:
        ratios = {v: [r["cpu_ratio"] for name, rows in runs.items() if name.startswith(v)
                      for r in rows if r["set"] == row["set"]] for v in ("old", "new")}
        means = {v: round(statistics.mean(x), 3) for v, x in ratios.items()}
        summary[row["set"]] = {"cpu_ratio_old": ratios["old"], "cpu_ratio_new": ratios["new"],
                               "mean_old": means["old"], "mean_new": means["new"],
                               "new_over_old": round(means["new"] / means["old"], 3)}
        print(f"{row['set']:<22} CPU ratio against the baseline: old {ratios['old']} (mean {means['old']}), "
              f"new {ratios['new']} (mean {means['new']}): new / old {summary[row['set']]['new_over_old']}")
    if args.json:
        command = "python -s bench/sandbox_throughput.py " + " ".join(argv)
        args.json.write_text(json.dumps({
            "command": command, "old": str(args.alternate), "new": str(new_src), "order": ",".join(order),
            "load_average": {"note": "1, 5 and 15 minute load averages at the start and at the end of each run",
                             **loads},
            "summary": summary, "runs": runs}, indent=2) + "\n")
    return 0


def humaneval_set() -> list[tuple[Problem, str]]:
    """HumanEval's canonical solutions, then as many ``return None`` bodies (none passes)."""
    from execrl.datasets import load_split

    problems = load_split("humaneval", "test").problems
    return [(p, p.reference) for p in problems] + [(p, p.prompt + "    return None\n") for p in problems]


def padded_set(n: int = 50) -> list[tuple[Problem, str]]:
    """The padded program of ``tests/test_sandbox_modes.py``, ``n`` times (a problem each; each
    copy ends in a comment of its own, so that no cache keyed on the text serves it)."""
    code = "def sum(a, b):\n    return 6\n" + "\n" * 40000 + "# sum = x\n" * 2000 + "def f(x):\n    return x + 1\n"
    return [(Problem(id=f"padded/{i}", prompt="p", test_type="assert",
                     tests=["assert sum(10, 15) == 6", "assert f(2) == 3"]), f"{code}# copy {i}\n") for i in range(n)]


def stdio_set(n: int = 200) -> list[tuple[Problem, str]]:
    """``n`` stdio programs, two tests each: read a number, build a list with a function of the
    program's, print a sum (what the interpreter's finalization of ``__main__`` costs a run
    that ends normally: a collection over the program's objects)."""
    items = []
    for i in range(n):
        code = (f"def square(x):\n    return x * x + {i}\n\nn = int(input())\n"
                "values = [square(k) for k in range(n)]\nprint(sum(values))\n")
        tests = [{"input": f"{m}\n", "output": f"{sum(k * k + i for k in range(m))}\n"} for m in (10, 1000)]
        items.append((Problem(id=f"stdio/{i}", prompt="p", test_type="stdio", tests=tests), code))
    return items


OPTIONAL_SETS = {"humaneval": humaneval_set, "padded": padded_set, "stdio": stdio_set}
"""Sets built only when ``--sets`` names them."""


def bench_sets(mbpp: Path, wanted: str = "") -> list[tuple[str, list[tuple[Problem, str]]]]:
    """The bench's sets; MBPP's without task 123 too (its reference spends ~5 s of its own CPU,
    one chunk that outweighs the sandbox's work on the other 973); those of ``OPTIONAL_SETS``
    that ``wanted`` (``--sets``) names."""
    sets = [("trivial", trivial_set())]
    if mbpp.exists():
        refs = mbpp_set(mbpp)
        sets += [("mbpp_references", refs), ("mbpp_without_task_123", [x for x in refs if x[0].id != "mbpp/123"])]
    sets += [(name, make()) for name, make in OPTIONAL_SETS.items() if name in wanted.split(",")]
    return sets


def serve_chunks(args: argparse.Namespace) -> int:
    """``--interleave``'s worker side: one executor; runs the chunks the parent names on stdin
    (one JSON line each: set, start, stop) and answers each with its CPU time (one JSON line)."""
    sets = dict(bench_sets(args.mbpp, args.sets))
    with Executor(workers=args.workers, limits=ExecutionLimits(timeout_s=10.0)) as ex:
        ex.run_batch(trivial_set(50))  # warm up the workers
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            verdicts, secs, cpu, parts = sandbox(ex, sets[cmd["set"]][cmd["start"]:cmd["stop"]])
            print(json.dumps({"secs": secs, "cpu": cpu, "parts": parts, "passes": sum(verdicts)}), flush=True)
    return 0


def interleave(args: argparse.Namespace, new_src: Path) -> int:
    """``--alternate`` with ``--interleave N``: both versions at once, N candidates in turn."""
    import statistics

    versions = {"old": args.alternate.resolve(), "new": new_src}
    common = ["--workers", str(args.workers), "--mbpp", str(args.mbpp), "--sets", args.sets]
    sets = [x for x in bench_sets(args.mbpp, args.sets) if x[0] in set(args.sets.split(","))]
    out = {"command": "python -s bench/sandbox_throughput.py " + " ".join(sys.argv[1:]), "old": str(versions["old"]),
           "new": str(new_src), "interleave": args.interleave, "load_average_start": os.getloadavg(), "rounds": []}
    k = 0
    for r in range(args.rounds):  # fresh executors every round (a worker's memory layout varies between starts)
        procs = {v: subprocess.Popen([sys.executable, "-s", __file__, "--serve-chunks", *common],
                                     env=dict(os.environ, PYTHONPATH=str(src)), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True) for v, src in versions.items()}
        try:
            for p in procs.values():
                json.loads(p.stdout.readline())  # ready
            rows = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
            for name, items in sets:
                n = len(items)
                tot = {v: {"secs": 0.0, "cpu": 0.0, "parts": [0.0, 0.0, 0.0], "passes": 0} for v in versions}
                for start in range(0, n, args.interleave):
                    order = ("old", "new") if k % 2 == 0 else ("new", "old")
                    k += 1
                    for v in order:
                        procs[v].stdin.write(json.dumps({"set": name, "start": start,
                                                         "stop": start + args.interleave}) + "\n")
                        procs[v].stdin.flush()
                        got = json.loads(procs[v].stdout.readline())
                        tot[v]["secs"] += got["secs"]
                        tot[v]["cpu"] += got["cpu"]
                        tot[v]["passes"] += got["passes"]
                        tot[v]["parts"] = [a + b for a, b in zip(tot[v]["parts"], got["parts"])]
                _verdicts, _secs, base_cpu = baseline(items, args.workers, timeout=args.baseline_timeout)
                row = {"n": n, "baseline_cpu_ms_per_cand": round(1000 * base_cpu / n, 3)}
                for v in versions:
                    row[v] = {"cpu_ms_per_cand": round(1000 * tot[v]["cpu"] / n, 3),
                              "cpu_ms_per_cand_by_process": dict(zip(("executor_process", "workers", "candidates"),
                                                                     (round(1000 * x / n, 3) for x in tot[v]["parts"]))),
                              "cpu_ratio": round(base_cpu / tot[v]["cpu"], 3), "passes": tot[v]["passes"]}
                row["new_over_old"] = round(row["new"]["cpu_ratio"] / row["old"]["cpu_ratio"], 3)
                rows[name] = row
                print(f"round {r + 1} {name:<16} CPU per candidate: old {row['old']['cpu_ms_per_cand']:.3f} ms, "
                      f"new {row['new']['cpu_ms_per_cand']:.3f} ms, baseline {row['baseline_cpu_ms_per_cand']:.3f} ms; "
                      f"CPU ratio old {row['old']['cpu_ratio']:.2f}x, new {row['new']['cpu_ratio']:.2f}x: "
                      f"new / old {row['new_over_old']:.3f}; passes {row['old']['passes']}/{row['new']['passes']}",
                      flush=True)
            out["rounds"].append(rows)
        finally:
            for p in procs.values():
                p.stdin.close()
                p.wait()
    out["load_average_end"] = os.getloadavg()
    out["summary"] = {}
    for name, _items in sets:
        ratios = [rows[name]["new_over_old"] for rows in out["rounds"]]
        cpu = {v: statistics.mean(rows[name][v]["cpu_ms_per_cand"] for rows in out["rounds"]) for v in versions}
        out["summary"][name] = {"new_over_old_per_round": ratios, "new_over_old_mean": round(statistics.mean(ratios), 3),
                                "cpu_ms_per_cand_mean": {v: round(x, 3) for v, x in cpu.items()}}
        print(f"{name:<22} CPU ratio new / old per round {ratios}, mean {out['summary'][name]['new_over_old_mean']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mbpp", type=Path, default=DEFAULT_MBPP)
    ap.add_argument("--repeat", type=int, default=3, help="executor passes over each set (best is reported)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--baseline-timeout", type=float, default=120.0, help="wall-clock seconds per baseline run")
    ap.add_argument("--sets", default="trivial,mbpp_references,mbpp_without_task_123",
                    help="comma-separated subset of the sets to run")
    ap.add_argument("--alternate", type=Path, metavar="OLD_SRC",
                    help="compare the src directory OLD_SRC with this checkout's src, alternated (see above)")
    ap.add_argument("--rounds", type=int, default=4, help="with --alternate: runs of each version")
    ap.add_argument("--interleave", type=int, metavar="N",
                    help="with --alternate: both versions at once, taking turns every N candidates")
    ap.add_argument("--serve-chunks", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_chunks:
        return serve_chunks(args)
    if args.alternate is not None and args.interleave:
        return interleave(args, Path(__file__).resolve().parents[1] / "src")
    if args.alternate is not None:
        return alternate(args, sys.argv[1:])

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, workers={args.workers}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    if not args.mbpp.exists():
        print(f"(MBPP not found at {args.mbpp}: skipping set b)")
    sets = [x for x in bench_sets(args.mbpp, args.sets) if x[0] in set(args.sets.split(","))]
    rows = []
    with Executor(workers=args.workers, limits=ExecutionLimits(timeout_s=10.0)) as ex:
        print(f"isolation: {ex.isolation}")
        ex.run_batch(trivial_set(50))  # warm up the workers
        for name, items in sets:
            best = None
            for _ in range(args.repeat):
                run = sandbox(ex, items)
                if best is None or run[1] < best[1]:
                    best = run
            # the baseline's timeout is wall-clock (as in common harnesses): keep it generous
            # so that load on the machine does not turn slow references into failures
            rows.append(report(name, items, best, baseline(items, args.workers, timeout=args.baseline_timeout)))
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
