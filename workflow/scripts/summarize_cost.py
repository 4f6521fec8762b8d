import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.methods import register_variants

# A method variant is looked up as the method it trains as.
register_variants(snakemake.params.variants)

from execrl.report.cost import job_table, per_rule
from execrl.report.figures import cost_figure, save

jobs = job_table(
    snakemake.params.root,
    snakemake.params.model_sizes,
    snakemake.params.training_gpus,
    set(snakemake.params.segments),
)
jobs.to_csv(snakemake.output.table, sep="\t", index=False)
save(cost_figure(per_rule(jobs)), snakemake.output.plot)
