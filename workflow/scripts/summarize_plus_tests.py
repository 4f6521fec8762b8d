import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import held_out_table
from execrl.watch.plus_tests import manifest_table

held_out_table(snakemake.input.base, snakemake.input.plus).to_csv(snakemake.output.table, sep="\t", index=False)
manifest_table(snakemake.input.manifests).to_csv(snakemake.output.manifests, sep="\t", index=False)
