import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.figures import save, srrl_figure
from execrl.report.training import metrics_table

save(srrl_figure(metrics_table(snakemake.input), snakemake.params.srrl_methods), snakemake.output[0])
