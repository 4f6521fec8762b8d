"""One training job from the command line: what the workflow's `train` rule runs under `accelerate launch`.

    accelerate launch --config_file workflow/accelerate/cpu.yaml --num_processes 2 --num_machines 1 \\
        --main_process_port 0 -m execrl.training.train_job grpo --model MODEL --settings '{"grpo": {...}, ...}' \\
        --problems train.jsonl --eval-problems test.jsonl --output trained/ --metrics metrics.jsonl \\
        --checkpoint-root results/checkpoints --run-name grpo/mbpp/qwen/0

`--settings` holds everything that can change the result; checkpoints go to
`CHECKPOINT_ROOT/RUN_NAME/<digest of method, model and settings>`, so a job killed and started
again resumes there, and one with other settings starts afresh. The other options (sandbox
workers, threads, logging) only change how the job runs and never reach the digest.
Malformed settings fail here, naming the key, before any model loads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import fields
from pathlib import Path

from execrl.methods import METHODS as REGISTRY
from execrl.methods import trained_methods

METHODS = tuple(trained_methods(REGISTRY))
WANDB_MODES = ("disabled", "online", "offline")


def section(settings: dict, name: str, cls, *, nullable: bool = False):
    """The dataclass `cls` built from `settings[name]`, or a ValueError naming the offending key."""
    if name not in settings:
        raise ValueError(f"settings: missing section {name!r}")
    value = settings[name]
    if value is None and nullable:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"settings.{name} must be an object{' or null' if nullable else ''}, got {value!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"settings.{name}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    try:
        return cls(**value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"settings.{name}: {error}") from error


def parse_settings(method: str, settings: dict) -> dict:
    """The settings objects of `method`, checked: exactly the sections its row in
    `execrl.methods.METHODS` names plus `lora`, known keys only."""
    from execrl.training.dpo import DPOSettings
    from execrl.training.grpo_settings import GRPOSettings
    from execrl.training.lora import LoRASettings
    from execrl.prompting import PromptConfig
    from execrl.training.rewards import RewardSettings
    from execrl.sandbox import ExecutionLimits
    from execrl.training.code_game_settings import CodeGameSettings
    from execrl.training.exec_reward import ExecRewardSettings
    from execrl.training.spiral import SPIRALSettings
    from execrl.training.srrl import SRRLSettings
    from execrl.watch.monitor import WatchSettings

    classes = {
        "exec": ExecRewardSettings,
        "code_game": CodeGameSettings,
        "spiral": SPIRALSettings,
        "dpo": DPOSettings,
        "grpo": GRPOSettings,
        "rewards": RewardSettings,
        "prompt": PromptConfig,
        "execution": ExecutionLimits,
        "srrl": SRRLSettings,
        "watch": WatchSettings,
    }
    if not isinstance(settings, dict):
        raise ValueError(f"--settings must be a JSON object, got {type(settings).__name__}")
    sections = (*REGISTRY[method].settings, "lora")
    unknown = sorted(set(settings) - set(sections))
    if unknown:
        raise ValueError(f"settings: section(s) {', '.join(unknown)} do not belong to {method} (expected {', '.join(sections)})")
    execution = settings.get("execution")
    if isinstance(execution, dict) and "workers" in execution:
        raise ValueError("settings.execution.workers changes no result: pass it as --sandbox-workers")
    parsed = {name: section(settings, name, classes[name]) for name in REGISTRY[method].settings}
    parsed["lora"] = section(settings, "lora", LoRASettings, nullable=True)
    return parsed


def die_with_launcher() -> None:
    """Die with the launcher: torchrun (under `accelerate launch`) starts every training process in
    a session of its own, so killing the launcher's process group, as a local scheduler cancelling
    the job does, would leave them training and writing checkpoints beside the run replacing them.
    """
    from execrl.generation.vllm_server import die_with_parent

    if "TORCHELASTIC_RUN_ID" in os.environ:
        die_with_parent()


def check_gpus(processes: int) -> None:
    """One training process per visible GPU: fewer leave GPUs idle, more share one and fail in NCCL."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() != processes:
        raise ValueError(
            f"{processes} training process(es) but {torch.cuda.device_count()} GPU(s) visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): set the train rule's "
            "`gpu` and `processes` resources together (one process per GPU not serving vLLM)"
        )


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m execrl.training.train_job", description=__doc__.split("\n")[0])
    parser.add_argument("method", choices=METHODS)
    parser.add_argument("--model", required=True, help="base model: a folder or a hub id")
    parser.add_argument("--settings", required=True, help="JSON object of every result-changing setting")
    parser.add_argument("--problems", "--pairs", "--data", dest="data", required=True, type=Path,
                        help="training data: problems (grpo, srrl) or preference pairs (dpo), JSONL")
    parser.add_argument("--eval-problems", type=Path,
                        help="held-out problems of the interval evaluation (read only when the method's eval_every > 0)")
    parser.add_argument("--output", required=True, type=Path, help="the trained folder (adapter or full model, and tokenizer)")
    parser.add_argument("--metrics", required=True, type=Path, help="per-step training metrics (JSONL)")
    parser.add_argument("--checkpoint-root", required=True, type=Path)
    parser.add_argument("--run-name", required=True, help="checkpoint subfolder and W&B run name")
    parser.add_argument("--sandbox-workers", type=positive_int, default=2,
                        help="sandbox workers of each process (rewards of online methods, every interval evaluation)")
    parser.add_argument("--token-budget-from", type=Path,
                        help="GRPO's metrics file: srrl with a token budget stops once it has used as many tokens")
    parser.add_argument("--micro-batch", type=positive_int,
                        help="the memory plan's micro-batch per process (execrl.planning.memory_plan); default: the settings' batch")
    parser.add_argument("--accumulation", type=positive_int,
                        help="the memory plan's gradient accumulation steps, given with --micro-batch")
    parser.add_argument("--threads", type=positive_int, help="torch threads of each process")
    # How often the job saves and whether it recomputes activations change no result (a run that
    # saves every step, or checkpoints its activations, trains to the same bits): they are options
    # of their own, out of --settings and so out of the checkpoint folder's key.
    parser.add_argument("--save-steps", type=positive_int,
                        help="steps between checkpoints (default: the settings' save_steps)")
    parser.add_argument("--gradient-checkpointing", type=int, choices=(0, 1),
                        help="1: recompute activations in the backward pass, 0: keep them (default: the settings')")
    parser.add_argument("--wandb-mode", choices=WANDB_MODES, default="disabled")
    parser.add_argument("--wandb-project", default="execrl")
    printing = parser.add_argument_group("printing the trainer config (no model loads, nothing trains)")
    printing.add_argument("--print-trainer-config", action="store_true",
                          help="print the TRL config (every field), the PEFT config and the launch layout as JSON, and exit")
    printing.add_argument("--processes", type=positive_int,
                          help="training processes to print for (default: the launcher's WORLD_SIZE, 1 outside one)")
    printing.add_argument("--accelerate-config", type=Path,
                          help="the train rule's accelerate --config_file, for ZeRO and dtype outside `accelerate launch`")
    return parser


def with_runtime_options(settings: dict, section: str, args) -> dict:
    """`settings` with --save-steps and --gradient-checkpointing laid over the training section
    (`grpo` or `dpo`) where given."""
    import dataclasses

    given = {}
    if args.save_steps is not None:
        given["save_steps"] = args.save_steps
    if args.gradient_checkpointing is not None:
        given["gradient_checkpointing"] = bool(args.gradient_checkpointing)
    return {**settings, section: dataclasses.replace(settings[section], **given)}


def checkpoint_dir(args, settings: dict, token_budget=None) -> Path:
    """`token_budget` keys the folder too: a checkpoint saved on the way to one budget may lie past another."""
    from execrl.training.common import settings_digest

    key = {"method": args.method, "model": args.model, "settings": settings}
    if token_budget is not None:
        key["token_budget"] = {"budget": token_budget.budget, "tokens": token_budget.tokens}
    return args.checkpoint_root / args.run_name / settings_digest(key)


def token_budget(method: str, settings: dict, budget_from: Path | None):
    """SRRL's `execrl.training.token_budget.TokenBudget` under `srrl.budget: generated_tokens` or
    `total_tokens`, read from GRPO's metrics file; None for every other method and budget."""
    from execrl.training.token_budget import TOKEN_BUDGETS, read_token_budget

    srrl = settings.get("srrl")
    if srrl is None or srrl.budget not in TOKEN_BUDGETS:
        if budget_from is not None:
            raise ValueError(f"--token-budget-from is only for srrl with a token budget (this job: {method})")
        return None
    if budget_from is None:
        raise ValueError(f"srrl.budget is {srrl.budget!r}: pass GRPO's metrics file as --token-budget-from")
    return read_token_budget(budget_from, srrl.budget)


def main(argv: list[str] | None = None) -> None:
    die_with_launcher()
    cli = parser()
    args = cli.parse_args(argv)
    try:
        raw = json.loads(args.settings)
    except json.JSONDecodeError as error:
        cli.error(f"--settings is not JSON: {error}")
    try:
        settings = parse_settings(args.method, raw)
    except ValueError as error:
        cli.error(str(error))
    online = REGISTRY[args.method].online
    steps = "grpo" if online else "dpo"  # the section that steps training
    settings = with_runtime_options(settings, steps, args)
    if online:
        settings["grpo"] = settings["grpo"].for_model(args.model)
    if settings[steps].eval_every and args.eval_problems is None:
        cli.error(f"{steps}.eval_every is {settings[steps].eval_every}: {args.method} needs --eval-problems "
                  f"(or set {steps}.eval_every: 0)")
    try:
        tokens = token_budget(args.method, settings, args.token_budget_from)
    except OSError as error:
        if not args.print_trainer_config:  # the budget keys only the checkpoint folder: printed without it
            cli.error(str(error))
        tokens = None
    except ValueError as error:
        cli.error(str(error))

    from execrl.training.common import world_size

    if (args.micro_batch is None) != (args.accumulation is None):
        cli.error("give --micro-batch and --accumulation together (the memory plan's cut of a step)")
    if args.print_trainer_config:
        try:
            print_trainer_config(args, settings, raw, tokens)
        except ValueError as error:
            cli.error(str(error))
        return
    try:
        check_gpus(world_size())
        if online:
            settings["grpo"].micro_batches(world_size(), args.micro_batch, args.accumulation)
            settings["grpo"].vllm_args(world_size())
        else:
            from execrl.training.trainer_config import trainer_batch

            trainer_batch(settings["dpo"], args.micro_batch, args.accumulation)
    except ValueError as error:
        cli.error(str(error))

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    wandb = {"mode": args.wandb_mode, "project": args.wandb_project}
    where = checkpoint_dir(args, raw, tokens)
    print(f"{args.method} job: checkpoints in {where}, {world_size()} process(es)", file=sys.stderr, flush=True)
    from execrl.problems import read_problems
    from execrl.sandbox import Executor

    if not online:
        from contextlib import nullcontext

        from execrl.training.dpo import train_dpo
        from execrl.jsonl import read_jsonl
        from execrl.training_data.rl_data import no_pairs_message

        pairs = read_jsonl(args.data)
        if not pairs:
            raise SystemExit(no_pairs_message(args.data))

        dpo = settings["dpo"]
        # Only the interval evaluation runs code: without it, no sandbox.
        evaluates = dpo.eval_every > 0
        with Executor(workers=args.sandbox_workers, limits=settings["execution"]) if evaluates else nullcontext() as executor:
            train_dpo(
                model_path=args.model,
                pairs=pairs,
                settings=dpo,
                lora=settings["lora"],
                checkpoint_dir=where,
                adapter_dir=args.output,
                metrics_path=args.metrics,
                eval_problems=read_problems(args.eval_problems)[: dpo.eval_problems] if evaluates else [],
                prompt_config=settings["prompt"],
                executor=executor,
                wandb=wandb,
                run_name=args.run_name,
                micro_batch=args.micro_batch,
                accumulation=args.accumulation,
            )
        return

    from execrl.training.grpo import train_grpo

    grpo = settings["grpo"]
    problems = read_problems(args.data)
    if grpo.train_problems is not None and grpo.train_problems > len(problems):
        print(f"grpo.train_problems is {grpo.train_problems}, but {args.data} has {len(problems)} problems: "
              f"training on all {len(problems)}", file=sys.stderr, flush=True)  # fmt: skip
    # Each training process rewards its own completions with its own sandbox workers.
    with Executor(workers=args.sandbox_workers, limits=settings["execution"]) as executor:
        task = online_task(args.method, settings, executor, args.model)
        try:
            train_grpo(
                model_path=args.model,
                problems=problems[: grpo.train_problems],
                eval_problems=read_problems(args.eval_problems)[: grpo.eval_problems] if grpo.eval_every else [],
                prompt_config=settings["prompt"],
                settings=grpo,
                reward_settings=settings.get("rewards"),
                lora=settings["lora"],
                executor=executor,
                checkpoint_dir=where,
                adapter_dir=args.output,
                metrics_path=args.metrics,
                srrl=settings.get("srrl"),
                watch=settings.get("watch"),
                token_budget=tokens,
                wandb=wandb,
                run_name=args.run_name,
                task=task,
                micro_batch=args.micro_batch,
                accumulation=args.accumulation,
            )
        finally:
            if task is not None:
                task.close()


def print_trainer_config(args, settings: dict, raw: dict, tokens: int | None) -> None:
    """Print (rank 0 only) the TRL and PEFT configs the job would train with, built by the
    functions training uses (`execrl.training.trainer_config`), and its launch layout."""
    from unittest.mock import patch

    from execrl.training import trainer_config
    from execrl.training.common import process_rank, world_size
    from execrl.generation.vllm_server import VLLM_GROUP_PORT_ENV, VLLM_SERVER_HOST_ENV, VLLM_SERVER_PORT_ENV

    processes = args.processes or world_size()
    common = {"checkpoint_dir": checkpoint_dir(args, raw, tokens), "run_name": args.run_name,
              "wandb": {"mode": args.wandb_mode, "project": args.wandb_project},
              "micro_batch": args.micro_batch, "accumulation": args.accumulation}
    if REGISTRY[args.method].online:
        grpo = settings["grpo"]
        # A server's address is chosen when `execrl.generation.vllm_server` starts it: outside one, shown as unset.
        server = {VLLM_SERVER_HOST_ENV: "unset", VLLM_SERVER_PORT_ENV: "0", VLLM_GROUP_PORT_ENV: "0"}
        with patch.dict(os.environ, {k: v for k, v in server.items() if k not in os.environ}):
            config = trainer_config.grpo_config(
                grpo, processes=processes, reward_weights=trainer_config.reward_weights(args.method, settings), **common
            )
    else:
        config = trainer_config.dpo_config(settings["dpo"], **common)
    peft = trainer_config.peft_config(settings["lora"])
    layout = trainer_config.launch_layout(config, processes, args.accelerate_config)
    if process_rank() == 0:
        print(trainer_config.dumps(trainer_config.describe(args.method, config, peft, layout)), flush=True)


def online_task(method: str, settings: dict, executor, model: str):
    """What an online method trains on, when it is not the problems' tests (GRPO's, SRRL's)."""
    reasoning_format = settings["prompt"].reasoning_format
    if method == "exec":
        from execrl.training.exec_reward import ProgramRewards

        return ProgramRewards(executor, settings["exec"], reasoning_format)
    if method == "code_game":
        from execrl.training.code_game import CodeGameRewards, opponent_predictor

        return CodeGameRewards(
            executor,
            settings["code_game"],
            settings["exec"],
            opponent_predictor(settings["code_game"], model),
            settings["prompt"],
            reasoning_format,
        )
    if method == "spiral":
        from execrl.training.spiral_trainer import SelfPlayTask

        return SelfPlayTask(settings["spiral"], settings["prompt"], settings["grpo"].seed)
    return None


if __name__ == "__main__":
    main()
