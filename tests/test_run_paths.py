"""Result paths encode the settings that make a result differ (execrl.run_paths)."""

import copy

import pytest

from execrl.config import RUNTIME_SETTINGS, ConfigError, check_references, merged_config
from execrl.methods import METHODS
from execrl.run_paths import METHOD_LEVELS, MODEL_PLACEMENT_KEYS, RunSegments, digest, readable, segment

EMBEDDED = ".test/config/config.yaml"
SEPARATE = {"srrl_separate": {"method": "srrl", "overrides": {"srrl": {"groups": "separate"}}}}


@pytest.fixture(scope="module")
def embedded():
    return merged_config([EMBEDDED])


def changed(config, **edits):
    """A copy of `config` with dotted keys set."""
    result = copy.deepcopy(config)
    for dotted, value in edits.items():
        *path, last = dotted.split("__")
        node = result
        for key in path:
            node = node[key]
        node[last] = value
    return result


def flat(config):
    """Every segment of a config, by (level, name) or (level, model, method)."""
    segments = RunSegments(config)
    named = {"plus": {"plus": segments.plus}}
    for level in ("dataset", "staged", "tokenizer", "init", "model", "rl_data"):
        named[level] = getattr(segments, level)
    flat = {(level, key): value for level, table in named.items() for key, value in table.items()}
    for level in METHOD_LEVELS:
        flat.update({(level, *key): value for key, value in getattr(segments, level).items()})
    return flat


def differing(a, b):
    before, after = flat(a), flat(b)
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def moved(config, **edits):
    """(level, name or method) of the segments of the builtin data set and the tiny model that move."""
    keys = differing(config, changed(config, **edits))
    return {(key[0], key[-1]) for key in keys if len(key) == 2 or key[1] == "tiny"} - {
        ("dataset", "mbpp"), ("staged", "qwen2.5-3b-instruct"), ("tokenizer", "qwen2.5-3b-instruct"),
        ("init", "qwen2.5-3b-instruct"), ("model", "qwen2.5-3b-instruct"), ("rl_data", "qwen2.5-3b-instruct"),
    }


ALL = ("base", "base_low_temp", "dpo", "grpo", "srrl")  # base_low_temp: the base model sampled cooler
SRRLS = ("srrl",)  # the embedded default runs SRRL's pooled grouping (srrl_separate: an overlay)
EVALUATION = ("sampled", "judged", "judged_plus", "scored", "scored_plus", "refined")


def levels(levels, methods):
    return {(level, method) for level in levels for method in methods}


def test_digest_is_stable_and_ignores_key_order():
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert segment("builtin", {"a": 1}) == f"builtin-{digest({'a': 1})}"


@pytest.mark.parametrize("name", ["builtin", "tiny-games", "model-abcdef", "qwen2.5-3b-instruct", "srrl_separate"])
def test_readable_gives_the_config_name_back(name):
    assert readable(segment(name, {"x": 1})) == name


def test_same_settings_give_the_same_segments(embedded):
    assert flat(embedded) == flat(merged_config([EMBEDDED]))
    reordered = {key: embedded[key] for key in reversed(list(embedded))}
    assert flat(reordered) == flat(embedded)


@pytest.mark.parametrize(
    "edits, expected",
    [
        # the data set: its own segment (everything under it follows by its place in the path)
        ({"datasets__builtin__options": {"seed": 0, "n_train": 800, "n_test": 200}}, {("dataset", "builtin")}),
        # the held-out tests: the watched trainings and the held-out judgements, nothing else
        (
            {"plus_tests__tests_per_problem": 3},
            {("plus", "plus")} | levels(["trained"], ["grpo", *SRRLS]) | levels(["judged_plus", "scored_plus"], ALL)
            | levels(EVALUATION, ["grpo", *SRRLS]),
        ),
        # the tiny model: its level and what follows, not the data
        ({"tiny_model__sft__learning_rate": 0.001}, {("model", "tiny")}),
        ({"tiny_model__hidden_size": 96}, {("init", "tiny"), ("model", "tiny")}),
        # one method's training: that method only; the variant keeps the grouping it names, and
        # follows srrl's other settings
        ({"srrl__groups": "separate"}, levels(["trained", *EVALUATION], ["srrl"])),
        ({"srrl__budget": "generated_tokens"}, levels(["trained", *EVALUATION], SRRLS)),
        ({"dpo__beta": 0.2}, levels(["trained", *EVALUATION], ["dpo"])),
        # the RL data: DPO's pairs and DPO, not GRPO
        ({"rl_data__max_pairs_per_problem": 2}, {("rl_data", "tiny")} | levels(["trained", *EVALUATION], ["dpo"])),
        # scoring: pass@k only, nothing is sampled or run again
        ({"evaluation__k": [1, 4]}, levels(["scored", "scored_plus"], ALL)),
        # the sandbox's time limit: every judgement and training that runs code, not the sampling of the base model
        (
            {"execution__timeout_s": 3},
            levels(["judged", "judged_plus", "scored", "scored_plus", "refined"], ALL)
            | levels(["trained"], ["dpo", "grpo", *SRRLS]) | levels(["sampled"], ["dpo", "grpo", *SRRLS])
            | {("rl_data", "tiny")},
        ),
    ],
    ids=["dataset", "plus-tests", "sft", "architecture", "srrl-groups", "srrl-budget", "dpo", "rl-data", "k", "timeout"],
)
def test_a_result_changing_setting_moves_exactly_the_segments_it_reaches(embedded, edits, expected):
    assert moved(embedded, **edits) == expected


def test_shared_training_settings_move_every_method_that_reads_them(embedded):
    trained = {method for level, method in moved(embedded, grpo__learning_rate=0.001) if level == "trained"}
    assert trained == {"grpo", *SRRLS}  # dpo reads dpo:, not grpo:


def test_sampling_settings_move_the_evaluations_and_the_rollouts(embedded):
    result = moved(embedded, generation__top_k=5)
    # DPO's pairs come from the base model's samples; GRPO's and SRRL's rollouts sample alike
    assert {method for level, method in result if level == "trained"} == {"dpo", "grpo", *SRRLS}
    assert levels(EVALUATION, ALL) <= result


def test_how_many_samples_the_evaluation_draws_moves_no_online_training(embedded):
    result = moved(embedded, generation__num_samples=4)
    assert {method for level, method in result if level == "trained"} == {"dpo"}


@pytest.mark.parametrize(
    "edits",
    [
        {"execution__workers": 8},
        {"wandb__mode": "offline"},
        {"wandb__project": "elsewhere"},
        {"grpo__vllm_server_gpus": 2},
        {"report__title": "another title"},
        {"experiment__name": "another name"},
    ],
)
def test_settings_that_cannot_change_a_result_move_nothing(embedded, edits):
    assert differing(embedded, changed(embedded, **edits)) == set()


@pytest.mark.parametrize("key, value", [("gpu_model", "a100"), ("params_b", 7.6), ("training_processes", 4)])
def test_a_models_placement_moves_nothing(embedded, key, value):
    """The GPU type, the size resources are planned from and the training processes place a job;
    where the memory plan they feed changes a training job's command, its params rerun it in place
    (tests/test_cluster.py)."""
    assert key in MODEL_PLACEMENT_KEYS
    config = copy.deepcopy(embedded)
    config["models"]["tiny"][key] = value
    assert differing(embedded, config) == set()


def test_full_weight_or_lora_training_moves_the_trained_methods_only(embedded):
    """`finetuning` is training's alone: the base model's samples stay where they are."""
    config = copy.deepcopy(embedded)
    config["models"]["tiny"]["finetuning"] = "lora" if embedded["models"]["tiny"]["finetuning"] == "full" else "full"
    moved_keys = {(key[0], key[-1]) for key in differing(embedded, config)}
    assert moved_keys == levels(["trained", *EVALUATION], ["dpo", "grpo", *SRRLS])


def perturbed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    return "x"


def leaves(node, path=()):
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    else:
        yield path


NEVER_A_RESULT = {("experiment",), ("report",), ("wandb",), ("staging",), ("method_overrides",), ("method_variants",),
                  ("cluster",)}
"""Sections no job's result reads (report.refinement_prompts is the exception, checked below)."""


def ignored_by_the_backend(config):
    """The generation keys the config's sampling backend never reads (`backend_generation`)."""
    from execrl.training_settings import BACKEND_ONLY_GENERATION_KEYS

    backend = config["generation"]["backend"]
    return {("generation", key) for other, keys in BACKEND_ONLY_GENERATION_KEYS.items() if other != backend
            for key in keys}


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_a_generation_key_its_backend_ignores_moves_nothing(embedded, backend):
    """transformers never reads `generation.vllm`, vLLM never reads `generation.batch_size`: a change
    of either under the other backend reruns no sampling; the key its backend reads moves the
    sampled segment of every method."""
    config = changed(embedded, generation__backend=backend)
    ignored = changed(config, **({"generation__vllm__gpu_memory_utilization": 0.5} if backend == "transformers"
                                 else {"generation__batch_size": 7}))
    read = changed(config, **({"generation__batch_size": 7} if backend == "transformers"
                              else {"generation__vllm__gpu_memory_utilization": 0.5}))
    assert differing(config, ignored) == set()
    sampled = {key for key in flat(config) if key[0] == "sampled"}
    assert sampled and sampled <= differing(config, read)


def test_vllms_training_settings_move_the_trained_segment_only_where_vllm_generates(embedded):
    """`grpo.vllm_*` decide nothing with `grpo.use_vllm: false` (TRL reads them only with vLLM):
    a change of one then reruns no training; with vLLM generating it retrains GRPO and SRRL."""
    for use_vllm in (False, True):
        config = changed(embedded, grpo__use_vllm=use_vllm)
        moved = differing(config, changed(config, grpo__vllm_gpu_memory_utilization=0.5))
        trained = {key for key in moved if key[0] == "trained"}
        if use_vllm:
            assert {key[1:3] for key in trained} >= {("tiny", "grpo"), ("tiny", "srrl")}, moved
        else:
            assert moved == set()


def test_every_other_leaf_setting_moves_some_segment():
    """Every setting outside the report, logging and parallelism, changed alone, moves a segment
    of a config running every method (so no setting a job reads is left out of the paths)."""
    config = merged_config([EMBEDDED, ".test/config/seed-002.yaml"])
    config["experiment"]["methods"] = list(METHODS)
    config["experiment"]["models"] = ["tiny-games"]
    config["tiny_model"]["sft"]["refinement_share"] = 0.1
    unmoved = []
    for path in leaves(config):
        runtime = {(section, key) for section, keys in RUNTIME_SETTINGS.items() for key in keys}
        if path[:1] in NEVER_A_RESULT or path in runtime:
            continue
        if path[:1] == ("models",) and path[-1] in MODEL_PLACEMENT_KEYS:
            continue
        if path[:2] in ignored_by_the_backend(config):
            continue
        if path[0] == "grpo" and path[1].startswith("vllm_") and not config["grpo"]["use_vllm"]:
            continue  # read only where vLLM generates in training (the next test)
        edited = copy.deepcopy(config)
        node = edited
        for key in path[:-1]:
            node = node[key]
        value = node[path[-1]]
        # an enum's other choice (a string perturbed by a suffix is not one)
        node[path[-1]] = {"full": "lora", "lora": "full"}[value] if path[-1] == "finetuning" else perturbed(value)
        if not differing(config, edited):
            unmoved.append(".".join(path))
    assert unmoved == []
    edited = changed(config, report__refinement_prompts=3)
    assert differing(config, edited)


def test_a_variant_has_segments_of_its_own_and_leaves_the_others(embedded):
    config = copy.deepcopy(embedded)
    config["method_variants"].update(copy.deepcopy(SEPARATE))
    config["experiment"]["methods"] = [*config["experiment"]["methods"], "srrl_separate"]
    check_references(config)
    before, after = flat(embedded), flat(config)
    assert {key: value for key, value in after.items() if key in before} == before
    assert after["trained", "tiny", "srrl_separate"] != after["trained", "tiny", "srrl"]
    assert after["scored", "tiny", "srrl_separate"] != after["scored", "tiny", "srrl"]
    assert readable(after["trained", "tiny", "srrl_separate"]) == "srrl_separate"
    # the variant trains as SRRL with srrl.groups: separate, and nothing else differs from srrl
    separate = changed(embedded, srrl__groups="separate")
    assert RunSegments(config).rows["srrl_separate"].variant_of == "srrl"
    from execrl.training_settings import training_settings

    assert training_settings(config, "srrl_separate", "tiny") == training_settings(separate, "srrl", "tiny")


def test_a_base_variant_samples_the_base_model_at_its_own_temperature(embedded):
    config = copy.deepcopy(embedded)
    config["method_variants"]["cool"] = {"method": "base", "overrides": {"generation": {"temperature": 0.2}}}
    config["experiment"]["methods"] = [*config["experiment"]["methods"], "cool"]
    check_references(config)
    before, after = flat(embedded), flat(config)
    # nothing the other methods wrote moves, and the variant trains nothing
    assert {key: value for key, value in after.items() if key in before} == before
    assert ("trained", "tiny", "cool") not in after
    # its candidates are the base model's sampled as the default would at temperature 0.2
    cooled = changed(embedded, generation__temperature=0.2)
    assert after["sampled", "tiny", "cool"] != after["sampled", "tiny", "base"]
    assert RunSegments(config).sampled["tiny", "cool"].split("-")[1] == RunSegments(cooled).sampled["tiny", "base"].split("-")[1]
    from execrl.training_settings import method_generation

    assert method_generation(config, "cool") == {**method_generation(embedded, "base"), "temperature": 0.2}


def test_a_trained_variant_with_its_own_sampling_rolls_out_with_it(embedded):
    """GRPO's rollouts and its evaluation candidates are one sampling configuration: a variant's
    `generation` overrides reach both."""
    from execrl.training_settings import training_settings

    config = copy.deepcopy(embedded)
    config["method_variants"]["grpo_cool"] = {"method": "grpo", "overrides": {"generation": {"temperature": 0.5}}}
    config["experiment"]["methods"] = [*config["experiment"]["methods"], "grpo_cool"]
    check_references(config)
    cooled = changed(embedded, generation__temperature=0.5)
    assert training_settings(config, "grpo_cool", "tiny")["grpo"] == training_settings(cooled, "grpo", "tiny")["grpo"]
    assert training_settings(config, "grpo_cool", "tiny")["grpo"] != training_settings(embedded, "grpo", "tiny")["grpo"]


@pytest.mark.parametrize(
    "variants, message",
    [
        ({"srrl": {"method": "grpo"}}, "is a registry method"),
        ({"x": {"method": "base"}}, "a variant of 'base', which trains nothing, differs only in how it samples"),
        ({"x": {"method": "base", "overrides": {"generation": {"temperature": 0.2}, "grpo": {"learning_rate": 1.0}}}},
         "which trains nothing"),
        ({"x": {"method": "basic"}}, "'basic' is not a method"),
        ({"x": {"method": "base", "overrides": {"generation": {"max_new_tokens": 8}}}},
         "max_new_tokens cannot differ between methods"),
        ({"x": {"method": "dpo", "overrides": {"srrl": {"groups": "separate"}}}}, "dpo does not read 'srrl'"),
        ({"x": {"method": "srrl", "overrides": {"srrl": {"grouping": "separate"}}}}, "unknown key(s) grouping"),
    ],
)
def test_a_bad_variant_is_refused_by_name(embedded, variants, message):
    config = copy.deepcopy(embedded)
    config["method_variants"] = variants
    with pytest.raises(ConfigError, match=r"method_variants\.") as error:
        check_references(config)
    assert message in str(error.value)


def test_a_token_budget_variant_needs_grpo(embedded):
    config = copy.deepcopy(embedded)
    config["method_variants"] = {"srrl_tokens": {"method": "srrl", "overrides": {"srrl": {"budget": "generated_tokens"}}}}
    config["experiment"]["methods"] = ["base", "srrl_tokens"]
    with pytest.raises(ConfigError, match="srrl_tokens with srrl.budget: generated_tokens"):
        check_references(config)
    config["experiment"]["methods"] = ["base", "grpo", "srrl_tokens"]
    check_references(config)
    segments = RunSegments(config)
    # its budget is GRPO's run: GRPO's trained segment is part of its own
    grpo_changed = changed(config, grpo__learning_rate=0.001)
    assert RunSegments(grpo_changed).trained["tiny", "srrl_tokens"] != segments.trained["tiny", "srrl_tokens"]


def test_a_batch_size_vllm_ignores_reruns_no_sampling(tmp_path):
    """Under the vLLM backend (config.yaml's), `generation.batch_size` is read by nothing: the
    sampling jobs' params and paths stay as they were (`backend_generation`)."""
    import yaml

    from conftest import copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    plans = []
    for size in (64, 7):
        (workdir / "config" / "batch.yaml").write_text(yaml.safe_dump({"generation": {"batch_size": size}}))
        jobs = planned_jobs_of(workdir, "config/config.yaml", "config/batch.yaml")
        plans.append({path: job for path, job in jobs.items()
                      if job["rule"] in ("generate_candidates", "sample_refinements")})
    assert plans[0] and plans[0] == plans[1]
    assert all("batch_size" not in job["params"]["generation"] for job in plans[0].values())
