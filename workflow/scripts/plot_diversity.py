import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from execrl.report.evaluations import read_tsv
from execrl.report.figures import diversity_figure, save

table = pd.concat([read_tsv(path) for path in snakemake.input], ignore_index=True)
table.to_csv(snakemake.output.table, sep="\t", index=False)
save(diversity_figure(table), snakemake.output.plot)
