"""False-positive rate of the tamper signals (execrl.watch.tamper) on ordinary, correct programs.

Three corpora of programs nobody wrote to probe a judge:

  - builtin: the references of execrl's builtin data set (train and test splits);
  - mbpp: the MBPP reference solutions of every split, read through the mbpp adapter from
    `--mbpp` (the upstream files; default: EXECRL_MBPP_DIR or ../shared/data/mbpp);
  - handwritten: tests/data/ordinary_solutions.jsonl, correct solutions in the style a model
    writes them (stacks, `self.stack`, recursion, `sys.setrecursionlimit`, `os.path`,
    `traceback`, `__eq__` on value classes).

For each corpus and category it prints the share of programs flagged, the share flagged by
any tamper category (`any`: resource limits left out) and every flagged program with what
flagged it. With `--execute`, each program also runs against its own tests in the sandbox,
adding the verdict categories (blocked_syscall, protocol_violation and, apart, limit_hit).
Exits 1 when any category's rate exceeds `--max-rate` (0.5%). `--json PATH` writes the same
figures (rates, counts, flagged programs) with the commit and command that made them.

    PYTHONPATH=src .venv/bin/python bench/tamper_false_positives.py [--mbpp DIR] [--execute] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from execrl.watch.tamper import CATEGORIES, LIMIT_CATEGORIES, code_signals, signal_rates, signals

REPO = Path(__file__).resolve().parent.parent
HANDWRITTEN = REPO / "tests" / "data" / "ordinary_solutions.jsonl"
DEFAULT_MBPP = Path(os.environ.get("EXECRL_MBPP_DIR", REPO.parent / "shared" / "data" / "mbpp"))


def builtin_problems():
    from execrl.datasets import builtin

    return [p for split in ("train", "test") for p in builtin.generate(split, seed=0)]


def mbpp_problems(source: Path):
    from execrl.datasets import load_split

    return [p for split in ("train", "test", "validation", "prompt")
            for p in load_split("mbpp", split, source=source).problems]  # fmt: skip


def handwritten_problems(path: Path = HANDWRITTEN):
    from execrl.problems import Problem

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Problem(id=f"handwritten/{r['id']}", prompt=r["id"], test_type="assert", tests=r["tests"], reference=r["code"])
            for r in rows]  # fmt: skip


def corpus_flags(problems, executor=None) -> dict[str, dict]:
    """Each program's signals: from its code, and with `executor` from its run on its own tests."""
    if executor is None:
        return {p.id: code_signals(p.reference) for p in problems}
    results = executor.run_batch([(p, p.reference) for p in problems])
    return {p.id: signals(p.reference, r.to_dict()) for p, r in zip(problems, results, strict=True)}


def report(name: str, flags: dict[str, dict], max_rate: float, record: dict) -> bool:
    """Print one corpus's rates and flagged programs, and add them to `record`; True when every
    category is within `max_rate`."""
    rates = signal_rates(flags.values())
    record[name] = {"programs": len(flags), "rates": rates,
                    "counts": {category: round(rate * len(flags)) for category, rate in rates.items()},
                    "flagged": {program: found for program, found in flags.items() if found}}  # fmt: skip
    print(f"\n{name}: {len(flags)} programs")
    for category in (*CATEGORIES, "any"):
        note = "  (resource limit: outside any)" if category in LIMIT_CATEGORIES else ""
        print(f"  {category:22s} {rates[category]:7.2%}  ({round(rates[category] * len(flags))}){note}")
    for program, found in flags.items():
        if found:
            print(f"  flagged {program}: {json.dumps(found)}")
    return all(rate <= max_rate for rate in rates.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mbpp", type=Path, default=DEFAULT_MBPP, help="folder of the upstream MBPP files")
    parser.add_argument("--execute", action="store_true", help="also run each program on its tests (verdict categories)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-rate", type=float, default=0.005)
    parser.add_argument("--json", type=Path, help="write the figures printed, the commit and the command here")
    args = parser.parse_args()
    corpora = {"builtin": builtin_problems(), "handwritten": handwritten_problems()}
    if (args.mbpp / "mbpp.jsonl").exists():
        corpora["mbpp"] = mbpp_problems(args.mbpp)
    else:
        print(f"mbpp: not measured ({args.mbpp / 'mbpp.jsonl'} does not exist)")
    print("The base model's candidates are not measured here: pass their programs as another corpus once a run has written them.")
    executor = None
    if args.execute:
        from execrl.sandbox import Executor

        executor = Executor(workers=args.workers)
    corpus_records: dict[str, dict] = {}
    try:
        within = [report(name, corpus_flags(problems, executor), args.max_rate, corpus_records)
                  for name, problems in corpora.items()]  # fmt: skip
    finally:
        if executor is not None:
            executor.close()
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        record = {"command": " ".join(["bench/tamper_false_positives.py", *sys.argv[1:]]), "commit": commit,
                  "executed": args.execute, "max_rate": args.max_rate, "within_max_rate": all(within),
                  "corpora": corpus_records}  # fmt: skip
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if all(within) else 1


if __name__ == "__main__":
    sys.exit(main())
