import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.evaluation import summary_table

summary_table(snakemake.input).to_csv(snakemake.output.table, sep="\t", index=False)
