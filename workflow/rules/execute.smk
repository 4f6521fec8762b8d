rule annotate_candidates:
    input:
        problems=get_problems,
        candidates=get_candidates,
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


# Held-out tests: the reference runs on mutated inputs of the visible tests, once per data set.
rule make_plus_tests:
    input:
        problems=get_problems,
        alternatives=get_alternatives,
    output:
        problems="results/data/{dataset}/{plus}/{split}.jsonl",
        manifest="results/data/{dataset}/{plus}/{split}.manifest.json",
    log:
        "logs/make_plus_tests/{dataset}/{plus}/{split}.log",
    benchmark:
        "benchmarks/make_plus_tests/{dataset}/{plus}/{split}.tsv"
    conda:
        "../envs/execute.yaml"
    threads: config["execution"]["workers"]
    resources:
        **job_resources("execute"),
        cpus_per_task=config["execution"]["workers"],
    params:
        settings=get_plus_test_settings,
        memory_mb=get_execution_limits()["memory_mb"],
    script:
        "../scripts/make_plus_tests.py"


# The same candidates judged on the base tests plus the held-out ones.
rule annotate_plus_tests:
    input:
        problems=get_plus_problems,
        candidates=get_candidates,
    output:
        "results/annotations/{dataset}/{model}/{method}/{seed}/{split}.plus.jsonl",
    log:
        "logs/annotate_plus_tests/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/annotate_plus_tests/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/execute.yaml"
    threads: config["execution"]["workers"]
    resources:
        **job_resources("execute"),
        cpus_per_task=config["execution"]["workers"],
    params:
        limits=get_execution_limits,
        suite="plus",
    script:
        "../scripts/annotate_candidates.py"
