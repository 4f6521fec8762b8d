"""The memory plan's activation terms against what a real TRL 1.16 trainer step allocates.

Qwen2.5 shapes cut to 2 layers, random weights, one micro-batch's loss and backward through
execrl's GRPO trainer (LoRA, dropout, 4 scoring chunks) and TRL's DPOTrainer (full weights), both
with TRL's fused, chunked LM head (execrl.planning.memory_measure). On the CPU (fp32, TRL's torch fallback of
its Triton kernel): each term from torch's profiler (the CPU allocator's every allocation and
free). With CUDA also (bf16, the Triton kernel): the step's peak from torch.cuda.max_memory_allocated
against saved_activations + max(lm_head, recompute, embedding_gradient).

Usage: .venv/bin/python bench/memory_plan_check.py [--shapes Qwen/Qwen2.5-0.5B-Instruct ...]
           [--lengths 128:384 ...] [--json results.json]
"""

import argparse
import dataclasses
import json
import tempfile

from execrl.planning.memory_measure import StepShape, measure_cpu_step, measure_cuda_step, planned_activation_bytes
from execrl.planning.architecture import architecture

SHAPES = ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct")
# prompt:completion tokens; micro-batches of 4 completions (GRPO) and 2 pairs (DPO)
LENGTHS = ("128:384",)
TERMS = {"saved_activations": "layer_inputs", "lm_head": "lm_head", "recompute": "recompute",
         "embedding_gradient": "embedding_gradient"}


def peak(planned: dict) -> int:
    return planned["saved_activations"] + max(planned["lm_head"], planned["recompute"], planned["embedding_gradient"])


def step_shapes(prompt: int, completion: int) -> list[StepShape]:
    return [
        StepShape("grpo", micro_batch=4, prompt_length=prompt, completion_length=completion, lora=True),
        StepShape("dpo", micro_batch=2, prompt_length=prompt, completion_length=completion, lora=False),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--lengths", nargs="+", default=LENGTHS, help="prompt:completion tokens")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    rows = []
    print(f"{'model':<28}{'trainer':>9}{'T':>6}{'term':>19}{'plan MB':>10}{'measured MB':>13}{'ratio':>7}")
    for source in args.shapes:
        arch = dataclasses.replace(architecture(source), num_hidden_layers=args.layers)
        for lengths in args.lengths:
            prompt, completion = map(int, lengths.split(":"))
            for shape in step_shapes(prompt, completion):
                trainer = f"{shape.trainer}-{'lora' if shape.lora else 'full'}"
                with tempfile.TemporaryDirectory() as workdir:
                    measured = measure_cpu_step(arch, shape, workdir)
                planned = planned_activation_bytes(arch, shape, on_cpu=True)
                planned["step_peak"] = peak(planned)
                for term, as_measured in {**TERMS, "step_peak": "step_peak"}.items():
                    if not planned[term] and not measured[as_measured]:
                        continue
                    row = {"device": "cpu", "model": source, "layers": args.layers, "trainer": trainer,
                           "prompt": prompt, "completion": completion, "term": term,
                           "planned_mb": planned[term] / 1e6, "measured_mb": measured[as_measured] / 1e6}
                    rows.append(row)
                    print(f"{source:<28}{trainer:>9}{prompt + completion:>6}{term:>19}{row['planned_mb']:>10.1f}"
                          f"{row['measured_mb']:>13.1f}{row['measured_mb'] / max(row['planned_mb'], 1e-9):>7.2f}", flush=True)
                if cuda:
                    with tempfile.TemporaryDirectory() as workdir:
                        on_gpu = measure_cuda_step(arch, shape, workdir)
                    gpu_plan = planned_activation_bytes(arch, shape, on_cpu=False)
                    row = {"device": torch.cuda.get_device_name(), "model": source, "layers": args.layers,
                           "trainer": trainer, "prompt": prompt, "completion": completion, "term": "step_peak",
                           "planned_mb": peak(gpu_plan) / 1e6, "measured_mb": on_gpu["step_peak"] / 1e6}
                    rows.append(row)
                    print(f"{source:<28}{trainer:>9}{prompt + completion:>6}{'step_peak (CUDA)':>19}"
                          f"{row['planned_mb']:>10.1f}{row['measured_mb']:>13.1f}"
                          f"{row['measured_mb'] / row['planned_mb']:>7.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
