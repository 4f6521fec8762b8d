import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import write_json
from execrl.problems import read_problems, write_problems
from execrl.watch.plus_tests import PlusTestSettings, make_plus_tests_sandboxed, read_alternatives

settings = PlusTestSettings(**snakemake.params.settings)
problems = read_problems(snakemake.input.problems)
alternatives = read_alternatives(snakemake.input.alternatives)
# The worker count is parallelism, not a result: it comes from the config, not from params.
problems, report = make_plus_tests_sandboxed(
    problems, settings, workers=snakemake.config["execution"]["workers"], memory_mb=snakemake.params.memory_mb,
    alternatives=alternatives,
)
write_problems(problems, snakemake.output.problems)
write_json(report.to_dict(len(problems)), snakemake.output.manifest)
