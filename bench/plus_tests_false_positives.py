"""False-positive floor of the held-out tests (execrl.watch.plus_tests) on MBPP and builtin.

For each problem of a split that has an alternative correct solution (MBPP: the other upstream
file's code for the same task, where it differs and passes the visible tests; builtin: the
renamed reference, execrl.watch.alternatives), held-out tests are made at the schema's defaults
and the share of alternatives that fail some held-out test is printed: before the filter that
drops inputs on which an alternative disagrees with the reference, and after it (the kept tests
judged once more). Only problems with an alternative that differs from the reference (up to
formatting) are made (the floor concerns no others), unless `--all`. It writes the manifest with
`--manifest PATH`, and with `--json PATH` the printed figures with the commit and command that made them.

    PYTHONPATH=src .venv/bin/python bench/plus_tests_false_positives.py [--dataset mbpp|builtin]
        [--split test] [--mbpp DIR] [--workers 2] [--all] [--manifest PATH] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from execrl.datasets import builtin, load_split
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.alternatives import alternative_solutions
from execrl.watch.plus_tests import PlusTestSettings, distinct_alternatives, make_plus_tests

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MBPP = Path(os.environ.get("EXECRL_MBPP_DIR", REPO.parent / "shared" / "data" / "mbpp"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("mbpp", "builtin"), default="mbpp")
    parser.add_argument("--split", default="test")
    parser.add_argument("--mbpp", type=Path, default=DEFAULT_MBPP)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--all", action="store_true", help="make held-out tests for every problem of the split")
    parser.add_argument("--manifest", type=Path)
    parser.add_argument("--json", type=Path, help="write the figures printed, the commit and the command here")
    args = parser.parse_args()

    if args.dataset == "mbpp":
        problems = load_split("mbpp", args.split, source=str(args.mbpp), subset="full").problems
        alternatives = alternative_solutions("mbpp", problems, split=args.split, source=str(args.mbpp), subset="full")
    else:
        problems = builtin.generate(args.split, seed=0)
        alternatives = alternative_solutions("builtin", problems, split=args.split)
    if not args.all:
        problems = [p for p in problems if distinct_alternatives(p, alternatives.get(p.id, ()))]
    settings = PlusTestSettings()
    start = time.monotonic()
    with Executor(workers=args.workers, limits=ExecutionLimits(timeout_s=settings.timeout_s, memory_mb=1024)) as executor:
        _, report = make_plus_tests(problems, executor, settings, alternatives=alternatives)
    manifest = report.to_dict(len(problems))
    if args.manifest:
        args.manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    checked = manifest["alternatives_checked"]
    print(f"{args.dataset} {args.split}: {len(problems)} problems made, {manifest['alternatives_given']} alternatives "
          f"offered, {checked} correct (pass the visible tests); {time.monotonic() - start:.0f} s")  # fmt: skip
    print(f"skipped: {manifest['skipped']}")
    for when in ("before", "after"):
        failing = manifest[f"failing_{when}"]
        floor = manifest[f"false_positive_floor_{when}"]
        shown = "–" if floor is None else f"{floor:.3f}"
        print(f"false-positive floor {when} the alternatives' filter: {len(failing)} of {checked} = {shown}"
              + (f" ({', '.join(failing)})" if failing else ""))  # fmt: skip
    print(f"held-out tests dropped as splitting correct solutions: {manifest['split_inputs']}; "
          f"inputs dropped as unstable across hash seeds {settings.hash_seeds} and reruns: {manifest['unstable_inputs']}")
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        command = " ".join(["bench/plus_tests_false_positives.py", *sys.argv[1:]])
        record = {"command": command, "commit": commit, "dataset": args.dataset, "split": args.split,
                  "problems_made": len(problems), "all_problems": args.all, "manifest": manifest}  # fmt: skip
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
