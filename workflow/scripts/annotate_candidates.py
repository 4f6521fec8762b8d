import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import read_jsonl, write_jsonl
from execrl.problems import read_problems
from execrl.sandbox import ExecutionLimits, Executor, annotate_candidates

problems = {p.id: p for p in read_problems(snakemake.input.problems)}
candidates = read_jsonl(snakemake.input.candidates)
# The worker count is parallelism, not a result: it comes from the config, not from params.
workers = snakemake.config["execution"]["workers"]
with Executor(workers=workers, limits=ExecutionLimits(**snakemake.params.limits)) as executor:
    annotated = annotate_candidates(problems, candidates, executor)
write_jsonl(annotated, snakemake.output[0])
