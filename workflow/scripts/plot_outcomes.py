import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import read_tsv
from execrl.report.figures import outcomes_figure, save

save(outcomes_figure(read_tsv(snakemake.input[0])), snakemake.output[0])
