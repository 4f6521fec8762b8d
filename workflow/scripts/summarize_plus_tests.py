import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import held_out_table, plus_test_manifests

held_out_table(snakemake.input.base, snakemake.input.plus).to_csv(snakemake.output.table, sep="\t", index=False)
plus_test_manifests(snakemake.input.manifests).to_csv(snakemake.output.manifests, sep="\t", index=False)
