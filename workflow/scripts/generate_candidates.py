import sys


def main():
    sys.stderr = open(snakemake.log[0], "w")

    from execrl.models.staging import work_offline

    work_offline()

    import torch

    from execrl.generation import GenerationSettings, VLLMSettings, candidate_records, get_backend
    from execrl.jsonl import write_jsonl
    from execrl.problems import read_problems
    from execrl.prompting import PromptConfig, prompt_format

    torch.set_num_threads(snakemake.threads)
    params = snakemake.params
    vllm = VLLMSettings(**params.vllm) if params.vllm else None
    # vLLM spans every GPU of the job (tensor parallelism).
    backend = get_backend(params.backend, params.model_path, gpus=snakemake.resources.gpu, vllm=vllm)
    prompt_config = PromptConfig(**snakemake.params.prompt)
    print(f"prompts: {prompt_format(prompt_config, backend.tokenizer)}", file=sys.stderr, flush=True)
    records = candidate_records(
        problems=read_problems(snakemake.input.problems)[: snakemake.params.max_problems],
        backend=backend,
        settings=GenerationSettings(**snakemake.params.generation),
        prompt_config=prompt_config,
    )
    write_jsonl(records, snakemake.output[0])


# vLLM starts its workers by spawning this script anew (on CPU, and on GPUs once CUDA is up): only the
# script's own run samples.
if __name__ == "__main__":
    main()
