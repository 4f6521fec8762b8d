import sys

sys.stderr = open(snakemake.log[0], "w")

from contextlib import nullcontext

import torch

from execrl.training.code_game_settings import CodeGameSettings
from execrl.problems import read_problems
from execrl.prompting import PromptConfig
from execrl.sandbox import Executor
from execrl.training.sft import SFTSettings, run_sft
from execrl.training.spiral import SPIRALSettings
from execrl.training.srrl import SRRLSettings

torch.set_num_threads(snakemake.threads)
refinement = snakemake.params.refinement
code_game = snakemake.params.code_game
# The refinement examples' broken attempts and the game examples' programs run with the sandbox's
# default limits, not the `execution` config: a new evaluation timeout must not rebuild the model.
runs_code = bool(refinement or code_game)
executor = Executor(workers=snakemake.threads) if runs_code else nullcontext()
with executor:
    run_sft(
        model_path=snakemake.input.model,
        problems=read_problems(snakemake.input.problems),
        prompt_config=PromptConfig(**snakemake.params.prompt),
        settings=SFTSettings(**snakemake.params.sft),
        output_dir=snakemake.output.model,
        metrics_path=snakemake.output.metrics,
        refinement=SRRLSettings(**refinement) if refinement else None,
        executor=executor if runs_code else None,
        code_game=CodeGameSettings(**code_game) if code_game else None,
        game=SPIRALSettings(**snakemake.params.game) if snakemake.params.game else None,
    )
