# Figures and the self-contained report. Every figure is also a `report()` item with a caption,
# so `snakemake --report` shows it with its provenance.


rule plot_pass_at_k:
    input:
        "results/tables/pass_at_k_ci.tsv",
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
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_pass_at_k.py"


rule plot_per_problem:
    input:
        "results/tables/per_problem.tsv",
    output:
        report(
            "results/plots/per_problem.png",
            caption="../report/per_problem_plot.rst",
            category="Evaluation",
        ),
    log:
        "logs/plot_per_problem.log",
    benchmark:
        "benchmarks/plot_per_problem.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_per_problem.py"


rule plot_outcomes:
    input:
        "results/tables/outcomes.tsv",
    output:
        report(
            "results/plots/outcomes.png",
            caption="../report/outcomes_plot.rst",
            category="Evaluation",
        ),
    log:
        "logs/plot_outcomes.log",
    benchmark:
        "benchmarks/plot_outcomes.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_outcomes.py"


rule plot_training_curves:
    input:
        metrics=get_training_metrics(),
        manifests=get_rl_manifests(),
    output:
        steps=report(
            "results/plots/training_steps.png",
            caption="../report/training_steps_plot.rst",
            category="Training",
        ),
        samples=report(
            "results/plots/training_samples.png",
            caption="../report/training_samples_plot.rst",
            category="Training",
        ),
        table=report(
            "results/tables/training.tsv",
            caption="../report/training_table.rst",
            category="Training",
        ),
    log:
        "logs/plot_training_curves.log",
    benchmark:
        "benchmarks/plot_training_curves.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        grpo=get_report_grpo(),
        method_overrides=get_method_overrides(),
        variants=get_method_variants(),
    script:
        "../scripts/plot_training_curves.py"


rule plot_srrl_refinement:
    input:
        get_training_metrics([*srrl_runs(), "grpo"]),
    output:
        report(
            "results/plots/srrl_c1_c2.png",
            caption="../report/srrl_plot.rst",
            category="Training",
        ),
    log:
        "logs/plot_srrl_refinement.log",
    benchmark:
        "benchmarks/plot_srrl_refinement.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        srrl_methods=srrl_runs(),
    script:
        "../scripts/plot_srrl_refinement.py"


rule plot_reward_hacking:
    input:
        get_watched_metrics(),
    output:
        report(
            "results/plots/reward_hacking.png",
            caption="../report/reward_hacking_plot.rst",
            category="Training",
        ),
    log:
        "logs/plot_reward_hacking.log",
    benchmark:
        "benchmarks/plot_reward_hacking.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_reward_hacking.py"


rule plot_method_metrics:
    input:
        get_method_metrics,
    output:
        report(
            "results/plots/methods/{method}.png",
            caption="../report/method_plot.rst",
            category="Training",
        ),
    log:
        "logs/plot_method_metrics/{method}.log",
    benchmark:
        "benchmarks/plot_method_metrics/{method}.tsv"
    # The report's figures are named by the config's method names, not by path segments.
    wildcard_constraints:
        method=one_of(TRAINED),
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_method_metrics.py"


rule plot_warm_start:
    input:
        get_warm_start_metrics(),
    output:
        report(
            "results/plots/warm_start.png",
            caption="../report/warm_start_plot.rst",
            category="Training",
        ),
    log:
        "logs/plot_warm_start.log",
    benchmark:
        "benchmarks/plot_warm_start.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_warm_start.py"


rule plot_diversity:
    input:
        get_all_diversity(),
    output:
        plot=report(
            "results/plots/diversity.png",
            caption="../report/diversity_plot.rst",
            category="Analysis",
        ),
        table=report(
            "results/tables/diversity.tsv",
            caption="../report/diversity_table.rst",
            category="Analysis",
        ),
    log:
        "logs/plot_diversity.log",
    benchmark:
        "benchmarks/plot_diversity.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    script:
        "../scripts/plot_diversity.py"


rule render_report:
    input:
        unpack(get_report_inputs),
    output:
        html="results/report.html",
        summary="results/summary.json",
        markdown=report(
            "results/summary.md",
            caption="../report/summary.rst",
            category="Summary",
        ),
    log:
        "logs/render_report.log",
    benchmark:
        "benchmarks/render_report.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        title=config["report"]["title"],
        experiment=config["experiment"],
        config=shown_in_report(RESULT_CONFIG),
        config_left_out=left_out_of_report(RESULT_CONFIG),
        ks=config["evaluation"]["k"],
        n_boot=config["report"]["bootstrap_samples"],
        examples=4,
        grpo=get_report_grpo(),
        method_overrides=get_method_overrides(),
        variants=get_method_variants(),
    script:
        "../scripts/render_report.py"
