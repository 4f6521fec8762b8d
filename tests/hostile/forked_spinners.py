# expect: timeout
# Eight processes spinning: each stays under its own CPU limit, together they must not.
import os

for _ in range(3):
    os.fork()
while True:
    pass


def add(a, b):
    return a + b
