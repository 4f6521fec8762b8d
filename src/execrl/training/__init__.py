"""Training: the methods that fine-tune a model and what they share.

The supervised warm start (`sft`, on `warm_start`'s examples in the later methods' formats),
offline preference optimisation (`dpo`) and the online methods on TRL's GRPOTrainer (`grpo` with its
`grpo_settings`, `srrl` and its `token_budget`, and `online_task`, what an online method trains on),
their execution rewards (`rewards`, `exec_reward`), seed 002's methods on games: the code-output
game (`code_game`, with its `code_game_settings`) and SPIRAL self-play (`spiral`, and `spiral_trainer`, its
steps through TRL's GRPOTrainer) on the engines of `execrl.games`; LoRA adapters (`lora`), the TRL
configs they run with (`trainer_config`), what every trainer shares (`common`: logging, metrics,
resume), and the command the workflow's `train` rule runs (`train_job`; the `accelerate launch`
config it runs under is `execrl.planning.launch`'s choice).
"""
