# expect: fail error
# Processes that try to leave the run's process tree: a sibling through CLONE_PARENT, a new
# PID namespace, a grandchild that ptraces the candidate after it exits, a double fork.
import ctypes
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
SIGCHLD, CLONE_PARENT, CLONE_NEWPID = 17, 0x8000, 0x20000000


def linger():
    try:
        time.sleep(1000)
    finally:
        os._exit(0)


pid = libc.syscall(56, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)  # raw clone (x86_64)
if pid == 0:
    linger()
if libc.unshare(CLONE_NEWPID) == 0 and os.fork() == 0:
    linger()
me = os.getpid()
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        libc.ptrace(16, me, 0, 0)  # PTRACE_ATTACH
        linger()
    os._exit(0)


def add(a, b):
    return 0
