import sys

import pytest

from conftest import build_tiny_model
from execrl.generation import GenerationSettings, candidate_records, get_backend
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
