"""Clients that drive `wspipe -l` in the server tests (Python `websockets` and raw sockets).

    server_client.py echo URL                 messages of both types through a websockets client;
                                              prints "text:..." / "binary:HEX" per answer, then "closed CODE"
    server_client.py request PORT FILE        sends FILE's bytes as the request; prints the answer's head and
                                              body (up to the close), "status N" first
    server_client.py hold URL N               opens N connections (raw handshakes on one loop); prints
                                              "open N", then, once all are closed, "closes CODE=COUNT ..."
    server_client.py slowloris PORT SECS      sends half a request head and waits; prints "closed after S"
                                              when the server drops it (or "still open" after SECS)
    server_client.py pingflood PORT N SECS    raw: sends N pings (8-byte index, 125 bytes) without reading,
                                              waits SECS, sends text "after" and reads until its echo; prints
                                              "pongs P after-gap G echo yes|no" (G: pongs after the first ping
                                              left unanswered)
    server_client.py halfclose PORT LINE...   raw: handshake, the LINEs as text messages and a Close 1000 in one
                                              write, then shutdown(SHUT_WR) (TCP's half-close: it still reads);
                                              prints "text:..." per text message, then "close CODE REASON" or
                                              "no close", until the server closes TCP
"""
import asyncio
import base64
import collections
import os
import socket
import struct
import sys
import time


async def echo(url):
    from websockets.asyncio.client import connect
    async with connect(url, compression=None, ping_interval=None) as ws:
        for message in ["hello", b"\x00\x01\xff", "", "é" * 1000, os.urandom(300_000)]:
            await ws.send(message)
            answer = await ws.recv()
            if isinstance(answer, str):
                shown = answer if len(answer) < 50 else f"{len(answer)} chars"
                print(f"text:{shown}", flush=True)
            else:
                ok = "same" if answer == message else "DIFFERENT"
                print(f"binary:{len(answer)}:{ok}", flush=True)
    print(f"closed {ws.close_code}", flush=True)


def request(port, path):
    with open(path, "rb") as f:
        data = f.read()
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(data)
    answer = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        answer += chunk
        if b"\r\n\r\n" in answer and answer.startswith(b"HTTP/1.1 101"):
            break
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    print("status", lines[0].split(" ")[1] if lines and " " in lines[0] else "none")
    for line in lines[1:]:
        print(line)
    print("body", body.decode("utf-8", "replace").rstrip("\n"))


def handshake(host, port, path):
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


async def hold(url, count):
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, port = hostport.rsplit(":", 1)
    closes = collections.Counter()

    async def one(i):
        # Source addresses spread over 127.0.0.x, so TIME_WAIT does not use up ports.
        reader, writer = await asyncio.open_connection(host, int(port), local_addr=(f"127.0.0.{1 + i % 200}", 0))
        writer.write(handshake(host, port, "/" + path))
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head[:40]
        return reader, writer

    async def watch(reader, writer):
        try:
            b0, b1 = await reader.readexactly(2)
            length = b1 & 0x7F
            payload = await reader.readexactly(length)
            code = struct.unpack("!H", payload[:2])[0] if (b0 & 0x0F) == 8 and length >= 2 else None
            # Echo the Close (masked, empty key) and let the server close TCP.
            writer.write(bytes([0x88, 0x80 | len(payload[:2])]) + b"\0\0\0\0" + payload[:2])
            await writer.drain()
            await reader.read()
            closes[code] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            closes["lost"] += 1
        writer.close()

    pairs = []
    for start in range(0, count, 200):
        pairs += await asyncio.gather(*(one(i) for i in range(start, min(count, start + 200))))
    print(f"open {len(pairs)}", flush=True)
    await asyncio.gather(*(watch(r, w) for r, w in pairs))
    print("closes " + " ".join(f"{k}={v}" for k, v in sorted(closes.items(), key=str)), flush=True)


async def fanout(url, count):
    """count clients; the first never reads (a small receive buffer). The others count the
    text messages they get until the Close. Prints "ready", then per client "N messages CODE"."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, port = hostport.rsplit(":", 1)

    async def one(i):
        sock = socket.socket()
        if i == 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(handshake(host, port, "/" + path))
        await reader.readuntil(b"\r\n\r\n")
        return reader, writer

    async def count_messages(reader, writer):
        messages = 0
        while True:
            try:
                b0, b1 = await reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                return messages, "lost"
            length = b1 & 0x7F
            if length == 126:
                length = struct.unpack("!H", await reader.readexactly(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", await reader.readexactly(8))[0]
            payload = await reader.readexactly(length)
            if b0 & 0x0F == 8:
                writer.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + payload[:2])
                return messages, struct.unpack("!H", payload[:2])[0]
            messages += 1

    pairs = await asyncio.gather(*(one(i) for i in range(count)))
    print("ready", flush=True)
    # The stalled client reads nothing until the others are done, then only its end.
    results = await asyncio.gather(*(count_messages(r, w) for r, w in pairs[1:]))
    stalled_reader, stalled_writer = pairs[0]
    data = await stalled_reader.read()
    code = "none"
    index = data.find(b"\x88")
    while index >= 0:
        if index + 4 <= len(data) and data[index + 1] & 0x7F >= 2:
            code = struct.unpack("!H", data[index + 2:index + 4])[0]
        index = data.find(b"\x88", index + 1)
    print(f"stalled {code}", flush=True)
    for messages, code in results:
        print(f"{messages} messages {code}", flush=True)


def halfclose(port, lines):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=20)
    s.sendall(handshake("127.0.0.1", port, "/"))
    data = b""
    while b"\r\n\r\n" not in data:
        more = s.recv(4096)
        if not more:
            print("no 101", flush=True)
            return
        data += more
    data = data.split(b"\r\n\r\n", 1)[1]
    # Zero masking keys: the payloads go as they are.
    frames = b"".join(bytes([0x81, 0x80 | len(line)]) + b"\0\0\0\0" + line.encode() for line in lines)
    s.sendall(frames + bytes([0x88, 0x82]) + b"\0\0\0\0" + struct.pack("!H", 1000))
    s.shutdown(socket.SHUT_WR)
    try:
        while True:
            more = s.recv(1 << 16)
            if not more:
                break
            data += more
    except (socket.timeout, ConnectionError) as error:
        print(f"error {error}", flush=True)
    closed = False
    while len(data) >= 2:
        opcode, length, start = data[0] & 0x0F, data[1] & 0x7F, 2
        if length == 126:
            length, start = struct.unpack("!H", data[2:4])[0], 4
        payload, data = data[start:start + length], data[start + length:]
        if opcode == 0x1:
            print(f"text:{payload.decode()}", flush=True)
        elif opcode == 0x8:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
            print(f"close {code} {payload[2:].decode()}".rstrip(), flush=True)
            closed = True
    if not closed:
        print("no close", flush=True)


def slowloris(port, seconds):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=float(seconds))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
    start = time.monotonic()
    try:
        data = s.recv(100)
        print(f"closed after {time.monotonic() - start:.1f}" if not data else f"answered {data[:20]!r}", flush=True)
    except socket.timeout:
        print("still open", flush=True)
    except ConnectionResetError:
        print(f"closed after {time.monotonic() - start:.1f}", flush=True)


def pingflood(port, count, seconds):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(handshake("127.0.0.1", port, "/"))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    padding = b"p" * 117
    chunk = bytearray()
    try:
        for i in range(int(count)):
            chunk += bytes([0x89, 0x80 | 125]) + b"\0\0\0\0" + struct.pack("!Q", i) + padding  # zero mask: as is
            if len(chunk) >= 1 << 16:
                s.sendall(chunk)
                chunk = bytearray()
        s.sendall(chunk + bytes([0x81, 0x80 | 5]) + b"\0\0\0\0" + b"after")
    except socket.timeout:
        print(f"stalled: the server stopped reading after about {i} pings", flush=True)
        return
    time.sleep(float(seconds))
    data = bytearray()
    pongs, after_gap, expected, echo, index = 0, 0, 0, False, 0
    deadline = time.monotonic() + 20
    while not echo and time.monotonic() < deadline:
        try:
            more = s.recv(1 << 20)
        except socket.timeout:
            break
        if not more:
            break
        data += more
        while index + 2 <= len(data):
            opcode, length, start = data[index] & 0x0F, data[index + 1] & 0x7F, index + 2
            if length == 126:
                length, start = struct.unpack("!H", data[start:start + 2])[0], start + 2
            elif length == 127:
                length, start = struct.unpack("!Q", data[start:start + 8])[0], start + 8
            if start + length > len(data):
                break
            payload = bytes(data[start:start + length])
            index = start + length
            if opcode == 0xA:
                pongs += 1
                number = struct.unpack("!Q", payload[:8])[0]
                if after_gap or number != expected:
                    after_gap += 1
                expected = number + 1
            elif opcode == 0x1 and payload == b"after":
                echo = True
    print(f"pongs {pongs} after-gap {after_gap} echo {'yes' if echo else 'no'}", flush=True)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "echo":
        asyncio.run(echo(args[0]))
    elif command == "request":
        request(args[0], args[1])
    elif command == "hold":
        asyncio.run(hold(args[0], int(args[1])))
    elif command == "fanout":
        asyncio.run(fanout(args[0], int(args[1])))
    elif command == "halfclose":
        halfclose(args[0], args[1:])
    elif command == "slowloris":
        slowloris(args[0], args[1])
    elif command == "pingflood":
        pingflood(args[0], args[1], args[2])
