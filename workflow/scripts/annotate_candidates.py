import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import read_jsonl, write_jsonl
from execrl.problems import read_problems
from execrl.sandbox import ExecutionLimits, Executor, annotate_candidates

from execrl.watch.plus_tests import with_plus_tests

problems = {p.id: p for p in read_problems(snakemake.input.problems)}
if getattr(snakemake.params, "suite", "base") == "plus":
    problems = {key: with_plus_tests(problem) for key, problem in problems.items()}
candidates = read_jsonl(snakemake.input.candidates)
# The worker count is parallelism, not a result: it comes from the config, not from params.
workers = snakemake.config["execution"]["workers"]
with Executor(workers=workers, limits=ExecutionLimits(**snakemake.params.limits)) as executor:
    annotated = annotate_candidates(problems, candidates, executor)
write_jsonl(annotated, snakemake.output[0])
