"""`python -m execrl.generation.vllm_server`: GPUs, ports, the health wait, failures and stopping, with a stand-in
`trl` executable; its command line checked with the installed TRL's own `vllm-serve` parser."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from trl.scripts.vllm_serve import ScriptArguments, build_command, make_parser

from execrl.generation.vllm_server import free_ports, serve_command, split_gpus

# Stand-in for `trl`: records how it was started, then behaves as FAKE_TRL asks:
# `serve` answers /health on --port, `exit` fails at once, `hang` never listens, `crash` serves
# for 2 s and then exits.
FAKE_TRL = f"""#!{sys.executable}
import http.server, json, os, sys, threading, time
record = {{"argv": sys.argv[1:], "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}}
with open(os.environ["FAKE_TRL_RECORD"], "w") as handle:
    json.dump(record, handle)
mode = os.environ["FAKE_TRL"]
print("stand-in vllm-serve starting", flush=True)
if mode == "exit":
    print("CUDA out of memory", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(600)
argv = sys.argv[1:]
host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

time.sleep(1)  # a real server takes a while: the job must wait for it
server = http.server.HTTPServer((host, port), Health)
if mode == "crash":
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(2)
    print("engine core died", flush=True)
    os._exit(4)
server.serve_forever()
"""

# The training command's stand-in: reports its environment and that the server answers there.
COMMAND = """
import json, os, sys, time, urllib.request
env = {k: v for k, v in os.environ.items() if k.startswith("EXECRL_VLLM") or k == "CUDA_VISIBLE_DEVICES"}
url = f"http://{env['EXECRL_VLLM_SERVER_HOST']}:{env['EXECRL_VLLM_SERVER_PORT']}/health"
env["health"] = urllib.request.urlopen(url).status
env["pid"] = os.getpid()
json.dump(env, open(sys.argv[1], "w"))
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
sys.exit(7)
"""


@pytest.fixture
def stand_in(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "trl").write_text(FAKE_TRL)
    (bin_dir / "trl").chmod(0o755)

    def start(mode, *options, command_args=(), gpus="0,1,2,3"):
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": gpus,
               "FAKE_TRL": mode, "FAKE_TRL_RECORD": str(tmp_path / "server.json")}
        argv = [sys.executable, "-m", "execrl.generation.vllm_server", "--model", "some/model", "--log", str(tmp_path / "vllm.log"),
                *options, "--", sys.executable, "-c", COMMAND, str(tmp_path / "command.json"), *command_args]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    return start


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_gets_the_last_gpus_and_the_command_its_address(stand_in, tmp_path):
    job = stand_in("serve", "--gpus", "1", "--max-model-len", "4096", "--dtype", "bfloat16",
                   "--gpu-memory-utilization", "0.85", gpus="4,5,6,7")
    _, err = job.communicate(timeout=120)
    assert job.returncode == 7, err  # the command's status
    server = json.loads((tmp_path / "server.json").read_text())
    command = json.loads((tmp_path / "command.json").read_text())
    assert server["cuda"] == "7" and command["CUDA_VISIBLE_DEVICES"] == "4,5,6"
    assert command["health"] == 200  # the command started after the server answered, at the address it was given
    port, group_port = int(command["EXECRL_VLLM_SERVER_PORT"]), int(command["EXECRL_VLLM_GROUP_PORT"])
    assert port != group_port
    assert command["EXECRL_VLLM_SERVER_HOST"] == "127.0.0.1"

    # What the server was started with, read by TRL's own `trl vllm-serve` parser: unknown flags fail it.
    assert server["argv"][0] == "vllm-serve"
    (parsed,) = make_parser().parse_args_and_config(args=server["argv"][1:])
    assert isinstance(parsed, ScriptArguments)
    assert (parsed.model, parsed.tensor_parallel_size, parsed.port, parsed.host) == ("some/model", 1, port, "127.0.0.1")
    assert (parsed.gpu_memory_utilization, parsed.max_model_len, parsed.dtype) == (0.85, 4096, "bfloat16")
    # ...and what TRL makes of them for `vllm serve`.
    vllm = build_command(parsed)
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "1" and vllm[vllm.index("--max-model-len") + 1] == "4096"

    assert not alive(server["pid"])  # stopped after the command


def test_a_server_that_dies_fails_the_job_naming_its_log(stand_in, tmp_path):
    job = stand_in("exit", "--gpus", "2", "--timeout", "60")
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1
    assert "exited with status 3" in err and str(tmp_path / "vllm.log") in err
    assert "CUDA out of memory" in (tmp_path / "vllm.log").read_text()
    assert not (tmp_path / "command.json").exists()  # training never started


def test_a_server_that_never_answers_fails_at_the_deadline(stand_in, tmp_path):
    # The stand-in never listens and sleeps 600 s: the job's ending (status 1) before this
    # guard's 300 s shows it gave up at its own deadline rather than waiting for the server;
    # its message names that deadline.
    job = stand_in("hang", "--gpus", "1", "--timeout", "2")
    _, err = job.communicate(timeout=300)
    assert job.returncode == 1
    assert "did not answer" in err and "within 2 s" in err and str(tmp_path / "vllm.log") in err
    assert not alive(json.loads((tmp_path / "server.json").read_text())["pid"])
    assert not (tmp_path / "command.json").exists()


def started_command(tmp_path) -> dict:
    """The stand-in training command's record, once the server is up and the command has started."""
    deadline = time.monotonic() + 60
    while not (tmp_path / "command.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.2)
    return json.loads((tmp_path / "command.json").read_text())


def test_sigterm_stops_the_command_and_the_server(stand_in, tmp_path):
    job = stand_in("serve", "--gpus", "1", command_args=("120",))
    command = started_command(tmp_path)
    job.send_signal(signal.SIGTERM)  # as Slurm does at the time limit or on scancel
    job.communicate(timeout=60)
    assert job.returncode == 128 + signal.SIGTERM
    assert not alive(command["pid"])
    assert not alive(json.loads((tmp_path / "server.json").read_text())["pid"])


def test_gpu_split_and_ports():
    assert split_gpus(["0", "1", "2", "3", "4", "5", "6", "7"], 1) == (["0", "1", "2", "3", "4", "5", "6"], ["7"])
    assert split_gpus(["3", "5"], 1) == (["3"], ["5"])
    with pytest.raises(ValueError, match="leaves none for training"):
        split_gpus(["0"], 1)
    assert split_gpus(["0", "1"], 0) == (["0", "1"], [])  # a server on CPU
    assert split_gpus([], 0) == ([], [])
    with pytest.raises(ValueError, match="0 \\(a server on CPU\\) or more"):
        split_gpus(["0", "1"], -1)
    first, second = free_ports(2)
    assert first != second


def test_every_flag_is_a_field_of_trls_script_arguments():
    class Args:
        model, gpus, host, gpu_memory_utilization, dtype, max_model_len = "m", 2, "127.0.0.1", 0.9, "auto", 2048

    command = serve_command("trl", Args, 8000)
    flags = {arg[2:] for arg in command if arg.startswith("--")}
    assert flags <= {field.name for field in ScriptArguments.__dataclass_fields__.values()}
    assert Path(command[0]).name == "trl" and command[1] == "vllm-serve"


def test_a_killed_server_command_takes_the_server_and_the_training_with_it(stand_in, tmp_path):
    """SIGKILL leaves no time to stop anything: the children die with their parent."""
    job = stand_in("serve", "--gpus", "1", command_args=("120",))
    command = started_command(tmp_path)
    server = json.loads((tmp_path / "server.json").read_text())
    job.kill()
    job.communicate(timeout=60)
    deadline = time.monotonic() + 60  # a guard against a hang, not a speed claim: they die at once
    while (alive(command["pid"]) or alive(server["pid"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(command["pid"]) and not alive(server["pid"])


def test_a_server_that_dies_during_training_stops_it_and_fails_the_job(stand_in, tmp_path):
    job = stand_in("crash", "--gpus", "1", command_args=("120",))
    _, err = job.communicate(timeout=60)
    assert job.returncode == 1
    assert "exited with status 4 during training" in err and str(tmp_path / "vllm.log") in err
    assert not alive(json.loads((tmp_path / "command.json").read_text())["pid"])


def test_the_server_logs_where_the_workflow_says(monkeypatch, tmp_path):
    from execrl.generation.vllm_server import VLLM_SERVER_LOG_ENV, parser

    monkeypatch.delenv(VLLM_SERVER_LOG_ENV, raising=False)
    assert parser().parse_args(["--model", "m", "--gpus", "1", "--", "true"]).log is None  # a temporary file
    monkeypatch.setenv(VLLM_SERVER_LOG_ENV, str(tmp_path / "train.log.vllm-server"))
    assert parser().parse_args(["--model", "m", "--gpus", "1", "--", "true"]).log == tmp_path / "train.log.vllm-server"


def test_the_server_waits_as_long_as_the_workflow_says(stand_in, tmp_path, monkeypatch):
    """Without --timeout the deadline is $EXECRL_VLLM_SERVER_TIMEOUT (the train rule's, from
    grpo.vllm_server_timeout_s), else 900 s."""
    from execrl.generation.vllm_server import VLLM_SERVER_TIMEOUT_ENV, parser

    monkeypatch.delenv(VLLM_SERVER_TIMEOUT_ENV, raising=False)
    assert parser().parse_args(["--model", "m", "--gpus", "1", "--", "true"]).timeout == 900
    monkeypatch.setenv(VLLM_SERVER_TIMEOUT_ENV, "3")
    job = stand_in("hang", "--gpus", "1")
    _, err = job.communicate(timeout=300)  # ends long before the stand-in's 600 s: at the 3 s deadline
    assert job.returncode == 1
    assert "within 3 s" in err


@pytest.mark.slow
def test_the_server_timeout_setting_reaches_the_train_job_and_moves_no_output(tmp_path):
    """grpo.vllm_server_timeout_s reaches the server of every scaling job, and changes nothing else of the
    job: not its command, outputs or params (a resource, so it reruns nothing, as wandb.mode)."""
    import yaml

    from conftest import copy_workflow
    from test_configs import CONFIGS, dry_run, planned_jobs

    workdir = copy_workflow(tmp_path / "workflow")
    (workdir / "slurm").symlink_to("profiles/slurm")
    (workdir / "config" / "timeout.yaml").write_text(yaml.safe_dump({"grpo": {"vllm_server_timeout_s": 2400}}))
    configs = CONFIGS["scaling-binary-bonus.yaml"]

    def train_jobs(*overlay):
        return {job["wildcards"]["model"]: job for job in planned_jobs(dry_run(workdir, [*configs, *overlay]))
                if job["rule"] == "train"}

    default, longer = train_jobs(), train_jobs("config/timeout.yaml")
    assert default.keys() == longer.keys() and len(default) > 1
    for model, job in default.items():
        assert "EXECRL_VLLM_SERVER_TIMEOUT=900 " in job["shell"] and "execrl.generation.vllm_server" in job["shell"]
        # The same command otherwise, its output paths (digests of the settings) included.
        assert longer[model]["shell"] == job["shell"].replace("EXECRL_VLLM_SERVER_TIMEOUT=900 ", "EXECRL_VLLM_SERVER_TIMEOUT=2400 ")


# The check that vLLM serves the trained weights after each sync (execrl.generation.weight_sync), against a
# real tiny model's log-probabilities.

@pytest.fixture(scope="module")
def probe_model(tmp_path_factory):
    """A tiny Qwen2 model (tied embeddings, as the workflow's) and its tokenizer, in float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from execrl.models.tiny_model import TinyModelConfig, init_model, train_tokenizer

    root = tmp_path_factory.mktemp("probe")
    train_tokenizer(["def add(a, b):\n    return a + b\n", "def f(x):\n    return x * 2\n"] * 10, 300, root / "tokenizer")
    init_model(root / "tokenizer", TinyModelConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                   num_key_value_heads=1, intermediate_size=128), seed=0,
               out_dir=root / "model")
    return AutoModelForCausalLM.from_pretrained(root / "model", dtype=torch.float32), AutoTokenizer.from_pretrained(root / "model")


def probe_ids(tokenizer):
    from execrl.generation.weight_sync import PROBE_TEXT

    return tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]


def moved(model, scale=1e-3, seed=1):
    """A copy of `model` with every weight moved by `scale` of its own size (about an optimizer step)."""
    import copy

    other = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in other.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * scale * param.abs().mean())
    return other


def test_the_probe_tolerance_holds_rounding_noise_and_not_a_step(probe_model):
    """The same weights computed in a coarser dtype stay within that dtype's tolerance of the exact
    (float64) log-probabilities; weights moved by a small step lie outside the float32 tolerance."""
    import copy

    from execrl.generation.weight_sync import logprob_mismatch, logprob_tolerance, policy_logprobs

    model, tokenizer = probe_model
    ids = probe_ids(tokenizer)
    assert len(ids) >= 8
    exact, scale = policy_logprobs(copy.deepcopy(model).double(), ids, "cpu")
    layers = model.config.num_hidden_layers
    for dtype in (torch.float32, torch.bfloat16):
        rounded, _ = policy_logprobs(copy.deepcopy(model).to(dtype), ids, "cpu")
        assert rounded != exact  # rounding shows...
        assert logprob_mismatch(exact, rounded, logprob_tolerance(dtype, layers, scale)) is None  # ...within tolerance
    assert logprob_tolerance(torch.bfloat16, layers, scale) > 1000 * logprob_tolerance(torch.float32, layers, scale)
    stepped, _ = policy_logprobs(moved(model).double(), ids, "cpu")
    assert logprob_mismatch(exact, stepped, logprob_tolerance(torch.float32, layers, scale)) is not None


def test_the_probe_comparison():
    from execrl.generation.weight_sync import coarsest_dtype, logprob_mismatch

    assert coarsest_dtype(torch.float32, "torch.bfloat16") == torch.bfloat16
    assert coarsest_dtype(torch.float16, "float32", None) == torch.float16

    assert logprob_mismatch([-1.0, -2.0], [-1.0 + 1e-7, -2.0], 1e-5) is None
    assert logprob_mismatch([-1.0, -2.0, -3.0], [-1.5, -2.0, -3.25], 1e-5) == 0.5
    assert logprob_mismatch([-1.0], [float("-inf")], 1e-5) == float("inf")  # a token the server rules out
    with pytest.raises(ValueError, match="2 trainer log-probabilities against 1 served"):
        logprob_mismatch([-1.0, -2.0], [-1.0], 1e-5)


def served_by(model):
    """A VLLMGeneration (execrl's, as the GRPO trainer builds it) in server mode on this process's
    accelerator, whose served log-probabilities are those of `model` (the server's weights)."""
    from accelerate import Accelerator

    from execrl.generation.weight_sync import policy_logprobs, vllm_generation_class

    class Served(vllm_generation_class()):
        def _serving_dtype(self):
            return "torch.float32"  # as vLLM's /server_info names it

        def _served_logprobs(self, token_ids):
            return policy_logprobs(model, token_ids, "cpu")[0]

    generation = Served.__new__(Served)  # TRL's __init__ would connect to a server
    generation.mode, generation.enable_sleep_mode, generation.accelerator = "server", False, Accelerator(cpu=True)
    return generation


def test_a_stale_server_stops_the_run_naming_the_step(probe_model):
    from execrl.generation.weight_sync import ServedWeightsMismatch

    model, tokenizer = probe_model
    trained = moved(model, scale=1e-2)
    generation = served_by(model)
    generation.model, generation.processing_class, generation.current_step = trained, tokenizer, lambda: 7
    with pytest.raises(ServedWeightsMismatch, match=r"after the weight sync at step 7, .* differ from the trainer's by up "
                                                    r"to [0-9.e-]+ \(tolerance [0-9.e-]+ for float32\).*Likely cause"):
        generation.check_served_weights()
    generation.model = model.train()  # in sync: no error
    generation.check_served_weights()
    assert model.training  # the probe computes in eval mode and leaves the model training


def test_the_cpu_server_reloads_through_execrl_worker_extension():
    """The CPU server's command names the worker extension whose method the sync calls, by a name that
    resolves to it in a fresh process (the server runs execrl.generation.vllm_cpu as __main__)."""
    from execrl.generation.vllm_server import cpu_build_serve_command

    class Args:
        model, gpus, host, gpu_memory_utilization, dtype, max_model_len = "m", 0, "127.0.0.1", 0.05, "auto", 256

    command = cpu_build_serve_command(serve_command("trl", Args, 8000))
    assert command[1:4] == ["-m", "execrl.generation.vllm_cpu", "serve"]
    extension = command[command.index("--worker-extension-cls") + 1]
    module, name = extension.rsplit(".", 1)
    resolved = subprocess.run([sys.executable, "-c", f"import {module}; print(callable({module}.{name}.execrl_reload_weights))"],
                              capture_output=True, text=True, check=True)
    assert resolved.stdout.strip() == "True"
