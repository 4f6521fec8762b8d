# expect: timeout
# Ignore every catchable signal, disarm the CPU timer, try to raise the CPU rlimit, then spin.
import resource
import signal

for sig in range(1, signal.NSIG):
    try:
        signal.signal(sig, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
signal.setitimer(signal.ITIMER_PROF, 0)
try:
    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
while True:
    pass
