"""The vLLM sampling backend with a stand-in `vllm` module: what reaches `vllm.LLM` and `SamplingParams`.

vLLM is not installed here. The names we pass are checked against the vLLM engine arguments the
installed TRL itself uses: the keywords of its `LLM(...)` call (colocated generation) and the
`vllm serve` flags its `trl vllm-serve` builds, both engine arguments of the vLLM versions TRL
supports. A keyword vLLM does not know would have to be in neither.
"""

import ast
import inspect
import sys
import types

import pytest
import trl.generation.vllm_generation as trl_vllm_generation
from trl.scripts.vllm_serve import ScriptArguments, build_command

from execrl.generation import GenerationSettings, VLLMSettings, candidate_records, get_backend
from execrl.problems import Problem
from execrl.prompting import PromptConfig


def trl_llm_keywords() -> set[str]:
    """Keywords of the `LLM(...)` call in the installed TRL's vLLM generation."""
    tree = ast.parse(inspect.getsource(trl_vllm_generation))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LLM"]
    assert calls, "TRL no longer builds vllm.LLM: re-check the engine arguments"
    return {keyword.arg for call in calls for keyword in call.keywords}


def trl_serve_engine_args() -> set[str]:
    """Engine arguments `trl vllm-serve` passes to `vllm serve` (--max-model-len → max_model_len)."""
    command = build_command(ScriptArguments(model="m", max_model_len=1024))
    return {arg[2:].replace("-", "_") for arg in command if arg.startswith("--")}


def trl_sampling_keywords() -> set[str]:
    """Keywords TRL's colocated generation passes to vllm.SamplingParams, plus the `seed` its docs name."""
    source = inspect.getsource(trl_vllm_generation.VLLMGeneration.generate)
    tree = ast.parse(inspect.cleandoc("\n" + source) if source.startswith(" ") else source)
    keys = {
        key.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and isinstance(key.value, str)
    }
    assert "seed" in inspect.getdoc(trl_vllm_generation.VLLMGeneration)
    return keys | {"seed"}


# Read before any test puts a stand-in `vllm` module in place (TRL looks for the real one).
ENGINE_ARGS = trl_llm_keywords() | trl_serve_engine_args()
SAMPLING_ARGS = trl_sampling_keywords()


class Output:
    def __init__(self, text):
        self.text = text


class Result:
    def __init__(self, texts):
        self.outputs = [Output(t) for t in texts]


@pytest.fixture
def stand_in_vllm(monkeypatch):
    calls = {}

    class LLM:
        def __init__(self, **kwargs):
            calls["LLM"] = kwargs

        def get_tokenizer(self):
            return types.SimpleNamespace(chat_template=None)

        def generate(self, prompts, params, **kwargs):
            calls["generate"] = (prompts, params, kwargs)
            return [Result([f"{p}#{i}" for i in range(params.kwargs["n"])]) for p in prompts]

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    return calls


def test_the_jobs_gpus_and_settings_reach_llm(stand_in_vllm):
    settings = VLLMSettings(gpu_memory_utilization=0.75, max_model_len=4096, dtype="bfloat16")
    backend = get_backend("vllm", "/models/qwen-32b", gpus=4, vllm=settings)
    assert stand_in_vllm["LLM"] == {
        "model": "/models/qwen-32b",
        "tensor_parallel_size": 4,
        "gpu_memory_utilization": 0.75,
        "max_model_len": 4096,
        "dtype": "bfloat16",
    }
    assert set(stand_in_vllm["LLM"]) <= ENGINE_ARGS

    problems = [Problem(id="p/0", prompt="Write f.", test_type="assert", tests=["assert f() == 1"])]
    records = candidate_records(problems, backend, GenerationSettings(num_samples=3, max_new_tokens=20, seed=5, temperature=1.0, top_p=1.0),
                                PromptConfig(num_tests_shown=0, template="{prompt}"))
    assert [r["sample_index"] for r in records] == [0, 1, 2] and records[2]["completion"] == "Write f.#2"
    _, params, _ = stand_in_vllm["generate"]
    assert params.kwargs == {"n": 3, "temperature": 1.0, "top_p": 1.0, "max_tokens": 20, "seed": 5}
    assert set(params.kwargs) <= SAMPLING_ARGS


def test_defaults_one_gpu_and_vllms_own_values(stand_in_vllm):
    get_backend("vllm", "m")
    assert stand_in_vllm["LLM"]["tensor_parallel_size"] == 1  # a CPU-sized job (0 GPUs) never reaches vLLM, but 1 is the floor
    assert stand_in_vllm["LLM"]["gpu_memory_utilization"] == 0.9
    assert stand_in_vllm["LLM"]["max_model_len"] is None and stand_in_vllm["LLM"]["dtype"] == "auto"


def test_settings_are_checked():
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        VLLMSettings(gpu_memory_utilization=1.5)
