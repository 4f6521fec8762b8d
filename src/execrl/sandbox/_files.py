"""Whole reads and writes on the worker's descriptors (the runs' capture memfds, the pipe from
the forker), and removing a run's temporary directory however deep it goes.
"""

from __future__ import annotations

import builtins
import os

__builtins__ = dict(builtins.__dict__)  # a private snapshot, as in ``_exchange``


def _pwrite_all(fd: int, data: bytes) -> None:
    off = 0
    while off < len(data):
        off += os.pwrite(fd, data[off:off + (1 << 20)], off)


def _read_exact(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _read_memfd(fd: int, cap: int, truncate: bool = False) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of the file, and whether it held more; optionally empty it then
    (a later run must never see an earlier run's output)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b"", False
    n = min(size, cap)
    parts, off = [], 0
    while off < n:
        chunk = os.pread(fd, min(n - off, 1 << 20), off)
        if not chunk:
            break
        parts.append(chunk)
        off += len(chunk)
    if truncate:
        os.ftruncate(fd, 0)
    return b"".join(parts), size > cap


def _rmtree(path: str, max_depth: int = 64) -> None:
    """Remove a run's temp dir (no private root) however deep it goes: iterative, relative
    to directory fds (no PATH_MAX), and subtrees deeper than ``max_depth`` are first moved up
    to the top directory (so open fds stay bounded)."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    frames = [(top, os.listdir(top), None)]  # (dir fd, names left, its name in the parent)
    cuts = 0
    while frames:
        dfd, names, own_name = frames[-1]
        if not names:
            os.close(dfd)
            frames.pop()
            if frames:
                try:
                    os.rmdir(own_name, dir_fd=frames[-1][0])
                except OSError:
                    pass
            continue
        name = names.pop()
        try:
            os.unlink(name, dir_fd=dfd)
            continue
        except OSError:
            pass
        try:
            os.rmdir(name, dir_fd=dfd)
            continue
        except OSError:
            pass
        if len(frames) >= max_depth:
            cuts += 1
            try:
                os.rename(name, f".execrl-cut-{cuts}", src_dir_fd=dfd, dst_dir_fd=top)
                frames[0][1].append(f".execrl-cut-{cuts}")
            except OSError:
                pass
            continue
        try:
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            os.chmod(sub, 0o700)
            frames.append((sub, os.listdir(sub), name))
        except OSError:
            continue
    try:
        os.rmdir(path)
    except OSError:
        pass
