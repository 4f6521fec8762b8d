"""SRRL: refinement prompts, the c1/c2 budget, c2 samples reaching GRPO's loss, and the token-matched budgets."""

import json
from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState

from execrl.problems import Problem
from execrl.prompting import PromptConfig
from execrl.refinement import refinement_message
from execrl.training.srrl import SRRLRollout, SRRLSettings, assign_refinements, budget
from execrl.training.token_budget import TokenBudget, read_token_budget
from execrl.training.common import GeneratedTokenCount, StopAtTokenBudget

PROBLEM = Problem(
    id="p/1",
    prompt="Write add(a, b).",
    test_type="assert",
    tests=["assert add(1, 2) == 3", "assert add(2, 2) == 4", "assert add(5, 5) == 10"],
    entry_point="add",
)
CONFIG = PromptConfig(template="{prompt}\nTest: {tests}\n", num_tests_shown=1)


def failed_result(failing_indices, first_message="AssertionError: add(5, 5) returned 11"):
    outcomes = [
        {"index": i, "status": "fail" if i in failing_indices else "pass", "error_type": None, "message": None}
        for i in range(3)
    ]
    return {
        "status": "fail",
        "tests_passed": 3 - len(failing_indices),
        "tests_total": 3,
        "test_outcomes": outcomes,
        "error_type": "AssertionError",
        "error_message": first_message,
        "trace": f"trace of test {min(failing_indices)}",
    }


def test_refinement_prompt_quotes_problem_code_error_and_shown_tests():
    message = refinement_message(PROBLEM, "def add(a, b):\n    return a - b", failed_result({0}), SRRLSettings(), CONFIG)
    assert "Write add(a, b)." in message
    assert "return a - b" in message
    assert "Failed test: assert add(1, 2) == 3" in message
    assert "AssertionError" in message


def test_hidden_tests_stay_out_of_refinement_prompts():
    result = failed_result({2})
    hidden = refinement_message(PROBLEM, "code", result, SRRLSettings(feedback_tests="shown"), CONFIG)
    assert "add(5, 5)" not in hidden and "trace of test 2" not in hidden
    assert "hidden test" in hidden
    shown_all = refinement_message(
        PROBLEM, "code", result, SRRLSettings(feedback_tests="all", refinement_template="{failed_tests}|{trace}|{error}"), CONFIG
    )
    assert "assert add(5, 5) == 10" in shown_all and "trace of test 2" in shown_all
    none = refinement_message(PROBLEM, "code", failed_result({0}), SRRLSettings(feedback_tests="none"), CONFIG)
    assert "Failed test" not in none


def test_max_trace_chars_keeps_the_traces_end():
    """`srrl.max_trace_chars` cuts the quoted trace to its last characters (where the error is)."""
    result = {**failed_result({0}), "trace": "Traceback (most recent call last):\n" + "x" * 500 + "\nAssertionError: END"}
    template = "[{trace}]"
    long = refinement_message(PROBLEM, "code", result, SRRLSettings(refinement_template=template), CONFIG)
    short = refinement_message(PROBLEM, "code", result, SRRLSettings(refinement_template=template, max_trace_chars=40), CONFIG)
    assert long == f"[{result['trace']}]"
    assert short == f"[{result['trace'][-40:]}]" and short.endswith("AssertionError: END]")
    none = refinement_message(PROBLEM, "code", result, SRRLSettings(refinement_template=template, max_trace_chars=0), CONFIG)
    assert none == "[]"  # 0 characters of the trace, not all of them


def test_budget_and_assignment():
    assert budget(8, 0.5) == (4, 4)
    assert budget(8, 0.25) == (6, 2)
    assert budget(2, 0.9) == (1, 1)
    assert budget(8, 0.0) == (8, 0)
    assert assign_refinements([True, False, True, False], 4) == ([1, 3, 1, 3], 0)
    assert assign_refinements([False, True, True], 2) == ([0, 0], 0)
    assert assign_refinements([True, True], 3) == ([], 3)  # nothing failed: the budget goes back to c1


def test_invalid_settings_named():
    with pytest.raises(ValueError, match="refine_share"):
        SRRLSettings(refine_share=1.0)
    with pytest.raises(ValueError, match="feedback_tests"):
        SRRLSettings(feedback_tests="some")


class ScriptedExecutor:
    """Fails every first attempt; passes refinements whose index in their batch is even."""

    def __init__(self):
        self.batches = []

    def run_batch(self, items):
        batch_index = len(self.batches)
        self.batches.append(items)

        class Result:
            def __init__(self, passed):
                self.passed = passed

            def to_dict(self):
                status = "pass" if self.passed else "fail"
                return failed_result({0}) if not self.passed else {"status": status, "tests_passed": 3, "tests_total": 3, "test_outcomes": []}

        return [Result(batch_index % 2 == 1 and i % 2 == 0) for i in range(len(items))]


class FakeSampler:
    class tokenizer:
        chat_template = None

    def __init__(self, logprobs=False):
        self.calls = []
        self.logprobs = logprobs

    def __call__(self, prompts):
        self.calls.append(list(prompts))
        call = len(self.calls)
        return [
            ([len(p)], [i, i], f"def add(a, b):\n    return {i}", [-0.1 * call, -0.01 * i] if self.logprobs else None)
            for i, p in enumerate(prompts)
        ]


def test_rollout_groups_hold_c1_then_c2_at_equal_cost():
    prompt = "Write add(a, b).\nTest: assert add(1, 2) == 3\n"
    rollout = SRRLRollout({prompt: PROBLEM}, ScriptedExecutor(), SRRLSettings(refine_share=0.5), CONFIG, None)
    sampler = FakeSampler()
    output = rollout.rollout([prompt], group_size=4, sampler=sampler)
    assert output["sample_kind"] == ["c1", "c1", "c2", "c2"] and output["first_round"] == [True, True, False, False]
    assert len(output["completion_ids"]) == len(output["prompt_ids"]) == len(output["execution"]) == 4
    assert len(sampler.calls[0]) == 2 and len(sampler.calls[1]) == 2  # 4 samples in all, as GRPO would draw
    assert all("A previous attempt" in p for p in sampler.calls[1])
    assert output["prompt_ids"][2] != output["prompt_ids"][0]  # c2 is conditioned on its refinement prompt
    assert [r["status"] for r in output["execution"]] == ["fail", "fail", "pass", "fail"]


def test_rollout_returns_unused_refinement_budget_to_c1():
    prompt = "Write add(a, b).\nTest: assert add(1, 2) == 3\n"

    class AllPass(ScriptedExecutor):
        def run_batch(self, items):
            return [type("R", (), {"to_dict": lambda self: {"status": "pass", "tests_passed": 3, "tests_total": 3}})() for _ in items]

    sampler = FakeSampler()
    output = SRRLRollout({prompt: PROBLEM}, AllPass(), SRRLSettings(refine_share=0.5), CONFIG, None).rollout(
        [prompt], group_size=4, sampler=sampler
    )
    assert output["sample_kind"] == ["c1"] * 4
    assert output["first_round"] == [True, True, False, False]  # the returned slots are not the first round
    assert sampler.calls[1] == [prompt, prompt]


def test_rollout_hands_trl_each_completions_sampling_logprobs():
    """Under vLLM each completion keeps the log-probs it was sampled with (c2: under its refinement
    prompt); without them (transformers sampling) TRL gets None, as from its own path."""
    prompt = "Write add(a, b).\nTest: assert add(1, 2) == 3\n"
    rollout = SRRLRollout({prompt: PROBLEM}, ScriptedExecutor(), SRRLSettings(refine_share=0.5), CONFIG, None)
    output = rollout.rollout([prompt], group_size=4, sampler=FakeSampler(logprobs=True))
    assert output["sample_kind"] == ["c1", "c1", "c2", "c2"]
    # first call (c1) has -0.1, second (c2) -0.2; one entry per completion token
    assert output["logprobs"] == [[-0.1, -0.0], [-0.1, -0.01], [-0.2, -0.0], [-0.2, -0.01]]
    assert all(len(lp) == len(ids) for lp, ids in zip(output["logprobs"], output["completion_ids"], strict=True))
    without = SRRLRollout({prompt: PROBLEM}, ScriptedExecutor(), SRRLSettings(refine_share=0.5), CONFIG, None)
    assert without.rollout([prompt], group_size=4, sampler=FakeSampler())["logprobs"] is None


def test_budget_setting_named_when_unknown():
    assert SRRLSettings().budget == "completions"
    with pytest.raises(ValueError, match="srrl.budget must be one of"):
        SRRLSettings(budget="flops")
    # The former `tokens` counted prompt and completion tokens: its error names what replaces it.
    with pytest.raises(ValueError, match="generated_tokens .* total_tokens"):
        SRRLSettings(budget="tokens")


def test_token_budget_is_grpos_total_from_its_metrics(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    records = [
        {"step": 0, "interval_eval/pass_at_1": 0.1},
        {"step": 1, "loss": 0.2, "num_tokens": 900.0, "num_generated_tokens": 300.0},
        {"step": 2, "interval_eval/pass_at_1": 0.2, "num_tokens": 1850.0, "num_generated_tokens": 610.0},
        {"step": 2, "loss": 0.1},
        {"step": 2, "train_runtime": 3.0, "train_loss": 0.1},
    ]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_token_budget(metrics, "total_tokens") == TokenBudget("total_tokens", 1850)
    assert read_token_budget(metrics, "generated_tokens") == TokenBudget("generated_tokens", 610)
    metrics.write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n")  # DPO's, say
    with pytest.raises(ValueError, match="logged no num_generated_tokens"):
        read_token_budget(metrics, "generated_tokens")


def run_steps(stop, args, counts):
    """Feed `stop` one optimizer step after another, each with the running count `counts[step - 1]`
    (generated and total alike); the step it stops at, or None."""
    state = TrainerState()
    for step, count in enumerate(counts, start=1):
        state.global_step, state.num_input_tokens_seen = step, count
        if stop.counter is not None:
            stop.counter.count = count
        control = TrainerControl()
        stop.on_step_end(args, state, control)
        if control.should_training_stop:
            return step
    return None


def trl_args(accumulation=1, steps_per_generation=1, iterations=1):
    return SimpleNamespace(gradient_accumulation_steps=accumulation, steps_per_generation=steps_per_generation,
                           num_iterations=iterations)


def test_training_stops_at_the_end_of_the_round_that_reaches_the_budget():
    # One round per optimizer step: the step that reaches the budget is the last.
    stop = StopAtTokenBudget(TokenBudget("generated_tokens", 1000), GeneratedTokenCount())
    assert run_steps(stop, trl_args(), [300, 650, 990, 1320, 1700]) == 4  # 990 < 1000 ≤ 1320
    # A round of four optimizer steps (steps_per_generation 4): its tokens are counted when it is
    # sampled, before its first step; the run trains the whole round that crossed the budget.
    per_round = [300] * 4 + [650] * 4 + [990] * 4 + [1320] * 4 + [1700] * 4
    assert run_steps(stop, trl_args(steps_per_generation=4), per_round) == 16  # round 4 is steps 13-16
    # Two passes over each round (num_iterations 2) of two micro-batches: a round lasts four steps.
    assert run_steps(stop, trl_args(steps_per_generation=2, iterations=2), per_round) == 16
    # An optimizer step of four micro-batches over rounds of two: every step ends at a round's end.
    assert run_steps(stop, trl_args(accumulation=4, steps_per_generation=2), [300, 650, 990, 1320]) == 4
    # Never reached: training runs to max_steps.
    assert run_steps(stop, trl_args(), [100, 200]) is None
    # total_tokens reads TRL's own count (state.num_input_tokens_seen).
    total = StopAtTokenBudget(TokenBudget("total_tokens", 1000))
    assert run_steps(total, trl_args(steps_per_generation=2), [600, 600, 1200, 1200]) == 4
    with pytest.raises(ValueError, match="at least 1"):
        TokenBudget("generated_tokens", 0)
    with pytest.raises(ValueError, match="needs the trainer's GeneratedTokenCount"):
        StopAtTokenBudget(TokenBudget("generated_tokens", 10))


def test_the_generated_token_count_comes_back_from_a_checkpoint(tmp_path):
    saved = GeneratedTokenCount()
    saved.count = 1234
    # As Trainer writes a checkpoint's trainer_state.json, and reads it back on resume.
    TrainerState(stateful_callbacks=[saved]).save_to_json(tmp_path / "trainer_state.json")
    resumed = GeneratedTokenCount()
    resumed.on_train_begin(None, TrainerState.load_from_json(tmp_path / "trainer_state.json"), TrainerControl())
    assert resumed.count == 1234
    fresh = GeneratedTokenCount()
    fresh.on_train_begin(None, TrainerState(stateful_callbacks=[fresh]), TrainerControl())
    assert fresh.count == 0


TOKEN_PROBLEMS = [
    Problem(id=f"t/{i}", prompt=f"Write f(x) returning x + {i}.", test_type="assert",
            tests=[f"assert f(1) == {1 + i}"], entry_point="f", reference=f"def f(x):\n    return x + {i}\n")
    for i in range(4)
]


def train_tiny(tmp_path, name, model, settings, srrl=None, token_budget=None):
    """Train a tiny run; its metrics records."""
    from execrl.training.grpo import train_grpo
    from execrl.jsonl import read_jsonl
    from execrl.training.lora import LoRASettings
    from execrl.training.rewards import RewardSettings
    from execrl.sandbox import Executor

    metrics = tmp_path / name / "metrics.jsonl"
    with Executor(workers=1) as executor:
        train_grpo(model, TOKEN_PROBLEMS, TOKEN_PROBLEMS[:1], CONFIG, settings, RewardSettings(binary=1.0),
                   LoRASettings(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]), executor,
                   tmp_path / name / "checkpoints", tmp_path / name / "adapter", metrics,
                   srrl=srrl, token_budget=token_budget)
    return read_jsonl(metrics)


def counts(records, key):
    """step -> the running count `key` logged at that step."""
    return {r["step"]: r[key] for r in records if key in r}


def test_a_real_srrl_run_stops_at_its_token_budget(tmp_path, monkeypatch):
    """TRL's own token count stops a real SRRL run under `total_tokens`: given a budget just past
    what a first run had used after two steps, a second run ends at the first step whose count
    reaches it, well before max_steps. Its advantages come from c1 and c2 subgroups (`groups:
    separate`, the default) at every step."""
    import execrl.training.srrl
    from conftest import build_tiny_model
    from execrl.training.grpo import GRPOSettings

    model = build_tiny_model(tmp_path / "tiny", [p.prompt + "\n" + p.reference for p in TOKEN_PROBLEMS] * 20)
    settings = GRPOSettings(num_generations=2, prompts_per_step=2, max_steps=6, max_completion_length=8, save_steps=100,
                            gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False, eval_every=0, temperature=1.0)
    srrl = SRRLSettings(refine_share=0.5, budget="total_tokens")
    subgrouped = []
    original = execrl.training.srrl.subgroup_advantages
    monkeypatch.setattr(execrl.training.srrl, "subgroup_advantages",
                        lambda rewards, kinds, *args: subgrouped.append(list(kinds)) or original(rewards, kinds, *args))
    unlimited = counts(train_tiny(tmp_path, "unlimited", model, settings, srrl), "num_tokens")
    assert len(subgrouped) == settings.max_steps and all(len(kinds) == 4 for kinds in subgrouped)
    assert {"c1", "c2"} <= {kind for kinds in subgrouped for kind in kinds}
    assert max(unlimited) == settings.max_steps
    budget = TokenBudget("total_tokens", int(unlimited[2]) + 1)
    stopped = counts(train_tiny(tmp_path, "stopped", model, settings, srrl, budget), "num_tokens")
    last = max(stopped)
    assert last < settings.max_steps
    assert stopped[last] >= budget.tokens and all(stopped[step] < budget.tokens for step in stopped if step < last)
    assert (tmp_path / "stopped" / "adapter" / "adapter_config.json").is_file()  # a stopped run still writes its adapter


def test_srrl_held_to_grpos_generated_tokens_stops_within_one_round_of_grpos_count(tmp_path):
    """The acceptance test of `srrl.budget: generated_tokens`: GRPO trains for max_steps and logs its
    generated tokens (num_generated_tokens, counted as TRL counts completion lengths); SRRL, given
    GRPO's metrics' count, stops at the end of a generation round (two optimizer steps each here,
    steps_per_generation 2), at or past GRPO's count by less than its own last round's tokens."""
    from conftest import build_tiny_model
    from execrl.training.grpo import GRPOSettings

    model = build_tiny_model(tmp_path / "tiny", [p.prompt + "\n" + p.reference for p in TOKEN_PROBLEMS] * 20)
    common = dict(num_generations=2, prompts_per_step=2, max_completion_length=8, save_steps=100,
                  gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False, eval_every=0, temperature=1.0,
                  steps_per_generation=2)
    grpo_records = train_tiny(tmp_path, "grpo", model, GRPOSettings(max_steps=4, **common))
    grpo = counts(grpo_records, "num_generated_tokens")
    assert sorted(grpo) == [1, 3]  # counted once a round, when it is sampled
    # The count is TRL's completion lengths summed: each round's mean length times its 4 completions.
    lengths = [r["completions/mean_length"] for r in grpo_records if "completions/mean_length" in r]
    assert grpo[3] == pytest.approx(sum(lengths) * 4)
    (tmp_path / "grpo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in grpo_records))
    budget = read_token_budget(tmp_path / "grpo.jsonl", "generated_tokens")
    assert budget.tokens == grpo[3]

    srrl_records = train_tiny(tmp_path, "srrl", model, GRPOSettings(max_steps=40, **common),
                              SRRLSettings(refine_share=0.5, budget="generated_tokens"), budget)
    srrl = counts(srrl_records, "num_generated_tokens")
    last_step = max(r["step"] for r in srrl_records)
    assert last_step < 40 and last_step % 2 == 0  # stopped early, at a round's end
    rounds = sorted(srrl)
    final, before = srrl[rounds[-1]], (srrl[rounds[-2]] if len(rounds) > 1 else 0)
    assert before < budget.tokens <= final  # the last round is the one that reached GRPO's count
    assert 0 <= final - budget.tokens < final - before  # past GRPO's count by less than that round's tokens
    assert last_step == rounds[-1] + 1  # and trained to that round's end


def pooled_advantages(rewards, group_size):
    """TRL's own normalisation of a group of G (`scale_rewards: group`), for comparison."""
    grouped = rewards.view(-1, group_size)
    return ((grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + 1e-4)).view(-1)


def test_separate_groups_give_failed_first_attempts_no_signal_where_pooled_pushes_them_down():
    """All four c1s failed, two refinements passed: GRPO would give the c1s nothing; pooled pushes
    every c1 down because refinements passed; separate gives the c1s nothing and ranks the c2s."""
    import torch

    from execrl.training.srrl import subgroup_advantages

    kinds = ["c1"] * 4 + ["c2"] * 4
    rewards = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    pooled = pooled_advantages(rewards, 8)
    separate = subgroup_advantages(rewards, kinds, 8, "group")
    assert (pooled[:4] < -0.5).all()
    assert torch.equal(separate[:4], torch.zeros(4))
    assert separate[4] > 0 > separate[5] and separate[4] == separate[6]
    assert separate[4:].sum().abs() < 1e-5  # c2s centred on their own mean


def test_separate_groups_give_c1s_grpos_advantages_whatever_the_refinements_did():
    """A c1's advantage under `separate` is GRPO's over the group's c1s alone, so it does not
    depend on how the refinements did; under `pooled` it does."""
    import torch

    from execrl.training.srrl import subgroup_advantages

    kinds = ["c1"] * 4 + ["c2"] * 4
    c1 = torch.tensor([1.0, 0.0, 0.0, 1.0])
    easy = torch.cat([c1, torch.tensor([1.0, 1.0, 1.0, 1.0])])
    hard = torch.cat([c1, torch.tensor([0.0, 0.0, 0.0, 0.0])])
    grpo_c1 = pooled_advantages(c1, 4)
    for rewards in (easy, hard):
        assert torch.allclose(subgroup_advantages(rewards, kinds, 8, "group")[:4], grpo_c1)
    assert not torch.allclose(pooled_advantages(easy, 8)[:4], pooled_advantages(hard, 8)[:4])
    # two groups are normalised apart; `none` only centres; unscorable rewards get 0
    two = subgroup_advantages(torch.cat([easy, hard]), kinds * 2, 8, "none")
    assert torch.allclose(two[:4], torch.tensor([0.5, -0.5, -0.5, 0.5])) and torch.equal(two[12:], torch.zeros(4))
    nan = subgroup_advantages(torch.tensor([1.0, float("nan"), 0.0, 1.0]), ["c1", "c1", "c1", "c2"], 4, "none")
    assert torch.allclose(nan, torch.tensor([0.5, 0.0, -0.5, 0.0]))
    # `batch` centres in each subgroup, then divides by the whole batch's standard deviation
    rewards = torch.cat([easy, hard])
    batch = subgroup_advantages(rewards, kinds * 2, 8, "batch")
    assert torch.allclose(batch, two / (rewards.std() + 1e-4))
    assert not torch.allclose(batch, two) and not torch.allclose(batch, subgroup_advantages(rewards, kinds * 2, 8, "group"))


def test_grouping_is_a_checked_setting():
    assert SRRLSettings().groups == "separate"
    with pytest.raises(ValueError, match="srrl.groups must be one of"):
        SRRLSettings(groups="mixed")


def test_separate_grouping_replaces_the_advantages_the_trainer_returns(monkeypatch):
    """The trainer class for `separate` swaps the advantages of TRL's step (this process's slice of
    the gathered batch) and its logged ones; `pooled` keeps TRL's trainer as it is."""
    from collections import deque

    import torch

    from execrl.training.srrl import grouping_trainer_class, subgroup_advantages

    kinds = ["c1"] * 4 + ["c2"] * 4
    rewards = torch.tensor([[0.0], [0.0], [0.0], [0.0], [1.0], [0.0], [1.0], [0.0]])

    class FakeTRL:
        """Stands in for GRPOTrainer's step: rewards of both processes' completions, pooled advantages."""

        num_generations, scale_rewards, multi_objective_aggregation = 8, "group", "sum_then_normalize"
        reward_weights = torch.tensor([1.0])
        model = type("M", (), {"training": True})()
        accelerator = type("A", (), {"process_index": 1})()

        def __init__(self):
            self._logs = {"advantages": deque(maxlen=64)}

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            return rewards

        def _generate_and_score_completions(self, inputs):
            self._calculate_rewards(inputs, None, None, None)
            pooled = pooled_advantages(rewards.view(-1), 8)
            self._logs["advantages"].extend(pooled.tolist())
            return {"advantages": pooled[4:]}  # process 1's half

    assert grouping_trainer_class(FakeTRL, SRRLSettings(groups="pooled")) is FakeTRL
    monkeypatch.setattr("accelerate.utils.gather_object", lambda local: kinds)  # both processes' kinds
    trainer = grouping_trainer_class(FakeTRL, SRRLSettings(groups="separate"))()
    output = trainer._generate_and_score_completions([{"sample_kind": k} for k in kinds[4:]])
    expected = subgroup_advantages(rewards.view(-1), kinds, 8, "group")
    assert torch.allclose(output["advantages"], expected[4:])
    assert torch.allclose(torch.tensor(list(trainer._logs["advantages"])), expected)


def test_refinements_never_quote_a_held_out_test_the_reward_ran():
    """Under `plus_tests: reward` with `max_tests` the reward runs the first tests, then the held-out
    ones, at indices the problem's own tests also have: a refinement prompt quotes neither the
    held-out test's error (its expected value) nor the problem's own test at that index."""
    from execrl.sandbox import ExecutionLimits, Executor
    from execrl.training.rewards import RewardSettings

    problem = Problem(
        id="p/2", prompt="Write f(x), twice x.", test_type="assert", entry_point="f",
        tests=[f"assert f({x}) == {2 * x}" for x in (1, 2, 3, 4)], plus_tests=["assert f(17) == 34"],
    )  # fmt: skip
    hard_coded = "def f(x):\n    return {1: 2, 2: 4}.get(x, 0)"

    class Sampler(FakeSampler):
        def __call__(self, prompts):
            self.calls.append(list(prompts))
            return [([1], [1], hard_coded, None) for _ in prompts]

    rewards = RewardSettings(max_tests=2, plus_tests="reward")
    prompt = "Write f(x), twice x.\n"
    sampler = Sampler()
    for feedback in ("shown", "all"):
        settings = SRRLSettings(refine_share=0.5, feedback_tests=feedback)
        with Executor(workers=1, limits=ExecutionLimits(timeout_s=2)) as executor:
            rollout = SRRLRollout({prompt: problem}, executor, settings, PromptConfig(num_tests_shown=3), None,
                                  rewarded=rewards.rewarded)  # fmt: skip
            output = rollout.rollout([prompt], group_size=2, sampler=sampler)
        first = output["execution"][0]
        assert [o["status"] for o in first["test_outcomes"]] == ["pass", "pass", "fail"]
        assert "34" in first["error_message"]  # the held-out test failed, and its message has the value
        (refinement,) = sampler.calls[-1]
        assert "34" not in refinement and "17" not in refinement, refinement
        assert "Failed test" not in refinement and "hidden test" in refinement  # f(3) == 6 passed
