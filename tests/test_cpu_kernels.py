"""The CPU kernel pin (execrl.compute): the same config gives byte-identical weights and metrics
whichever instruction sets the machine offers; without the pin it does not."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import EMBEDDED, copy_workflow, run_snakemake, segments
from execrl.compute import (
    GPU_ENVIRONMENT,
    PIN_VARIABLES,
    compute_provenance,
    describe,
    kernel_environment,
    pin_cpu_kernels,
    widest_instruction_set,
)
from execrl.config import merged_config
from execrl.run_paths import RunSegments
from test_workflow import REDUCED, deep_update

# A reduced warm start and 20 GRPO steps: enough updates for kernel differences to show in the bytes.
GRPO_20 = deep_update(
    json.loads(json.dumps(REDUCED)),
    {
        "experiment": {"methods": ["base", "grpo"]},
        "tiny_model": {"hidden_size": 64, "intermediate_size": 128, "sft": {"num_train_epochs": 2}},
        "grpo": {"max_steps": 20, "prompts_per_step": 2, "num_generations": 4, "max_completion_length": 24,
                 "save_steps": 100, "eval_every": 0},
    },
)
"""Metric fields that measure the machine's speed, not the result."""
TIMING_FIELDS = ("runtime", "second", "time", "per_second", "elapsed")


def isa_below(isa: str) -> dict[str, str]:
    """Variables that make this machine look like one with the instruction set below `isa`: an
    AVX2-only CPU on an AVX-512 one, a CPU without AVX2 on an AVX2 one."""
    if isa == "AVX512":
        return {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    return {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}


# ---------------------------------------------------------------- the settings


def test_avx2_pins_every_library_and_native_sets_nothing():
    pins = kernel_environment("avx2")
    assert pins["ATEN_CPU_CAPABILITY"] == "avx2"
    assert pins["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert pins["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and pins["MKL_CBWR"] == "AVX2"
    assert kernel_environment("native") == {}
    with pytest.raises(ValueError, match="compute.cpu_kernels"):
        kernel_environment("avx512")
    environ = {"ATEN_CPU_CAPABILITY": "default"}
    pin_cpu_kernels("native", environ)
    assert environ == {"ATEN_CPU_CAPABILITY": "default", **GPU_ENVIRONMENT}
    pin_cpu_kernels("avx2", environ)
    assert environ["ATEN_CPU_CAPABILITY"] == "avx2"


def test_the_choice_of_kernels_is_in_every_model_path_and_no_data_path():
    config = merged_config([EMBEDDED])
    native = json.loads(json.dumps(config))
    native["compute"] = {"cpu_kernels": "native"}
    pinned, other = RunSegments(config), RunSegments(native)
    assert config["compute"]["cpu_kernels"] == "avx2"  # the schema's default
    assert pinned.dataset == other.dataset and pinned.tokenizer == other.tokenizer
    assert pinned.init["tiny"] != other.init["tiny"] and pinned.model["tiny"] != other.model["tiny"]
    # A method's segment covers only what its level adds: its full path changes through the model's.
    assert pinned.run("builtin", "tiny", "base") != other.run("builtin", "tiny", "base")


def test_provenance_names_the_kernels_this_process_uses():
    script = "import json; from execrl.compute import compute_provenance; print(json.dumps(compute_provenance('avx2')))"
    env = {key: value for key, value in os.environ.items() if key not in PIN_VARIABLES}
    env.update({**kernel_environment("avx2"), **GPU_ENVIRONMENT})
    record = json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                       check=True).stdout)
    assert record["torch_cpu_capability"] == "AVX2"
    assert record["pins"] == {**kernel_environment("avx2"), **GPU_ENVIRONMENT}
    assert record["cpu_widest_instruction_set"] == widest_instruction_set()
    assert "AVX2" in describe(record) and "avx2" in describe(record)
    assert compute_provenance()["cores"] == os.cpu_count()


# ---------------------------------------------------------------- the workflow's results


def warm_start_dir(workdir, config_file: str):
    runs = segments(workdir, EMBEDDED, config_file)
    return workdir / "results" / "models" / runs.dataset["builtin"] / runs.model["tiny"] / "base"


def result_bytes(workdir, config_file: str, grpo: bool = True) -> dict[str, str]:
    """sha256 of the warm-started model's and the GRPO adapter's tensors, and the GRPO metrics less
    their timings, of one finished run (the warm start's alone without `grpo`)."""
    from safetensors.numpy import load_file

    runs = segments(workdir, EMBEDDED, config_file)
    trained = runs.run("builtin", "tiny", "grpo", "trained")
    found = {}
    folders = {"warm start": warm_start_dir(workdir, config_file)}
    if grpo:
        folders["grpo"] = workdir / f"results/models/{trained}/0/trained"
    for name, folder in folders.items():
        files = sorted(folder.rglob("*.safetensors"))
        assert files, f"no weights under {folder}"
        digest = hashlib.sha256()
        for path in files:
            for key, value in sorted(load_file(path).items()):
                digest.update(key.encode() + value.tobytes())
        found[name] = digest.hexdigest()
    if not grpo:
        return found
    rows = [json.loads(line) for line in (workdir / f"results/training/{trained}/0/metrics.jsonl").read_text().splitlines()]
    kept = [{k: v for k, v in row.items() if not any(t in k for t in TIMING_FIELDS)} for row in rows]
    assert len(kept) >= 20
    found["grpo metrics"] = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
    return found


def grpo_run(tmp_path, name: str, cpu_kernels: str, mask: dict[str, str], grpo: bool = True) -> dict[str, str]:
    workdir = copy_workflow(tmp_path / name)
    config = deep_update(json.loads(json.dumps(GRPO_20)), {"compute": {"cpu_kernels": cpu_kernels}})
    (workdir / "config" / "test.yaml").write_text(yaml.safe_dump(config))
    trained = segments(workdir, EMBEDDED, "config/test.yaml").run("builtin", "tiny", "grpo", "trained")
    target = f"results/models/{trained}/0/trained" if grpo else str(warm_start_dir(workdir, "config/test.yaml").relative_to(workdir))
    outside = {key: value for key, value in os.environ.items() if key not in PIN_VARIABLES}
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({**outside, **mask})
    try:
        run_snakemake(workdir, target, "--configfile", EMBEDDED, "config/test.yaml")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return result_bytes(workdir, "config/test.yaml", grpo)


@pytest.mark.slow
def test_pinned_runs_agree_to_the_byte_on_a_masked_cpu_and_unpinned_ones_do_not(tmp_path):
    older = isa_below(widest_instruction_set())
    pinned = grpo_run(tmp_path, "pinned", "avx2", {})
    pinned_masked = grpo_run(tmp_path, "pinned-masked", "avx2", older)
    assert pinned == pinned_masked
    # The control: without the pin the same masks change the warm start (and so everything after it).
    native = grpo_run(tmp_path, "native", "native", {}, grpo=False)
    native_masked = grpo_run(tmp_path, "native-masked", "native", older, grpo=False)
    assert native["warm start"] != native_masked["warm start"]
