# expect: fail error
import os
import signal


def add(a, b):
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
        try:
            os.kill(os.getppid(), sig)
        except OSError:
            pass
    return 0
