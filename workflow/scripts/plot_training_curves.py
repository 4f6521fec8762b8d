import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.methods import register_variants

# A method variant is looked up as the method it trains as.
register_variants(snakemake.params.variants)

from execrl.report.figures import save, training_figure
from execrl.report.training import metrics_table, offline_samples, training_summary

metrics = metrics_table(
    snakemake.input.metrics,
    snakemake.params.grpo,
    offline_samples(snakemake.input.manifests),
    snakemake.params.method_overrides,
)
save(training_figure(metrics, x="step"), snakemake.output.steps)
save(training_figure(metrics, x="samples"), snakemake.output.samples)
training_summary(metrics).to_csv(snakemake.output.table, sep="\t", index=False)
