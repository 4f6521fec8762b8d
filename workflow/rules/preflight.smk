# Preflight (execrl.planning.preflight): on the node a model's training jobs get, one measured optimizer
# step of each of them with random weights, planned against measured memory per term. With
# `preflight.required` every training job of the model waits for it, so a job that would not fit
# fails here in minutes, not after its time in the queue.


rule preflight:
    input:
        model=get_preflight_model_config,
    output:
        "results/preflight/{model}.json",
    log:
        "logs/preflight/{model}.log",
    benchmark:
        "benchmarks/preflight/{model}.tsv"
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        gpu=preflight_gpus,
        nodes=1,
        tasks_per_gpu=0,
        gpu_model=gpu_model,
        cpus_per_task=preflight_resource("cpus_per_task"),
        mem_mb=preflight_resource("mem_mb"),
        runtime=60,
    params:
        model=model_name,
        settings=get_preflight_settings,
    script:
        "../scripts/preflight.py"


# What the train rule waits for, whether or not a preflight is required: the train rule reads it as
# `ancient`, so switching `preflight.required` reruns this record (and the preflight), never training.
localrules:
    preflight_gate,


rule preflight_gate:
    input:
        report=get_preflight_report,
    output:
        "results/preflight/{model}.gate.json",
    log:
        "logs/preflight_gate/{model}.log",
    benchmark:
        "benchmarks/preflight_gate/{model}.tsv"
    conda:
        "../envs/train.yaml"
    script:
        "../scripts/preflight_gate.py"
