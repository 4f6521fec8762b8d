# expect: fail
# problem: echo
# Every test of a stdio problem sleeps just under the per-run wall-clock limit: the
# candidate must not hold the worker for all of them (6 x 1.8 s here): the test checks that
# the per-candidate backstop left the last ones not run.
import time

time.sleep(1.8)
print("no")
