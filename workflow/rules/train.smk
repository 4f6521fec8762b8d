# Training, one rule for every trained method (execrl.methods.METHODS says what each reads).
# Always through `accelerate launch`: one process on CPU or one GPU, DDP or DeepSpeed ZeRO-3 on
# several; with vLLM in server mode, the server runs on GPUs of the same job. Checkpoints live
# outside the declared outputs, in a folder named by the training settings, so a killed job
# resumes from its last checkpoint and a changed setting starts afresh.


rule train:
    input:
        data=get_training_data,
        eval_problems=get_interval_eval_problems,
        model=get_base_model_input,
        # Under a token budget (srrl.budget), SRRL's budget is what GRPO's run used: it waits for it.
        token_budget=get_token_budget_source,
        # With preflight.required, the model's preflight (rules/preflight.smk) passed on this cluster;
        # ancient: the gate's record is rewritten when the switch changes, and training must not rerun.
        preflight=ancient("results/preflight/{model}.gate.json"),
    output:
        trained=directory("results/models/{dataset}/{model}/{method}/{seed}/trained"),
        metrics="results/training/{dataset}/{model}/{method}/{seed}/metrics.jsonl",
    log:
        "logs/train/{dataset}/{model}/{method}/{seed}.log",
    benchmark:
        "benchmarks/train/{dataset}/{model}/{method}/{seed}.tsv"
    wildcard_constraints:
        method=one_of(TRAINABLE),
    # Training takes longest: start it before the jobs that can wait.
    priority: 1
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        gpu=training_resources("gpu"),
        nodes=training_resources("nodes"),
        tasks_per_gpu=training_resources("tasks_per_gpu"),
        processes=training_resources("processes"),
        gpu_model=gpu_model,
        cpus_per_task=training_resources("cpus_per_task"),
        mem_mb=training_resources("mem_mb"),
        runtime=training_resources("runtime"),
        sandbox_workers=sandbox_workers,
        wandb_mode=runtime_setting("wandb", "mode"),
        wandb_project=runtime_setting("wandb", "project"),
        vllm_server_timeout_s=runtime_setting("grpo", "vllm_server_timeout_s"),
        save_steps=training_runtime_setting("save_steps"),
        gradient_checkpointing=training_runtime_setting("gradient_checkpointing"),
    params:
        method=registry_method,
        model=get_base_model,
        settings=get_training_settings,
        accelerate_config=get_accelerate_config,
        launch_options=get_launch_options,
        micro_batching=get_micro_batching_options,
        dpo_processes=get_dpo_processes,
        vllm_server=get_vllm_server_prefix,
        run=get_run_name,
        token_budget=get_token_budget_option,
        eval_problems=get_eval_problems_option,
    shell:
        "HF_HUB_OFFLINE=1 EXECRL_VLLM_SERVER_LOG={log}.vllm-server"
        " EXECRL_VLLM_SERVER_TIMEOUT={resources.vllm_server_timeout_s}"
        " {params.vllm_server}accelerate launch --config_file {params.accelerate_config}"
        " {params.launch_options}"
        " --num_processes {resources.processes} --num_machines 1 --main_process_port 0"
        " -m execrl.training.train_job {params.method} --model {params.model:q}"
        " --settings {params.settings:q} --data {input.data}"
        " {params.eval_problems} {params.token_budget} {params.micro_batching}"
        " --output {output.trained}"
        " --metrics {output.metrics} --checkpoint-root results/checkpoints"
        " --run-name {params.run} --threads {threads}"
        " --save-steps {resources.save_steps}"
        " --gradient-checkpointing {resources.gradient_checkpointing}"
        " --sandbox-workers {resources.sandbox_workers}"
        " --wandb-mode {resources.wandb_mode} --wandb-project {resources.wandb_project}"
        " > {log} 2>&1"
