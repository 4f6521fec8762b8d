import os
import sys

sys.stderr = open(snakemake.log[0], "w")
# A staging job: it may read the hub (MBPP's other file), like prepare_dataset.
os.environ["HF_HUB_OFFLINE"] = "0"

from execrl.problems import read_problems
from execrl.watch.alternatives import alternative_solutions
from execrl.watch.plus_tests import write_alternatives

problems = read_problems(snakemake.input.problems)
alternatives = alternative_solutions(
    snakemake.params.adapter,
    problems,
    split=snakemake.params.split_name,
    source=snakemake.params.source,
    subset=snakemake.params.subset,
    options=snakemake.params.options,
)
write_alternatives(alternatives, snakemake.output[0])
print(f"alternatives for {len(alternatives)} of {len(problems)} problems", file=sys.stderr)
