rule generate_candidates:
    input:
        problems=get_problems,
        model=get_policy_model_input,
    output:
        "results/candidates/{dataset}/{model}/{method}/{seed}/{split}.jsonl",
    log:
        "logs/generate_candidates/{dataset}/{model}/{method}/{seed}/{split}.log",
    benchmark:
        "benchmarks/generate_candidates/{dataset}/{model}/{method}/{seed}/{split}.tsv"
    conda:
        "../envs/generate.yaml"
    threads: 2
    resources:
        **job_resources("generate"),
    params:
        model_path=get_policy_model,
        backend=config["generation"]["backend"],
        vllm=get_vllm_settings,
        generation=get_generation_settings,
        prompt=get_prompt_settings,
        max_problems=config["evaluation"]["max_problems"],
    script:
        "../scripts/generate_candidates.py"
