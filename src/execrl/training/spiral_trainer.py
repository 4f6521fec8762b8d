"""SPIRAL through TRL's GRPOTrainer: a step's samples are turns of self-play games, and their
advantages are role-conditioned (`execrl.training.spiral`).

TRL's trainer takes a fixed number of completions per step and makes their advantages by
normalising rewards within groups of `num_generations`. Self-play fits the first through
`rollout_func`: each step plays rounds of games until it has at least as many turns as the step
has completions, and hands TRL a seeded, uniform draw of exactly that many turns (prompt = the
player's observation, completion = its reply): the batch's size stays the configured one (seed
002's 8 completions), and each turn of the step's games has the same chance to be trained on
(docs/self-play.md says why). It does not fit the second: a turn's advantage is its
return minus its role's running baseline, not a group's mean. `SelfPlayGRPOTrainer` overrides
the one method that makes advantages, to put RAE's in their place; the loss, clipping, LoRA,
checkpoints and logging stay TRL's.

The role baselines are updated with every process's games (gathered), so they are the same on
every process, and rank 0 keeps them in each checkpoint (`spiral_baselines.json`): a resumed run
continues with the baselines it had.

On several processes every sampling call may be a collective (ZeRO-3 gathers the weights for it, a
tensor-parallel vLLM spans processes), while each process's games last their own number of rounds
and a process may need more rounds of games than another to fill its step. Play and evaluation
therefore run under a `Lockstep` (`execrl.games.play`): the processes agree on every round, and one
with nothing left to play makes padding calls meanwhile.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback

from execrl.games import get_game
from execrl.training.online_task import OnlineTask
from execrl.problems import Problem
from execrl.prompting import PromptConfig, chat_prompt
from execrl.training.spiral import Lockstep, RoleBaselines, SPIRALSettings, evaluate_policy, play_self_play, self_play_seed
from execrl.games.play import Sampled
from execrl.evaluation.interval_eval import PeriodicEvaluation

BASELINES_FILE = "spiral_baselines.json"


@dataclass(frozen=True)
class Outcome:
    """What a role baseline needs of a game: which roles the policy played and their returns."""

    game: str
    policy_roles: tuple[int, ...]
    returns: tuple[float, float]


def text_policy(sampler, prompt_config: PromptConfig, tokenizer, temperature: float | None = None):
    """A games policy from a `PolicySampler`: observations in, `Sampled` replies (with token ids) out."""

    def play(observations: list[str]) -> list[Sampled]:
        prompts = [chat_prompt(o, prompt_config, tokenizer) for o in observations]
        samples = sampler(prompts, temperature)
        return [Sampled(text, (prompt_ids, completion_ids, logprobs)) for prompt_ids, completion_ids, text, logprobs in samples]

    return play


class SelfPlayTask(OnlineTask):
    """SPIRAL's task: self-play turns as samples, their returns as rewards, RAE as advantages."""

    def __init__(self, settings: SPIRALSettings, prompt_config: PromptConfig, seed: int):
        self.settings = settings
        self.prompt_config = prompt_config
        self.seed = seed
        self.game = get_game(settings.game)
        self.rules = settings.match_rules()
        self.baselines = RoleBaselines(settings.baseline_decay)
        self.advantages: list[float] = []
        """This process's advantages of the last step's turns, in the order TRL was given them."""
        self.metrics: dict[str, float] = {}
        self.evaluation: GameEvaluation | None = None

    def prompt(self, problem: Problem, prompt_config: PromptConfig, tokenizer) -> str:
        # TRL's data loader paces the steps; the rollout plays games whatever the prompt says.
        return chat_prompt(self.game.observation(self.game.initial_state(random.Random(0)), 0, self.rules.answer_format), prompt_config, tokenizer)

    def reward_functions(self):
        def self_play_return(completions, turn_return, log_metric=None, **kwargs):
            if log_metric is not None:
                for name, value in self.metrics.items():
                    log_metric(name, value)
            return list(turn_return)

        return [self_play_return], [1.0]

    def rollout_func(self, make_sampler):
        def rollout(prompts: list[str], trainer) -> dict:
            policy = text_policy(make_sampler(trainer), self.prompt_config, trainer.processing_class)
            return self.rollout(len(prompts), policy, trainer.state.global_step, trainer.accelerator)

        return rollout

    def rollout(self, rows: int, policy, step: int, accelerator) -> dict:
        """Play until `rows` turns exist, update the baselines with every process's games, and
        return a seeded draw of `rows` turns in TRL's rollout format."""
        from accelerate.utils import gather_object

        rank, processes = accelerator.process_index, accelerator.num_processes
        games = self.settings.games_per_step // processes if self.settings.games_per_step >= processes else 1
        lockstep = self.lockstep(policy, accelerator)
        episodes, turns, round_ = [], 0, 0
        while lockstep.any_active(turns < rows) if lockstep else turns < rows:
            if turns >= rows:  # this process's step is full; the others still play
                lockstep.idle()
                continue
            seed = f"{self_play_seed(self.seed, step, rank)}/round{round_}"
            played = play_self_play(self.game, policy, games, seed, self.rules, lockstep)
            episodes += played
            turns += sum(len(e.turns) for e in played)
            round_ += 1
        if lockstep is not None:
            print(f"self-play lockstep: {lockstep.padding_calls} padding calls on rank {rank}, step {step}",
                  file=sys.stderr, flush=True)  # fmt: skip
        outcomes = [Outcome(e.game, tuple(e.policy_roles), tuple(e.returns)) for e in episodes]
        self.baselines.update(gather_object(outcomes) if processes > 1 else outcomes)
        samples = [(turn, advantage) for e in episodes for turn, advantage in zip(e.turns, self.baselines.advantages(e), strict=True)]
        chosen = random.Random(f"{self.seed}/draw/step{step}/rank{rank}").sample(samples, rows)
        self.advantages = [advantage for _, advantage in chosen]
        self.metrics = self.step_metrics(episodes)
        logprobs = [turn.payload[2] for turn, _ in chosen]
        return {
            "prompt_ids": [turn.payload[0] for turn, _ in chosen],
            "completion_ids": [turn.payload[1] for turn, _ in chosen],
            # TRL takes None for "no sampling log-probabilities" (its transformers path), never a partial list.
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "turn_return": [turn.reward for turn, _ in chosen],
        }

    def lockstep(self, policy, accelerator) -> Lockstep | None:
        """A lockstep over the training processes for `policy`, or None on one process."""
        if accelerator.num_processes == 1:
            return None
        from accelerate.utils import gather_object

        padding_prompt = self.game.observation(self.game.initial_state(random.Random(0)), 0, self.rules.answer_format)
        return Lockstep(policy, lambda mine: any(gather_object([mine])), padding_prompt)

    def step_metrics(self, episodes) -> dict[str, float]:
        """This process's self-play games: outcomes by role, illegal answers per turn, the baselines."""
        games = len(episodes)
        turns = [turn for e in episodes for turn in e.turns]
        metrics = {
            "spiral/self_play/illegal_move_rate": sum(not t.legal for t in turns) / len(turns),
            "spiral/self_play/forfeit_rate": sum(e.forfeited_by is not None for e in episodes) / games,
            "spiral/self_play/draw_rate": sum(e.returns[0] == 0 for e in episodes) / games,
            "spiral/self_play/turns_per_game": len(turns) / games,
        }
        for role in (0, 1):
            metrics[f"spiral/self_play/role{role}_win_rate"] = sum(e.returns[role] > 0 for e in episodes) / games
            metrics[f"spiral/self_play/role{role}_return"] = sum(e.returns[role] for e in episodes) / games
            metrics[f"spiral/baseline/role{role}"] = self.baselines.baseline(self.game.name, role)
        return metrics

    def callbacks(self, make_sampler) -> list:
        callbacks = [RoleBaselineCheckpoints(self.baselines)]
        if self.settings.eval_every and self.settings.eval_games:
            self.evaluation = GameEvaluation(self, make_sampler)
            callbacks.append(self.evaluation)
        return callbacks

    def bind(self, trainer) -> None:
        if self.evaluation is not None:
            self.evaluation.trainer = trainer

    def trainer_class(self, base: type) -> type:
        task = self

        class SelfPlayGRPOTrainer(base):
            """`base` whose advantages are the self-play turns' role-conditioned ones."""

            def _generate_and_score_completions(self, inputs):
                import torch

                output = super()._generate_and_score_completions(inputs)
                mine = output["advantages"]
                if len(task.advantages) != len(mine):
                    raise AssertionError(f"{len(task.advantages)} self-play advantages for {len(mine)} completions")
                output["advantages"] = torch.tensor(task.advantages, dtype=mine.dtype, device=mine.device)
                return output

        return SelfPlayGRPOTrainer


class RoleBaselineCheckpoints(TrainerCallback):
    """Keeps the role baselines in every checkpoint, and takes them back when a run resumes."""

    def __init__(self, baselines: RoleBaselines):
        self.baselines = baselines

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}" / BASELINES_FILE
            if path.is_file():
                self.baselines.load_state_dict(json.loads(path.read_text()))

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}" / BASELINES_FILE
            path.write_text(json.dumps(self.baselines.state_dict()))


class GameEvaluation(PeriodicEvaluation):
    """The policy against fixed opponents (random, perfect) in both roles, before the first step,
    every `eval_every` steps and after the last, on the same deals each time; logged as
    `spiral/eval/{opponent}[/role{r}]/{rate}`. Every process plays the same deals (in lockstep,
    as its sampling calls may be collectives), and rank 0 writes them."""

    def __init__(self, task: SelfPlayTask, make_sampler):
        self.task = task
        self.make_sampler = make_sampler
        self.every = task.settings.eval_every

    def evaluate(self, step: int) -> dict[str, float]:
        task, settings = self.task, self.task.settings
        policy = text_policy(
            self.make_sampler(self.trainer), task.prompt_config, self.trainer.processing_class, settings.eval_temperature
        )
        results = evaluate_policy(
            task.game, policy, settings.eval_opponents, settings.eval_games, f"{task.seed}/eval", task.rules,
            task.lockstep(policy, self.trainer.accelerator),
        )
        metrics = {f"spiral/eval/{name}": value for name, value in results.items()}
        self._last_step = step
        self.trainer.log(metrics)
        return metrics
