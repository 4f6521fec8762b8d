"""`execrl.training.train_job`'s settings: malformed ones fail before a model loads, naming the key; the
checkpoint folder follows the settings and nothing else."""

import json

import pytest

from execrl.training import train_job
from execrl.training.grpo import GRPOSettings
from execrl.generation.vllm_server import VLLM_GROUP_PORT_ENV, VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV

GRPO = {
    "grpo": {"num_generations": 2, "prompts_per_step": 4, "seed": 0},
    "rewards": {"binary": 1.0},
    "lora": None,
    "prompt": {"num_tests_shown": 1},
    "execution": {"timeout_s": 2, "memory_mb": 512},
    "watch": {},
}
DPO = {"dpo": {"beta": 0.1, "seed": 0}, "lora": {"r": 4}, "prompt": GRPO["prompt"], "execution": GRPO["execution"]}
SRRL_TOKENS = {**GRPO, "srrl": {"budget": "generated_tokens"}}
SRRL_TOTAL = {**GRPO, "srrl": {"budget": "total_tokens"}}


def argv(method, settings, *extra):
    data = ["--pairs" if method == "dpo" else "--problems", "p.jsonl", "--eval-problems", "e.jsonl"]
    return [method, "--model", "m", "--settings", json.dumps(settings), *data, "--output", "out", "--metrics",
            "m.jsonl", "--checkpoint-root", "ck", "--run-name", "r", *extra]


def error_of(argv_, capsys):
    with pytest.raises(SystemExit) as exit_:
        train_job.main(argv_)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.fixture(autouse=True)
def never_trains(monkeypatch):
    """A test reaching training would be a test of a malformed setting that got through."""
    def refuse(**kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr("execrl.training.dpo.train_dpo", refuse)
    monkeypatch.setattr("execrl.training.grpo.train_grpo", refuse)
    for name in ("WORLD_SIZE", VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV, VLLM_GROUP_PORT_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "method, settings, message",
    [
        ("grpo", {**GRPO, "grpo": {**GRPO["grpo"], "lerning_rate": 1e-5}}, "settings.grpo: unknown key(s) lerning_rate"),
        ("grpo", {k: v for k, v in GRPO.items() if k != "rewards"}, "missing section 'rewards'"),
        ("grpo", {**GRPO, "srrl": {}}, "section(s) srrl do not belong to grpo"),
        ("srrl", GRPO, "missing section 'srrl'"),
        ("srrl", {**GRPO, "srrl": {"refine_share": 1.5}}, "settings.srrl: srrl.refine_share must be in [0, 1)"),
        ("grpo", {**GRPO, "execution": {"timeout_s": 2, "workers": 4}}, "pass it as --sandbox-workers"),
        ("grpo", {**GRPO, "grpo": {**GRPO["grpo"], "vllm_mode": "remote"}}, "grpo.vllm_mode must be one of"),
        ("grpo", {**GRPO, "lora": []}, "settings.lora must be an object or null"),
        ("dpo", {**DPO, "dpo": {"beta": 0.1, "loss": "sigmoid"}}, "settings.dpo: unknown key(s) loss"),
        ("dpo", [1, 2], "--settings must be a JSON object"),
    ],
)
def test_malformed_settings_are_named(method, settings, message, capsys):
    assert message in error_of(argv(method, settings), capsys)


def test_settings_that_are_not_json(capsys):
    bad = argv("dpo", DPO)
    bad[bad.index("--settings") + 1] = "{'dpo': 1}"
    assert "--settings is not JSON" in error_of(bad, capsys)


def test_data_options_follow_the_method(capsys):
    no_eval = argv("grpo", GRPO)
    index = no_eval.index("--eval-problems")
    del no_eval[index : index + 2]
    assert "grpo.eval_every is 25: grpo needs --eval-problems (or set grpo.eval_every: 0)" in error_of(no_eval, capsys)


def test_dpo_evaluating_needs_held_out_problems(capsys):
    no_eval = argv("dpo", DPO)
    index = no_eval.index("--eval-problems")
    del no_eval[index : index + 2]
    assert "dpo.eval_every is 25: dpo needs --eval-problems (or set dpo.eval_every: 0)" in error_of(no_eval, capsys)
    assert "missing section 'prompt'" in error_of(argv("dpo", {k: v for k, v in DPO.items() if k != "prompt"}), capsys)


def grpo_metrics(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_token_budget_comes_from_grpos_metrics_only_under_a_token_budget(tmp_path, capsys):
    from execrl.training.token_budget import TokenBudget

    assert "srrl.budget is 'generated_tokens': pass GRPO's metrics file as --token-budget-from" in error_of(
        argv("srrl", SRRL_TOKENS), capsys
    )
    grpo = grpo_metrics(tmp_path / "grpo.jsonl", [{"step": 1, "num_tokens": 800.0, "num_generated_tokens": 300.0},
                                                  {"step": 2, "num_tokens": 1600.0, "num_generated_tokens": 650.0}])
    for method, settings in (("grpo", GRPO), ("srrl", {**GRPO, "srrl": {}})):
        message = error_of(argv(method, settings, "--token-budget-from", grpo), capsys)
        assert f"--token-budget-from is only for srrl with a token budget (this job: {method})" in message
    dpo = grpo_metrics(tmp_path / "dpo.jsonl", [{"step": 1, "loss": 0.5}])
    assert "logged no num_generated_tokens" in error_of(argv("srrl", SRRL_TOKENS, "--token-budget-from", dpo), capsys)
    assert "logged no num_tokens" in error_of(argv("srrl", SRRL_TOTAL, "--token-budget-from", dpo), capsys)
    assert "No such file" in error_of(argv("srrl", SRRL_TOKENS, "--token-budget-from", str(tmp_path / "none.jsonl")), capsys)
    generated = train_job.token_budget("srrl", train_job.parse_settings("srrl", SRRL_TOKENS), tmp_path / "grpo.jsonl")
    assert generated == TokenBudget("generated_tokens", 650)
    total = train_job.token_budget("srrl", train_job.parse_settings("srrl", SRRL_TOTAL), tmp_path / "grpo.jsonl")
    assert total == TokenBudget("total_tokens", 1600)
    assert "is no longer a budget" in error_of(argv("srrl", {**GRPO, "srrl": {"budget": "tokens"}}), capsys)


def test_prompts_per_step_must_share_out_over_the_processes(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "3")
    message = error_of(argv("grpo", GRPO), capsys)
    assert "prompts_per_step (4) must be a multiple of the training processes (3)" in message
    assert "Set it to 3 or 6" in message
    assert GRPOSettings(num_generations=8, prompts_per_step=16).per_process_completions(4) == 32


def test_server_mode_needs_the_server_the_vllm_server_command_starts(monkeypatch, capsys):
    server = {**GRPO, "grpo": {**GRPO["grpo"], "use_vllm": True, "vllm_mode": "server"}}
    assert "run the training command under `python -m execrl.generation.vllm_server" in error_of(argv("grpo", server), capsys)
    monkeypatch.setenv(VLLM_SERVER_HOST_ENV, "127.0.0.1")
    monkeypatch.setenv(VLLM_SERVER_PORT_ENV, "8123")
    monkeypatch.setenv(VLLM_GROUP_PORT_ENV, "51999")
    args = GRPOSettings(**server["grpo"]).vllm_args(processes=1)
    assert args["vllm_server_host"] == "127.0.0.1" and args["vllm_server_port"] == 8123 and args["vllm_group_port"] == 51999


def test_checkpoints_follow_settings_not_runtime_options():
    def where(settings, *extra):
        args = train_job.parser().parse_args(argv("grpo", settings, *extra))
        return train_job.checkpoint_dir(args, json.loads(args.settings))

    base = where(GRPO)
    assert base.parent.as_posix() == "ck/r"
    assert where(GRPO, "--threads", "8", "--sandbox-workers", "16", "--wandb-mode", "offline") == base
    assert where({**GRPO, "grpo": {**GRPO["grpo"], "seed": 1}}) != base
    changed_model = train_job.parser().parse_args(argv("grpo", GRPO))
    changed_model.model = "other"
    assert train_job.checkpoint_dir(changed_model, GRPO) != base
    # A token budget keys the folder: a checkpoint on the way to a larger budget may lie past a smaller one.
    srrl = train_job.parser().parse_args(argv("srrl", SRRL_TOKENS))
    from execrl.training.token_budget import TokenBudget

    budgets = {train_job.checkpoint_dir(srrl, SRRL_TOKENS, tokens) for tokens in (
        None, TokenBudget("generated_tokens", 1600), TokenBudget("generated_tokens", 1601), TokenBudget("total_tokens", 1600))}
    assert len(budgets) == 4


def test_processes_and_visible_gpus_must_agree(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 4)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    message = error_of(argv("dpo", DPO), capsys)
    assert "2 training process(es) but 4 GPU(s) visible (CUDA_VISIBLE_DEVICES=0,1,2,3)" in message
    assert "`gpu` and `processes` resources together" in message


def test_colocated_engines_must_tile_the_processes(monkeypatch, capsys):
    colocate = {**GRPO, "grpo": {**GRPO["grpo"], "use_vllm": True, "vllm_tensor_parallel_size": 4}}
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert "vllm_tensor_parallel_size (4) must divide the training processes (2)" in error_of(argv("grpo", colocate), capsys)
    assert GRPOSettings(**{**colocate["grpo"], "vllm_tensor_parallel_size": 2}).vllm_args(2)["vllm_tensor_parallel_size"] == 2


@pytest.mark.parametrize("steps_per_generation", [None, 2])
def test_the_plans_micro_batch_reaches_trls_config_and_keeps_the_step(steps_per_generation, tmp_path):
    """The memory plan cuts each micro-batch (here 64 completions) into pieces of 8: GRPOConfig gets
    them, and the generation round and the optimizer step keep their completions."""
    from trl import GRPOConfig

    settings = GRPOSettings(num_generations=8, prompts_per_step=16, steps_per_generation=steps_per_generation,
                            gradient_accumulation_steps=1 if steps_per_generation is None else 2)
    whole = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, **settings.trl_args(1))
    pieces = 128 // (steps_per_generation or 1) // 8
    cut = GRPOConfig(output_dir=str(tmp_path), use_cpu=True,
                     **settings.trl_args(1, micro_batch=8, accumulation=settings.gradient_accumulation_steps * pieces))
    assert cut.per_device_train_batch_size == 8
    assert cut.gradient_accumulation_steps == whole.gradient_accumulation_steps * pieces
    assert cut.generation_batch_size == whole.generation_batch_size == 128
    assert (cut.per_device_train_batch_size * cut.gradient_accumulation_steps
            == whole.per_device_train_batch_size * whole.gradient_accumulation_steps)


def test_a_plan_that_does_not_cut_the_batch_is_refused(monkeypatch, capsys):
    message = error_of(argv("grpo", GRPO, "--micro-batch", "3", "--accumulation", "2"), capsys)
    assert "micro-batch 3 x accumulation 2 does not cut" in message
    assert "--micro-batch and --accumulation together" in error_of(argv("grpo", GRPO, "--micro-batch", "2"), capsys)


def test_the_plans_micro_batch_reaches_dpos_config():
    from execrl.training.dpo import DPOSettings
    from execrl.training.trainer_config import trainer_batch

    settings = DPOSettings(per_device_train_batch_size=8, gradient_accumulation_steps=2)
    assert trainer_batch(settings) == {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}
    assert trainer_batch(settings, 2, 8) == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8}
    with pytest.raises(ValueError, match="does not cut"):
        trainer_batch(settings, 2, 4)


def test_train_problems_takes_the_first_problems_of_the_training_data(tmp_path, monkeypatch):
    """`grpo.train_problems`: GRPO trains on the first N problems of its data (all when null)."""
    from execrl.problems import Problem, write_problems

    problems = [Problem(id=f"p/{i}", prompt=f"Return {i}.", test_type="assert", tests=[f"assert f() == {i}"])
                for i in range(5)]
    write_problems(problems, tmp_path / "p.jsonl")
    write_problems(problems[:2], tmp_path / "e.jsonl")
    monkeypatch.chdir(tmp_path)
    seen = {}

    def record(**kwargs):
        seen[kwargs["settings"].train_problems] = [p.id for p in kwargs["problems"]]

    monkeypatch.setattr("execrl.training.grpo.train_grpo", record)
    for n in (3, None):
        train_job.main(argv("grpo", {**GRPO, "grpo": {**GRPO["grpo"], "train_problems": n}}))
    assert seen == {3: ["p/0", "p/1", "p/2"], None: [f"p/{i}" for i in range(5)]}


@pytest.mark.parametrize("method", ["dpo", "grpo"])
def test_without_interval_evaluation_no_held_out_problems_are_needed(method, tmp_path, monkeypatch):
    """`eval_every: 0`: the job runs without --eval-problems (the workflow then gives it no test split)."""
    problem = {"id": "p", "prompt": "Add.", "test_type": "assert", "tests": ["assert add(1, 2) == 3"]}
    pair = {"problem_id": "p", "prompt": "Add.", "chosen": "a", "rejected": "b"}
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(pair if method == "dpo" else problem) + "\n")
    settings = {**(DPO if method == "dpo" else GRPO)}
    settings[method] = {**settings[method], "eval_every": 0}
    given = {}
    monkeypatch.setattr(f"execrl.training.{method}.train_{method}", lambda **kwargs: given.update(kwargs))
    options = argv(method, settings)
    at = options.index("--eval-problems")
    del options[at : at + 2]
    options[options.index("p.jsonl")] = str(data)
    train_job.main(options)
    assert given["eval_problems"] == []
