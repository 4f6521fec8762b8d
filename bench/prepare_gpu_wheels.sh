#!/usr/bin/env bash
# Builds the wheel folder that bench/gpu_preflight.sh installs from on an offline GPU machine
# (Python 3.12, manylinux x86_64, with torch, transformers, accelerate, peft, numpy, pandas and
# triton already installed, and no trl, datasets or deepspeed).
#
#   bash bench/prepare_gpu_wheels.sh [DIR]      # DIR defaults to gpu-wheels/ (git-ignored)
#   bash bench/prepare_gpu_wheels.sh --pyarrow [DIR]   # also pyarrow (52 MiB): only for a machine whose
#                                                      # pyarrow is older than datasets' >= 24
#   bash bench/prepare_gpu_wheels.sh --record PATH [DIR]  # also writes the sizes as JSON to PATH
#
# Each wheel is downloaded alone (--no-deps) for cp312 / manylinux x86_64; DeepSpeed, published only
# as an sdist, is built here into a pure-Python wheel (DS_BUILD_OPS=0: no compiled ops; its ops are
# compiled just in time on the GPU machine when used). Prints the folder's size and the size of a
# checkout with it (limit: 64 MiB together).
set -euo pipefail
cd "$(dirname "$0")/.."

PYARROW=0
RECORD=""
while (($#)); do
  case "$1" in
    --pyarrow) PYARROW=1; shift ;;
    --record) RECORD=$2; shift 2 ;;
    *) break ;;
  esac
done
DIR=${1:-gpu-wheels}
PIP=${PIP:-pip}
mkdir -p "$DIR"

# The versions the project pins (pyproject.toml) and the target lacks.
PINNED=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0)
# DeepSpeed's runtime requirements a machine with torch/transformers/accelerate may lack (small).
DEEPSPEED_DEPS=(hjson py-cpuinfo einops msgpack ninja pydantic pydantic-core annotated-types typing-inspection)
# Installed only where the machine's own do not satisfy the pins: datasets caps fsspec at 2026.9.0,
# pydantic needs typing-extensions >= 4.16.
FALLBACKS=(fsspec==2026.9.0 typing-extensions)
if ((PYARROW)); then PINNED+=(pyarrow==26.0.1); fi

PLATFORM=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64
  --platform manylinux_2_34_x86_64 --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
  --only-binary=:all:)
for requirement in "${PINNED[@]}" "${DEEPSPEED_DEPS[@]}" "${FALLBACKS[@]}"; do
  "$PIP" download --quiet --no-deps "${PLATFORM[@]}" --dest "$DIR" "$requirement"
done
# DeepSpeed: a wheel of its Python code, built here (its setup.py imports torch: build isolation off,
# with this environment's torch).
DS_BUILD_OPS=0 "$PIP" wheel --quiet --no-deps --no-build-isolation --wheel-dir "$DIR" deepspeed==0.19.8

echo "wheels in $DIR:"
ls -l "$DIR"
wheels_kib=$(du -sk "$DIR" | cut -f1)
checkout_kib=$(git archive --format=tar HEAD | wc -c | awk '{print int($1 / 1024)}')
echo "wheel folder: $((wheels_kib / 1024)).$(((wheels_kib % 1024) * 10 / 1024)) MiB;" \
  "checkout (git archive HEAD): $((checkout_kib / 1024)).$(((checkout_kib % 1024) * 10 / 1024)) MiB;" \
  "together: $(((wheels_kib + checkout_kib) / 1024)) MiB of 64 MiB"
if [[ -n "$RECORD" ]]; then
  "${PYTHON:-python3}" - "$RECORD" "$DIR" "$checkout_kib" "$PYARROW" <<'PY'
import json, subprocess, sys
from pathlib import Path
record, folder, checkout_kib, pyarrow = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
wheels = {p.name: p.stat().st_size for p in sorted(folder.glob("*.whl"))}
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
mib = lambda n: round(n / 2**20, 2)
Path(record).write_text(json.dumps({
    "command": "bash bench/prepare_gpu_wheels.sh" + (" --pyarrow" if pyarrow else ""), "commit": commit,
    "wheels": len(wheels), "wheels_mib": mib(sum(wheels.values())), "checkout_mib": mib(checkout_kib * 1024),
    "together_mib": mib(sum(wheels.values()) + checkout_kib * 1024), "limit_mib": 64,
    "wheel_bytes": wheels}, indent=1) + "\n")
PY
fi
if ((wheels_kib + checkout_kib > 64 * 1024)); then
  echo "checkout plus wheels exceed 64 MiB" >&2
  exit 1
fi
