import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import read_jsonl, write_jsonl
from execrl.problems import read_problems
from execrl.sandbox import ExecutionLimits, Executor, annotate_candidates

problems = {p.id: p for p in read_problems(snakemake.input.problems)}
candidates = read_jsonl(snakemake.input.candidates)
limits = ExecutionLimits(timeout_s=snakemake.params.timeout_s, memory_mb=snakemake.params.memory_mb)
with Executor(workers=snakemake.params.workers, limits=limits) as executor:
    annotated = annotate_candidates(problems, candidates, executor)
write_jsonl(annotated, snakemake.output[0])
