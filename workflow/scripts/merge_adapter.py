import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.models.staging import work_offline

work_offline()

from execrl.training.lora import merge_adapter

merge_adapter(snakemake.params.model_path, snakemake.input.adapter, snakemake.output[0])
