"""Differential bench: the sandbox's per-test verdicts against plain Python's.

Judges every program of the corpus (builtin, HumanEval and MBPP references, one mutant of
each, the ordinary programs of tests/data, the hand-written feature corpus) by the executor
and by a fresh plain interpreter, and prints the agreement rate and every disagreement by
class (see ``execrl.sandbox.differential``).

    PYTHONPATH=src .venv/bin/python bench/sandbox_differential.py [--mbpp-dir ../shared/data/mbpp] \
        [--workers 2] [--timeout 3] [--sample N --seed S] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.differential import INTENDED, compare, load_corpus

ROOT = Path(__file__).resolve().parents[1]
FEATURES = ROOT / "tests" / "data" / "differential" / "features.py"
ORDINARY = ROOT / "tests" / "data" / "ordinary_solutions.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mbpp-dir", default=os.environ.get("EXECRL_MBPP_DIR"),
                    help="directory holding mbpp.jsonl (left out when absent)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3.0, help="CPU-time limit per program, both sides")
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--mutants", type=int, default=1, help="mutants per reference")
    ap.add_argument("--sample", type=int, default=None, help="judge a seeded sample of this many programs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the report here")
    args = ap.parse_args(argv)

    programs = load_corpus(FEATURES, mbpp_dir=args.mbpp_dir, ordinary=ORDINARY,
                           mutants_per_program=args.mutants, seed=args.seed)
    if args.sample is not None and args.sample < len(programs):
        programs = random.Random(args.seed).sample(programs, args.sample)
    limits = ExecutionLimits(timeout_s=args.timeout, memory_mb=args.memory_mb)
    print(f"{len(programs)} programs: " + ", ".join(f"{k} {v}" for k, v in
                                                   sorted(Counter(p.group.split(':')[0] for p in programs).items())))
    start = time.monotonic()
    with Executor(workers=args.workers, limits=limits) as ex:
        report = compare(programs, ex, limits, workers=args.workers, progress=sys.stderr.isatty())
        stats = ex.stats()
    elapsed = time.monotonic() - start
    d = report.to_dict()
    print(f"agreement: {d['agree']}/{d['programs']} = {100 * d['agreement']:.2f}% "
          f"({elapsed:.0f} s, sandbox retries {stats['retries']}, respawns {stats['respawns']})")
    print("plain Python's verdicts by group: " + ", ".join(f"{k} {v}" for k, v in d["plain_statuses"].items()))
    print(f"intended differences: {sum(d['intended'].values())} " + json.dumps(dict(d["intended"])))
    print(f"unexplained disagreements: {d['unexplained']}")
    for cls, n in sorted(d["classes"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:4d}  {cls}")
        for o in report.unexplained:
            if o.kind == cls:
                print(f"          {o.program.id}: plain {o.plain.tests} / sandbox {o.sandbox.tests}")
    for name in sorted(set(d["intended"])):
        print(f"intended: {name}: {INTENDED[name]}")
        for o in report.intended:
            if o.explained_by == name:
                print(f"          {o.program.id}: plain {o.plain.tests} ({o.plain.cpu_s:.2f} s) / "
                      f"sandbox {o.sandbox.tests} ({o.sandbox.cpu_s:.2f} s)")
    if args.json:
        d["elapsed_s"], d["stats"] = elapsed, {k: stats[k] for k in ("retries", "respawns", "workers")}
        d["command"] = " ".join(sys.argv)
        Path(args.json).write_text(json.dumps(d, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
