"""What the AVX2 kernel pin (`compute.cpu_kernels: avx2`, execrl.compute) costs against the
machine's native kernels, per kind of job, on the embedded default's tiny model.

    .venv/bin/python bench/cpu_kernel_cost.py [--rounds 5] [--output docs/results/cpu_kernel_cost.json]

Each kind of job is one measured piece of work in a fresh process (the pin is read when torch
first dispatches, so it cannot change inside one process), run under both choices in alternation,
`--rounds` times each; the figure is the ratio of the medians (pinned ÷ native: above 1 the pin is
slower). Kinds, each at the embedded default's shapes (hidden 192, 3 layers, vocabulary 512):

- warm start: 20 optimizer steps of supervised training, batches of 16 sequences of 128 tokens;
- generation: sampling 64 completions of 48 new tokens from 8 prompts (transformers' generate);
- GRPO update: forward and backward of 64 completions of 96 tokens and an AdamW step, 5 times.

On a CPU without AVX-512 both choices run the same kernels and the ratio is 1 up to noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from execrl.compute import PIN_VARIABLES, kernel_environment, widest_instruction_set

WORK = r"""
import sys, time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.manual_seed(0)
torch.set_num_threads(1)
config = Qwen2Config(vocab_size=512, hidden_size=192, num_hidden_layers=3, num_attention_heads=4,
                     num_key_value_heads=2, intermediate_size=512, max_position_embeddings=512)
model = Qwen2ForCausalLM(config)
kind = sys.argv[1]
ids = torch.randint(3, 512, (64, 128))
start = time.perf_counter()
if kind == "warm start":
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(20):
        batch = ids[(step % 4) * 16:(step % 4 + 1) * 16]
        model(input_ids=batch, labels=batch).loss.backward()
        optimizer.step(); optimizer.zero_grad()
elif kind == "generation":
    model.eval()
    with torch.no_grad():
        model.generate(ids[:8, :32], do_sample=True, top_k=0, top_p=1.0, max_new_tokens=48, min_new_tokens=48,
                       num_return_sequences=8, pad_token_id=0)
else:
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    batch = ids[:, :96]
    for _ in range(5):
        model(input_ids=batch, labels=batch).loss.backward()
        optimizer.step(); optimizer.zero_grad()
print(time.perf_counter() - start, torch.backends.cpu.get_cpu_capability())
"""
KINDS = ("warm start", "generation", "GRPO update")


def measure(kind: str, cpu_kernels: str) -> tuple[float, str]:
    env = {key: value for key, value in os.environ.items() if key not in PIN_VARIABLES}
    env.update(kernel_environment(cpu_kernels))
    out = subprocess.run([sys.executable, "-c", WORK, kind], env=env, capture_output=True, text=True, check=True)
    seconds, capability = out.stdout.split()
    return float(seconds), capability


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for kind in KINDS:
        times = {"avx2": [], "native": []}
        capability = {}
        for _ in range(args.rounds):
            for choice in ("avx2", "native"):
                seconds, capability[choice] = measure(kind, choice)
                times[choice].append(seconds)
        pinned, native = statistics.median(times["avx2"]), statistics.median(times["native"])
        rows.append({"kind": kind, "pinned_s": pinned, "native_s": native, "ratio": pinned / native,
                     "kernels": capability, "times": times})
        print(f"{kind}: pinned ({capability['avx2']}) {pinned:.2f} s, native ({capability['native']}) {native:.2f} s,"
              f" pinned / native {pinned / native:.2f}", flush=True)
    if args.output:
        record = {"command": " ".join(sys.argv), "cpu_widest_instruction_set": widest_instruction_set(),
                  "rounds": args.rounds, "rows": rows}
        args.output.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
