"""Many WebSocket clients over several wspipe --broadcast --bus processes (BusTests).

    bus_clients.py COUNT EXPECTED SECONDS URL [URL...]

Opens COUNT connections spread round robin over the URLs, prints "ready" once all are open,
then reads until each has EXPECTED messages (or SECONDS pass). Then one line per client:

    CLIENT URL-INDEX COUNT ORDER SET CLOSE

ORDER is a SHA-256 of the client's messages in order (type and bytes of each), SET one of
the sorted per-message digests (the same messages whatever their order); CLOSE the close
code once the server closed, or "open". With a file named in BUS_EXPECT (lines "t HEX" or
"b HEX"), first "expected SET" for those messages. With a file named in BUS_DUMP, each message of
client 0 is written there as a line: "t HEX" or "b HEX".
"""
import asyncio
import hashlib
import os
import sys

import websockets


def digest(message):
    kind = b"t" if isinstance(message, str) else b"b"
    data = message.encode() if isinstance(message, str) else message
    return kind + len(data).to_bytes(8, "big") + data


async def client(index, url, expected, deadline, ready, results):
    async with websockets.connect(url, max_size=None, compression=None, open_timeout=60,
                                  ping_interval=None, max_queue=None) as ws:
        ready.append(index)
        order = hashlib.sha256()
        digests = []
        kept = [] if index == 0 else None
        close = "open"
        while len(digests) < expected:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            try:
                message = await asyncio.wait_for(ws.recv(), left)
            except asyncio.TimeoutError:
                break
            except websockets.ConnectionClosed as closed:
                close = str(closed.rcvd.code if closed.rcvd else "none")
                break
            piece = digest(message)
            order.update(hashlib.sha256(piece).digest())
            digests.append(hashlib.sha256(piece).digest())
            if kept is not None:
                kept.append(message)
        results[index] = (len(digests), order.hexdigest()[:16], hashlib.sha256(b"".join(sorted(digests))).hexdigest()[:16],
                          close, kept)


async def main():
    count, expected, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    urls = sys.argv[4:]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    ready, results = [], {}
    tasks = [asyncio.create_task(client(i, urls[i % len(urls)], expected, deadline, ready, results)) for i in range(count)]
    while len(ready) < count and loop.time() < deadline and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    print("ready" if len(ready) == count else f"only {len(ready)} connected", flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
    if os.environ.get("BUS_EXPECT"):
        with open(os.environ["BUS_EXPECT"]) as f:
            pairs = [line.split(" ") for line in f.read().splitlines()]
        expected_digests = sorted(hashlib.sha256(digest(bytes.fromhex(h).decode() if k == "t" else bytes.fromhex(h))).digest()
                                  for k, h in pairs)
        print("expected", hashlib.sha256(b"".join(expected_digests)).hexdigest()[:16], flush=True)
    for i in range(count):
        n, order, digests, close, kept = results.get(i, (0, "-", "-", "failed", None))
        print(i, i % len(urls), n, order, digests, close, flush=True)
        if kept is not None and os.environ.get("BUS_DUMP"):
            with open(os.environ["BUS_DUMP"], "w") as f:
                for m in kept:
                    f.write(("t " + m.encode().hex()) if isinstance(m, str) else ("b " + m.hex()))
                    f.write("\n")


asyncio.run(main())
