# expect: error
# problem: echo
# Print the right answer, write the harness's end-of-run record (token dug out of its frames)
# on every descriptor, close them all so that the harness's own record fails, then fail as
# `python solution.py` would (exit status 1): not a run that reached its end.
import os
import sys

print(input())
token = None
frame = sys._getframe()
while frame is not None:
    token = frame.f_locals.get("token", token)
    frame = frame.f_back
for name in os.listdir("/proc/self/fd"):
    if int(name) > 2:
        try:
            os.write(int(name), f'["d", 0, "{token}"]\n'.encode())
        except OSError:
            pass
for name in os.listdir("/proc/self/fd"):
    if int(name) > 2:
        try:
            os.close(int(name))
        except OSError:
            pass
raise ValueError("not finished")
