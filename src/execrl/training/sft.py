"""Supervised warm start on reference solutions (TRL's SFTTrainer)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from execrl.training.code_game_settings import CodeGameSettings
from execrl.problems import Problem
from execrl.prompting import PromptConfig, build_prompt
from execrl.training.srrl import SRRLSettings
from execrl.training.common import MetricsFileCallback, device_kwargs
from execrl.training.spiral import SPIRALSettings
from execrl.training.warm_start import code_game_examples, game_move_examples, refinement_examples


@dataclass(frozen=True)
class SFTSettings:
    """Supervised fine-tuning of a model on reference solutions (the workflow passes its dataset's
    warm-start split: `warmup_split`, else the train split)."""

    num_train_epochs: float = 3.0
    learning_rate: float = 2e-3
    per_device_train_batch_size: int = 16
    gradient_accumulation_steps: int = 1
    max_length: int = 384
    warmup_steps: float = 0.05
    """Warm-up length: a fraction of training below 1, else a number of steps."""
    weight_decay: float = 0.0
    refinement_share: float = 0.0
    """Share of problems that also get an example in SRRL's refinement template (see `warm_start`)."""
    code_game_share: float = 0.0
    """Share of problems that also get the code-output game's two examples (see `warm_start`)."""
    game_examples: int = 0
    """Turns of random play of SPIRAL's game, each answered by a random legal move (see `warm_start`)."""
    seed: int = 0


def sft_examples(problems: list[Problem], prompt_config: PromptConfig, tokenizer) -> list[dict]:
    """Prompt-completion pairs; problems without a reference solution are left out."""
    return [
        {"prompt": build_prompt(p, prompt_config, tokenizer), "completion": p.reference.strip("\n") + "\n"}
        for p in problems
        if p.reference
    ]


def check_room_for_completions(examples: list[dict], tokenizer, max_length: int) -> None:
    """Fail, naming the key, where `max_length` leaves no example a completion token: TRL drops an
    example cut inside its prompt, and with none left its trainer stops on an empty dataset."""
    shortest = min(len(tokenizer(e["prompt"], add_special_tokens=False)["input_ids"]) for e in examples)
    if shortest >= max_length:
        raise ValueError(
            f"tiny_model.sft.max_length is {max_length} tokens, but the shortest of the warm start's "
            f"{len(examples)} prompts has {shortest}: no completion would be trained on (raise it above {shortest})"
        )


def run_sft(
    model_path: str | Path,
    problems: list[Problem],
    prompt_config: PromptConfig,
    settings: SFTSettings,
    output_dir: str | Path,
    metrics_path: str | Path,
    refinement: SRRLSettings | None = None,
    executor=None,
    code_game: CodeGameSettings | None = None,
    game: SPIRALSettings | None = None,
) -> None:
    """Fine-tune on first-attempt examples, plus refinement examples when `settings.refinement_share` > 0
    (these need SRRL's template settings and an executor to get real feedback on the broken attempts)
    and code-game examples when `settings.code_game_share` > 0 (the game's templates, and an
    executor to run the programs whose output the opponent's examples give), and moves of SPIRAL's
    game when `settings.game_examples` > 0 (the game, its answer format and observation)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    examples = sft_examples(problems, prompt_config, tokenizer)
    if not examples:
        raise ValueError("no problem in the train split has a reference solution to fine-tune on")
    if settings.refinement_share > 0:
        if refinement is None or executor is None:
            raise ValueError("tiny_model.sft.refinement_share > 0 needs the srrl settings and an executor")
        examples += refinement_examples(
            problems, settings.refinement_share, refinement, prompt_config, executor, tokenizer, settings.seed
        )
    if settings.code_game_share > 0:
        if code_game is None or executor is None:
            raise ValueError("tiny_model.sft.code_game_share > 0 needs the code_game settings and an executor")
        examples += code_game_examples(
            problems, settings.code_game_share, code_game, prompt_config, executor, tokenizer, settings.seed
        )
    if settings.game_examples > 0:
        if game is None:
            raise ValueError("tiny_model.sft.game_examples > 0 needs the spiral settings")
        examples += game_move_examples(game, settings.game_examples, prompt_config, tokenizer, settings.seed)
    check_room_for_completions(examples, tokenizer, settings.max_length)
    model = AutoModelForCausalLM.from_pretrained(str(model_path))
    output_dir = Path(output_dir)
    args = SFTConfig(
        output_dir=str(output_dir / "trainer"),
        num_train_epochs=settings.num_train_epochs,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.per_device_train_batch_size,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        max_length=settings.max_length,
        warmup_steps=settings.warmup_steps,
        weight_decay=settings.weight_decay,
        lr_scheduler_type="cosine",
        completion_only_loss=True,
        gradient_checkpointing=False,
        seed=settings.seed,
        data_seed=settings.seed,
        logging_steps=10,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
        **device_kwargs(),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        callbacks=[MetricsFileCallback(metrics_path)],
    )
    trainer.train()
    trainer.save_model(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
