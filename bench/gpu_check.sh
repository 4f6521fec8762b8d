#!/usr/bin/env bash
# The GPU check a short remote run makes, in one command from a checkout:
#
#   bash bench/gpu_check.sh [--wheels DIR] [--cpu] [--budget-s SECONDS]
#
# 1. bench/gpu_preflight.sh (installs what is missing from DIR, then the preflight: every environment
#    check and one measured optimizer step of each job of bench/preflight/gpu.yaml, planned against
#    measured), given the budget less what the tests keep;
# 2. tests/test_gpu.py's one-GPU tests that need no vLLM: the memory plan's activation terms against
#    CUDA's allocator (GRPO with LoRA, DPO with all weights), the preflight's peak reset between
#    generation and the update, and (with 2 GPUs) the full-weight ZeRO-3 save, in what is left of
#    the budget.
#
# Everything lands in $OUT (or results/gpu-check): preflight-MODE.json, logs/JOB.log per job,
# gpu-tests.log, gpu-tests.xml and gpu-check.json (each part's time and exit status): 6 files, at
# most 1 folder deep, so a remote run brings all of it back. The preflight's report is rewritten
# after each job and the tests' log as each test ends, so a run cut short still returns what
# finished. Exit status: the preflight's, else the tests'.
#
# --budget-s (default 570): the whole call, install included; the tests keep at least
# TESTS_MIN_S (default 90) of it, the preflight gets the rest less its 60 s hard stop and 30 s for
# the install (390 s: each of its two jobs is given at least 195 s; the first GPU run's took about
# 165 s each). Under a 600 s command limit that leaves 30 s.
#
# --cpu: both in CPU mode (the preflight on the embedded default at small shapes; the GPU tests are
# collected and skipped without CUDA), for a machine without a GPU (what the tests run).
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=()
MODE=()
BUDGET_S=570
TESTS_MIN_S=${TESTS_MIN_S:-90}
while (($#)); do
  case "$1" in
    --wheels) WHEELS=(--wheels "$2"); shift 2 ;;
    --cpu) MODE=(--cpu); shift ;;
    --budget-s) BUDGET_S=$2; shift 2 ;;
    *) echo "usage: bash bench/gpu_check.sh [--wheels DIR] [--cpu] [--budget-s SECONDS]" >&2; exit 2 ;;
  esac
done
PYTHON=${PYTHON:-python3}
export OUT=${OUT:-results/gpu-check}
mkdir -p "$OUT"

# gpu_preflight.sh stops its call 60 s after its own budget, and its install comes before that.
PREFLIGHT_S=$((BUDGET_S - TESTS_MIN_S - 60 - 30))
if ((PREFLIGHT_S < 60)); then
  echo "--budget-s $BUDGET_S leaves the preflight $PREFLIGHT_S s (it needs 60 or more)" >&2
  exit 2
fi
started=$SECONDS
preflight_status=0
PYTHON=$PYTHON bash bench/gpu_preflight.sh "${WHEELS[@]}" "${MODE[@]}" --budget-s "$PREFLIGHT_S" || preflight_status=$?
preflight_spent=$((SECONDS - started))

tests_s=$((BUDGET_S - (SECONDS - started)))
echo "GPU tests: $tests_s s left"
# -rA names every outcome (a skip with its reason) in the log; the log is written as tests end.
set +e
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" timeout --kill-after=10 "$tests_s" \
  "$PYTHON" -m pytest -m gpu tests/test_gpu.py -k "memory_plans or phase_reset or zero3_saves" \
  -p no:cacheprovider -q -rA --junitxml "$OUT/gpu-tests.xml" 2>&1 | tee "$OUT/gpu-tests.log"
tests_status=${PIPESTATUS[0]}
set -e
spent=$((SECONDS - started))
echo "gpu check: preflight exit $preflight_status, tests exit $tests_status, $spent s of a $BUDGET_S s budget; results in $OUT"
# The call's own record: what each part took of the budget, on which commit and machine.
"$PYTHON" - "$OUT/gpu-check.json" "${MODE[*]:-gpu}" "$BUDGET_S" "$PREFLIGHT_S" "$preflight_spent" \
  "$preflight_status" "$tests_s" "$((spent - preflight_spent))" "$tests_status" <<'PY'
import json, os, subprocess, sys
sys.path.insert(0, "src")
from execrl.compute import cpu_model  # the standard library only
path, mode, budget, preflight_budget, preflight_s, preflight_rc, tests_budget, tests_s, tests_rc = sys.argv[1:]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
record = {"command": f"bash bench/gpu_check.sh{' --cpu' if mode == '--cpu' else ''}", "commit": commit or None,
          "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "budget_s": int(budget),
          "preflight": {"budget_s": int(preflight_budget), "wall_s": int(preflight_s), "rc": int(preflight_rc)},
          "tests": {"budget_s": int(tests_budget), "wall_s": int(tests_s), "rc": int(tests_rc)}}
open(path, "w").write(json.dumps(record, indent=1) + "\n")
PY
((preflight_status != 0)) && exit "$preflight_status"
exit "$tests_status"
