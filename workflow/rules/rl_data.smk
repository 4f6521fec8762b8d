rule build_rl_dataset:
    input:
        annotations="results/annotations/{dataset}/{model}/base/{seed}/train.jsonl",
    output:
        nbest="results/rl_data/{dataset}/{model}/{seed}/nbest.jsonl",
        pairs="results/rl_data/{dataset}/{model}/{seed}/pairs.jsonl",
        manifest="results/rl_data/{dataset}/{model}/{seed}/manifest.json",
    log:
        "logs/build_rl_dataset/{dataset}/{model}/{seed}.log",
    benchmark:
        "benchmarks/build_rl_dataset/{dataset}/{model}/{seed}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=resource("data", "mem_mb"),
        runtime=resource("data", "runtime"),
    params:
        rl_data=config["rl_data"],
    script:
        "../scripts/build_rl_dataset.py"
