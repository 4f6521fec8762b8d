"""Planning: what each job needs from the cluster, decided while Snakemake builds the DAG, and the
preflight that proves it on a node.

The cluster's GPU nodes (`cluster`), each training job's GPU memory plan (`memory_plan`, from the
model's shape in `architecture`, one training process's plan in `training_plan` and vLLM's in
`vllm_plan`; checked against a measured TRL step by `memory_measure`), the Slurm resources of
every rule (`resources`), how a training job starts its processes (`launch`: the accelerate config
and the process count), and the preflight (`preflight`, with its environment checks
`preflight_env`, the model and data its jobs train on `preflight_workload`, and the one measured
optimizer step it launches per job, `preflight_step`). What runs while the DAG is built imports
settings, not trainers.
"""
