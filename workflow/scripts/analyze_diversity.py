import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.evaluation.diversity import candidate_diversity
from execrl.jsonl import iter_jsonl
from execrl.run_paths import readable

table = candidate_diversity(iter_jsonl(snakemake.input[0]), max_pairs=snakemake.params.max_pairs)
for position, key in enumerate(("dataset", "model", "method", "seed", "split")):
    table.insert(position, key, readable(snakemake.wildcards[key]))
table.to_csv(snakemake.output[0], sep="\t", index=False)
