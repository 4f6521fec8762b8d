"""Sampling candidate programs from a model, behind one interface for every backend.

Sampling from the policy while it trains is here too (`policy_sampling`), as are vLLM's CPU build
(`vllm_cpu`) and the vLLM server beside a training job (`vllm_server`).
"""

from __future__ import annotations

from execrl.generation.base import BACKENDS, GenerationBackend, GenerationSettings, VLLMSettings, candidate_records


def get_backend(name: str, model_path: str, gpus: int = 0, vllm: VLLMSettings | None = None) -> GenerationBackend:
    """Instantiate a backend by name; vLLM is imported only when chosen.

    `gpus` is the job's GPU count: vLLM shards the model over all of them (tensor parallelism).
    """
    if name == "transformers":
        from execrl.generation.transformers_backend import TransformersBackend

        return TransformersBackend(model_path)
    if name == "vllm":
        from execrl.generation.vllm_backend import VLLMBackend

        return VLLMBackend(model_path, tensor_parallel_size=max(1, gpus), settings=vllm or VLLMSettings())
    raise ValueError(f"unknown generation backend {name!r}; choose one of {BACKENDS}")


__all__ = ["GenerationBackend", "GenerationSettings", "VLLMSettings", "candidate_records", "get_backend"]
