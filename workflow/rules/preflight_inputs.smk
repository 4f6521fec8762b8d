# Inputs, params and resources of the preflight rule (rules/preflight.smk), and the preflight
# gate's input (`preflight.required`).


def get_preflight_report(wildcards):
    """The preflight gate's input: the model's report when `preflight.required`, else nothing."""
    if not config["preflight"]["required"]:
        return []
    return f"results/preflight/{wildcards.model}.json"


def get_preflight_model_config(wildcards):
    """A hub model's staged folder (its config.json gives the shape); nothing for other models."""
    name = model_name(wildcards)
    return f"resources/models/{SEGMENTS.staged[name]}" if is_hub_model(name) else []


def preflight_gpus(wildcards):
    """GPUs of the preflight job: the most any of the model's training jobs plans (0 on CPU)."""
    name = model_name(wildcards)
    layouts = [training_layout(name, method) for method in TRAINED]
    return max(
        (layout.processes for layout in layouts if layout is not None), default=0
    )


def preflight_resource(key):
    """One resource of the preflight job: the most any of the model's training jobs asks for (its
    host memory and CPUs, with the optimizer state the plan offloads), so that each job's step runs
    as it will; one task for all the GPUs, as training asks."""

    def get(wildcards, attempt):
        name = model_name(wildcards)
        params_b = params_b_of(wildcards)
        layouts = [training_layout(name, method) for method in TRAINED]
        values = [
            training_job_resources(layout, params_b, attempt)[key]
            for layout in layouts
            if layout is not None
        ]
        return max(values, default=stage_resources("train", params_b, attempt)[key])

    return get


def get_preflight_settings(wildcards):
    """What decides the preflight's jobs of a model: its entry, the built model's shape, the
    cluster it is planned on and every trained method's training settings."""
    name = model_name(wildcards)
    return json.dumps(
        {
            "model": config["models"][name],
            "tiny_model": RESULT_CONFIG["tiny_model"],
            "cluster": RESULT_CONFIG["cluster"],
            "training": {
                method: training_settings(config, method, name) for method in TRAINED
            },
            # gradient checkpointing changes what the preflight measures, not a result
            "runtime": {method: training_runtime(config, method) for method in TRAINED},
        },
        sort_keys=True,
    )
