rule annotate_candidates:
    input:
        problems=get_problems,
        candidates="results/candidates/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
    output:
        "results/annotations/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
    log:
        "logs/annotate_candidates/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/annotate_candidates/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/execute.yaml"
    threads: config["execution"]["workers"]
    resources:
        **job_resources("execute"),
        # One CPU per sandbox worker: execution.workers decides both.
        cpus_per_task=config["execution"]["workers"],
    params:
        limits=get_execution_limits,
    script:
        "../scripts/annotate_candidates.py"
