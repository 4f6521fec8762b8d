"""Training: the methods that fine-tune a model and what they share.

The supervised warm start (`sft`), offline preference optimisation (`dpo`) and the online methods
on TRL's GRPOTrainer (`grpo` with its `grpo_settings`, `srrl` and its `token_budget`, and
`online_task`, what an online method trains on), their execution rewards (`rewards`,
`program_rewards`), LoRA adapters (`lora`), the TRL configs they run with (`trainer_config`), what
every trainer shares (`common`: logging, metrics, resume), and how the workflow's `train` rule
starts a job (`launch` picks the `accelerate launch` config, `train_job` is the command it runs).
"""
