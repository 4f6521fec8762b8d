"""The jobs a config plans, with each output's params, from Snakemake's own DAG (no job runs).

    python tests/workflow_plan.py WORKDIR TARGET CONFIGFILE...   → JSON {output path: {rule, params, directory, input}}

Run as a script (one config per process: Snakemake keeps state in its modules).
"""

import json
import sys
from pathlib import Path


def planned_params(workdir: str, target: str, configfiles: list[str]) -> dict[str, dict]:
    from snakemake.api import SnakemakeApi
    from snakemake.io import is_flagged
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings, StorageSettings

    plan = {}
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=2),
            config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
            storage_settings=StorageSettings(),
            workdir=Path(workdir),
            snakefile=Path(workdir) / "workflow" / "Snakefile",
        )
        dag_api = workflow_api.dag(dag_settings=DAGSettings(targets={target}, forceall=True))
        workflow = dag_api.workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        for job in workflow.dag.jobs:
            params = {key: value for key, value in job.params.items()}
            for output in job.output:
                plan[str(output)] = {
                    "rule": job.rule.name,
                    "params": json.loads(json.dumps(params, default=str)),
                    "directory": is_flagged(output, "directory"),
                    "input": sorted(str(path) for path in job.input),
                }
    return plan


if __name__ == "__main__":
    workdir, target, *configfiles = sys.argv[1:]
    json.dump(planned_params(workdir, target, configfiles), sys.stdout, sort_keys=True)
