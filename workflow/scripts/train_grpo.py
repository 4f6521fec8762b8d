import sys

sys.stderr = open(snakemake.log[0], "w")

from pathlib import Path

import torch

from execrl.grpo import GRPOSettings, train_grpo
from execrl.lora import LoRASettings
from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.rewards import RewardSettings
from execrl.sandbox import ExecutionLimits, Executor
from execrl.srrl import SRRLSettings
from execrl.training import settings_digest

torch.set_num_threads(snakemake.threads)
wc = snakemake.wildcards
method = "srrl" if "srrl" in snakemake.params.keys() else "grpo"
srrl = SRRLSettings(**snakemake.params.srrl) if method == "srrl" else None
settings = {key: snakemake.params[key] for key in snakemake.params.keys() if key != "checkpoint_root"}
checkpoint_dir = Path(snakemake.params.checkpoint_root, wc.dataset, wc.model, method, wc.seed, settings_digest(settings))
execution = snakemake.params.execution
limits = ExecutionLimits(timeout_s=execution["timeout_s"], memory_mb=execution["memory_mb"])
grpo = GRPOSettings(**snakemake.params.grpo)
with Executor(workers=execution["workers"], limits=limits) as executor:
    train_grpo(
        model_path=snakemake.params.model_path,
        problems=read_problems(snakemake.input.problems),
        eval_problems=read_problems(snakemake.input.eval_problems)[: grpo.eval_problems],
        prompt_config=PromptConfig(**snakemake.params.prompt),
        settings=grpo,
        reward_settings=RewardSettings(**snakemake.params.rewards),
        lora=LoRASettings(**snakemake.params.lora),
        executor=executor,
        checkpoint_dir=checkpoint_dir,
        adapter_dir=snakemake.output.adapter,
        metrics_path=snakemake.output.metrics,
        srrl=srrl,
        wandb=snakemake.params.wandb,
        run_name=f"{method}/{wc.dataset}/{wc.model}/{wc.seed}",
    )
