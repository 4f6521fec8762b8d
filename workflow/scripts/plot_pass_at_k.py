import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from execrl.report.figures import pass_at_k_figure

figure = pass_at_k_figure(pd.read_csv(snakemake.input[0], sep="\t"))
figure.savefig(snakemake.output[0], dpi=150, bbox_inches="tight")
