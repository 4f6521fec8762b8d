"""One training job's first optimizer step, measured: what `execrl.planning.preflight` launches for each job.

    accelerate launch ... -m execrl.planning.preflight_step --probe-out probe.json grpo --model ... (train_job's arguments)

It runs `execrl.training.train_job` itself, with the same arguments the workflow's `train` rule passes,
and adds one callback to the trainer `execrl.training.grpo.train_grpo` / `execrl.training.dpo.train_dpo` builds
(`MemoryProbe`), which stops training after the first optimizer step and writes (rank 0) what it
measured:

- on a GPU, `torch.cuda.memory_allocated` when training begins (weights, frozen copies, ZeRO's
  buffers), after the step (plus the optimizer state; gradients are freed at zero_grad), and
  `max_memory_allocated` / `max_memory_reserved` over the whole process;
- on the CPU, the process's resident set (VmRSS) at the same points, and its peak (VmHWM) during
  the step, reset when training begins (`/proc/self/clear_refs`); torch's CPU allocator keeps no
  peak of its own, so this is RSS, with the imported libraries in the baseline;
- the step's wall time and the tokens TRL counted in it (its `num_tokens` metric).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from transformers import TrainerCallback


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def memory_now() -> dict:
    """Bytes in use now: torch's CUDA allocator on a GPU, the resident set on the CPU."""
    import torch

    if torch.cuda.is_available():
        return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
    return {"allocated": _status_kb("VmRSS") * 1024, "reserved": _status_kb("VmRSS") * 1024}


def reset_peak() -> None:
    import torch

    if not torch.cuda.is_available():
        # Writing 5 resets the peak resident set (VmHWM) to the current one (Linux 4.0 and newer).
        Path("/proc/self/clear_refs").write_text("5")


def memory_peak() -> dict:
    import torch

    if torch.cuda.is_available():
        return {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved()}
    # VmHWM is updated lazily: never below the resident set read now.
    peak = max(_status_kb("VmHWM"), _status_kb("VmRSS")) * 1024
    return {"allocated": peak, "reserved": peak}


class MemoryProbe(TrainerCallback):
    """Records memory when training begins, after the first optimizer step and its peak, the step's
    time and tokens; stops training after that step."""

    def __init__(self, baseline: dict):
        self.record: dict = {"baseline": baseline}
        self._start = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self.record["train_begin"] = memory_now()
        reset_peak()

    def on_step_begin(self, args, state, control, **kwargs):
        if "step_seconds" not in self.record:
            self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if "step_seconds" not in self.record:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.record["step_seconds"] = time.perf_counter() - self._start
            self.record["after_step"] = memory_now()
            self.record["peak"] = memory_peak()
            self.record["optimizer_steps"] = state.global_step
        control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "num_tokens" in logs and "step_tokens" not in self.record:
            self.record["step_tokens"] = float(logs["num_tokens"])


def run(probe_out: Path, train_job_args: list[str]) -> dict:
    """Run `execrl.training.train_job` with `train_job_args`, probing its trainer; write the record (rank 0)."""
    import torch

    from execrl.training import dpo, grpo, train_job
    from execrl.training.common import process_rank

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    probe = MemoryProbe(memory_now())
    originals = {module: module.train_resuming for module in (grpo, dpo)}

    def probed(module):
        def train_resuming(trainer, checkpoint_dir):
            trainer.add_callback(probe)
            return originals[module](trainer, checkpoint_dir)

        return train_resuming

    for module in originals:
        module.train_resuming = probed(module)
    try:
        train_job.main(train_job_args)
    finally:
        for module, original in originals.items():
            module.train_resuming = original
    if "step_seconds" not in probe.record:
        raise RuntimeError("the job ended without an optimizer step: nothing measured")
    if torch.cuda.is_available():
        probe.record["device"] = torch.cuda.get_device_name(0)
        probe.record["memory_source"] = "torch.cuda allocator (memory_allocated, max_memory_allocated/reserved)"
    else:
        probe.record["device"] = "cpu"
        probe.record["memory_source"] = "process resident set (VmRSS; peak VmHWM during the step)"
    if process_rank() == 0:
        probe_out.parent.mkdir(parents=True, exist_ok=True)
        probe_out.write_text(json.dumps(probe.record, indent=2))
    return probe.record


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "--probe-out":
        sys.exit("usage: python -m execrl.planning.preflight_step --probe-out FILE METHOD (execrl.training.train_job's arguments)")
    run(Path(argv[1]), argv[2:])


if __name__ == "__main__":
    main()
