# expect: error
import socket


def add(a, b):
    s = socket.create_connection(("127.0.0.1", __PORT__), timeout=2)
    s.sendall(b"leak")
    return a + b
