# RL training. Checkpoints live outside the declared outputs, under a folder named by the
# training settings, so a killed job resumes from its last checkpoint and a changed setting
# starts afresh.


rule train_dpo:
    input:
        pairs="results/rl_data/{dataset}/{model}/{seed}/pairs.jsonl",
        model=get_base_model_dir,
    output:
        adapter=directory("results/models/{dataset}/{model}/dpo/{seed}/adapter"),
        metrics="results/training/{dataset}/{model}/dpo/{seed}/metrics.jsonl",
    log:
        "logs/train_dpo/{dataset}/{model}/{seed}.log",
    benchmark:
        "benchmarks/train_dpo/{dataset}/{model}/{seed}.tsv"
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        gpu=resource("train", "gpu"),
        gpu_model=gpu_model,
        cpus_per_task=resource("train", "cpus_per_task"),
        mem_mb=resource("train", "mem_mb"),
        runtime=resource("train", "runtime"),
    params:
        model_path=get_base_model_path,
        dpo=get_dpo_settings,
        lora=config["lora"],
        wandb=config["wandb"],
        checkpoint_root="results/checkpoints",
    script:
        "../scripts/train_dpo.py"


rule train_grpo:
    input:
        problems=get_train_problems,
        eval_problems=get_interval_eval_problems,
        model=get_base_model_dir,
    output:
        adapter=directory("results/models/{dataset}/{model}/grpo/{seed}/adapter"),
        metrics="results/training/{dataset}/{model}/grpo/{seed}/metrics.jsonl",
    log:
        "logs/train_grpo/{dataset}/{model}/{seed}.log",
    benchmark:
        "benchmarks/train_grpo/{dataset}/{model}/{seed}.tsv"
    # Online RL takes longest: start it before the jobs that can wait.
    priority: 1
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        gpu=resource("train", "gpu"),
        gpu_model=gpu_model,
        cpus_per_task=resource("train", "cpus_per_task"),
        mem_mb=resource("train", "mem_mb"),
        runtime=resource("train", "runtime"),
    params:
        model_path=get_base_model_path,
        grpo=get_grpo_settings,
        rewards=config["rewards"],
        lora=config["lora"],
        prompt=get_prompt_settings,
        execution=config["execution"],
        wandb=config["wandb"],
        checkpoint_root="results/checkpoints",
    script:
        "../scripts/train_grpo.py"


use rule train_grpo as train_srrl with:
    output:
        adapter=directory("results/models/{dataset}/{model}/srrl/{seed}/adapter"),
        metrics="results/training/{dataset}/{model}/srrl/{seed}/metrics.jsonl",
    log:
        "logs/train_srrl/{dataset}/{model}/{seed}.log",
    benchmark:
        "benchmarks/train_srrl/{dataset}/{model}/{seed}.tsv"
    params:
        model_path=get_base_model_path,
        grpo=get_grpo_settings,
        rewards=config["rewards"],
        lora=config["lora"],
        prompt=get_prompt_settings,
        execution=config["execution"],
        wandb=config["wandb"],
        checkpoint_root="results/checkpoints",
        srrl=config["srrl"],
