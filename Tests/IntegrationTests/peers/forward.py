"""Targets and clients for the gateway tests (wspipe -l --forward / --forward-tokens).

Targets (plain TCP, or a Unix socket with --unix PATH), each printing "PORT n" when ready:
    forward.py --port 0 echo              every byte back
    forward.py --port 0 sink              reads to EOF, then prints "SINK <bytes> <sha256>" and closes
    forward.py --port 0 reset             sends "hello", then resets the connection (RST) 0.3 s later
    forward.py --port 0 halfclose         sends "bye" and shuts down its sending side; reads to EOF,
                                          prints "HALF <bytes>"
    forward.py --port 0 stall             accepts and never reads (a small receive buffer)
    forward.py --port 0 burst N           sends N bytes (a pattern), then closes at once
Clients (Python websockets), no port of their own:
    forward.py --port 0 echoclient URL SIZE [SUBPROTOCOL]   SIZE random bytes in 64 KiB messages, the
                                          same back; prints "subprotocol X", "ECHO same|DIFFERENT n", "closed CODE"
    forward.py --port 0 send URL SIZE     SIZE bytes (a pattern), then Close; prints "closed CODE"
    forward.py --port 0 recv URL          prints "RECV <bytes> <sha256> CODE" at the server's Close
    forward.py --port 0 status URL [ORIGIN]   the handshake's answer: "status N"
    forward.py --port 0 many URL N        N connections at once, each echoes 10 bytes, then all close;
                                          prints "MANY <ok> <failed>"
    forward.py --port 0 flood URL SECS    sends 1 MiB messages for SECS without waiting; prints "SENT n"
    forward.py --port 0 hold URL          connects, prints "held", then waits for the server's Close:
                                          prints "closed CODE after S"
"""
import asyncio
import hashlib
import os
import socket
import struct
import sys

args = sys.argv[1:]
port = 0
unix = None
if args[:1] == ["--port"]:
    port = int(args[1])
    args = args[2:]
if args[:1] == ["--unix"]:
    unix = args[1]
    args = args[2:]
mode, rest = args[0], args[1:]


def pattern(n):
    block = bytes((i * 7 + (i >> 11)) & 0xFF for i in range(65536))
    return (block * (n // 65536 + 1))[:n]


async def serve(handler):
    if unix:
        server = await asyncio.start_unix_server(handler, unix)
        print("PORT 0", flush=True)
    else:
        server = await asyncio.start_server(handler, "127.0.0.1", port)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


async def echo(reader, writer):
    while True:
        data = await reader.read(65536)
        if not data:
            break
        writer.write(data)
        await writer.drain()
    writer.close()


async def sink(reader, writer):
    digest, count = hashlib.sha256(), 0
    while True:
        data = await reader.read(65536)
        if not data:
            break
        digest.update(data)
        count += len(data)
    print(f"SINK {count} {digest.hexdigest()}", flush=True)
    writer.close()


async def reset(reader, writer):
    writer.write(b"hello")
    await writer.drain()
    await asyncio.sleep(0.3)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def halfclose(reader, writer):
    writer.write(b"bye")
    await writer.drain()
    writer.write_eof()
    count = 0
    while True:
        data = await reader.read(65536)
        if not data:
            break
        count += len(data)
    print(f"HALF {count}", flush=True)
    writer.close()


async def stall(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await asyncio.sleep(3600)


def burst(n):
    async def handler(reader, writer):
        writer.write(pattern(n))
        await writer.drain()
        writer.close()
    return handler


async def echoclient(url, size, subprotocol=None):
    from websockets.asyncio.client import connect
    data = os.urandom(size)
    protocols = [subprotocol] if subprotocol else None
    context = None
    if url.startswith("wss:"):
        import ssl
        context = ssl.create_default_context(cafile=os.environ["FORWARD_CA"])
    async with connect(url, compression=None, subprotocols=protocols, max_size=None, ssl=context) as ws:
        print(f"subprotocol {ws.subprotocol}", flush=True)

        async def sender():
            for i in range(0, size, 65536):
                await ws.send(data[i:i + 65536])
        task = asyncio.create_task(sender())
        got = bytearray()
        while len(got) < size:
            got += await asyncio.wait_for(ws.recv(), 20)
        await task
        print(f"ECHO {'same' if got == data else 'DIFFERENT'} {len(got)}", flush=True)
    print(f"closed {ws.close_code}", flush=True)


async def send(url, size):
    from websockets.asyncio.client import connect
    data = pattern(size)
    async with connect(url, compression=None) as ws:
        for i in range(0, size, 65536):
            await ws.send(data[i:i + 65536])
    print(f"closed {ws.close_code} {hashlib.sha256(data).hexdigest()}", flush=True)


async def recv(url, expected=None):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed
    digest, count = hashlib.sha256(), 0
    async with connect(url, compression=None, max_size=None) as ws:
        try:
            while True:
                data = await asyncio.wait_for(ws.recv(), 20)
                data = data.encode() if isinstance(data, str) else data
                digest.update(data)
                count += len(data)
        except ConnectionClosed:
            pass
    print(f"RECV {count} {digest.hexdigest()} {ws.close_code}", flush=True)
    if expected is not None:
        same = hashlib.sha256(pattern(int(expected))).hexdigest() == digest.hexdigest()
        print(f"PATTERN {'same' if same else 'DIFFERENT'}", flush=True)


async def status(url, origin="-", subprotocol=None):
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus
    try:
        async with connect(url, compression=None, origin=None if origin == "-" else origin,
                           subprotocols=[subprotocol] if subprotocol else None) as ws:
            print(f"status 101 {ws.subprotocol}", flush=True)
    except InvalidStatus as error:
        print(f"status {error.response.status_code}", flush=True)


async def many(url, n):
    from websockets.asyncio.client import connect
    ok = failed = 0
    sockets = []

    async def one(i):
        ws = await connect(url, compression=None, open_timeout=30)
        await ws.send(b"0123456789")
        assert await asyncio.wait_for(ws.recv(), 30) == b"0123456789"
        return ws
    results = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            failed += 1
        else:
            ok += 1
            sockets.append(result)
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    print(f"MANY {ok} {failed}", flush=True)


async def flood(url, seconds):
    from websockets.asyncio.client import connect
    sent = 0
    chunk = bytes(1 << 20)
    async with connect(url, compression=None, write_limit=1 << 20) as ws:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            try:
                await asyncio.wait_for(ws.send(chunk), max(0.01, end - loop.time()))
            except asyncio.TimeoutError:
                break
            sent += len(chunk)
        print(f"SENT {sent}", flush=True)
        ws.transport.abort()


async def hold(url):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed
    loop = asyncio.get_running_loop()
    async with connect(url, compression=None, ping_interval=None) as ws:
        print("held", flush=True)
        start = loop.time()
        try:
            await asyncio.wait_for(ws.recv(), 60)
        except ConnectionClosed:
            pass
    print(f"closed {ws.close_code} after {loop.time() - start:.1f}", flush=True)


targets = {"echo": echo, "sink": sink, "reset": reset, "halfclose": halfclose, "stall": stall}
if mode in targets:
    asyncio.run(serve(targets[mode]))
elif mode == "burst":
    asyncio.run(serve(burst(int(rest[0]))))
elif mode == "echoclient":
    asyncio.run(echoclient(rest[0], int(rest[1]), *rest[2:]))
elif mode == "send":
    asyncio.run(send(rest[0], int(rest[1])))
elif mode == "recv":
    asyncio.run(recv(*rest))
elif mode == "status":
    asyncio.run(status(*rest))
elif mode == "many":
    asyncio.run(many(rest[0], int(rest[1])))
elif mode == "hold":
    asyncio.run(hold(rest[0]))
elif mode == "flood":
    asyncio.run(flood(rest[0], float(rest[1])))
else:
    sys.exit(f"unknown mode {mode}")
