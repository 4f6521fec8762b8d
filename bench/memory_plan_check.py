"""The memory plan's checkpointed-activation term against torch's CPU allocator peak.

Qwen2.5 shapes at 2 layers with random bf16 weights; forward + backward with gradient checkpointing.
Gradients are allocated before measuring (backward then accumulates into them), so the profiler's
running allocation peak is the activations alone. Usage: .venv/bin/python bench/memory_plan_check.py
"""

import dataclasses

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import Qwen2Config, Qwen2ForCausalLM

from execrl.memory_plan import architecture

SHAPES = ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct")
# Long enough that the activations, not one weight's gradient temporary, make the peak.
BATCHES = ((1, 1024), (2, 1024), (1, 2048))


def allocator_peak_bytes(run) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    current = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        current += event.self_cpu_memory_usage
        peak = max(peak, current)
    return peak


def main() -> None:
    torch.manual_seed(0)
    print(f"{'model (2 layers)':<28}{'micro':>6}{'T':>6}{'plan MB':>10}{'measured MB':>13}{'ratio':>8}")
    for source in SHAPES:
        arch = dataclasses.replace(architecture(source), num_hidden_layers=2)
        shape = {f.name: getattr(arch, f.name) for f in dataclasses.fields(arch) if f.name != "parameter_count"}
        model = Qwen2ForCausalLM(Qwen2Config(**shape)).to(torch.bfloat16)
        model.gradient_checkpointing_enable()
        model.train()
        for parameter in model.parameters():
            parameter.grad = torch.zeros_like(parameter)
        for micro, length in BATCHES:
            ids = torch.randint(0, arch.vocab_size, (micro, length))

            def step():
                model(input_ids=ids, labels=ids).loss.backward()

            measured = allocator_peak_bytes(step)
            plan = arch.checkpointed_activation_bytes(micro, length)
            print(f"{source:<28}{micro:>6}{length:>6}{plan / 1e6:>10.0f}{measured / 1e6:>13.0f}{measured / plan:>8.2f}")
        del model


if __name__ == "__main__":
    main()
