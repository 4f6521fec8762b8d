import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.report.evaluations import read_tsv
from execrl.report.figures import per_problem_figure, save
from execrl.report.stats import problem_rates

save(per_problem_figure(problem_rates(read_tsv(snakemake.input[0]))), snakemake.output[0])
