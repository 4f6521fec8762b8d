import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.methods import register_variants

# A method variant is looked up as the method it trains as.
register_variants(snakemake.params.variants)

from pathlib import Path

from execrl.jsonl import write_json
from execrl.report.build import ReportInputs, build

inputs = snakemake.input
page, summary, markdown = build(
    ReportInputs(
        pass_at_k=inputs.pass_at_k,
        curves=inputs.curves,
        comparison=inputs.comparison,
        comparisons=inputs.comparisons,
        outcomes=inputs.outcomes,
        per_problem=inputs.per_problem,
        diversity=inputs.diversity,
        training=inputs.get("training"),
        cost_jobs=inputs.cost,
        refinements=list(inputs.refinements),
        manifests=list(inputs.manifests),
        data_manifests=list(inputs.data_manifests),
        split_manifests=list(inputs.split_manifests),
        split_problems=list(inputs.split_problems),
        metrics=list(inputs.metrics),
        plus=inputs.plus,
        plus_manifests=inputs.plus_manifests,
        annotations=list(inputs.annotations),
        figures={name[4:]: path for name, path in inputs.items() if name.startswith("fig_")},
    ),
    title=snakemake.params.title,
    experiment=snakemake.params.experiment,
    config=snakemake.params.config,
    config_left_out=snakemake.params.config_left_out,
    ks=snakemake.params.ks,
    n_boot=snakemake.params.n_boot,
    n_examples=snakemake.params.examples,
    grpo=snakemake.params.grpo,
    method_overrides=snakemake.params.method_overrides,
    workflow_dir=snakemake.scriptdir,
)
write_json(summary, snakemake.output.summary)
Path(snakemake.output.markdown).write_text(markdown, encoding="utf-8")
Path(snakemake.output.html).write_text(page, encoding="utf-8")
