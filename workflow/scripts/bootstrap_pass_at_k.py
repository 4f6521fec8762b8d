import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import read_tsv
from execrl.report.stats import compare_to_baseline, pass_at_k_curves

per_problem = read_tsv(snakemake.input[0])
n_boot, seed = snakemake.params.n_boot, snakemake.params.seed
pass_at_k_curves(per_problem, n_boot=n_boot, seed=seed).to_csv(snakemake.output.curves, sep="\t", index=False)
compare_to_baseline(per_problem, n_boot=n_boot, seed=seed).to_csv(snakemake.output.comparison, sep="\t", index=False)
