"""GRPO and SRRL through TRL's own vLLM server-mode path, with a stand-in for TRL's VLLMClient.

vLLM is not installed here, so TRL's `VLLMClient` is replaced by a stand-in whose every call is
bound to the installed client's real signature (a renamed or missing argument fails the test).
Everything between our settings and the client is TRL's own code: GRPOConfig, GRPOTrainer,
VLLMGeneration, and the importance-sampling correction that uses the rollout's log-probs.
"""

import inspect
import json

import pytest
from trl.generation.vllm_client import VLLMClient

from conftest import build_tiny_model
from execrl.grpo import GRPOSettings, train_grpo
from execrl.lora import LoRASettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.rewards import RewardSettings
from execrl.sandbox import Executor
from execrl.srrl import SRRLSettings
from execrl.vllm_server import VLLM_GROUP_PORT_ENV, VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV

PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f(x) returning x + {i}.", test_type="assert",
            tests=[f"assert f(1) == {1 + i}"], entry_point="f", reference=f"def f(x):\n    return x + {i}\n")
    for i in range(4)
]
SAMPLING_LOGPROB = -2.0


class StandInClient:
    """Answers as a vLLM server would: 3 tokens per completion, each sampled with log-prob -2."""

    instances = []

    def __init__(self, *args, **kwargs):
        self.init = self._bound(VLLMClient.__init__, args, kwargs)
        self.generated = []
        self.weight_syncs = 0
        StandInClient.instances.append(self)

    def _bound(self, real, args, kwargs):
        bound = inspect.signature(real).bind(self, *args, **kwargs)
        bound.apply_defaults()
        return bound.arguments

    def init_communicator(self, *args, **kwargs):
        self._bound(VLLMClient.init_communicator, args, kwargs)

    def get_server_info(self, *args, **kwargs):
        self._bound(VLLMClient.get_server_info, args, kwargs)
        return {"model_config": {"logprobs_mode": "processed_logprobs"}, "weight_transfer_config": {"backend": "nccl"}}

    def update_named_params(self, *args, **kwargs):
        call = self._bound(VLLMClient.update_named_params, args, kwargs)
        assert len(list(call["named_params"])) == len(call["metadata"])
        self.weight_syncs += 1

    def reset_prefix_cache(self, *args, **kwargs):
        self._bound(VLLMClient.reset_prefix_cache, args, kwargs)

    def generate(self, *args, **kwargs):
        call = self._bound(VLLMClient.generate, args, kwargs)
        self.generated.append(call)
        completions = [[5 + (i + j) % 7 for j in range(3)] for i, _ in enumerate(call["prompts"]) for _ in range(call["n"])]
        return {
            "prompt_ids": call["prompts"],
            "completion_ids": completions,
            "logprobs": [[[SAMPLING_LOGPROB]] * len(ids) for ids in completions],
            "logprob_token_ids": [[[token] for token in ids] for ids in completions],
        }


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p.prompt + "\n" + p.reference for p in PROBLEMS] * 20)


@pytest.fixture
def server_mode(monkeypatch):
    StandInClient.instances.clear()
    monkeypatch.setattr("trl.generation.vllm_generation.is_vllm_available", lambda *args, **kwargs: True)
    monkeypatch.setattr("trl.generation.vllm_generation.VLLMClient", StandInClient)
    # As `python -m execrl.vllm_server` sets them for the training command.
    monkeypatch.setenv(VLLM_SERVER_HOST_ENV, "127.0.0.1")
    monkeypatch.setenv(VLLM_SERVER_PORT_ENV, "18123")
    monkeypatch.setenv(VLLM_GROUP_PORT_ENV, "51999")


@pytest.mark.parametrize("method", ["grpo", "srrl"])
def test_server_mode_reaches_the_client_and_the_correction_sees_the_sampling_logprobs(method, tiny_model, tmp_path,
                                                                                      server_mode):
    settings = GRPOSettings(num_generations=4, prompts_per_step=2, max_steps=1, max_completion_length=3, save_steps=100,
                            gradient_checkpointing=False, use_vllm=True, vllm_mode="server", temperature=0.9,
                            eval_every=1, eval_problems=1, eval_temperature=0.2)
    with Executor(workers=1) as executor:
        train_grpo(tiny_model, PROBLEMS, PROBLEMS[:1], PromptConfig(num_tests_shown=1), settings, RewardSettings(),
                   LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]), executor, tmp_path / "ck",
                   tmp_path / "trained", tmp_path / "metrics.jsonl",
                   srrl=SRRLSettings(refine_share=0.5) if method == "srrl" else None)

    (client,) = StandInClient.instances
    assert client.init["base_url"] == "http://127.0.0.1:18123" and client.init["group_port"] == 51999
    # The interval evaluation before step 1 and after it, each from the weights of its step (2 syncs),
    # around the step's own sampling: GRPO asks once for n=4 per prompt, SRRL for the c1s, then the
    # c2s (and returned c1s), n=1 each.
    assert client.weight_syncs == 2
    training = [(4, 0.9)] if method == "grpo" else [(1, 0.9), (1, 0.9)]
    assert [(call["n"], call["temperature"]) for call in client.generated] == [(1, 0.2), *training, (1, 0.2)]
    assert all(call["max_tokens"] == 3 and call["logprobs"] == 0 for call in client.generated)
    (record,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"reward"' in line]
    # TRL's importance-sampling correction ran on the sampling log-probs: exp(trainer's log-prob - (-2)) per sequence.
    assert "sampling/importance_sampling_ratio/mean" in record
    assert record["sampling/sampling_logp_difference/mean"] > 0
