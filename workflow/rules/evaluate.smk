rule evaluate_pass_at_k:
    input:
        problems=get_problems,
        annotations="results/annotations/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
    output:
        "results/eval/{dataset}/{model}/{method}/{seed}/{split}.json",
    log:
        "logs/evaluate_pass_at_k/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/evaluate_pass_at_k/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=resource("data", "mem_mb"),
        runtime=resource("data", "runtime"),
    params:
        k=config["evaluation"]["k"],
        max_problems=config["evaluation"]["max_problems"],
    script:
        "../scripts/evaluate_pass_at_k.py"


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
        mem_mb=resource("report", "mem_mb"),
        runtime=resource("report", "runtime"),
    script:
        "../scripts/summarize_evaluations.py"
