import sys

sys.stderr = open(snakemake.log[0], "w")

import pandas as pd

from execrl.jsonl import write_json
from execrl.report.html import render_report, summary_record

table = pd.read_csv(snakemake.input.table, sep="\t")
summary = summary_record(table, snakemake.params.experiment)
write_json(summary, snakemake.output.summary)
html = render_report(
    title=snakemake.params.title,
    table=table,
    figures={"pass@k": snakemake.input.plot},
    config=snakemake.params.config,
    summary=summary,
)
with open(snakemake.output.html, "w", encoding="utf-8") as handle:
    handle.write(html)
