import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import read_jsonl, write_json, write_jsonl
from execrl.training_data.rl_data import PairSettings, build_rl_datasets, file_digest

nbest, pairs, manifest = build_rl_datasets(
    read_jsonl(snakemake.input.annotations), PairSettings(**snakemake.params.rl_data)
)
manifest["inputs"] = {snakemake.input.annotations: file_digest(snakemake.input.annotations)}
write_jsonl(nbest, snakemake.output.nbest)
write_jsonl(pairs, snakemake.output.pairs)
write_json(manifest, snakemake.output.manifest)
