import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.evaluation.scores import summary_table
from execrl.report.evaluations import outcome_table, per_problem_table

summary_table(snakemake.input).to_csv(snakemake.output.table, sep="\t", index=False)
per_problem_table(snakemake.input).to_csv(snakemake.output.per_problem, sep="\t", index=False)
outcome_table(snakemake.input).to_csv(snakemake.output.outcomes, sep="\t", index=False)
