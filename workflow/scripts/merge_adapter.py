import sys

sys.stderr = open(snakemake.log[0], "w")

from execrl.staging import work_offline

work_offline()

from execrl.lora import merge_adapter

merge_adapter(snakemake.params.model_path, snakemake.input.adapter, snakemake.output[0])
