"""The README's two commands in a fresh clone, as a new user runs them, with a record of what they gave.

Clones the repository (its committed HEAD, nothing uncommitted travels), runs `make report` and
then `python -m execrl.report.compare docs/results/embedded-default.summary.json results`, and/or
`make test`, each in that clone, and writes one JSON record: the commit, the CPU, each command's
exit status and wall time, Snakemake's own elapsed time and job count, compare's verdict,
pytest's counts and its slowest setups and tests. The commands' full output goes to
`<dest>/fresh-clone-check.<what>.log`.

    python3 bench/fresh_clone_check.py --dest /tmp/fresh [--what report|test|both] [--json PATH]

Exits with the first failing command's status (compare's 1 when a field differs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUMMARY = "docs/results/embedded-default.summary.json"
# Runs before any virtualenv exists (the clone makes its own): execrl.compute needs only the standard library.
sys.path.insert(0, str(REPO / "src"))
from execrl.compute import cpu_model  # noqa: E402


def run_logged(command: list[str], cwd: Path, log: Path) -> dict:
    """Run `command` in `cwd`, its output appended to `log`; its exit status, wall time, the load
    averages it started and ended at (other work on the machine stretches the wall time), and output."""
    load_start = [round(x, 2) for x in os.getloadavg()]
    start = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out.write(done.stdout)
    return {"command": " ".join(command), "rc": done.returncode, "wall_s": round(time.monotonic() - start, 1),
            "load_average_start": load_start, "load_average_end": [round(x, 2) for x in os.getloadavg()],
            "output": done.stdout}  # fmt: skip


def snakemake_figures(output: str) -> dict:
    """Snakemake's last "N of M steps" line and its "Elapsed time" (Snakemake's own clock, without `make env`)."""
    steps = re.findall(r"^(\d+) of (\d+) steps \(\d+%\) done$", output, flags=re.M)
    elapsed = re.findall(r"^Elapsed time: (\d+):(\d\d):(\d\d(?:\.\d+)?)$", output, flags=re.M)
    figures = {}
    if steps:
        figures["jobs_done"], figures["jobs_planned"] = int(steps[-1][0]), int(steps[-1][1])
    if elapsed:
        hours, minutes, seconds = elapsed[-1]
        figures["snakemake_elapsed_s"] = round(int(hours) * 3600 + int(minutes) * 60 + float(seconds), 1)
    return figures


def pytest_counts(output: str) -> list[dict]:
    """Each pytest run's summary line ("== 1520 passed, 16 skipped, ... in 1595.54s ==") as counts."""
    runs = []
    for line in re.findall(r"^=+ (.*\bin [\d.]+s(?: \([\d:]+\))?) =+$", output, flags=re.M):
        counts = {word: int(number) for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)", line)}
        runs.append({"summary": line, **counts})
    return runs


def slowest_durations(output: str) -> list[dict]:
    """pytest's "slowest N durations" list (`make test` asks for it): seconds, phase and test, slowest first."""
    return [{"s": float(seconds), "when": when, "test": test}
            for seconds, when, test in re.findall(r"^([\d.]+)s (setup|call|teardown) +(\S+)$", output, flags=re.M)]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True, help="folder to clone into (must not exist)")
    parser.add_argument("--what", choices=("report", "test", "both"), default="both")
    parser.add_argument("--source", default=str(REPO), help="the repository to clone (default: this one)")
    parser.add_argument("--json", type=Path, help="write the record here (default: <dest>/fresh-clone-check.json)")
    args = parser.parse_args()
    if args.dest.exists():
        parser.error(f"--dest {args.dest} exists: give a folder a fresh clone can be made in")
    subprocess.run(["git", "clone", "-q", args.source, str(args.dest)], check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.dest, capture_output=True, text=True).stdout.strip()
    record: dict = {"commit": commit, "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                    "command": " ".join(["bench/fresh_clone_check.py", *sys.argv[1:]])}  # fmt: skip
    status = 0
    if args.what in ("report", "both"):
        log = args.dest / "fresh-clone-check.report.log"
        report = run_logged(["make", "report"], args.dest, log)
        record["make_report"] = {k: v for k, v in report.items() if k != "output"} | snakemake_figures(report["output"])
        status = status or report["rc"]
        if report["rc"] == 0:
            compare = run_logged([".venv/bin/python", "-m", "execrl.report.compare", SUMMARY, "results"], args.dest, log)
            verdicts = [line for line in compare["output"].splitlines() if re.match(r"^(AGREE|DIFFER|SETTINGS DIFFER)", line)]
            record["compare"] = {"command": compare["command"], "rc": compare["rc"], "verdicts": verdicts}
            status = status or compare["rc"]
    if args.what in ("test", "both"):
        log = args.dest / "fresh-clone-check.test.log"
        test = run_logged(["make", "test"], args.dest, log)
        record["make_test"] = {k: v for k, v in test.items() if k != "output"} | {"pytest_runs": pytest_counts(test["output"]), "slowest": slowest_durations(test["output"])}
        status = status or test["rc"]
    out = args.json or args.dest / "fresh-clone-check.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
