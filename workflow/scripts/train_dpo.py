import sys

sys.stderr = open(snakemake.log[0], "w")

from pathlib import Path

import torch

from execrl.dpo import DPOSettings, train_dpo
from execrl.jsonl import read_jsonl
from execrl.lora import LoRASettings
from execrl.training import settings_digest

torch.set_num_threads(snakemake.threads)
wc = snakemake.wildcards
settings = {"dpo": snakemake.params.dpo, "lora": snakemake.params.lora, "model": snakemake.params.model_path}
checkpoint_dir = Path(snakemake.params.checkpoint_root, wc.dataset, wc.model, "dpo", wc.seed, settings_digest(settings))
train_dpo(
    model_path=snakemake.params.model_path,
    pairs=read_jsonl(snakemake.input.pairs),
    settings=DPOSettings(**snakemake.params.dpo),
    lora=LoRASettings(**snakemake.params.lora),
    checkpoint_dir=checkpoint_dir,
    adapter_dir=snakemake.output.adapter,
    metrics_path=snakemake.output.metrics,
    wandb=snakemake.params.wandb,
    run_name=f"dpo/{wc.dataset}/{wc.model}/{wc.seed}",
)
