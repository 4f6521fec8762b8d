# expect: error
with open("big.bin", "wb") as fh:
    while True:
        fh.write(b"\0" * (1 << 20))
