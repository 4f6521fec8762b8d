import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import read_tsv
from execrl.report.figures import pass_at_k_figure, save

save(pass_at_k_figure(read_tsv(snakemake.input[0])), snakemake.output[0])
