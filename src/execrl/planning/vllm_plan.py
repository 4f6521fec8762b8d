"""GPU memory of vLLM, term by term: a server on GPUs of its own (`trl vllm-serve`: plan_vllm_server,
and the smallest tensor parallelism that fits, fit_vllm_server) and vLLM colocated in a training
process's share of its GPU (colocated_vllm_plan). Each is an execrl.planning.training_plan.Plan.
"""

from __future__ import annotations

from execrl.planning.architecture import Architecture
from execrl.planning.cluster import A100_80GB, Gpu
from execrl.planning.training_plan import CUDA_CONTEXT_GB, GB, DoesNotFit, Plan

GIB = 1024**3
# Estimates, not measured on a GPU by this project: on a vLLM server the communicator that
# receives the trainer's weights (2 to 3.6 GB: the larger is planned) and its CUDA graphs, which
# vLLM captures outside its gpu_memory_utilization budget (vllm/v1/worker/gpu_worker.py: its
# estimate is applied only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
SERVER_NCCL_GB = 3.6
VLLM_CUDA_GRAPHS_GB = 1.0
# vLLM's start-up profiling run (vllm/engine/arg_utils.py defaults for the LLM class, which both
# colocated vLLM and `trl vllm-serve` build, on GPUs of 70 GiB and more other than A100):
# a forward of 16384 tokens and sampling logits for 1024 sequences; 8192 and 256 on other GPUs.
VLLM_PROFILE_TOKENS = {True: 16384, False: 8192}
VLLM_PROFILE_SEQUENCES = {True: 1024, False: 256}


def vllm_server_kv_cache_bytes(arch: Architecture, max_model_len: int, concurrent_sequences: int) -> int:
    """KV cache a vLLM server needs to hold `concurrent_sequences` sequences of `max_model_len` tokens."""
    return arch.kv_cache_bytes_per_token() * max_model_len * concurrent_sequences


def vllm_profile_bytes(arch: Architecture, tokens: int, sequences: int, tensor_parallel: int = 1) -> int:
    """vLLM's start-up profiling peak: a forward of `tokens` tokens (qkv, the MLP's fused gate/up and
    its activation, split over tensor parallelism; the residual stream whole) and the fp32 sampling
    logits and probabilities of `sequences` sequences over the whole vocabulary."""
    h, kv, inter = arch.hidden_size, arch.kv_dim, arch.intermediate_size
    forward = tokens * ((h + 2 * kv + 3 * inter) / tensor_parallel + 2 * h) * 2
    return int(forward + sequences * arch.vocab_size * 4 * 2)


def _large_gpu(device: Gpu) -> bool:
    """vLLM's larger defaults: GPUs of 70 GiB or more other than A100 (vllm/engine/arg_utils.py)."""
    return device.capacity_gb * GB >= 70 * GIB and "a100" not in device.name.lower()


def plan_vllm_server(
    arch: Architecture,
    max_model_len: int,
    concurrent_sequences: int,
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
    device: Gpu = A100_80GB,
) -> Plan:
    """Per-GPU memory of a vLLM server (`trl vllm-serve`, vLLM's LLM class): inside its
    `gpu_memory_utilization` share of the GPU's capacity, the weights and KV cache split over
    `tensor_parallel` GPUs and its start-up profiling peak (vllm_profile_bytes at vLLM's defaults
    for the GPU; vLLM counts its CUDA context and start-up NCCL buffers inside the share, as
    memory torch did not allocate); beside the share (`parts`), its CUDA graphs and the NCCL
    communicator that receives the trainer's weights, both made after vLLM sized its KV cache."""
    large = _large_gpu(device)
    terms = {
        "weights": 2 * arch.parameters() / tensor_parallel / GB,
        "kv_cache": vllm_server_kv_cache_bytes(arch, max_model_len, concurrent_sequences) / tensor_parallel / GB,
        "profile_peak": vllm_profile_bytes(
            arch, VLLM_PROFILE_TOKENS[large], VLLM_PROFILE_SEQUENCES[large], tensor_parallel
        ) / GB,
    }
    terms["cuda_context"] = CUDA_CONTEXT_GB
    beside = {"cuda_graphs": VLLM_CUDA_GRAPHS_GB, "nccl": SERVER_NCCL_GB}
    return Plan(terms, 0.0, gpu_memory_utilization * device.capacity_gb, device.dtype, parts=beside)


def fit_vllm_server(
    arch: Architecture,
    max_model_len: int,
    concurrent_sequences: int,
    gpu_memory_utilization: float = 0.9,
    device: Gpu = A100_80GB,
    gpus_per_node: int = 8,
) -> tuple[int, Plan]:
    """The smallest tensor parallelism (a power of two dividing the attention heads, as vLLM requires)
    whose per-GPU weights, KV cache and profiling peak fit; DoesNotFit naming the numbers when none on
    one node does. What the server holds beside its share (Plan.parts) is shown, not checked: those
    are estimates not yet measured on a GPU."""
    sizes = [tp for tp in (1, 2, 4, 8, 16) if tp <= gpus_per_node and arch.num_attention_heads % tp == 0]
    for tensor_parallel in sizes:
        plan = plan_vllm_server(
            arch, max_model_len, concurrent_sequences, tensor_parallel, gpu_memory_utilization, device
        )
        if plan.fits:
            return tensor_parallel, plan
    raise DoesNotFit(
        f"a vLLM server of {arch.parameters() / 1e9:.1f}B for {concurrent_sequences} sequences of "
        f"{max_model_len} tokens does not fit even at tensor parallelism {sizes[-1]}: {plan.describe()}. "
        "Would help: a smaller max_model_len or fewer concurrent sequences, or a larger GPU (gpu_model)"
    )


def colocated_vllm_plan(
    arch: Architecture,
    fraction: float,
    device: Gpu,
    tensor_parallel: int,
    sequences: int,
    sequence_length: int,
    max_model_len: int,
) -> Plan:
    """What vLLM inside a training process needs of its `fraction` of the GPU's capacity (TRL's
    colocate mode: an LLM with max_num_seqs = the process's completions of a round × tensor
    parallelism, max_num_batched_tokens 4096): the weights over tensor parallelism, the KV cache
    of all those `sequences` (the tensor-parallel group's) of `sequence_length` tokens at once (at
    least one of `max_model_len`, which vLLM checks at start), and its profiling peak."""
    kv_tokens = max(sequences * sequence_length, max_model_len)
    terms = {
        "weights": 2 * arch.parameters() / tensor_parallel / GB,
        "kv_cache": arch.kv_cache_bytes_per_token() * kv_tokens / tensor_parallel / GB,
        "profile_peak": vllm_profile_bytes(arch, 4096, sequences, tensor_parallel) / GB,
    }
    return Plan(terms, 0.0, fraction * device.capacity_gb, device.dtype)
