# Analyses the report draws on: candidate diversity, refinement examples, confidence intervals, cost.


rule analyze_diversity:
    input:
        "results/annotations/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
    output:
        "results/analysis/diversity/{dataset}/{model}/{method}/{seed}/{split}.tsv",
    log:
        "logs/analyze_diversity/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/analyze_diversity/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        max_pairs=200,
    script:
        "../scripts/analyze_diversity.py"


rule sample_refinements:
    input:
        problems=get_train_problems,
        attempts=get_base_annotations,
        model=get_policy_model_input,
    output:
        "results/analysis/refinements/{dataset}/{model}/{method}/{seed}.jsonl",
    log:
        "logs/sample_refinements/{dataset}/{model}/{method}/{seed}.log",
    benchmark:
        "benchmarks/sample_refinements/{dataset}/{model}/{method}/{seed}.tsv"
    conda:
        "../envs/generate.yaml"
    threads: 2
    resources:
        **job_resources("generate"),
    params:
        model_path=get_policy_model,
        backend=config["generation"]["backend"],
        vllm=get_vllm_settings,
        generation=get_refinement_generation_settings,
        prompt=get_prompt_settings,
        srrl=get_refinement_prompt_settings,
        limits=get_execution_limits,
        prompts=config["report"]["refinement_prompts"],
    script:
        "../scripts/sample_refinements.py"


rule bootstrap_pass_at_k:
    input:
        "results/tables/per_problem.tsv",
    output:
        curves=report(
            "results/tables/pass_at_k_ci.tsv",
            caption="../report/pass_at_k_ci_table.rst",
            category="Evaluation",
        ),
        comparison=report(
            "results/tables/vs_base.tsv",
            caption="../report/vs_base_table.rst",
            category="Evaluation",
        ),
        comparisons=report(
            "results/tables/comparisons.tsv",
            caption="../report/comparisons_table.rst",
            category="Evaluation",
        ),
    log:
        "logs/bootstrap_pass_at_k.log",
    benchmark:
        "benchmarks/bootstrap_pass_at_k.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        n_boot=config["report"]["bootstrap_samples"],
        seed=0,
        comparisons=config["report"]["comparisons"],
        variants=variants_run(),
    script:
        "../scripts/bootstrap_pass_at_k.py"


# Benchmark files are written as jobs finish and are not declared outputs: this rule reads them
# once every job that computes results is done (the last of each chain is an evaluation, on the
# tests or the held-out tests); the report's own jobs are not counted (execrl.report.cost.job_table).
rule summarize_cost:
    input:
        get_all_evaluations(),
        get_all_plus_evaluations(),
    output:
        table=report(
            "results/tables/cost.tsv",
            caption="../report/cost_table.rst",
            category="Cost",
        ),
        plot=report(
            "results/plots/cost.png",
            caption="../report/cost_plot.rst",
            category="Cost",
        ),
    log:
        "logs/summarize_cost.log",
    benchmark:
        "benchmarks/summarize_cost.tsv"
    conda:
        "../envs/report.yaml"
    resources:
        **job_resources("report"),
    params:
        root="benchmarks",
        segments=sorted(SEGMENTS.experiment_segments()),
        variants=get_method_variants(),
        model_sizes=get_model_sizes(),
        training_gpus=get_training_gpus(),
    script:
        "../scripts/summarize_cost.py"
