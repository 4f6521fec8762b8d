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
        # One CPU per sandbox worker: execution.workers decides both.
        cpus_per_task=config["execution"]["workers"],
        mem_mb=resource("execute", "mem_mb"),
        runtime=resource("execute", "runtime"),
    params:
        workers=config["execution"]["workers"],
        timeout_s=config["execution"]["timeout_s"],
        memory_mb=config["execution"]["memory_mb"],
    script:
        "../scripts/annotate_candidates.py"
