import sys

sys.stderr = open(snakemake.log[0], "w")

import torch

from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.sft import SFTSettings, run_sft

torch.set_num_threads(snakemake.threads)
run_sft(
    model_path=snakemake.input.model,
    problems=read_problems(snakemake.input.problems),
    prompt_config=PromptConfig(**snakemake.params.prompt),
    settings=SFTSettings(**snakemake.params.sft),
    output_dir=snakemake.output.model,
    metrics_path=snakemake.output.metrics,
)
