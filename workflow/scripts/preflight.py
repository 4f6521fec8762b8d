import sys

sys.stderr = open(snakemake.log[0], "w")
sys.stdout = sys.stderr

from execrl.models.staging import work_offline

work_offline()

from execrl.planning.preflight import preflight_model

preflight_model(snakemake.config, snakemake.params.model, snakemake.output[0], snakemake.input.model or None)
