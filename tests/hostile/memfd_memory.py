# expect: fail error
# Memory outside RLIMIT_AS: memfds (and tmpfs files) grown far beyond the memory limit.
import mmap
import os

try:
    fd = os.memfd_create("hoard")
    os.ftruncate(fd, 4 << 30)
    m = mmap.mmap(fd, 4 << 30)
    for off in range(0, 4 << 30, 4096):
        m[off] = 1
except OSError:
    pass


def add(a, b):
    return 0
