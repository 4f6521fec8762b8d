# expect: error
# Lone surrogates in exception messages, and invalid UTF-8 on stdout and stderr, used to
# make the annotations unwritable (and end the whole run).
import sys

sys.stdout.buffer.write(b"\xed\xa0\x80 out\n")
sys.stderr.buffer.write(b"\xed\xb3\xbf err\n")


class Odd(ValueError):
    def __str__(self):
        return "bad \udfff"


def add(a, b):
    if a == 1:
        raise ValueError("\ud800")
    raise Odd()
