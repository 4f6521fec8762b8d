#!/usr/bin/env bash
# Installs execrl itself into a conda environment Snakemake has just created from one of the
# environment files here (Snakemake runs <family>.post-deploy.sh, a link to this script, inside
# the new environment, from the workflow's working directory: the repository root).
# Editable, so the environment follows the checkout; without dependencies, because the
# environment file pins exactly what its rule family imports.
set -euo pipefail
if ! grep -qs '^name = "execrl"' pyproject.toml; then
    echo "install-execrl.sh: run Snakemake from the execrl repository root ($PWD has no execrl pyproject.toml)" >&2
    exit 1
fi
python -m pip install --quiet --no-deps --editable .
