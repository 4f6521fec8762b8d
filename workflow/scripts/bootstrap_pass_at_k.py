import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import read_tsv
from execrl.report.stats import base_pairs, compare_methods, comparison_pairs, pass_at_k_curves

per_problem = read_tsv(snakemake.input[0])
n_boot, seed = snakemake.params.n_boot, snakemake.params.seed
methods = per_problem["method"].unique()
pass_at_k_curves(per_problem, n_boot=n_boot, seed=seed).to_csv(snakemake.output.curves, sep="\t", index=False)
for output, pairs in (
    (snakemake.output.comparison, base_pairs(methods)),
    (snakemake.output.comparisons, comparison_pairs(methods, snakemake.params.comparisons, snakemake.params.variants)),
):
    compare_methods(per_problem, pairs, n_boot=n_boot, seed=seed).to_csv(output, sep="\t", index=False)
