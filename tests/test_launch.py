"""The accelerate config of a training job and its process count; each config as accelerate reads it.

The CPU config runs for real in tests/test_train_job.py (2 gloo processes); DDP and ZeRO-3 need
GPUs, so here they go through accelerate's own config loader and launch-argument validation.
"""

import pytest
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DistributedType

from execrl.planning.launch import (
    DEFAULT_CONFIG_DIR,
    accelerate_config,
    accelerate_config_of_stage,
    fits_one_gpu,
    training_processes,
)
from execrl.planning.resources import stage_resources


def rule_command(config_file, processes):
    """What `accelerate launch` makes of the `train` rule's command line, without starting anything."""
    argv = [
        "--config_file", str(config_file), "--num_processes", str(processes), "--num_machines", "1",
        "--main_process_port", "0", "-m", "execrl.training.train_job", "grpo", "--model", "m",
    ]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    return args


@pytest.mark.parametrize("processes", [1, 2])
def test_cpu_config_starts_its_processes_itself_on_cpu(processes):
    config = load_config_from_file(str(DEFAULT_CONFIG_DIR / "cpu.yaml"))
    assert config.use_cpu and config.mixed_precision == "no"
    # MULTI_GPU is accelerate's torchrun launcher: it spawns the processes (MULTI_CPU would need mpirun).
    assert config.distributed_type == DistributedType.MULTI_GPU
    args = rule_command(DEFAULT_CONFIG_DIR / "cpu.yaml", processes)
    assert args.multi_gpu and not args.use_deepspeed and not args.cpu
    assert args.num_processes == processes and args.main_process_port == 0
    assert args.module and args.training_script == "execrl.training.train_job"
    assert args.training_script_args == ["grpo", "--model", "m"]


@pytest.mark.parametrize("processes", [1, 4])
def test_ddp_config(processes):
    config = load_config_from_file(str(DEFAULT_CONFIG_DIR / "ddp.yaml"))
    assert config.distributed_type == DistributedType.MULTI_GPU and not config.use_cpu
    args = rule_command(DEFAULT_CONFIG_DIR / "ddp.yaml", processes)
    assert args.multi_gpu and not args.use_deepspeed
    assert args.num_processes == processes and args.num_machines == 1
    assert args.mixed_precision == "bf16"


def test_zero3_config():
    config = load_config_from_file(str(DEFAULT_CONFIG_DIR / "zero3.yaml"))
    assert config.distributed_type == DistributedType.DEEPSPEED
    assert config.deepspeed_config["zero_stage"] == 3 and config.deepspeed_config["zero3_save_16bit_model"]
    args = rule_command(DEFAULT_CONFIG_DIR / "zero3.yaml", 7)
    assert args.use_deepspeed and not args.multi_gpu
    assert args.num_processes == 7 and args.zero_stage == 3
    assert args.zero3_init_flag and args.zero3_save_16bit_model


def test_cpu_zero3_config_has_no_mixed_precision():
    config = load_config_from_file(str(DEFAULT_CONFIG_DIR / "zero3-cpu.yaml"))
    assert config.distributed_type == DistributedType.DEEPSPEED and config.use_cpu
    assert config.mixed_precision == "no" and config.deepspeed_config["zero_stage"] == 3
    args = rule_command(DEFAULT_CONFIG_DIR / "zero3-cpu.yaml", 2)
    assert args.use_deepspeed and args.num_processes == 2 and args.zero3_save_16bit_model


@pytest.mark.parametrize(
    "device, params_b, full_weight, name",
    [
        ("cpu", 0.003, False, "cpu.yaml"),
        ("cpu", 0.003, True, "cpu.yaml"),
        ("cpu", 7.6, True, "zero3-cpu.yaml"),  # what a GPU job shards, a CPU job shards too
        ("cpu", 14, False, "zero3-cpu.yaml"),
        ("gpu", 3.1, False, "ddp.yaml"),  # 19 GB of LoRA training
        ("gpu", 3.1, True, "ddp.yaml"),  # 56 GB of full-weight training
        ("gpu", 7.6, False, "ddp.yaml"),
        ("gpu", 7.6, True, "zero3.yaml"),  # 137 GB: sharded
        ("gpu", 14, False, "zero3.yaml"),
        ("gpu", 32, True, "zero3.yaml"),
    ],
)
def test_config_follows_device_size_and_full_weight(device, params_b, full_weight, name):
    assert accelerate_config(device, params_b, full_weight=full_weight) == DEFAULT_CONFIG_DIR / name


@pytest.mark.parametrize("params_b", [1.0, 3.1, 7.6, 14, 32, 70, 200])
@pytest.mark.parametrize("full_weight", [False, True])
def test_jobs_given_several_gpus_for_memory_are_sharded(params_b, full_weight):
    """A job the sizing gives several GPUs (because the model does not fit one) runs ZeRO-3."""
    gpus = stage_resources("train", params_b, full_weight=full_weight)["gpu"]
    config = accelerate_config("gpu", params_b, full_weight=full_weight)
    assert fits_one_gpu(params_b, full_weight) == (gpus <= 1)
    assert config.name == ("ddp.yaml" if gpus <= 1 else "zero3.yaml")


def test_processes_are_the_gpus_not_serving_vllm():
    assert training_processes(0) == 1
    assert training_processes(0, cpu_processes=2) == 2
    assert training_processes(1) == 1
    assert training_processes(8) == 8
    assert training_processes(8, vllm_server_gpus=1) == 7  # seed 004: 7 trainers, a server on the 8th
    with pytest.raises(ValueError, match="leave none"):
        training_processes(2, vllm_server_gpus=2)
    with pytest.raises(ValueError, match="needs GPUs"):
        training_processes(0, vllm_server_gpus=1)


def test_unknown_device_and_missing_config_are_errors(tmp_path):
    with pytest.raises(ValueError, match="device"):
        accelerate_config("tpu", 1.0)
    with pytest.raises(FileNotFoundError):
        accelerate_config("gpu", 1.0, config_dir=tmp_path)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_plan_dtype_and_offload_reach_deepspeed(dtype, monkeypatch):
    """The train rule's `--mixed_precision` and `--offload_optimizer_device` (from the memory plan)
    override zero3.yaml and reach the DeepSpeed config every training process builds."""
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    argv = [
        "--config_file", str(accelerate_config_of_stage("gpu", 3)), "--mixed_precision", dtype,
        "--offload_optimizer_device", "cpu", "--num_processes", "7", "--num_machines", "1",
        "--main_process_port", "0", "-m", "execrl.training.train_job", "grpo", "--model", "m",
    ]
    args, defaults, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)  # as launch_command does
    _, env = prepare_deepspeed_cmd_env(args)
    assert env["ACCELERATE_MIXED_PRECISION"] == dtype
    assert env["ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"] == "cpu"
    for key, value in env.items():
        if key.startswith("ACCELERATE_"):
            monkeypatch.setenv(key, value)
    plugin = DeepSpeedPlugin()
    assert plugin.deepspeed_config["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert plugin.deepspeed_config["zero_optimization"]["stage"] == 3


def test_without_offload_the_optimizer_stays_on_the_gpu():
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = rule_command(accelerate_config_of_stage("gpu", 3), 7)
    args.deepspeed_fields_from_accelerate_config = ""
    _, env = prepare_deepspeed_cmd_env(args)
    assert env["ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"] == "none"


def test_config_of_the_plans_zero_stage():
    assert accelerate_config_of_stage("gpu", 0).name == "ddp.yaml"
    assert accelerate_config_of_stage("gpu", 3).name == "zero3.yaml"
    assert accelerate_config_of_stage("cpu", 3).name == "zero3-cpu.yaml"
    with pytest.raises(ValueError, match="zero_stage"):
        accelerate_config_of_stage("gpu", 2)


def test_training_dtype_is_the_one_accelerate_was_launched_with(monkeypatch):
    import torch

    from execrl.training.common import device_kwargs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")  # a V100 or T4
    assert device_kwargs() == {"bf16": False, "fp16": True, "use_cpu": False}
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert device_kwargs() == {"bf16": True, "fp16": False, "use_cpu": False}


def test_a_workflow_launches_with_its_own_accelerate_configs(tmp_path):
    """Two checkouts may share one virtualenv, whose installed `execrl` is one of them: each
    workflow's train jobs take the accelerate configs beside its own Snakefile."""
    from conftest import EMBEDDED, copy_workflow, planned_jobs_of

    workdir = copy_workflow(tmp_path)
    trains = [job["params"] for job in planned_jobs_of(workdir, EMBEDDED).values() if job["rule"] == "train"]
    assert trains and {p["accelerate_config"] for p in trains} == {"workflow/accelerate/cpu.yaml"}
    assert DEFAULT_CONFIG_DIR != workdir / "workflow" / "accelerate"
