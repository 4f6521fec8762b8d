"""The code-output game (`code_game`): the policy writes a program, an opponent predicts its output.

Each train problem seeds one game prompt (`program_template`), so prompts vary as in GRPO. The
completion's program runs in the sandbox's run-and-capture mode; the opponent sees only the
code (`opponent_template`) and predicts what it prints. The policy gets `win` when its program
ran and the prediction is wrong, `loss` when the prediction is right, and when its program did
not run seed 002's execution reward (`execrl.training.exec_reward`) capped at `loss`: a program that
does not run never scores above one whose output the opponent predicts, or breaking the syntax
(−0.5 by default) would beat playing once the opponent predicts most programs. A program that prints nothing
loses (`silent_loses`): a tiny frozen opponent never predicts empty output, and a policy trained
against it learned to print nothing within 160 steps. A program whose output is longer than the
opponent may write (`max_prediction_tokens` tokens of the policy's tokenizer, the output as the
comparison reads it) loses too (`long_output_loses`): no prediction can match it, so without
the rule printing `"x" * 1000` would win every game.

Output that changes from run to run (the clock, unseeded randomness, addresses) cannot be
predicted from the code, so a policy could win every game by printing it. With
`require_deterministic` every program runs twice, the second time in a second pool of sandbox
workers (`Executor.sibling`), so the two runs are always two processes with their own address
layouts and uids, whatever the pools' sizes and schedules; one whose two outputs differ, or whose
output shows an object's address (`OBJECT_ADDRESS`), is scored as a run-time error.

The opponent is a frozen copy of the base model (`base`), sampled with transformers. Predictions
are sampled for every completion of a step, whether its program ran or not. The policy itself
cannot be the opponent: its prediction turns would be sampled but never trained, and since a
wrong prediction is the policy's win, the one-sided game would reward predicting worse; training
them on the negated reward would need the prediction turns as rows of TRL's step beside the
programs, which its fixed-size, one-prompt-per-group step does not hold.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from execrl.training.online_task import OnlineTask
from execrl.problems import Problem
from execrl.training.exec_reward import ExecRewardSettings, execution_reward, run_metrics
from execrl.prompting import PromptConfig, chat_prompt, extract_code
from execrl.training.rewards import completion_text
from execrl.sandbox.programs import ProgramRun, run_programs
from execrl.training.code_game_settings import CodeGameSettings

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|$)", re.DOTALL)


def game_prompt(problem: Problem, settings: CodeGameSettings, prompt_config: PromptConfig, tokenizer=None) -> str:
    """The policy's prompt: write a program on `problem`'s task whose output is hard to predict."""
    return chat_prompt(settings.program_template.format(prompt=problem.prompt.strip()), prompt_config, tokenizer)


def opponent_prompt(code: str, settings: CodeGameSettings, prompt_config: PromptConfig, tokenizer=None) -> str:
    """The opponent's prompt: predict what `code` prints."""
    return chat_prompt(settings.opponent_template.format(code=code), prompt_config, tokenizer)


def normalize_output(text: str) -> str:
    return " ".join(text.split())


def prediction_text(completion: str) -> str:
    """The predicted output in an opponent's completion: a fenced block's body if it has one."""
    match = _FENCE.search(completion)
    return match.group(1) if match else completion


def prediction_matches(prediction: str, output: str, comparison: str = "normalized") -> bool:
    return compared_output(prediction_text(prediction), comparison) == compared_output(output, comparison)


def compared_output(output: str, comparison: str = "normalized") -> str:
    """The text a prediction must match to be right about `output` (the shortest it can be)."""
    return output.strip("\n") if comparison == "exact" else normalize_output(output)


def output_tokens(output: str, comparison: str, tokenizer) -> int:
    """How many tokens the opponent needs at least to write `output` as `comparison` reads it."""
    return len(tokenizer(compared_output(output, comparison), add_special_tokens=False)["input_ids"])


OBJECT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
"""An object's default repr (`<__main__.Point object at 0x7fc2c108a790>`): its address, which
differs between the sandbox's workers (each its own address layout) and between runs of the
workflow, and which no opponent can predict from the code."""


def deterministic(first: ProgramRun, second: ProgramRun) -> ProgramRun:
    """`first`, or a run-time error when the second run of the same program did otherwise, or
    when its output shows an object's address (`OBJECT_ADDRESS`: refused as it is, whichever
    processes the two runs had; `CodeGameRewards` runs the second in a pool of its own)."""
    if first.status == second.status and first.stdout == second.stdout and not OBJECT_ADDRESS.search(first.stdout):
        return first
    return ProgramRun(
        status="error",
        stdout=first.stdout,
        stdout_truncated=first.stdout_truncated,
        error_type="Nondeterministic",
        error_message="two runs of the program printed different output or ended differently, or it printed an "
                      "object's address",
    )


def game_reward(
    run: ProgramRun,
    predicted_right: bool,
    settings: CodeGameSettings,
    exec_settings: ExecRewardSettings,
    too_long: bool = False,
) -> float:
    """The policy's reward for one program; `too_long`: its output is longer than the opponent may write."""
    if not run.ran:
        # Not running must never pay more than losing the game.
        return min(execution_reward(run, exec_settings), settings.loss)
    if settings.silent_loses and not run.printed:
        return settings.loss
    if settings.long_output_loses and too_long:
        return settings.loss
    return settings.loss if predicted_right else settings.win


def game_metrics(runs: list[ProgramRun], right: list[bool], rewards: list[float], too_long: list[bool]) -> dict[str, float]:
    """Run outcomes, the opponent's accuracy on programs that ran, how many printed more than it may
    write (of all programs), and the game's reward."""
    metrics = run_metrics(runs)
    ran = [ok for run, ok in zip(runs, right, strict=True) if run.ran]
    if ran:
        metrics["code_game/opponent_accuracy"] = sum(ran) / len(ran)
    metrics["code_game/long_output_rate"] = sum(too_long) / len(runs)
    metrics["code_game/nondeterministic_rate"] = sum(r.error_type == "Nondeterministic" for r in runs) / len(runs)
    metrics["code_game/reward"] = sum(rewards) / len(rewards)
    return metrics


class CodeGameRewards(OnlineTask):
    """The code game as TRL reward functions: runs each program, asks the opponent, scores the game.

    `predict(prompts, temperature, max_tokens)` returns one completion text per opponent prompt;
    `bind(trainer)` makes it from the trainer (`make_predictor(trainer)`). The tokenizer that
    measures output against `max_prediction_tokens` is the one `prompt` was given (the trainer's;
    the frozen opponent is a copy of the same model).
    """

    def __init__(
        self,
        executor,
        settings: CodeGameSettings,
        exec_settings: ExecRewardSettings,
        make_predictor: Callable,
        prompt_config: PromptConfig,
        reasoning_format: bool = False,
    ):
        self.executor = executor
        self.settings = settings
        self.exec_settings = exec_settings
        self.make_predictor = make_predictor
        self.prompt_config = prompt_config
        self.reasoning_format = reasoning_format
        self.predict = None
        self.tokenizer = None
        self._second_pool = None

    def prompt(self, problem: Problem, prompt_config: PromptConfig, tokenizer) -> str:
        self.tokenizer = tokenizer
        return game_prompt(problem, self.settings, prompt_config, tokenizer)

    def bind(self, trainer) -> None:
        self.predict = self.make_predictor(trainer)

    def opponent_prompt(self, code: str) -> str:
        return opponent_prompt(code, self.settings, self.prompt_config, self.tokenizer)

    def second_pool(self):
        """The sandbox workers of every program's second run (`require_deterministic`), started at
        the first game: a pool apart from `executor`'s, so that an address, a hash of one or the
        worker's uid printed by a program differs between its two runs with one worker as with
        eight (within one pool the two runs could land on one worker, forked from one process).
        Closed with `close`, or when the game is collected."""
        if self._second_pool is None:
            self._second_pool = self.executor.sibling()
        return self._second_pool

    def close(self) -> None:
        if self._second_pool is not None:
            self._second_pool.close()
            self._second_pool = None

    def too_long(self, runs: list[ProgramRun]) -> list[bool]:
        """Whether each program ran and printed more than the opponent may write."""
        if not self.settings.long_output_loses:
            return [False] * len(runs)
        if self.tokenizer is None:
            raise RuntimeError("code_game.long_output_loses counts tokens: the game's prompts were built without a tokenizer")
        limit, comparison = self.settings.max_prediction_tokens, self.settings.comparison
        return [run.ran and (run.stdout_truncated or output_tokens(run.stdout, comparison, self.tokenizer) > limit) for run in runs]

    def play(self, completions: list) -> tuple[list[ProgramRun], list[bool], list[str]]:
        """Each completion's run (deterministic or not), whether the opponent got it right, and its prediction."""
        codes = [extract_code(completion_text(c), self.reasoning_format) for c in completions]
        runs = run_programs(self.executor, codes)
        if self.settings.require_deterministic:
            again = run_programs(self.second_pool(), codes)
            runs = [deterministic(a, b) for a, b in zip(runs, again, strict=True)]
        if self.predict is None:
            raise RuntimeError("the code game's opponent is not bound to a trainer (call bind(trainer) first)")
        predictions = self.predict(
            [self.opponent_prompt(code) for code in codes], self.settings.opponent_temperature, self.settings.max_prediction_tokens
        )
        right = [
            run.ran and prediction_matches(prediction, run.stdout, self.settings.comparison)
            for run, prediction in zip(runs, predictions, strict=True)
        ]
        return runs, right, predictions

    def reward_functions(self) -> tuple[list[Callable], list[float]]:
        def code_game(completions, log_metric=None, **kwargs):
            runs, right, _ = self.play(completions)
            too_long = self.too_long(runs)
            rewards = [
                game_reward(r, ok, self.settings, self.exec_settings, long)
                for r, ok, long in zip(runs, right, too_long, strict=True)
            ]
            if log_metric is not None:
                for name, value in game_metrics(runs, right, rewards, too_long).items():
                    log_metric(name, value)
            return rewards

        return [code_game], [1.0]


@contextlib.contextmanager
def whole_model_loading():
    """`from_pretrained` builds a whole model on this process, also under DeepSpeed ZeRO-3.

    Once a ZeRO-3 trainer exists, transformers builds every model inside `deepspeed.zero.Init`,
    which leaves each process an empty shard of every weight, to be gathered by an engine; a
    frozen model sampled outside the trainer has no engine, so it must be built whole.
    """
    from transformers.integrations import deepspeed

    config = deepspeed._hf_deepspeed_config_weak_ref() if deepspeed._hf_deepspeed_config_weak_ref else None
    if config is None:
        yield
        return
    deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        deepspeed.set_hf_deepspeed_config(config)


def opponent_predictor(settings: CodeGameSettings, base_model: str) -> Callable:
    """`trainer -> predict(prompts, temperature, max_tokens)` for the configured opponent: a frozen
    copy of `base_model`, loaded once beside the trained one and sampled with transformers."""

    def for_trainer(trainer):
        from transformers import AutoModelForCausalLM

        from execrl.generation.sampling import SamplingSettings
        from execrl.generation.transformers_backend import generate_token_ids

        tokenizer = trainer.processing_class
        with whole_model_loading():
            frozen = AutoModelForCausalLM.from_pretrained(base_model, dtype="auto")
        frozen = frozen.to(trainer.accelerator.device).eval()
        frozen.requires_grad_(False)

        def predict(prompts, temperature, max_tokens, batch=64):
            ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            completions = []
            for start in range(0, len(ids), batch):
                completions += generate_token_ids(
                    frozen, tokenizer, ids[start : start + batch], SamplingSettings(temperature=temperature), max_tokens
                )
            return tokenizer.batch_decode(completions, skip_special_tokens=True)

        return predict

    return for_trainer
