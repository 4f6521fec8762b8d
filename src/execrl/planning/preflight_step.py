"""One training job's first optimizer step, measured: what `execrl.planning.preflight` launches for each job.

    accelerate launch ... -m execrl.planning.preflight_step --probe-out probe.json grpo --model ... (train_job's arguments)

It runs `execrl.training.train_job` itself, with the same arguments the workflow's `train` rule passes,
and adds one callback to the trainer `execrl.training.grpo.train_grpo` / `execrl.training.dpo.train_dpo` builds
(`MemoryProbe`), which stops training after the first optimizer step and writes (rank 0) what it
measured:

- on a GPU, `torch.cuda.memory_allocated` when training begins (weights, frozen copies, ZeRO's
  buffers) and after the step (plus the optimizer state; gradients are freed at zero_grad);
- the step cut into phases, each with its own peak (the peak is read, then reset, at each cut;
  on CUDA after `torch.cuda.synchronize`, with `torch.cuda.reset_peak_memory_stats`):
  `generation`, around the trainer's `_generate` (GRPO's round: the KV cache and sampling
  buffers of transformers' `generate`; none for DPO), with its own wall time; `update`, from the
  end of generation (or the start of training) to the first optimizer step's start (a global
  `torch.optim` step pre-hook: it also fires inside DeepSpeed's engine step), the forward and
  backward; `optimizer`, the optimizer step itself, to the step's end. Each phase reports the
  level it began at and its peak, so the update's activations are its peak above its own start;
- on the CPU, the process's resident set (VmRSS) at the same points, and its peak (VmHWM),
  reset at the same cuts (`/proc/self/clear_refs`); torch's CPU allocator keeps no peak of its
  own, so this is RSS, with the imported libraries in the baseline;
- the step's wall time, its generation's and the update's (the rest), and the tokens TRL counted
  in it (its `num_tokens` metric).
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


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    else:
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
    """Records memory when training begins, the first optimizer step's phases (generation, update,
    optimizer: see the module) and its peak, the step's time and tokens; stops training after that step."""

    def __init__(self, baseline: dict):
        self.record: dict = {"baseline": baseline, "phases": {}}
        self._start = 0.0
        self._phase: str | None = None
        self._phase_start = 0.0
        self._overall = {"allocated": 0, "reserved": 0}
        self._generation_seconds = 0.0
        self._done = False

    def _read_peak(self) -> dict:
        synchronize()
        peak = memory_peak()
        self._overall = {key: max(self._overall[key], peak[key]) for key in peak}
        return peak

    def begin_phase(self, name: str) -> None:
        """Close the running phase (its peak since it began) and start `name` from a fresh peak."""
        self.end_phase()
        self._phase, self._phase_start = name, time.perf_counter()
        reset_peak()
        self.record["phases"][name] = {"start": memory_now()}

    def end_phase(self) -> None:
        if self._phase is None:
            return
        phase = self.record["phases"][self._phase]
        phase["peak"] = self._read_peak()
        phase["end"] = memory_now()
        phase["seconds"] = time.perf_counter() - self._phase_start
        self._phase = None

    def in_first_step(self) -> bool:
        return self._start > 0 and not self._done

    def around_generation(self, generate):
        """`generate` (a trainer's `_generate`) measured as the `generation` phase of the first step."""

        def measured(*args, **kwargs):
            if not self.in_first_step() or "generation" in self.record["phases"]:
                return generate(*args, **kwargs)
            self.begin_phase("generation")
            try:
                return generate(*args, **kwargs)
            finally:
                self.end_phase()
                self._generation_seconds = self.record["phases"]["generation"]["seconds"]
                self.begin_phase("update")

        return measured

    def before_optimizer_step(self, optimizer, args, kwargs) -> None:
        """The global optimizer step pre-hook: the update's forward and backward end here."""
        if self.in_first_step() and "optimizer" not in self.record["phases"]:
            self.begin_phase("optimizer")

    def on_train_begin(self, args, state, control, **kwargs):
        self.record["train_begin"] = memory_now()
        synchronize()
        self.record["load_peak"] = memory_peak()  # loading and preparing (DeepSpeed's set-up), kept apart
        reset_peak()

    def on_step_begin(self, args, state, control, **kwargs):
        if self._start == 0:
            self._start = time.perf_counter()
            self.begin_phase("update")  # DPO; GRPO's round generates first and restarts it after

    def on_step_end(self, args, state, control, **kwargs):
        if self.in_first_step():
            self.end_phase()
            synchronize()
            self.record["step_seconds"] = time.perf_counter() - self._start
            self.record["generation_seconds"] = self._generation_seconds
            self.record["update_seconds"] = self.record["step_seconds"] - self._generation_seconds
            self.record["after_step"] = memory_now()
            self.record["peak"] = dict(self._overall)
            self.record["optimizer_steps"] = state.global_step
            self._done = True
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

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    probe = MemoryProbe(memory_now())
    originals = {module: module.train_resuming for module in (grpo, dpo)}

    def probed(module):
        def train_resuming(trainer, checkpoint_dir):
            trainer.add_callback(probe)
            if hasattr(trainer, "_generate"):  # GRPO's trainers: the round's sampling, measured on its own
                trainer._generate = probe.around_generation(trainer._generate)
            return originals[module](trainer, checkpoint_dir)

        return train_resuming

    for module in originals:
        module.train_resuming = probed(module)
    hook = register_optimizer_step_pre_hook(probe.before_optimizer_step)
    try:
        train_job.main(train_job_args)
    finally:
        hook.remove()
        for module, original in originals.items():
            module.train_resuming = original
    if "step_seconds" not in probe.record:
        raise RuntimeError("the job ended without an optimizer step: nothing measured")
    if torch.cuda.is_available():
        probe.record["device"] = torch.cuda.get_device_name(0)
        probe.record["memory_source"] = "torch.cuda allocator (memory_allocated, max_memory_allocated/reserved)"
    else:
        probe.record["device"] = "cpu"
        probe.record["memory_source"] = "process resident set (VmRSS; peak VmHWM per phase of the step)"
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
