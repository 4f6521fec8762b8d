"""vLLM's own code on CPU (`vllm-cpu`, installed by `make env`): sampling through `generation.backend: vllm`,
GRPO and SRRL with a colocated engine, and GRPO beside `trl vllm-serve` started by `execrl.generation.vllm_server`,
each through the command the workflow's rules run. The weights reach vLLM by execrl.generation.vllm_cpu's sync
(TRL's NCCL and per-tensor paths need a GPU build), and the tests check that they arrive.

vLLM on CPU reserves `gpu_memory_utilization` of the machine's memory and `VLLM_CPU_KVCACHE_SPACE` GiB
of KV cache; both are kept small here.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from execrl.models.tiny_model import TinyModelConfig
from test_train_job import PROBLEMS, build_tiny, grpo_settings, job, loaded_by_rank, run, step_records, write_jsonl

pytestmark = pytest.mark.slow

# vLLM's CPU attention takes head sizes of 32 and up: 128 / 2 heads.
VLLM_SHAPE = TinyModelConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                             intermediate_size=256, max_position_embeddings=512)
MEMORY_SHARE = 0.05
KV_CACHE_GB = "1"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("tiny"), VLLM_SHAPE)


def vllm_job(tiny, tmp_path, method, mode, prefix=(), processes=1, config="cpu.yaml", full_weight=False):
    settings = grpo_settings()
    if full_weight:
        settings["lora"] = None
    settings["grpo"].update(use_vllm=True, vllm_mode=mode, vllm_gpu_memory_utilization=MEMORY_SHARE,
                            vllm_max_model_length=256, max_completion_length=2, num_generations=4,
                            learning_rate=5e-2)
    # Syntax errors, runtime errors and wrong answers score apart, so a random model's samples differ in
    # reward (under the pass/fail reward they all fail alike: no advantage, no update, nothing to sync).
    settings["rewards"] = {"binary": 0.0, "outcome": 1.0}
    if method == "srrl":
        settings["srrl"] = {"refine_share": 0.5}
    data = write_jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    command, env = job(tiny, tmp_path, method, settings, data, processes=processes, config=config, prefix=prefix,
                       extra=("--eval-problems", str(data), "--sandbox-workers", "1"))
    env["VLLM_CPU_KVCACHE_SPACE"] = KV_CACHE_GB
    return command, env


def trained_steps(tmp_path):
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "reward" in r]


def test_vllm_sampling_through_the_generation_backend(tiny, monkeypatch):
    """`generation.backend: vllm`, as the candidates rule builds it: seeded samples from vLLM's own engine."""
    from execrl.generation import GenerationSettings, VLLMSettings, candidate_records, get_backend
    from execrl.problems import Problem
    from execrl.prompting import PromptConfig

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GB)
    problems = [Problem(**{k: v for k, v in p.items() if k != "reference"}) for p in PROBLEMS]
    backend = get_backend("vllm", str(tiny / "model"), gpus=0,
                          vllm=VLLMSettings(gpu_memory_utilization=MEMORY_SHARE, max_model_len=256, dtype="float32"))
    settings = GenerationSettings(num_samples=4, max_new_tokens=16, seed=3, temperature=1.0, top_p=1.0)
    prompt = PromptConfig(num_tests_shown=1)
    first = candidate_records(problems, backend, settings, prompt)
    again = candidate_records(problems, backend, settings, prompt)
    other = candidate_records(problems, backend, dataclasses.replace(settings, seed=4), prompt)
    assert len(first) == 4 * len(problems)
    assert [r["sample_index"] for r in first[:4]] == [0, 1, 2, 3]
    completions = [r["completion"] for r in first]
    assert completions == [r["completion"] for r in again]  # seeded
    assert completions != [r["completion"] for r in other]
    assert all(len(set(completions[i:i + 4])) > 1 for i in range(0, len(completions), 4))  # a problem's samples differ
    config = backend.llm.llm_engine.model_config
    assert config.max_model_len == 256 and str(config.dtype) == "torch.float32"
    # generation.vllm.gpu_memory_utilization is the engine's (vLLM's own default is 0.9)
    assert backend.llm.llm_engine.vllm_config.cache_config.gpu_memory_utilization == MEMORY_SHARE
    # More prompt tokens than one engine step prefills (the embedded default's 200 problems × 8 samples
    # are): seeded sampling on vLLM's CPU build then fails unless prefills stay whole.
    many = candidate_records(problems * 8, backend, dataclasses.replace(settings, num_samples=64, max_new_tokens=2),
                             prompt)
    assert len(many) == 64 * 8 * len(problems)


@pytest.mark.parametrize("method", ["grpo", "srrl"])
def test_two_steps_with_colocated_vllm(tiny, tmp_path, method):
    """The `train` rule's command on CPU, 1 process with a vLLM engine inside it."""
    run(*vllm_job(tiny, tmp_path, method, "colocate"), tmp_path)
    assert step_records(tmp_path) == [0, 1, 1, 2, 2]  # the evaluation before step 1, then each step's two records
    steps = trained_steps(tmp_path)
    assert len(steps) == 2
    # The step-2 samples came from vLLM after step 1's weights were pushed in, so the trainer's log-probs
    # agree with vLLM's token by token (without the sync they are up to ~0.5 apart here, ratios 0.36-1.86).
    second = steps[1]
    assert second["sampling/sampling_logp_difference/max"] < 0.05, second
    assert 0.95 < second["sampling/importance_sampling_ratio/min"] <= second["sampling/importance_sampling_ratio/max"] < 1.05
    assert (tmp_path / "trained" / "adapter_config.json").is_file()


def server_prefix(tiny, tmp_path):
    """`python -m execrl.generation.vllm_server --gpus 0` (vLLM's server on CPU), as the `train` rule prefixes its command."""
    return (sys.executable, "-m", "execrl.generation.vllm_server", "--model", str(tiny / "model"), "--gpus", "0",
            "--gpu-memory-utilization", str(MEMORY_SHARE), "--max-model-len", "256", "--timeout", "300",
            "--log", str(tmp_path / "vllm.log"), "--")


@pytest.mark.parametrize("method", ["grpo", "srrl"])
def test_two_steps_beside_a_vllm_server_on_cpu(tiny, tmp_path, method):
    """The server around the `train` rule's command; SRRL's refinements (its second sampling round of a
    step) are served too."""
    run(*vllm_job(tiny, tmp_path, method, "server", prefix=server_prefix(tiny, tmp_path)), tmp_path)
    assert step_records(tmp_path) == [0, 1, 1, 2, 2]
    # The served model changed: step 2 was sampled by the server after step 1's weights were reloaded into
    # it, and the trainer's log-probs agree with the server's token by token.
    second = trained_steps(tmp_path)[1]
    assert second["sampling/sampling_logp_difference/max"] < 0.05, second
    log = (tmp_path / "vllm.log").read_text()
    assert "Application startup complete" in log
    # One weight reload per step the server sampled after (the evaluations' and the steps' own syncs).
    assert log.count('"POST /collective_rpc HTTP/1.1" 200') >= 2
    if method == "srrl":
        # Half of each step's completions are refinements of failed first attempts, sampled by the server
        # in a second request of the step (7 completion requests against GRPO's 5 here).
        assert [step["srrl/c2_share"] for step in trained_steps(tmp_path)] == [0.5, 0.5]


def test_full_weight_grpo_on_two_zero3_processes_beside_a_vllm_server_on_cpu(tiny, tmp_path):
    """config/scaling-binary-bonus.yaml's path on CPU: full-weight GRPO sharded by ZeRO-3 over 2 processes
    (gloo, workflow/accelerate/zero3-cpu.yaml), beside the vLLM server, its weights synced every step: each
    process gathers every parameter from the shards in turn and rank 0 sends them."""
    from test_zero3_cpu import ZERO3, zero3_checkpoint

    command, env = vllm_job(tiny, tmp_path, "grpo", "server", prefix=server_prefix(tiny, tmp_path), processes=2,
                            config=ZERO3, full_weight=True)
    log = run(command, env, tmp_path)
    batches = loaded_by_rank(log)
    assert set(batches) == {0, 1}
    assert step_records(tmp_path) == [0, 1, 1, 2, 2]
    steps = trained_steps(tmp_path)
    # Step 2 was sampled by the server after step 1's full weights were gathered and reloaded into it: the
    # trainer's log-probs agree with the server's token by token (a step at this learning rate moves them).
    assert steps[1]["sampling/sampling_logp_difference/max"] < 0.05, steps[1]
    assert 0.95 < steps[1]["sampling/importance_sampling_ratio/min"] <= steps[1]["sampling/importance_sampling_ratio/max"] < 1.05
    served = (tmp_path / "vllm.log").read_text()
    assert served.count('"POST /collective_rpc HTTP/1.1" 200') >= 2
    # All weights trained, written whole (gathered from the shards), and DeepSpeed's checkpoint sharded in 2.
    assert (tmp_path / "trained" / "config.json").is_file() and not (tmp_path / "trained" / "adapter_config.json").exists()
    assert zero3_checkpoint(tmp_path) == (3, 2)


def test_a_reload_leaves_a_tied_lm_head_stale_and_the_repacking_reload_refreshes_it(tiny, tmp_path, monkeypatch):
    """Why the server's workers reload through execrl.generation.vllm_cpu.RepackingReload: after vLLM's own
    `reload_weights` of a model whose LM head shares the embedding's weight, the head's CPU kernel still
    computes with the packed copy of the weights it was started with."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM, SamplingParams

    from execrl.generation.vllm_cpu import WORKER_EXTENSION
    from execrl.generation.weight_sync import PROBE_TEXT, logprob_mismatch, logprob_tolerance, policy_logprobs

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GB)
    trained = AutoModelForCausalLM.from_pretrained(tiny / "model", dtype=torch.float32)
    assert trained.config.tie_word_embeddings
    ids = AutoTokenizer.from_pretrained(tiny / "model")(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    llm = LLM(model=str(tiny / "model"), dtype="float32", gpu_memory_utilization=MEMORY_SHARE, max_model_len=256,
              worker_extension_cls=WORKER_EXTENSION)

    def difference():
        """How far vLLM's log-probabilities of the probe lie from the trained model's, and the float32 tolerance."""
        (output,) = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=1),
                                 use_tqdm=False)
        served = [output.prompt_logprobs[i][token].logprob for i, token in enumerate(ids) if i > 0]
        expected, scale = policy_logprobs(trained, ids, "cpu")
        tolerance = logprob_tolerance(torch.float32, trained.config.num_hidden_layers, scale)
        return logprob_mismatch(expected, served, tolerance) or 0.0, tolerance

    assert difference()[0] == 0.0  # both loaded the same checkpoint
    # A step's worth of change to the embedding alone (the LM head with it: they are one tensor).
    with torch.no_grad():
        trained.model.embed_tokens.weight.add_(torch.randn(trained.model.embed_tokens.weight.shape,
                                                           generator=torch.Generator().manual_seed(1)) * 0.05)
    weights = tmp_path / "weights"
    weights.mkdir()
    save_file({name: tensor.contiguous() for name, tensor in trained.state_dict().items() if name != "lm_head.weight"},
              str(weights / "model.safetensors"))
    llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights)})
    llm.reset_prefix_cache()
    stale, tolerance = difference()
    assert stale > 0.1 > tolerance, stale
    (repacked,) = llm.collective_rpc("execrl_reload_weights", kwargs={"weights_path": str(weights)})
    llm.reset_prefix_cache()
    assert "lm_head" in repacked and "model.embed_tokens" in repacked
    assert difference()[0] == 0.0


# Loaded in every process of a job before anything else: the server's weight reload is a no-op, so the server
# keeps serving the weights it started with.
SKIP_SERVER_RELOAD = """
import importlib.abc, importlib.util, sys

class SkipServerReload(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "execrl.generation.vllm_cpu":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module.reload_server_weights = lambda client, weights: None

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, SkipServerReload())
"""


def test_a_server_left_with_old_weights_stops_the_run_naming_the_step(tiny, tmp_path):
    """The sync's check: when the server keeps its first weights (its reload skipped), the run fails after
    the first sync that follows a training step, naming it, instead of training on another policy's samples."""
    from test_train_job import WRITE_RECORDER

    command, env = vllm_job(tiny, tmp_path, "grpo", "server", prefix=server_prefix(tiny, tmp_path), full_weight=True)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(WRITE_RECORDER + SKIP_SERVER_RELOAD)
    env["PYTHONPATH"] = os.pathsep.join([str(hook), env["PYTHONPATH"]])
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    (tmp_path / "job.log").write_text(result.stderr)
    assert result.returncode != 0
    # The sync before step 1 passes its check (the server loaded the same checkpoint); the one after fails.
    assert "ServedWeightsMismatch: after the weight sync at step 1, vLLM's log-probabilities" in result.stderr, \
        result.stderr[-6000:]
    # The server computes in bfloat16 (vLLM's `--dtype auto` for a float32 checkpoint), so its rounding sets the tolerance.
    assert "(tolerance" in result.stderr and "for bfloat16)" in result.stderr
    assert not (tmp_path / "trained").exists()


def test_vllm_settings_are_checked():
    from execrl.generation import VLLMSettings

    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMSettings(gpu_memory_utilization=1.5)
