# expect: fail
import subprocess

subprocess.Popen(["/bin/sh", "-c", "sleep 10000 & sleep 10000"], start_new_session=True)


def add(a, b):
    return 0
