"""GPU memory plan of a training job on one node: its training GPUs, ZeRO stage, micro-batch ×
accumulation, optimizer offload and vLLM server, from the model's shape and the run's config.

Per-GPU gigabytes (1e9 bytes) by term (plan_training names each): weights, gradients, optimizer
state (LoRA or full weights; DDP or ZeRO-3 sharded over the processes; optionally the optimizer
offloaded to the CPU); one micro-batch's activations on TRL 1.16's path, whose GRPO and DPO
trainers score tokens through a fused, chunked LM head (Architecture.activation_bytes:
saved_activations, and backward_peak, the larger of lm_head and recompute); DeepSpeed's buffers,
the CUDA context and NCCL's buffers; the colocated vLLM share; frozen copies (a reference sharded
like the policy) and code_game's opponent (whole on every GPU). A vLLM server: its weights, KV
cache and profiling peak per tensor-parallel GPU. Colocated vLLM is checked to hold its weights
and the round's KV cache in its share. The capacity is what the GPU's driver reports
(execrl.planning.cluster.Gpu.capacity_gb).

Where each part is: the model's shape and the bytes it implies (execrl.planning.architecture:
Architecture, SHIPPED_SHAPES); one training process's plan and the largest micro-batch that fits
(execrl.planning.training_plan: TrainingJob, Plan, plan_training, fit); a vLLM server's and
colocated vLLM's plans (execrl.planning.vllm_plan); here, the job's layout on a node
(TrainingLayout, plan_training_layout, training_job_layout).

A job's layout must also fit its node's host memory and CPUs (execrl.planning.cluster.Node: a GPU partition of the
Slurm executor's partition file). The activation terms are checked on the CPU against a real TRL
trainer step (tests/test_memory_plan_trl.py, execrl.planning.memory_measure), in fp32 and in bf16;
the CUDA context, NCCL, DeepSpeed and vLLM figures are estimates from the sources named beside
them. The workflow sizes every training job with `training_job_layout`
when the DAG is planned (workflow/rules/resources.smk); nothing here imports torch or TRL.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from execrl.planning.architecture import Architecture, architecture
from execrl.planning.cluster import Gpu, Node
from execrl.planning.resources import gpu_job_cpus, gpu_job_host_gb, least_gpu_job_cpus
from execrl.planning.training_plan import GRPO_SCORE_CHUNKS, DoesNotFit, Plan, TrainingJob, fit
from execrl.planning.vllm_plan import colocated_vllm_plan, fit_vllm_server, plan_vllm_server


@dataclass(frozen=True)
class TrainingLayout:
    """One training job's shape on one node: training processes (one GPU each), the vLLM server's
    GPUs (its tensor parallelism), ZeRO stage, the per-GPU plans that chose them, and the host
    memory and CPUs the job asks of the node."""

    processes: int
    server_gpus: int
    zero_stage: int
    plan: Plan
    server_plan: Plan | None = None
    server_max_model_len: int | None = None
    # The settings' own gradient_accumulation_steps: the plan cuts each of their micro-batches
    # into plan.accumulation pieces.
    settings_accumulation: int = 1
    node: Node = Node()
    # The job's host memory: execrl.planning.resources.gpu_job_host_gb plus the offloaded optimizer state.
    host_gb: float = 0.0
    cpus: int = 0
    sandbox_workers: int = 0  # per training process
    # What colocated vLLM needs of its share of each training GPU (None: no colocated vLLM).
    colocated_plan: Plan | None = None

    @property
    def gpus(self) -> int:
        return self.processes + self.server_gpus

    @property
    def micro_batch(self) -> int:
        return self.plan.micro_batch

    @property
    def accumulation(self) -> int:
        """The trainer's gradient_accumulation_steps: micro-batches of `micro_batch` per optimizer step."""
        return self.plan.accumulation * self.settings_accumulation

    @property
    def offload_optimizer(self) -> bool:
        return self.plan.offload_optimizer

    def describe(self) -> str:
        """One line for the dry run: GPUs, micro-batch × accumulation, offload, GB per GPU by term,
        and the host memory and CPUs against the node's."""
        line = (
            f"{self.processes} training GPU(s) (ZeRO stage {self.zero_stage}), micro-batch {self.micro_batch} "
            f"x accumulation {self.accumulation}, optimizer offload {'on' if self.offload_optimizer else 'off'}"
            f"{f' ({self.plan.host_gb:.0f} GB of it on the host)' if self.offload_optimizer else ''}: "
            f"{self.plan.describe()} ({self.node.gpu.name})"
        )
        if self.server_plan is not None:
            line += (
                f"; vLLM server on {self.server_gpus} GPU(s), max_model_len {self.server_max_model_len}: "
                f"{self.server_plan.describe()}, KV cache room for {self.server_sequences} such sequences at once"
            )
        line += f"; host memory {self.host_gb:.0f} of {_amount(self.node.memory_gb)} GB, " \
            f"{self.cpus} of {_amount(self.node.cpus)} CPUs{f' (partition {self.node.partition})' if self.node.partition else ''}"
        if self.colocated_plan is not None:
            line += f"; colocated vLLM in its share: {self.colocated_plan.describe()}"
        return line

    @property
    def server_sequences(self) -> int:
        """Sequences of `server_max_model_len` tokens the server's KV cache holds at once (0: no server)."""
        if self.server_plan is None:
            return 0
        terms = self.server_plan.terms
        room_gb = self.server_plan.gpu_memory_gb - sum(gb for name, gb in terms.items() if name != "kv_cache")
        per_sequence_gb = terms["kv_cache"]  # planned for one sequence
        return int(room_gb // per_sequence_gb)


def _amount(value: float) -> str:
    return "unlimited" if math.isinf(value) else f"{value:.0f}"


def plan_training_layout(
    arch: Architecture,
    job: TrainingJob,
    completions_for: Callable[[int], int],
    processes: int | None = None,
    server_gpus: int = 0,
    server_max_model_len: int | None = None,
    server_gpu_memory_utilization: float = 0.9,
    node: Node | None = None,
    settings_accumulation: int = 1,
    params_b: float | None = None,
    sandbox_workers: int = 0,
    other_gpus: tuple[Gpu, ...] = (),
) -> TrainingLayout:
    """The job's GPUs, ZeRO stage, micro-batch × accumulation and offload on one `node`.

    `completions_for(n)` is the number of sequences one optimizer step's micro-batches hold over
    `n` processes (a ValueError when the step does not split over n). `processes` None: the fewest
    that fit without offloading the optimizer, else the most with it. Full-weight training runs under
    ZeRO-3; LoRA under DDP when it fits one GPU per process, else ZeRO-3. `server_gpus` (0: no
    server) is the least the vLLM server gets: more when its weights and one `server_max_model_len`
    sequence (what vLLM checks at start) need a larger tensor parallelism. Each process's GPU is
    `node.gpu` (None: a node of 8 GPUs of `job.gpu` and unlimited host). A layout must also fit the node's host memory
    (execrl.planning.resources.gpu_job_host_gb for `params_b`, default the shape's count, plus the offloaded
    state) and CPUs (execrl.planning.resources.gpu_job_cpus with `sandbox_workers` per process). DoesNotFit
    names the numbers and what would help (`other_gpus`: the cluster's other GPU types).
    """
    node = Node(gpu=job.gpu) if node is None else node
    job = dataclasses.replace(job, gpu=node.gpu)
    gpus_per_node = node.gpus
    if params_b is None:
        params_b = arch.parameters() / 1e9
    server_plan = None
    if server_gpus:
        length = server_max_model_len or job.sequence_length
        tensor_parallel, server_plan = fit_vllm_server(
            arch, length, 1, server_gpu_memory_utilization, job.gpu, gpus_per_node - 1
        )
        server_gpus = max(server_gpus, tensor_parallel)
        if tensor_parallel < server_gpus:
            server_plan = plan_vllm_server(arch, length, 1, server_gpus, server_gpu_memory_utilization, job.gpu)
        server_max_model_len = length
    room = gpus_per_node - server_gpus
    counts = [processes] if processes is not None else list(range(1, room + 1))
    stages = [3] if job.finetune == "full" else [0, 3]
    splittable = []
    first_reason = None  # the fewest processes' reason names the setting (grpo.steps_per_generation, ...)
    for count in counts:
        try:
            splittable.append((count, completions_for(count)))
        except ValueError as error:
            first_reason = first_reason or f"{count}: {error}"
    if not splittable:
        raise ValueError(f"the step's sequences split over none of {counts} training processes (with {first_reason})")
    last_error: DoesNotFit | None = None
    host_error: DoesNotFit | None = None
    # Without offload the fewest GPUs that fit; with it, the most (more GPUs share the host's optimizer work).
    for allow_offload, order in ((False, splittable), (True, splittable[::-1])):
        for count, completions in order:
            for stage in stages:
                candidate = dataclasses.replace(job, processes=count, zero_stage=stage)
                try:
                    plan = fit(arch, candidate, completions, allow_offload, room, other_gpus)
                except DoesNotFit as error:
                    last_error = error
                    continue
                gpus = count + server_gpus
                base_gb = gpu_job_host_gb(gpus, params_b)
                host_gb = base_gb + plan.host_gb
                cpus = gpu_job_cpus(gpus, count, sandbox_workers, node.cpus)
                if host_gb > node.memory_gb or cpus is None:
                    host_error = host_error or DoesNotFit(
                        f"{arch.parameters() / 1e9:.1f}B {job.finetune} training on {count} processes fits its "
                        f"GPUs ({plan.describe()}) but not the node's host: it needs {host_gb:.0f} GB of host memory "
                        f"({base_gb:.0f} GB for {gpus} GPUs and {params_b:.1f}B of weights"
                        f"{f', {plan.host_gb:.0f} GB of offloaded optimizer state' if plan.offload_optimizer else ''}"
                        f") of the node's {_amount(node.memory_gb)} GB, and at least "
                        f"{least_gpu_job_cpus(gpus, count, sandbox_workers)} CPUs of its {_amount(node.cpus)}. "
                        "Would help: models.NAME.finetuning: lora, or a partition with more host memory and CPUs (cluster.partitions)"
                    )
                    continue
                return TrainingLayout(
                    count, server_gpus, stage, plan, server_plan, server_max_model_len, settings_accumulation,
                    node, host_gb, cpus[0], cpus[1],
                )
    error = host_error or last_error
    assert error is not None
    more = ""
    if processes is not None:
        try:
            other = plan_training_layout(
                arch, job, completions_for, None, server_gpus, server_max_model_len,
                server_gpu_memory_utilization, node, settings_accumulation, params_b, sandbox_workers,
            )
            more = f"; or models.NAME.training_processes: {other.processes}"
        except (DoesNotFit, ValueError):
            pass
    raise DoesNotFit(f"{error}{more} (node: {node.describe()}; {server_gpus} of its GPUs serving vLLM)")


def check_colocated_vllm(arch: Architecture, layout: TrainingLayout, grpo, job_name: str) -> TrainingLayout:
    """`layout` with the plan of its colocated vLLM (colocated_vllm_plan for `grpo`'s settings, a
    GRPOSettings), or DoesNotFit naming the job, the term and what would fit: the smallest
    grpo.vllm_tensor_parallel_size that would, vllm_mode: server, or the share it needs."""
    length = _planned_length(grpo)
    max_model_len = grpo.vllm_max_model_length or length

    def colocated(tensor_parallel: int) -> Plan:
        sequences = grpo.per_process_completions(layout.processes) * tensor_parallel
        return colocated_vllm_plan(arch, grpo.vllm_gpu_memory_utilization, layout.node.gpu, tensor_parallel,
                                   sequences, length, max_model_len)

    tensor_parallel = grpo.vllm_tensor_parallel_size
    chosen = colocated(tensor_parallel)
    if chosen.fits:
        return dataclasses.replace(layout, colocated_plan=chosen)
    remedies = [
        f"grpo.vllm_tensor_parallel_size: {tp}"
        for tp in (2, 4, 8)
        if tp > tensor_parallel and layout.processes % tp == 0 and arch.num_attention_heads % tp == 0
        and colocated(tp).fits
    ][:1]
    remedies.append("grpo.vllm_mode: server (vLLM on GPUs of its own)")
    share = chosen.total_gb / layout.node.gpu.capacity_gb
    if share < 1:
        remedies.append(f"grpo.vllm_gpu_memory_utilization of at least {math.ceil(share * 100) / 100:.2f}, if the "
                        "training still fits beside it")
    raise DoesNotFit(
        f"{job_name}: colocated vLLM does not fit its share of each training GPU (term colocated_vllm): "
        f"{chosen.describe()} at grpo.vllm_tensor_parallel_size {tensor_parallel} "
        f"(share: grpo.vllm_gpu_memory_utilization {grpo.vllm_gpu_memory_utilization} of "
        f"{layout.node.gpu.name}'s {layout.node.gpu.capacity_gb:.1f} GB). Would help: {'; or '.join(remedies)}"
    )


def _planned_length(grpo) -> int:
    """The sequence length planned for a GRPO step: completion plus PROMPT_TOKENS, at most vLLM's window."""
    length = grpo.max_completion_length + PROMPT_TOKENS
    return min(length, grpo.vllm_max_model_length) if grpo.vllm_max_model_length else length


# Prompt tokens planned beside the completion when vLLM's context window is not set: the prompts'
# own length is known only once the data is prepared, after the DAG is planned.
PROMPT_TOKENS = 1024
# Below this size a model trains on CPU (execrl.planning.resources.CPU_ONLY_BELOW_B): no GPU plan.
_CPU_ONLY_BELOW_B = 0.1


def training_job_layout(config: dict, model: str, method: str, model_dir: str | Path | None = None) -> TrainingLayout | None:
    """The layout of the `train` job of `method` on `model` under the merged workflow `config`,
    or None for a model that trains on CPU. The model's shape comes from `model_dir`'s
    config.json when present, else from SHIPPED_SHAPES (the hub is not asked). The node is the
    first GPU partition of `cluster.partitions` the job fits, with the GPU execrl.planning.cluster.target_gpu
    plans for; DoesNotFit names each partition's numbers when it fits none, ClusterError a
    description that cannot place it."""
    from execrl.planning.cluster import gpu_types, target_nodes
    from execrl.config import without_runtime_settings
    from execrl.methods import METHODS
    from execrl.training_settings import method_overrides, registry_name, with_training_runtime

    model_config = config["models"][model]
    if model_config["source"] == "tiny" or model_config["params_b"] < _CPU_ONLY_BELOW_B:
        return None
    arch = architecture(model_config["source"], model_dir)
    nodes = target_nodes(config, model)
    others = tuple(g for g in gpu_types(config).values() if g.runs_pinned_torch)
    settings = without_runtime_settings(config)
    for section, values in method_overrides(config, method).items():
        settings[section] = {**settings[section], **values}
    # Gradient checkpointing changes no result, but it changes the activations the plan holds.
    settings = with_training_runtime(settings, config, method)
    trains_as = registry_name(config, method)  # a method variant trains as its registry method
    full = model_config["finetuning"] == "full"
    job = TrainingJob(
        finetune="full" if full else "lora", lora_rank=config["lora"]["r"], lora_dropout=config["lora"]["lora_dropout"]
    )
    common = {"processes": model_config["training_processes"], "params_b": model_config["params_b"], "other_gpus": others}
    colocated = None
    if METHODS[trains_as].online:
        from execrl.training.grpo_settings import GRPOSettings

        grpo = GRPOSettings(**settings["grpo"])
        length = _planned_length(grpo)
        colocated = grpo if grpo.use_vllm and grpo.vllm_mode == "colocate" else None
        server = grpo.use_vllm and grpo.vllm_mode == "server"
        opponent = trains_as == "code_game" and settings["code_game"]["opponent"] == "base"
        job = dataclasses.replace(
            job,
            sequence_length=length,
            scored_length=min(grpo.max_completion_length, length),
            row_chunks=GRPO_SCORE_CHUNKS,
            gradient_checkpointing=grpo.gradient_checkpointing,
            colocated_vllm_fraction=grpo.vllm_gpu_memory_utilization if colocated else 0.0,
            # A reference for the KL term (full weights; LoRA scores it with the adapter off) is
            # sharded like the policy; code_game's opponent is a plain model every process loads whole.
            frozen_copies=int(full and grpo.beta > 0),
            whole_copies=int(opponent),
            server_weight_sync=server,
        )

        def plan(node: Node) -> TrainingLayout:
            return plan_training_layout(
                arch,
                job,
                lambda processes: grpo.per_device_batch(processes) * processes,
                server_gpus=config["grpo"]["vllm_server_gpus"] if server else 0,
                server_max_model_len=grpo.vllm_max_model_length,
                server_gpu_memory_utilization=config["grpo"]["vllm_server_gpu_memory_utilization"],
                node=node,
                settings_accumulation=grpo.gradient_accumulation_steps,
                sandbox_workers=config["execution"]["workers"],  # each process rewards with its own
                **common,
            )
    else:
        dpo = settings["dpo"]
        # A DPO micro-batch of m pairs holds 2m sequences (chosen and rejected), planned as m of twice the length.
        job = dataclasses.replace(
            job,
            sequence_length=2 * dpo["max_length"],
            frozen_copies=int(full),
            gradient_checkpointing=dpo["gradient_checkpointing"],
        )

        def plan(node: Node) -> TrainingLayout:
            return plan_training_layout(
                arch,
                job,
                lambda processes: dpo["per_device_train_batch_size"] * processes,
                node=node,
                settings_accumulation=dpo["gradient_accumulation_steps"],
                **common,
            )

    def checked(layout: TrainingLayout) -> TrainingLayout:
        if colocated is None:
            return layout
        return check_colocated_vllm(arch, layout, colocated, f"train {model}/{method}")

    errors = []
    for node in nodes:
        try:
            return checked(plan(node))
        except DoesNotFit as error:
            errors.append(str(error).replace("models.NAME.", f"models.{model}."))  # the remedies' keys, named
    raise DoesNotFit(" | ".join(errors))
