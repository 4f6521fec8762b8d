# expect: fail error
# A setsid'd child ptraces its parent, so that the parent's zombie can only be reaped by
# the tracer, and sleeps: the pool must not hang and the tracer must not outlive the run.
import ctypes
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
parent = os.getpid()
if os.fork() == 0:
    os.setsid()
    libc.ptrace(0x4206, parent, 0, 0)  # PTRACE_SEIZE
    time.sleep(1000)
    os._exit(0)


def add(a, b):
    return 0
