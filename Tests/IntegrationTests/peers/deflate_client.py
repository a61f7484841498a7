"""Python `websockets` clients with permessage-deflate that drive `wspipe -l` (DeflateServerTests).

    deflate_client.py combos URL [--lines]   one connection per parameter combination the websockets
                                             client supports; each sends messages of both types (text
                                             lines only with --lines, for --exec cat) and checks the echo;
                                             prints "PARAMS -> ANSWER ok" per combination
    deflate_client.py offer URL              the default offer; prints the 101's extensions ("none")
    deflate_client.py bomb URL BYTES         sends one compressed binary message of BYTES zeros; prints
                                             "closed CODE"
    deflate_client.py broadcast URL N        one client per combination and one without the
                                             extension, then "ready"; each expects N
                                             lines "line I ..." and prints "PARAMS -> ANSWER N ok"
    deflate_client.py hold URL N             opens N compressing clients, each sends and gets back one
                                             message; prints "open N", then waits for stdin to end
"""
import asyncio
import json
import os
import sys
import zlib

from websockets.asyncio.client import connect
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

COMBINATIONS = [
    {},
    {"client_max_window_bits": None},             # not offered: the client may use 15 bits
    {"client_max_window_bits": 9},
    {"server_max_window_bits": 9},
    {"server_max_window_bits": 15},
    {"server_no_context_takeover": True},
    {"client_no_context_takeover": True},
    {"server_no_context_takeover": True, "client_no_context_takeover": True,
     "server_max_window_bits": 10, "client_max_window_bits": 10},
]


def messages(lines_only):
    rows = [json.dumps({"id": i, "price": 1000 + (i * 7919) % 997, "sym": "BTC-USD"}) for i in range(200)]
    out = rows + ["x" * 70_000, "é" * 3000, "short"]
    if not lines_only:
        out += [os.urandom(1000), bytes(200_000), b"\x00\x01" * 40, ""]
    return out


async def combos(url, lines_only):
    for params in COMBINATIONS:
        factory = ClientPerMessageDeflateFactory(**params)
        async with connect(url, extensions=[factory], compression=None, ping_interval=None, max_size=None) as ws:
            answer = ws.response.headers.get("Sec-WebSocket-Extensions")
            for message in messages(lines_only):
                await ws.send(message)
                echoed = await ws.recv()
                if echoed != message:
                    print(f"{json.dumps(params)} -> {answer} DIFFERENT at {message[:20]!r}", flush=True)
                    return
            print(f"{json.dumps(params)} -> {answer} ok", flush=True)


async def offer(url):
    async with connect(url, ping_interval=None) as ws:
        print(ws.response.headers.get("Sec-WebSocket-Extensions") or "none", flush=True)


async def bomb(url, size):
    # The echo starts before the limit is hit: no size limit here, so the Close is the server's.
    async with connect(url, ping_interval=None, max_size=None) as ws:
        # websockets compresses it: BYTES zeros are about BYTES/1000 on the wire.
        await ws.send(bytes(size))
        try:
            while True:
                await ws.recv()
        except Exception:
            pass
        received = ws.protocol.close_rcvd
        print(f"closed {received.code if received else None}", flush=True)


async def broadcast(url, count):
    clients = []
    for params in COMBINATIONS:
        ws = await connect(url, extensions=[ClientPerMessageDeflateFactory(**params)], compression=None,
                           ping_interval=None, max_size=None)
        clients.append((params, ws))
    # And one without the extension: it gets the batch of frames encoded once for every
    # uncompressed client, in order with the compressed copies of the others.
    plain = await connect(url, compression=None, ping_interval=None, max_size=None)
    clients.append(({"plain": True}, plain))
    print("ready", flush=True)

    async def collect(params, ws):
        got = [await ws.recv() for _ in range(count)]
        expected = [f"line {i} " + "abc" * (i % 50) for i in range(count)]
        verdict = "ok" if got == expected else "DIFFERENT"
        return f"{json.dumps(params)} -> {ws.response.headers.get('Sec-WebSocket-Extensions')} {count} {verdict}"

    for line in await asyncio.gather(*(collect(p, ws) for p, ws in clients)):
        print(line, flush=True)
    for _, ws in clients:
        await ws.close()


async def hold(url, count):
    clients = []
    for i in range(count):
        ws = await connect(url, ping_interval=None)
        await ws.send("hello, compressed world " * 10)
        await ws.recv()
        clients.append(ws)
    print(f"open {len(clients)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for ws in clients:
        await ws.close()
    print("closed", flush=True)


def main():
    command, url = sys.argv[1], sys.argv[2]
    if command == "combos":
        asyncio.run(combos(url, "--lines" in sys.argv[3:]))
    elif command == "offer":
        asyncio.run(offer(url))
    elif command == "bomb":
        asyncio.run(bomb(url, int(sys.argv[3])))
    elif command == "broadcast":
        asyncio.run(broadcast(url, int(sys.argv[3])))
    elif command == "hold":
        asyncio.run(hold(url, int(sys.argv[3])))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
