# Data and models from the hub. These rules run where Snakemake runs (`localrules`), where the
# hub is reachable; every other job reads only what they wrote, so compute nodes stay offline.


localrules:
    prepare_dataset,
    prepare_alternatives,
    stage_model,


rule prepare_dataset:
    input:
        get_dataset_source_files,
    output:
        problems="results/data/{dataset}/{split}.jsonl",
        manifest="results/data/{dataset}/{split}.manifest.json",
    log:
        "logs/prepare_dataset/{dataset}/{split}.log",
    benchmark:
        "benchmarks/prepare_dataset/{dataset}/{split}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        **job_resources("data"),
    params:
        adapter=dataset_setting("adapter"),
        source=dataset_setting("source"),
        subset=dataset_setting("subset"),
        split_name=get_split_name,
        options=dataset_setting("options"),
        on_malformed=dataset_setting("on_malformed"),
    script:
        "../scripts/prepare_dataset.py"


# Other correct solutions of each problem (MBPP's other file; builtin's renamed references), which
# held-out tests must not fail: make_plus_tests drops inputs on which they disagree.
rule prepare_alternatives:
    input:
        problems=get_problems,
    output:
        "results/data/{dataset}/{split}.alternatives.json",
    log:
        "logs/prepare_alternatives/{dataset}/{split}.log",
    benchmark:
        "benchmarks/prepare_alternatives/{dataset}/{split}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        **job_resources("data"),
    params:
        adapter=dataset_setting("adapter"),
        source=dataset_setting("source"),
        subset=dataset_setting("subset"),
        split_name=get_split_name,
        options=dataset_setting("options"),
    script:
        "../scripts/prepare_alternatives.py"


rule stage_model:
    output:
        directory("resources/models/{staged}"),
    log:
        "logs/stage_model/{staged}.log",
    benchmark:
        "benchmarks/stage_model/{staged}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        **job_resources("data"),
    params:
        source=staged_setting("source"),
        revision=staged_setting("revision"),
    script:
        "../scripts/stage_model.py"
