rule plot_pass_at_k:
    input:
        "results/tables/pass_at_k.tsv",
    output:
        report(
            "results/plots/pass_at_k.png",
            caption="../report/pass_at_k_plot.rst",
            category="Evaluation",
        ),
    log:
        "logs/plot_pass_at_k.log",
    benchmark:
        "benchmarks/plot_pass_at_k.tsv"
    resources:
        mem_mb=resource("report", "mem_mb"),
        runtime=resource("report", "runtime"),
    script:
        "../scripts/plot_pass_at_k.py"


rule render_report:
    input:
        table="results/tables/pass_at_k.tsv",
        plot="results/plots/pass_at_k.png",
        evaluations=get_all_evaluations(),
    output:
        html="results/report.html",
        summary="results/summary.json",
    log:
        "logs/render_report.log",
    benchmark:
        "benchmarks/render_report.tsv"
    params:
        title=config["report"]["title"],
        experiment=config["experiment"],
        config=config,
    resources:
        mem_mb=resource("report", "mem_mb"),
        runtime=resource("report", "runtime"),
    script:
        "../scripts/render_report.py"
