import sys

sys.stderr = open(snakemake.log[0], "w")

from contextlib import nullcontext

import torch

from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor
from execrl.sft import SFTSettings, run_sft
from execrl.srrl import SRRLSettings

torch.set_num_threads(snakemake.threads)
refinement = snakemake.params.refinement
# The refinement examples' broken attempts run with the sandbox's default limits, not the
# `execution` config: a new evaluation timeout must not rebuild the model.
executor = Executor(workers=snakemake.threads) if refinement else nullcontext()
with executor:
    run_sft(
        model_path=snakemake.input.model,
        problems=read_problems(snakemake.input.problems),
        prompt_config=PromptConfig(**snakemake.params.prompt),
        settings=SFTSettings(**snakemake.params.sft),
        output_dir=snakemake.output.model,
        metrics_path=snakemake.output.metrics,
        refinement=SRRLSettings(**refinement) if refinement else None,
        executor=executor if refinement else None,
    )
