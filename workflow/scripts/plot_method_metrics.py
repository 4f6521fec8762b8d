import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.figures import method_figure, save
from execrl.report.training import metrics_table

save(method_figure(metrics_table(snakemake.input), snakemake.wildcards.method), snakemake.output[0])
