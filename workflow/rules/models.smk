# A tiny model built locally for a dataset (tokenizer, random init, supervised warm start), and
# trained adapters merged into their base model.


rule train_tokenizer:
    input:
        problems=get_warmup_problems,
    output:
        directory("results/models/{dataset}/{model}/tokenizer"),
    log:
        "logs/train_tokenizer/{dataset}/{model}.log",
    benchmark:
        "benchmarks/train_tokenizer/{dataset}/{model}.tsv"
    conda:
        "../envs/train.yaml"
    resources:
        **job_resources("data"),
    params:
        vocab_size=config["tiny_model"]["vocab_size"],
        prompt=get_prompt_settings,
    script:
        "../scripts/train_tokenizer.py"


rule init_tiny_model:
    input:
        tokenizer=get_tokenizer,
    output:
        directory("results/models/{dataset}/{model}/init"),
    log:
        "logs/init_tiny_model/{dataset}/{model}.log",
    benchmark:
        "benchmarks/init_tiny_model/{dataset}/{model}.tsv"
    conda:
        "../envs/train.yaml"
    resources:
        **job_resources("data"),
    params:
        architecture=get_tiny_model_settings,
        seed=0,
    script:
        "../scripts/init_tiny_model.py"


rule sft_tiny_model:
    input:
        model=get_init_model,
        problems=get_warmup_problems,
    output:
        model=directory("results/models/{dataset}/{model}/base"),
        metrics="results/training/{dataset}/{model}/sft/metrics.jsonl",
    log:
        "logs/sft_tiny_model/{dataset}/{model}.log",
    benchmark:
        "benchmarks/sft_tiny_model/{dataset}/{model}.tsv"
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        **job_resources("train"),
    params:
        sft=config["tiny_model"]["sft"],
        prompt=get_prompt_settings,
        refinement=get_sft_refinement_settings,
        code_game=get_sft_code_game_settings,
        game=get_sft_game_settings,
    script:
        "../scripts/sft_tiny_model.py"


rule merge_adapter:
    input:
        adapter="results/models/{dataset}/{model}/{method}/{seed}/trained",
        model=get_base_model_input,
    output:
        directory("results/models/{dataset}/{model}/{method}/{seed}/merged"),
    log:
        "logs/merge_adapter/{dataset}/{model}/{method}/{seed}.log",
    benchmark:
        "benchmarks/merge_adapter/{dataset}/{model}/{method}/{seed}.tsv"
    conda:
        "../envs/train.yaml"
    resources:
        **job_resources("merge"),
    params:
        model_path=get_base_model,
    script:
        "../scripts/merge_adapter.py"
