import os
import sys

sys.stderr = open(snakemake.log[0], "w")
# A staging job: it may read the hub (the workflow sets it offline for every other job).
os.environ["HF_HUB_OFFLINE"] = "0"

from execrl.datasets import load_split
from execrl.jsonl import write_json
from execrl.problems import write_problems

result = load_split(
    adapter=snakemake.params.adapter,
    split=snakemake.params.split_name,
    source=snakemake.params.source,
    subset=snakemake.params.subset,
    options=snakemake.params.options,
    on_malformed=snakemake.params.on_malformed,
)
write_problems(result.problems, snakemake.output.problems)
write_json(result.manifest, snakemake.output.manifest)
print(f"{len(result.problems)} problems", file=sys.stderr)
for row in result.manifest["skipped"]:
    print(f"skipped (on_malformed: skip) {row['row']}: {row['error']}", file=sys.stderr)
