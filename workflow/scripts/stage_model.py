import os
import sys

sys.stderr = open(snakemake.log[0], "w")
# The one job that goes online (the workflow sets the hub offline for every other job).
os.environ["HF_HUB_OFFLINE"] = "0"

from execrl.models.staging import stage_model

# Errors name the setting that gave the source (the first model, where several share it).
names = [
    name
    for name, model in snakemake.config["models"].items()
    if model["source"] == snakemake.params.source and model.get("revision") == snakemake.params.revision
]
stage_model(
    snakemake.params.source,
    snakemake.output[0],
    revision=snakemake.params.revision,
    cache_dir=snakemake.config["staging"]["cache_dir"],
    setting=f"models.{names[0]}.source" if names else "source",
)
