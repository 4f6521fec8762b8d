# expect: fail
# Double fork, new session, ignore SIGHUP: a process that tries to outlive the candidate.
import os
import signal
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(10_000)
    os._exit(0)


def add(a, b):
    return 0
