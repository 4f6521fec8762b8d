"""Sampling time of the embedded default's base model with each generation backend, on CPU.

Does the work of the `generate_candidates` rule for the base model's test candidates (the embedded
default's problems, samples per problem, tokens and batch size, seed 0) with transformers'
`generate` and with vLLM's CPU build, each in a fresh interpreter as the rule's job is (imports and
the backend's start-up included), on the CPU kernels the workflow pins, with the rule's 2 threads.
The two alternate over `--rounds` (transformers first in odd rounds, vLLM first in even ones), so
that a drift in the machine's load favours neither. Prints each run's wall time, split into
start-up (imports, building the backend) and sampling, the CPU time of its whole process tree, and
per round vLLM's wall time over transformers'; `--json` keeps every run, the commit, the CPU and
the load averages. The backend the workflow is configured with must write byte for byte the
candidates the workflow wrote under `--results` (each run says whether it did): the bench does the
rule's work, not a lookalike.

vLLM runs as the docs measured it: `generation.backend: vllm` with `generation.vllm:
{gpu_memory_utilization: 0.05}` laid over the embedded default, and `VLLM_CPU_KVCACHE_SPACE=1`
(GiB of KV cache; vLLM's CPU build takes it from the environment).

    PYTHONPATH=src .venv/bin/python bench/generation_backend_time.py --results results [--rounds 3] [--json PATH]

`--results` is a finished `make report`'s results folder: the base model and the test problems
are the ones the workflow built there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMBEDDED = REPO / ".test" / "config" / "config.yaml"
MODEL = "tiny"
VLLM_OVERLAY = {"backend": "vllm", "vllm": {"gpu_memory_utilization": 0.05}}
VLLM_ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": "1"}
BACKENDS = ("transformers", "vllm")
RULE_THREADS = 2


def rule_params(config: dict, backend: str) -> dict:
    """What the `generate_candidates` rule passes its script for the base model's seed 0
    (`workflow/rules/settings.smk`), with `backend` sampling."""
    from execrl.run_paths import sampling_settings

    config = {**config, "generation": {**config["generation"], **(VLLM_OVERLAY if backend == "vllm" else {})}}
    settings = sampling_settings(config, MODEL, "base")
    generation = {k: v for k, v in settings["generation"].items() if k not in ("backend", "vllm")}
    return {
        **settings,
        "backend": backend,
        "vllm": config["generation"]["vllm"] if backend == "vllm" else None,
        "generation": {**generation, "seed": 0},
    }


def sample_once(params: dict, model: str, problems: str, candidates: Path) -> dict:
    """The rule script's work (`workflow/scripts/generate_candidates.py`), timed: start-up, then sampling;
    the candidates written to `candidates` as the rule writes them."""
    start = time.monotonic()
    import torch

    from execrl.generation import GenerationSettings, VLLMSettings, candidate_records, get_backend
    from execrl.jsonl import write_jsonl
    from execrl.problems import read_problems
    from execrl.prompting import PromptConfig

    torch.set_num_threads(RULE_THREADS)
    vllm = VLLMSettings(**params["vllm"]) if params["vllm"] else None
    backend = get_backend(params["backend"], model, gpus=0, vllm=vllm)
    ready = time.monotonic()
    records = candidate_records(
        problems=read_problems(problems)[: params["max_problems"]],
        backend=backend,
        settings=GenerationSettings(**params["generation"]),
        prompt_config=PromptConfig(**params["prompt"]),
    )
    done = time.monotonic()
    write_jsonl(records, candidates)
    return {"startup_s": ready - start, "sampling_s": done - ready, "candidates": len(records)}


def run_fresh(backend: str, params: dict, model: Path, problems: Path, env: dict, reference: Path | None) -> dict:
    """`sample_once` in a fresh interpreter: its timings, its wall time, its process tree's CPU time, and
    whether its candidates are byte for byte those of `reference` (the rule's own file)."""
    scratch = tempfile.TemporaryDirectory()
    timings_file, candidates = Path(scratch.name, "timings.json"), Path(scratch.name, "candidates.jsonl")
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(params), "--model", str(model), "--problems", str(problems),
         "--json", str(timings_file), "--candidates", str(candidates)],
        env=env, capture_output=True, text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{backend} run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    timings = json.loads(timings_file.read_text())  # (vLLM and progress bars print on stdout)
    same = None if reference is None else candidates.read_bytes() == reference.read_bytes()
    scratch.cleanup()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"backend": backend, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "startup_s": round(timings["startup_s"], 2), "sampling_s": round(timings["sampling_s"], 2),
            "candidates": timings["candidates"], "same_as_workflow": same, "load_average_at_start": load_at_start}


def workflow_candidates(results: Path, config: dict) -> Path | None:
    """The base model's seed-0 test candidates the workflow sampled under `results` (with its
    configured backend), when there is exactly one such file."""
    dataset = config["experiment"]["datasets"][0]
    found = sorted(results.glob(f"candidates/{dataset}-*/{MODEL}-*/base-*/0/test.jsonl"))
    return found[0] if len(found) == 1 else None


def find_inputs(results: Path, config: dict) -> tuple[Path, Path]:
    """The base model and the test problems a finished run built under `results`."""
    dataset = config["experiment"]["datasets"][0]
    # results/models/{dataset}-{digest}/{model}-{digest}/base and results/data/{dataset}-{digest}/test.jsonl
    models = sorted(p.parent for p in results.glob(f"models/{dataset}-*/{MODEL}-*/base/config.json"))
    problems = sorted(results.glob(f"data/{dataset}-*/test.jsonl"))
    if not models or not problems:
        sys.exit(f"{results}: no base model or test problems of a finished `make report` (models: {models}, "
                 f"problems: {problems}); pass --model and --problems")
    return models[0], problems[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=REPO / "results")
    ap.add_argument("--model", type=Path, help="the base model's folder (default: found under --results)")
    ap.add_argument("--problems", type=Path, help="the test problems (default: found under --results)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--candidates", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        timings = sample_once(json.loads(args.one), str(args.model), str(args.problems), args.candidates)
        args.json.write_text(json.dumps(timings))
        return

    sys.path.insert(0, str(REPO / "src"))
    from execrl.compute import cpu_model, kernel_environment
    from execrl.config import merged_config

    config = merged_config([], base=EMBEDDED)
    model, problems = (args.model, args.problems) if args.model and args.problems else find_inputs(args.results, config)
    env = {**os.environ, **kernel_environment(config["compute"]["cpu_kernels"]), **VLLM_ENVIRONMENT,
           "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    reference = workflow_candidates(args.results, config)
    print(f"model {model}, problems {problems}, the workflow's candidates {reference}")
    runs, ratios = [], []
    load_start = [round(x, 2) for x in os.getloadavg()]
    for r in range(args.rounds):
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        got = {}
        for backend in order:
            same_backend = reference if backend == config["generation"]["backend"] else None
            run = run_fresh(backend, rule_params(config, backend), model, problems, env, same_backend)
            run["round"] = r + 1
            runs.append(run)
            got[backend] = run
            print(f"round {r + 1} {backend:12} wall {run['wall_s']:7.2f} s (start-up {run['startup_s']:6.2f} s, "
                  f"sampling {run['sampling_s']:6.2f} s), CPU {run['cpu_s']:7.2f} s, {run['candidates']} candidates"
                  + ("" if run["same_as_workflow"] is None else f", the workflow's own: {run['same_as_workflow']}"))
        ratios.append(round(got["vllm"]["wall_s"] / got["transformers"]["wall_s"], 3))
        print(f"round {r + 1} wall vLLM / transformers {ratios[-1]}")

    def mean(backend: str, key: str) -> float:
        values = [run[key] for run in runs if run["backend"] == backend]
        return round(sum(values) / len(values), 2)

    summary = {backend: {key: mean(backend, key) for key in ("wall_s", "startup_s", "sampling_s", "cpu_s")}
               for backend in BACKENDS}
    summary["vllm_over_transformers_wall"] = {"per_round": ratios, "mean": round(sum(ratios) / len(ratios), 3)}
    print(f"mean wall: transformers {summary['transformers']['wall_s']} s, vLLM {summary['vllm']['wall_s']} s "
          f"(start-up {summary['vllm']['startup_s']} s); vLLM / transformers per round {ratios}, "
          f"mean {summary['vllm_over_transformers_wall']['mean']}")
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        script = os.path.relpath(Path(sys.argv[0]).resolve(), REPO)
        record = {"command": " ".join(["python", script, *sys.argv[1:]]),
                  "commit": commit.stdout.strip(), "cpu": cpu_model(), "model": str(model), "problems": str(problems),
                  "params": {b: rule_params(config, b) for b in BACKENDS}, "environment": VLLM_ENVIRONMENT,
                  "load_average_start": load_start, "load_average_end": [round(x, 2) for x in os.getloadavg()],
                  "runs": runs, "summary": summary}
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
