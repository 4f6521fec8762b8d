import sys


def main():
    sys.stderr = open(snakemake.log[0], "w")

    from execrl.models.staging import work_offline

    work_offline()

    import torch

    from execrl.generation import GenerationSettings, VLLMSettings, get_backend
    from execrl.jsonl import read_jsonl, write_jsonl
    from execrl.problems import read_problems
    from execrl.prompting import PromptConfig
    from execrl.evaluation.refinement_samples import sample_refinements, select_failed_attempts
    from execrl.sandbox import ExecutionLimits, Executor
    from execrl.training.srrl import SRRLSettings

    torch.set_num_threads(snakemake.threads)
    params = snakemake.params
    selected = select_failed_attempts(
        read_problems(snakemake.input.problems), read_jsonl(snakemake.input.attempts), params.prompts
    )
    vllm = VLLMSettings(**params.vllm) if params.vllm else None
    backend = get_backend(params.backend, params.model_path, gpus=snakemake.resources.gpu, vllm=vllm)
    workers = snakemake.config["execution"]["workers"]
    with Executor(workers=workers, limits=ExecutionLimits(**params.limits)) as executor:
        records = sample_refinements(
            selected,
            backend,
            GenerationSettings(**params.generation),
            PromptConfig(**params.prompt),
            SRRLSettings(**params.srrl),
            executor,
        )
    write_jsonl(records, snakemake.output[0])


# vLLM starts its workers by spawning this script anew (on CPU, and on GPUs once CUDA is up): only the
# script's own run samples.
if __name__ == "__main__":
    main()
