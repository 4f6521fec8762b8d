"""SPIRAL through TRL's GRPOTrainer and `execrl.training.train_job`: real steps on a tiny random model."""

import json

import pytest

from conftest import build_tiny_model
from execrl.training import train_job
from execrl.training.grpo import GRPOSettings
from execrl.problems import Problem
from execrl.training.spiral_trainer import BASELINES_FILE, SelfPlayTask
from execrl.training.spiral import SPIRALSettings

PROBLEMS = [Problem(id=f"t/{i}", prompt=f"Return {i}.", test_type="assert", tests=[f"assert f() == {i}"]) for i in range(4)]
GRPO = GRPOSettings(num_generations=2, prompts_per_step=4, max_steps=2, max_completion_length=6, save_steps=1,
                    gradient_checkpointing=False, learning_rate=1e-3, use_vllm=False, eval_every=0, temperature=1.0)
SPIRAL = SPIRALSettings(game="tictactoe", games_per_step=4, eval_every=1, eval_games=2)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    texts = [f"[{i}]" for i in range(9)] * 20 + ["You are playing Tic-tac-toe. Legal moves: [0], [1]"] * 5
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts)


def run_spiral(tiny_model, tmp_path, monkeypatch):
    import dataclasses

    from trl import GRPOTrainer

    rolled, seen = [], []
    original_rollout, original_loss = SelfPlayTask.rollout, GRPOTrainer.compute_loss

    def recording_rollout(self, *args, **kwargs):
        output = original_rollout(self, *args, **kwargs)
        rolled.append((output, list(self.advantages), self.baselines.state_dict()))
        return output

    def recording_loss(self, model, inputs, *args, **kwargs):
        seen.append(inputs["advantages"].tolist())
        return original_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(SelfPlayTask, "rollout", recording_rollout)
    monkeypatch.setattr(GRPOTrainer, "compute_loss", recording_loss)
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in PROBLEMS))
    settings = {
        "grpo": dataclasses.asdict(GRPO),
        "spiral": {**dataclasses.asdict(SPIRAL), "eval_opponents": list(SPIRAL.eval_opponents)},
        "prompt": {"template": "{prompt}\n", "num_tests_shown": 0, "chat_template": "never"},
        "execution": {"timeout_s": 1.0, "memory_mb": 512},
        "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    }
    train_job.main([
        "spiral", "--model", tiny_model, "--settings", json.dumps(settings), "--data", str(problems),
        "--eval-problems", str(problems), "--output", str(tmp_path / "trained"), "--metrics", str(tmp_path / "metrics.jsonl"),
        "--checkpoint-root", str(tmp_path / "checkpoints"), "--run-name", "spiral/test", "--sandbox-workers", "1",
    ])
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return rolled, seen, records


def test_spiral_trains_on_self_play_turns_with_role_conditioned_advantages(tiny_model, tmp_path, monkeypatch):
    rolled, seen, records = run_spiral(tiny_model, tmp_path, monkeypatch)
    assert len(rolled) == len(seen) == 2
    for (output, advantages, _), loss_advantages in zip(rolled, seen, strict=True):
        # the step's completions are self-play turns, exactly as many as GRPO's step has
        assert len(output["completion_ids"]) == len(advantages) == GRPO.prompts_per_step * GRPO.num_generations
        # TRL's loss sees the role-conditioned advantages, not its own group-normalised ones
        assert loss_advantages == pytest.approx(advantages)
    # the second step's baselines moved from the first's (an EMA of the roles' returns)
    first, second = rolled[0][2]["baselines"]["tictactoe"], rolled[1][2]["baselines"]["tictactoe"]
    assert first != [0.0, 0.0] and first != second

    evaluations = [r for r in records if "spiral/eval/random/win_rate" in r]
    assert [r["step"] for r in evaluations] == [0, 1, 2]
    assert all(0.0 <= r["spiral/eval/perfect/win_rate"] <= 1.0 for r in evaluations)
    steps = [r for r in records if "spiral/self_play/illegal_move_rate" in r]
    assert len(steps) == 2 and all(r["spiral/baseline/role0"] < 0 or r["spiral/baseline/role1"] != 0 for r in steps)
    # every checkpoint holds the baselines a resumed run continues from
    (checkpoint_folder,) = (tmp_path / "checkpoints" / "spiral" / "test").iterdir()
    saved = json.loads((checkpoint_folder / "checkpoint-2" / BASELINES_FILE).read_text())
    assert saved == rolled[-1][2]


def test_a_step_trains_on_a_uniform_draw_of_its_games_turns():
    """A step trains on the batch's count of turns (seed 002: 8), drawn from every turn of its
    games: openings and endgames of both roles, not the first games' turns."""
    import random
    import re
    from types import SimpleNamespace

    from execrl.games.play import Sampled
    from execrl.prompting import PromptConfig

    rng = random.Random(0)

    def policy(observations):
        replies = []
        for index, observation in enumerate(observations):
            legal = re.findall(r"\[(\d)\]", observation.split("Legal:")[1])
            player = int(re.search(r"player (\d)", observation).group(1))
            # the payload stands for the token ids: the move's number in its game, and on the first
            # move (when every game of the round is in the call, in order) the game's index; the player
            replies.append(Sampled(f"[{rng.choice(legal)}]", ([9 - len(legal), index], [player], None)))
        return replies

    task = SelfPlayTask(SPIRALSettings(games_per_step=16, observation="compact"), PromptConfig(chat_template="never"), seed=0)
    one_process = SimpleNamespace(process_index=0, num_processes=1)
    drawn, openings = [], []
    for step in range(30):
        output = task.rollout(8, policy, step, one_process)
        assert len(output["prompt_ids"]) == len(task.advantages) == 8
        drawn += [(ids[0], player[0]) for ids, player in zip(output["prompt_ids"], output["completion_ids"], strict=True)]
        openings += [ids[1] for ids in output["prompt_ids"] if ids[0] == 0]
        # every game of the step reached the metrics and the baselines, not only the drawn turns'
        assert task.metrics["spiral/self_play/turns_per_game"] >= 5
    moves = {move for move, _ in drawn}
    assert moves == set(range(9))  # every move number of a tic-tac-toe game, the last ones included
    assert {player for _, player in drawn} == {0, 1}
    # uniform over turns: an opening move is drawn about as often as any move every game reaches
    counts = [sum(move == m for move, _ in drawn) for m in range(5)]
    assert max(counts) < 2 * min(counts)
    assert len(set(openings)) >= 12  # the drawn openings come from most of the round's 16 games
