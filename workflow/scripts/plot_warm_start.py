import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.figures import save, warm_start_figure
from execrl.report.training import metrics_table

save(warm_start_figure(metrics_table(snakemake.input)), snakemake.output[0])
