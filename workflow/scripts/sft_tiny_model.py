import sys

sys.stderr = open(snakemake.log[0], "w")

from contextlib import nullcontext

import torch

from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sft import SFTSettings, run_sft
from execrl.srrl import SRRLSettings

torch.set_num_threads(snakemake.threads)
refinement = snakemake.params.refinement
execution = snakemake.params.execution
executor = (
    Executor(workers=execution["workers"], limits=ExecutionLimits(timeout_s=execution["timeout_s"], memory_mb=execution["memory_mb"]))
    if execution
    else nullcontext()
)
with executor:
    run_sft(
        model_path=snakemake.input.model,
        problems=read_problems(snakemake.input.problems),
        prompt_config=PromptConfig(**snakemake.params.prompt),
        settings=SFTSettings(**snakemake.params.sft),
        output_dir=snakemake.output.model,
        metrics_path=snakemake.output.metrics,
        refinement=SRRLSettings(**refinement) if refinement else None,
        executor=executor if execution else None,
    )
