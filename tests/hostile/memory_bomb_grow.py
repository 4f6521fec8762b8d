# expect: error timeout
chunks = []
while True:
    chunks.append(b" " * (8 << 20))
