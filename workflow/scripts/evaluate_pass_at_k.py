import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.evaluation.scores import evaluate_annotations
from execrl.jsonl import read_jsonl, write_json
from execrl.problems import read_problems
from execrl.run_paths import readable

evaluation = evaluate_annotations(
    problems=read_problems(snakemake.input.problems)[: snakemake.params.max_problems],
    annotations=read_jsonl(snakemake.input.annotations),
    ks=snakemake.params.k,
)
evaluation["run"] = {key: readable(snakemake.wildcards[key]) for key in ("dataset", "model", "method", "seed", "split")}
write_json(evaluation, snakemake.output[0])
