rule evaluate_pass_at_k:
    input:
        problems=get_problems,
        annotations=get_annotations,
    output:
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.json",
    log:
        "logs/evaluate_pass_at_k/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/evaluate_pass_at_k/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        **job_resources("data"),
    params:
        k=config["evaluation"]["k"],
        max_problems=config["evaluation"]["max_problems"],
    script:
        "../scripts/evaluate_pass_at_k.py"


rule evaluate_pass_at_k_plus:
    input:
        problems=get_problems,
        annotations=get_plus_annotations,
    output:
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.plus.json",
    log:
        "logs/evaluate_pass_at_k_plus/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/evaluate_pass_at_k_plus/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        **job_resources("data"),
    params:
        k=config["evaluation"]["k"],
        max_problems=config["evaluation"]["max_problems"],
    script:
        "../scripts/evaluate_pass_at_k.py"


rule summarize_plus_tests:
    input:
        base=get_all_evaluations(),
        plus=get_all_plus_evaluations(),
        manifests=get_plus_test_manifests(),
    output:
        table=report(
            "results/tables/pass_at_k_plus.tsv",
            caption="../report/pass_at_k_plus_table.rst",
            category="Evaluation",
        ),
        manifests="results/tables/plus_tests.tsv",
    log:
        "logs/summarize_plus_tests.log",
    benchmark:
        "benchmarks/summarize_plus_tests.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/summarize_plus_tests.py"


rule summarize_evaluations:
    input:
        get_all_evaluations(),
    output:
        table=report(
            "results/tables/pass_at_k.tsv",
            caption="../report/pass_at_k_table.rst",
            category="Evaluation",
        ),
        per_problem=report(
            "results/tables/per_problem.tsv",
            caption="../report/per_problem_table.rst",
            category="Evaluation",
        ),
        outcomes=report(
            "results/tables/outcomes.tsv",
            caption="../report/outcomes_table.rst",
            category="Evaluation",
        ),
    log:
        "logs/summarize_evaluations.log",
    benchmark:
        "benchmarks/summarize_evaluations.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/summarize_evaluations.py"
