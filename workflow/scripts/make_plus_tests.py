import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import write_json
from execrl.problems import read_problems, write_problems
from execrl.sandbox import ExecutionLimits, Executor
from execrl.watch.plus_tests import PlusTestSettings, make_plus_tests, read_alternatives

settings = PlusTestSettings(**snakemake.params.settings)
problems = read_problems(snakemake.input.problems)
alternatives = read_alternatives(snakemake.input.alternatives)
limits = ExecutionLimits(timeout_s=settings.timeout_s, memory_mb=snakemake.params.memory_mb)
# The worker count is parallelism, not a result: it comes from the config, not from params.
with Executor(workers=snakemake.config["execution"]["workers"], limits=limits) as executor:
    problems, report = make_plus_tests(problems, executor, settings, alternatives=alternatives)
write_problems(problems, snakemake.output.problems)
write_json(report.to_dict(len(problems)), snakemake.output.manifest)
