# expect: error
import socket


def add(a, b):
    socket.getaddrinfo("pypi.org", 443)
    return a + b
