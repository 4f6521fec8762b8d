import sys

import pytest

from conftest import build_tiny_model
from execrl.generation import GenerationSettings, candidate_records, get_backend
from execrl.generation.sampling import SamplingSettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig

PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f{i}(x) returning x + {i}.", test_type="assert", tests=[f"assert f{i}(1) == {1 + i}"])
    for i in range(5)
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), [p.prompt + f"\ndef f(x):\n    return x + {i}\n" for i, p in enumerate(PROBLEMS)] * 20)


def test_same_seed_same_candidates(tiny_model):
    backend = get_backend("transformers", tiny_model)
    settings = GenerationSettings(num_samples=3, max_new_tokens=12, seed=7, batch_size=6)
    first = candidate_records(PROBLEMS, backend, settings, PromptConfig())
    second = candidate_records(PROBLEMS, backend, settings, PromptConfig())
    other_seed = candidate_records(PROBLEMS, backend, GenerationSettings(num_samples=3, max_new_tokens=12, seed=8, batch_size=6), PromptConfig())
    assert first == second
    assert [r["completion"] for r in first] != [r["completion"] for r in other_seed]
    assert len(first) == 15
    assert [(r["problem_id"], r["sample_index"]) for r in first[:4]] == [("t/0", 0), ("t/0", 1), ("t/0", 2), ("t/1", 0)]
    assert first[0]["generation"]["seed"] == 7 and first[0]["generation"]["backend"] == "transformers"


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="nosuch"):
        get_backend("nosuch", "model")


def test_vllm_is_imported_only_when_chosen(tiny_model):
    # In a process of its own: with vLLM installed, other tests' imports (TRL's) bring it in.
    import subprocess

    check = ("import sys; from execrl.generation import get_backend; "
             f"get_backend('transformers', {str(tiny_model)!r}); sys.exit('vllm' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", check], capture_output=True).returncode == 0


# ---------------------------------------------------------------- one sampling distribution

SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
UNUSUAL_SAMPLING = {"temperature": 0.7, "top_k": 7, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.1}


def generation_params(config: dict, seed: int = 0) -> dict:
    """What the workflow's `get_generation_settings` hands a generation job."""
    return {**{k: v for k, v in config["generation"].items() if k not in ("backend", "vllm")}, "seed": seed}


def evaluation_generation_config(model_path: str, settings: GenerationSettings):
    """The GenerationConfig the transformers backend passes to `generate`, caught at the call."""
    backend = get_backend("transformers", model_path)
    seen = []

    def generate(input_ids, attention_mask, generation_config):
        seen.append(generation_config)
        return input_ids.repeat_interleave(generation_config.num_return_sequences, dim=0)

    backend.model.generate = generate
    backend.generate([PROBLEMS[0].prompt], settings)
    return seen[0]


@pytest.mark.parametrize("generation", [{}, UNUSUAL_SAMPLING], ids=["embedded-default", "every-cut-set"])
def test_training_rollouts_and_evaluation_sample_from_one_distribution(tiny_model, tmp_path, generation):
    """GRPO's GRPOConfig (as the training job builds it from the workflow's settings) and the
    evaluation's transformers GenerationConfig and vLLM SamplingParams, all from one config."""
    from conftest import EMBEDDED
    from execrl.config import merged_config
    from execrl.generation.sampling import NEUTRAL_TRANSFORMERS_FIELDS
    from execrl.generation.vllm_backend import ENGINE_SAMPLING_ARGS, sampling_params_kwargs
    from execrl.training_settings import training_settings
    from execrl.training.grpo_settings import GRPOSettings
    from execrl.training.trainer_config import grpo_config

    config = merged_config([EMBEDDED])
    config["generation"].update(generation)
    grpo = GRPOSettings(**training_settings(config, "grpo", "tiny")["grpo"]).for_model(tiny_model)
    rollouts = grpo_config(grpo, processes=1, reward_weights=[1.0], checkpoint_dir=tmp_path)
    settings = GenerationSettings(**generation_params(config))
    evaluation = evaluation_generation_config(tiny_model, settings)
    vllm = sampling_params_kwargs(settings, settings.sampling.for_model(tiny_model), eos_ids=[0])

    expected = {key: config["generation"][key] for key in SAMPLING_FIELDS}
    assert {key: getattr(rollouts, key) for key in SAMPLING_FIELDS} == expected
    assert {key: getattr(evaluation, key) for key in SAMPLING_FIELDS} == expected
    assert {key: vllm[key] for key in SAMPLING_FIELDS} == expected
    assert evaluation.do_sample
    # transformers' other cuts, which it would fill from the model's generation config, set alike
    assert not rollouts.use_vllm and rollouts.generation_kwargs == NEUTRAL_TRANSFORMERS_FIELDS
    assert {key: getattr(evaluation, key) for key in NEUTRAL_TRANSFORMERS_FIELDS} == NEUTRAL_TRANSFORMERS_FIELDS
    assert ENGINE_SAMPLING_ARGS == {"generation_config": "vllm"}  # vLLM ignores the model's file


def test_dpos_interval_evaluation_samples_with_the_generation_sections_cuts(tmp_path):
    """DPO's curve in the training figure is drawn beside GRPO's and SRRL's: from the same
    distribution (the generation section's cuts at eval_temperature). Without a cut DPO's settings
    are as before, so its run's digest does not move."""
    from conftest import EMBEDDED
    from execrl.config import merged_config
    from execrl.training.dpo import DPOSettings
    from execrl.training_settings import training_settings

    config = merged_config([EMBEDDED])
    assert "eval_sampling" not in training_settings(config, "dpo", "tiny")["dpo"]
    assert DPOSettings(**training_settings(config, "dpo", "tiny")["dpo"]).interval_sampling() == SamplingSettings(temperature=0.2)
    config["generation"].update(top_p=0.9, top_k=20, temperature=1.0)
    dpo = DPOSettings(**training_settings(config, "dpo", "tiny")["dpo"])
    assert dpo.eval_sampling == {"top_k": 20, "top_p": 0.9}
    assert dpo.interval_sampling() == SamplingSettings(temperature=dpo.eval_temperature, top_k=20, top_p=0.9)
    # the model's generation config, where the section asks for it, as GRPO's rollouts take it
    config["generation"].update(use_model_generation_config=True)
    dpo = DPOSettings(**training_settings(config, "dpo", "tiny")["dpo"])
    assert dpo.eval_sampling["use_model_generation_config"] is True
    model = tmp_path / "model"
    model.mkdir()
    (model / "generation_config.json").write_text('{"top_k": 7, "repetition_penalty": 1.1, "temperature": 0.6}')
    resolved = dpo.interval_sampling(str(model))
    assert (resolved.top_k, resolved.repetition_penalty, resolved.top_p) == (7, 1.1, 0.9)
    assert resolved.temperature == dpo.eval_temperature  # the interval evaluation's own temperature


def test_a_sampling_key_set_for_grpo_alone_is_refused():
    from conftest import EMBEDDED
    from execrl.config import merged_config
    from execrl.training_settings import training_settings

    config = merged_config([EMBEDDED])
    config["method_overrides"] = {"grpo": {"grpo": {"top_k": 5}}}
    with pytest.raises(ValueError, match="set generation.top_k instead"):
        training_settings(config, "grpo", "tiny")


def completions(model_path, **sampling):
    backend = get_backend("transformers", model_path)
    settings = GenerationSettings(num_samples=4, max_new_tokens=12, seed=3, batch_size=8, **sampling)
    return [c for samples in backend.generate([p.prompt for p in PROBLEMS[:2]], settings) for c in samples]


def test_top_k_reaches_generate(tiny_model):
    """top-k 1 keeps only the most likely token: at temperature 1 it samples the greedy completion."""
    greedy = completions(tiny_model, temperature=0.0)
    assert greedy == [greedy[0]] * 4 + [greedy[4]] * 4  # one completion per prompt, four copies
    assert completions(tiny_model, temperature=1.0, top_k=1) == greedy
    assert completions(tiny_model, temperature=1.0, top_k=0) != greedy


def test_the_models_generation_config_is_used_only_when_asked(tiny_model, tmp_path):
    import shutil

    from transformers import GenerationConfig

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    own = GenerationConfig.from_pretrained(model)
    own.update(do_sample=True, top_k=1, repetition_penalty=1.0)
    own.save_pretrained(model)
    greedy = completions(str(model), temperature=0.0)
    assert completions(str(model), temperature=1.0) != greedy  # its top_k 1 fills no gap
    assert completions(str(model), temperature=1.0, use_model_generation_config=True) == greedy


def test_the_policy_sampler_path_takes_every_cut(tiny_model):
    """`generate_token_ids` (SRRL's rollouts and the interval evaluation without vLLM) draws as the
    backend does: top-k 1 at temperature 1 is greedy, and top-k off is not."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from execrl.generation.sampling import SamplingSettings
    from execrl.generation.transformers_backend import generate_token_ids

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    prompts = [tokenizer(p.prompt, add_special_tokens=False)["input_ids"] for p in PROBLEMS] * 3

    def sample(**settings):
        torch.manual_seed(0)
        return generate_token_ids(model, tokenizer, prompts, SamplingSettings(**settings), max_new_tokens=10)

    greedy = sample(temperature=0.0)
    assert sample(temperature=1.0, top_k=1) == greedy
    assert sample(temperature=1.0) != greedy


def test_a_completion_ends_at_the_tokenizers_or_the_models_end_tokens():
    from execrl.generation.sampling import eos_token_ids

    assert eos_token_ids(2, None) == [2]
    assert eos_token_ids(2, 7) == [2, 7]
    assert eos_token_ids(151645, [151645, 151643]) == [151645, 151643]  # Qwen2.5-Instruct's: kept as declared
    assert eos_token_ids(None, [5]) == [5]


def test_sampling_settings_refuse_values_out_of_range():
    from execrl.generation.sampling import SamplingSettings

    for bad in ({"top_k": -1}, {"top_p": 0.0}, {"min_p": 1.5}, {"repetition_penalty": 0.0}, {"temperature": -0.1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            GenerationSettings(**bad)
    assert SamplingSettings(top_k=5).describe().startswith("temperature 0.8, top-k 5, top-p off (1.0), min-p off")


def recorded_generate_calls(backend) -> list[tuple[int, int]]:
    """(sequences in, new tokens out) of each `generate` call the backend's model makes from now on."""
    calls = []
    original = backend.model.generate

    def recorded(**kwargs):
        out = original(**kwargs)
        calls.append((kwargs["input_ids"].shape[0], out.shape[1] - kwargs["input_ids"].shape[1]))
        return out

    backend.model.generate = recorded
    return calls


def test_max_new_tokens_caps_every_completion(tiny_model):
    """`generation.max_new_tokens`: no completion gets more new tokens than the cap, and a larger cap
    lets them run longer."""
    backend = get_backend("transformers", tiny_model)
    calls = recorded_generate_calls(backend)
    longest = {}
    for cap in (2, 12):
        calls.clear()
        backend.generate([p.prompt for p in PROBLEMS], GenerationSettings(num_samples=4, max_new_tokens=cap, seed=3, batch_size=8))
        longest[cap] = max(new for _, new in calls)
    assert longest[2] == 2 and 2 < longest[12] <= 12, longest


def test_batch_size_sets_the_prompts_each_generate_call_takes(tiny_model):
    """`generation.batch_size` counts sequences: batch_size // num_samples prompts per `generate` call."""
    backend = get_backend("transformers", tiny_model)
    calls = recorded_generate_calls(backend)
    prompts = [p.prompt for p in PROBLEMS]  # 5
    per_call = {}
    for batch_size in (4, 10):
        calls.clear()
        backend.generate(prompts, GenerationSettings(num_samples=2, max_new_tokens=2, seed=0, batch_size=batch_size))
        per_call[batch_size] = [rows for rows, _ in calls]
    assert per_call == {4: [2, 2, 1], 10: [5]}
