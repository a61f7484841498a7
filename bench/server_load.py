"""Load generator for scripts/bench-server: one asyncio process doing WebSocket handshakes
and frames by hand (no library), cheaper than the servers it loads.

    server_load.py idle PORT N        opens N connections (sources spread over 127.0.0.x), prints
                                      "open N", then waits for a line on stdin and closes them
    server_load.py deflate PORT N [BYTES]  as idle, each offering permessage-deflate (refused: exit 1)
                                      and sending one compressed message of BYTES (32 KiB) and reading
                                      its echo first, so both of the server's zlib states exist, their
                                      windows filled
    server_load.py echo PORT C K SECS C connections, K messages of 32 bytes in flight each, for SECS;
                                      prints "messages M seconds S p99_ms P"

With BENCH_TLS=1 in the environment every connection is TLS (certificate not verified).
"""
import asyncio, base64, os, ssl, struct, sys, time, zlib

TLS = None
if os.environ.get("BENCH_TLS"):
    TLS = ssl.create_default_context()
    TLS.check_hostname = False
    TLS.verify_mode = ssl.CERT_NONE


async def connect(port, i, extensions=""):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(f"127.0.0.{1 + i % 200}", 0), ssl=TLS)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extensions}\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(head[:60])
    if extensions and b"permessage-deflate" not in head.lower():
        raise RuntimeError("the server declined permessage-deflate")
    return reader, writer


async def idle(port, count):
    pairs = []
    for start in range(0, count, 250):
        pairs += await asyncio.gather(*(connect(port, i) for i in range(start, min(count, start + 250))))
    print(f"open {len(pairs)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, writer in pairs:
        writer.close()


OFFER = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"


async def deflate_connect(port, i, size):
    reader, writer = await connect(port, i, OFFER)
    # One compressed text message (RSV1, masked with a zero key) of `size` bytes of JSON-like
    # text, varied enough to fill the windows both ways (their pages then count in RSS).
    text = b""
    n = 0
    while len(text) < size:
        text += f'{{"id":{i * 100000 + n},"price":{1000 + (n * 7919) % 997}.25,"sym":"BTC-USD"}}'.encode()
        n += 1
    text = text[:size]
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = (compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
    if len(data) >= 65536:
        header = bytes([0xC1, 0x80 | 127]) + struct.pack("!Q", len(data))
    elif len(data) >= 126:
        header = bytes([0xC1, 0x80 | 126]) + struct.pack("!H", len(data))
    else:
        header = bytes([0xC1, 0x80 | len(data)])
    writer.write(header + b"\0\0\0\0" + data)
    while True:  # the echo, possibly fragmented
        first = await reader.readexactly(2)
        length = first[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", await reader.readexactly(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", await reader.readexactly(8))[0]
        await reader.readexactly(length)
        if first[0] & 0x80:
            return reader, writer


async def deflate_idle(port, count, size):
    pairs = []
    for start in range(0, count, 250):
        pairs += await asyncio.gather(*(deflate_connect(port, i, size) for i in range(start, min(count, start + 250))))
    print(f"open {len(pairs)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, writer in pairs:
        writer.close()
    await asyncio.sleep(0.5)
    print("closed", flush=True)


# A masked text frame of 32 bytes with a zero key (masking with zeros leaves the payload as is).
PAYLOAD = b"x" * 32
FRAME = bytes([0x81, 0x80 | len(PAYLOAD)]) + b"\0\0\0\0" + PAYLOAD


async def echo(port, connections, inflight, seconds):
    pairs = await asyncio.gather(*(connect(port, i) for i in range(connections)))
    latencies = []
    done = 0
    stop = time.monotonic() + seconds

    async def run(reader, writer):
        nonlocal done
        sent = []
        for _ in range(inflight):
            sent.append(time.monotonic())
            writer.write(FRAME)
        while time.monotonic() < stop:
            header = await reader.readexactly(2)
            await reader.readexactly(header[1] & 0x7F)
            latencies.append(time.monotonic() - sent.pop(0))
            done += 1
            sent.append(time.monotonic())
            writer.write(FRAME)
        writer.close()

    start = time.monotonic()
    await asyncio.gather(*(run(r, w) for r, w in pairs))
    elapsed = time.monotonic() - start
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)] * 1000 if latencies else 0
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else 0
    print(f"messages {done} seconds {elapsed:.2f} p99_ms {p99:.2f} p50_ms {p50:.2f}", flush=True)


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "idle":
        asyncio.run(idle(port, int(sys.argv[3])))
    elif mode == "deflate":
        asyncio.run(deflate_idle(port, int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 32768))
    else:
        asyncio.run(echo(port, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])))
