import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.problems import read_problems
from execrl.prompting import PromptConfig, user_message
from execrl.models.tiny_model import train_tokenizer

prompt_config = PromptConfig(**snakemake.params.prompt)
problems = read_problems(snakemake.input.problems)
texts = [user_message(p, prompt_config) + (p.reference or "") for p in problems]
tokenizer = train_tokenizer(texts, snakemake.params.vocab_size, snakemake.output[0])
print(f"vocabulary: {len(tokenizer)} tokens from {len(texts)} texts", file=sys.stderr)
