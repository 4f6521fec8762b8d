import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.jsonl import write_json
from execrl.planning.preflight import preflight_gate

write_json(preflight_gate(snakemake.input.get("report") or None), snakemake.output[0])
