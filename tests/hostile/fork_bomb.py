# expect: error timeout
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
