#!/usr/bin/env bash
# A single-node Slurm on this machine, for the cluster integration test (tests/test_slurm.py).
#
#   tests/cluster/slurm.sh start    # write /etc/slurm/slurm.conf, start munged, slurmctld, slurmd
#   tests/cluster/slurm.sh status   # partitions, node, GPUs
#   tests/cluster/slurm.sh stop     # cancel jobs, stop what `start` started, remove its config
#
# Needs root and Debian's slurm packages (`apt-get install slurmctld slurmd slurm-client munge`);
# no systemd. The node is `localhost` (127.0.0.1) with two partitions, `cpu-local` (default)
# and `gpu-local`, and two fake GPUs declared as GRES on character devices, so `--gpus`
# jobs are scheduled and get CUDA_VISIBLE_DEVICES while CUDA itself stays unavailable. The GPUs
# have a type named as a cluster might name it, `a100_sxm4_80gb` (EXECRL_SLURM_GPU_TYPE), so
# `--gpus=a100_sxm4_80gb:N` is scheduled as well as `--gpus=N`.
#
# The node declares EXECRL_SLURM_CPUS CPUs (default 16) and EXECRL_SLURM_MEMORY_MB MB
# (default 65536) whatever the machine has (`SlurmdParameters=config_overrides`), so jobs sized
# for a real GPU node (8 CPUs and 32 GB per GPU) are accepted unchanged; nothing enforces those
# limits on a test node. Accounting is off: `sacct` does not work, `squeue` does, and finished
# jobs stay in `scontrol show job` for an hour (MinJobAge) so a test can read what each asked for.
#
# The config goes to /etc/slurm/slurm.conf because the Slurm executor plugin runs its inner
# `srun` without SLURM_* variables, so SLURM_CONF would not reach it. An existing slurm.conf
# that this script did not write is never touched.
set -euo pipefail

STATE=${EXECRL_SLURM_STATE:-/var/lib/execrl-slurm}
CPUS=${EXECRL_SLURM_CPUS:-16}
MEMORY_MB=${EXECRL_SLURM_MEMORY_MB:-65536}
GPU_TYPE=${EXECRL_SLURM_GPU_TYPE:-a100_sxm4_80gb}
CONF_DIR=/etc/slurm
MARKER="# written by execrl tests/cluster/slurm.sh"

die() { echo "slurm.sh: $*" >&2; exit 1; }

ours() {  # is the config in /etc/slurm the one this script wrote?
    [ -f "$CONF_DIR/slurm.conf" ] && head -n 1 "$CONF_DIR/slurm.conf" | grep -qF "$MARKER"
}

alive() {  # pid file → is that process running?
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

stop_pid() {  # stop the process named by a pid file, waiting up to 10 s
    local pidfile=$1 pid
    alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

write_config() {
    mkdir -p "$CONF_DIR" "$STATE"/{ctld,spool,log,dev}
    # One character device per GPU: slurmd refuses GRES files that resolve to the same device.
    for i in 0 1; do
        [ -c "$STATE/dev/gpu$i" ] || mknod "$STATE/dev/gpu$i" c 1 3
    done
    cat >"$CONF_DIR/slurm.conf" <<EOF
$MARKER
ClusterName=execrl-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerParameters=sched_interval=2,bf_interval=2
MinJobAge=3600
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEMORY_MB Gres=gpu:$GPU_TYPE:2 State=UNKNOWN
PartitionName=cpu-local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu-local Nodes=localhost Default=NO MaxTime=INFINITE State=UP
EOF
    cat >"$CONF_DIR/gres.conf" <<EOF
$MARKER
NodeName=localhost Name=gpu Type=$GPU_TYPE File=$STATE/dev/gpu[0-1]
EOF
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0  # a munged is already serving
    fi
    [ -s /etc/munge/munge.key ] || { mungekey --create --force >/dev/null 2>&1 || \
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged
    pgrep -u munge -n -x munged >"$STATE/munged.pid"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    die "munged did not start"
}

start() {
    [ "$(id -u)" = 0 ] || die "needs root"
    for bin in slurmctld slurmd sbatch munged; do
        command -v "$bin" >/dev/null || [ -x "/usr/sbin/$bin" ] || die "$bin not installed"
    done
    if [ -f "$CONF_DIR/slurm.conf" ] && ! ours; then
        die "$CONF_DIR/slurm.conf exists and was not written by this script; not touching it"
    fi
    mkdir -p "$STATE"
    if alive "$STATE/slurmctld.pid" && alive "$STATE/slurmd.pid" && wait_idle 5; then
        echo "slurm.sh: already running"
        return 0
    fi
    stop_daemons
    write_config
    start_munge
    /usr/sbin/slurmctld -c
    /usr/sbin/slurmd -N localhost
    wait_idle 60 || { tail -n 20 "$STATE"/log/*.log >&2; die "node did not become idle"; }
    echo "slurm.sh: running (config $CONF_DIR/slurm.conf, state and logs $STATE)"
}

wait_idle() {  # wait up to $1 seconds for the node to accept jobs
    local deadline=$((SECONDS + $1)) state
    while [ $SECONDS -lt $deadline ]; do
        state=$(sinfo -h -N -n localhost -o %T 2>/dev/null | head -n 1 || true)
        case $state in idle|mixed|allocated) return 0 ;; esac
        sleep 0.5
    done
    return 1
}

stop_daemons() {
    if alive "$STATE/slurmctld.pid"; then
        # Jobs would otherwise outlive their controller.
        squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
        sleep 1
    fi
    stop_pid "$STATE/slurmd.pid"
    stop_pid "$STATE/slurmctld.pid"
}

stop() {
    [ "$(id -u)" = 0 ] || die "needs root"
    stop_daemons
    stop_pid "$STATE/munged.pid"  # only a munged this script started
    if ours; then
        rm -f "$CONF_DIR/slurm.conf" "$CONF_DIR/gres.conf"
    fi
    echo "slurm.sh: stopped"
}

status() {
    ours || die "not running (no config written by this script)"
    sinfo -o "%P %a %D %T %c %m %G"
    scontrol show node localhost | grep -E "NodeName|CfgTRES|AllocTRES|State"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
