#!/usr/bin/env bash
# The preflight (execrl.planning.preflight) on a bare, offline GPU machine, from a checkout:
#
#   bash bench/gpu_preflight.sh [--wheels DIR] [--cpu]
#
# Installs what the machine's Python lacks (trl, datasets, deepspeed and their small dependencies)
# from DIR (made by bench/prepare_gpu_wheels.sh) with `pip install --no-index --find-links DIR`,
# puts the checkout's src first on PYTHONPATH, and runs the preflight in GPU mode on
# bench/preflight/gpu.yaml laid over config/config.yaml: config.yaml's 3B GRPO job with LoRA, and a
# 1.5B full-weight job under ZeRO-3, each built with random weights from the config.json carried in
# bench/preflight/model_configs (the hub is not reached). Prints the planned-vs-measured table and
# writes it as JSON to $OUT/preflight.json ($OUT set) or results/preflight/gpu.json; job logs go
# next to it. Exit status: the preflight's (non-zero naming the job and term that does not fit).
#
# --cpu: the same call in CPU mode on the embedded default (.test/config/config.yaml) at the small
# shapes of bench/preflight/cpu.yaml, the tiny model, for a machine without a GPU (what the tests run).
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=""
DEVICE=gpu
while (($#)); do
  case "$1" in
    --wheels) WHEELS=$2; shift 2 ;;
    --cpu) DEVICE=cpu; shift ;;
    *) echo "usage: bash bench/gpu_preflight.sh [--wheels DIR] [--cpu]" >&2; exit 2 ;;
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
  set -- --configfile bench/preflight/gpu.yaml --device gpu --model-configs bench/preflight/model_configs \
    --timeout-s 420
  name=gpu
else
  set -- --configfile .test/config/config.yaml --configfile bench/preflight/cpu.yaml --device cpu
  name=cpu
fi
status=0
"$PYTHON" -m execrl.planning.preflight "$@" --work "$OUT_DIR/work-$name" --output "$OUT_DIR/preflight-$name.json" || status=$?
# Job logs travel back with the report; the models built with random weights do not.
rm -rf "$OUT_DIR/work-$name/models"
find "$OUT_DIR/work-$name" -name trained -prune -exec rm -rf {} + 2>/dev/null || true
find "$OUT_DIR/work-$name" -name checkpoints -prune -exec rm -rf {} + 2>/dev/null || true
echo "report: $OUT_DIR/preflight-$name.json (exit $status)"
exit $status
