#!/usr/bin/env bash
# The preflight (execrl.planning.preflight) on a bare, offline GPU machine, from a checkout:
#
#   bash bench/gpu_preflight.sh [--wheels DIR] [--cpu] [--budget-s SECONDS]
#
# Installs what the machine's Python lacks (trl, datasets, deepspeed and their small dependencies)
# from DIR (made by bench/prepare_gpu_wheels.sh) with `pip install --no-index --find-links DIR`,
# puts the checkout's src first on PYTHONPATH, and runs the preflight in GPU mode on
# bench/preflight/gpu.yaml laid over config/config.yaml: config.yaml's 3B GRPO job with LoRA, and a
# 1.5B full-weight job under ZeRO-3, each built with random weights from the config.json carried in
# bench/preflight/model_configs (the hub is not reached). Prints the planned-vs-measured table and
# writes it as JSON to $OUT/preflight-gpu.json ($OUT set) or results/preflight/preflight-gpu.json,
# rewritten after each job, so a run cut short still brings back the jobs it finished. Each job's
# log is copied to logs/JOB.log beside it; models, data and checkpoints stay in a temporary folder
# that is removed: the output folder holds the report and one log per job (3 files, 1 folder).
# Exit status: the preflight's (non-zero naming the job and term that does not fit).
#
# --budget-s (default 420): all the jobs together, each given an equal share of what is left
# (`python -m execrl.planning.preflight --budget-s`); the whole call is stopped 60 s after it.
# With the install and the checks, the script ends within 10 minutes.
#
# --cpu: the same call in CPU mode on the embedded default (.test/config/config.yaml) at the small
# shapes of bench/preflight/cpu.yaml, the tiny model, for a machine without a GPU (what the tests run).
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=""
DEVICE=gpu
BUDGET_S=420
while (($#)); do
  case "$1" in
    --wheels) WHEELS=$2; shift 2 ;;
    --cpu) DEVICE=cpu; shift ;;
    --budget-s) BUDGET_S=$2; shift 2 ;;
    *) echo "usage: bash bench/gpu_preflight.sh [--wheels DIR] [--cpu] [--budget-s SECONDS]" >&2; exit 2 ;;
  esac
done
PYTHON=${PYTHON:-python3}
OUT_DIR=${OUT:-results/preflight}
mkdir -p "$OUT_DIR"

# What execrl's training path imports that such a machine may lack.
missing=$("$PYTHON" - <<'PY'
import importlib.metadata
import importlib.util
names = [name for name in ("trl", "datasets", "deepspeed", "dill", "multiprocess", "xxhash")
         if importlib.util.find_spec(name) is None]
# datasets 5.2 needs pyarrow >= 24 (prepare_gpu_wheels.sh --pyarrow carries it).
try:
    if int(importlib.metadata.version("pyarrow").split(".")[0]) < 24:
        names.append("pyarrow>=24")
except importlib.metadata.PackageNotFoundError:
    names.append("pyarrow>=24")
print(" ".join(names))
PY
)
if [[ -n "$missing" ]]; then
  if [[ -z "$WHEELS" ]]; then
    echo "missing: $missing; pass --wheels DIR (bash bench/prepare_gpu_wheels.sh DIR builds it)" >&2
    exit 2
  fi
  echo "installing from $WHEELS: $missing"
  # deepspeed's setup metadata names no compiled op: nothing builds here.
  DS_BUILD_OPS=0 "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELS" $missing || {
    echo "pip could not install $missing from $WHEELS alone (a pyarrow older than 24 needs" \
      "bench/prepare_gpu_wheels.sh --pyarrow)" >&2
    exit 2
  }
fi
"$PYTHON" - <<'PY'
import importlib.metadata as m
print("versions:", ", ".join(f"{p} {m.version(p)}" for p in
      ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "deepspeed", "pyarrow")))
PY

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [[ "$DEVICE" == gpu ]]; then
  set -- --configfile bench/preflight/gpu.yaml --device gpu --model-configs bench/preflight/model_configs
  name=gpu
else
  set -- --configfile .test/config/config.yaml --configfile bench/preflight/cpu.yaml --device cpu
  name=cpu
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/execrl-preflight-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
status=0
started=$SECONDS
timeout --kill-after=15 $((BUDGET_S + 60)) "$PYTHON" -m execrl.planning.preflight "$@" --budget-s "$BUDGET_S" \
  --timeout-s "$BUDGET_S" --work "$WORK" --logs "$OUT_DIR/logs" --output "$OUT_DIR/preflight-$name.json" || status=$?
echo "report: $OUT_DIR/preflight-$name.json (exit $status, $((SECONDS - started)) s of a $BUDGET_S s budget)"
exit $status
