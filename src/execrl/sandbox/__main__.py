"""Annotate candidates from the command line.

    python -m execrl.sandbox --problems P.jsonl --candidates C.jsonl --out A.jsonl \\
        [--workers N] [--timeout S] [--memory-mb M]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter

from execrl.jsonl import read_jsonl, write_jsonl
from execrl.problems import read_problems
from execrl.sandbox.annotate import annotate_candidates
from execrl.sandbox.executor import Executor
from execrl.sandbox.limits import ExecutionLimits


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m execrl.sandbox", description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", required=True, help="normalized problems JSONL")
    p.add_argument("--candidates", required=True, help="candidates JSONL (problem_id, code, ...)")
    p.add_argument("--out", required=True, help="annotations JSONL to write (atomically)")
    p.add_argument("--workers", type=int, default=2, help="sandbox worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=ExecutionLimits.timeout_s,
                   help=f"CPU seconds per candidate (default {ExecutionLimits.timeout_s})")
    p.add_argument("--memory-mb", type=int, default=ExecutionLimits.memory_mb,
                   help=f"address-space cap in MiB (default {ExecutionLimits.memory_mb})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    problems = {p.id: p for p in read_problems(args.problems)}
    candidates = read_jsonl(args.candidates)
    limits = ExecutionLimits(timeout_s=args.timeout, memory_mb=args.memory_mb)
    start = time.perf_counter()
    with Executor(workers=args.workers, limits=limits) as executor:
        annotated = annotate_candidates(problems, candidates, executor, progress=not args.no_progress)
        isolation = executor.isolation
    write_jsonl(annotated, args.out)
    counts = Counter(a["status"] for a in annotated)
    elapsed = time.perf_counter() - start
    summary = {"candidates": len(annotated), "status_counts": dict(sorted(counts.items())),
               "seconds": round(elapsed, 2), "isolation": isolation["mode"], "out": str(args.out)}
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
