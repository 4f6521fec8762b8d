"""The launcher of a training job: one process, or `accelerate launch` with DDP or ZeRO-3."""

import pytest
from accelerate.commands.launch import _validate_launch_command, launch_command_parser

from execrl.launch import DEFAULT_CONFIG_DIR, fits_one_gpu, training_launch
from execrl.resources import stage_resources


def accelerate_args(launch, script=("train.py", "--seed", "0")):
    """What `accelerate launch` makes of the prefix, without starting anything."""
    assert launch.prefix[:2] == ("accelerate", "launch")
    args = launch_command_parser().parse_args([*launch.prefix[2:], *script])
    args, _, _ = _validate_launch_command(args)
    return args


@pytest.mark.parametrize("gpus", [0, 1])
def test_one_process_without_accelerate(gpus):
    launch = training_launch(gpus, 70.0)
    assert launch.strategy == "single" and launch.config_file is None
    assert launch.prefix == ("python",) and launch.shell_prefix == "python"


def test_ddp_when_the_model_fits_one_gpu():
    launch = training_launch(4, 3.1)
    assert launch.strategy == "ddp" and launch.config_file == DEFAULT_CONFIG_DIR / "ddp.yaml"
    args = accelerate_args(launch)
    assert args.multi_gpu and not args.use_deepspeed
    assert args.num_processes == 4 and args.num_machines == 1
    assert args.mixed_precision == "bf16"
    assert args.training_script == "train.py" and args.training_script_args == ["--seed", "0"]


def test_zero3_when_the_model_does_not_fit_one_gpu():
    launch = training_launch(8, 70.0)
    assert launch.strategy == "zero3" and launch.config_file == DEFAULT_CONFIG_DIR / "zero3.yaml"
    args = accelerate_args(launch)
    assert args.use_deepspeed and not args.multi_gpu
    assert args.num_processes == 8 and args.zero_stage == 3
    assert args.zero3_init_flag and args.zero3_save_16bit_model


def test_jobs_sharing_a_node_get_their_own_port():
    args = accelerate_args(training_launch(2, 3.1))
    assert args.main_process_port == 0  # accelerate picks a free port


def test_module_launch():
    args = accelerate_args(training_launch(2, 3.1), ("-m", "execrl.train", "--x", "1"))
    assert args.module and args.training_script == "execrl.train"


@pytest.mark.parametrize("params_b", [1.0, 3.1, 7.6, 14, 70, 200])
def test_the_derived_gpu_count_picks_the_strategy_the_memory_needs(params_b):
    gpus = stage_resources("train", params_b)["gpu"]
    launch = training_launch(gpus, params_b)
    assert launch.num_processes == max(gpus, 1)
    # More than one GPU is derived only when the model does not fit one: then it is sharded.
    assert launch.strategy == ("single" if gpus <= 1 else "zero3")
    assert fits_one_gpu(params_b) == (gpus <= 1)


def test_shell_prefix_quotes_paths(tmp_path):
    config_dir = tmp_path / "with space"
    config_dir.mkdir()
    (config_dir / "ddp.yaml").write_text((DEFAULT_CONFIG_DIR / "ddp.yaml").read_text())
    launch = training_launch(2, 1.0, config_dir=config_dir)
    assert f"'{config_dir / 'ddp.yaml'}'" in launch.shell_prefix


def test_missing_config_and_bad_counts_are_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        training_launch(2, 1.0, config_dir=tmp_path)
    with pytest.raises(ValueError):
        training_launch(-1, 1.0)
