rule prepare_dataset:
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
        mem_mb=resource("data", "mem_mb"),
        runtime=resource("data", "runtime"),
    params:
        adapter=dataset_setting("adapter"),
        source=dataset_setting("source"),
        subset=dataset_setting("subset"),
        split_name=get_split_name,
        options=dataset_setting("options"),
        on_malformed=dataset_setting("on_malformed"),
    script:
        "../scripts/prepare_dataset.py"
