import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.models.tiny_model import TinyModelConfig, init_model

config = TinyModelConfig(**snakemake.params.architecture)
model = init_model(snakemake.input.tokenizer, config, snakemake.params.seed, snakemake.output[0])
print(f"{model.num_parameters():,} parameters", file=sys.stderr)
