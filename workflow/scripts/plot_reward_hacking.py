import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.figures import save, watch_figure
from execrl.report.training import metrics_table

save(watch_figure(metrics_table(snakemake.input)), snakemake.output[0])
