# expect: fail
# SysV shared memory, message queues and semaphores, POSIX message queues and the kernel
# keyring: channels to later candidates that outlive the run. Every call must be refused.
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
made = []
shm = libc.shmget(0x5E1, 1 << 20, IPC_CREAT | 0o666)
made.append(shm >= 0)
if shm >= 0:
    addr = libc.shmat(shm, None, 0)
made.append(libc.msgget(0x5E1, IPC_CREAT | 0o666) >= 0)
made.append(libc.semget(0x5E1, 1, IPC_CREAT | 0o666) >= 0)
try:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    made.append(rt.mq_open(b"/execrl-leak", os.O_CREAT | os.O_RDWR, 0o666, None) >= 0)
except OSError:
    pass
made.append(libc.syscall(248, b"user", b"execrl-leak", b"secret", 6, -4) >= 0)  # add_key, user keyring
made.append(libc.syscall(248, b"user", b"execrl-leak", b"secret", 6, -3) >= 0)  # session keyring
MADE = any(made)


def add(a, b):
    return -1 if MADE else 0
