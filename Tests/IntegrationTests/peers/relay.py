"""A TCP relay that injects faults between wspipe and a server (reconnection tests).

    relay.py [--port 0] --target PORT --log FILE [--refuse N] [--cut-frames K]
             [--blackhole-after SECS] [--hole-match BYTES]

Connection i (from 1) is logged as `conn i` in FILE. The first N connections are reset at
once (--refuse). The first accepted connection is then cut mid-frame after the server's
101 head and K frames of 4 bytes (plus 2 bytes of the next: --cut-frames), or blackholed
after SECS (--blackhole-after: nothing more is forwarded either way and nothing is closed,
no FIN, no RST). Later connections are relayed as they are.

On demand, for any connection (the bus keepalive tests): SIGUSR1 blackholes the connections
open now and every one accepted after it, until SIGUSR2 (connections accepted after that
are relayed again; the blackholed stay so), and prints `HOLE n` (n: how many were open) or
`OPEN`. With --hole-match, only connections whose client's first bytes contain BYTES
(a Redis subscriber sends SUBSCRIBE first, a publisher PING).
"""
import asyncio
import signal
import socket
import struct

from common import announce, base_parser

count = 0
# SIGUSR1 until SIGUSR2: new connections are blackholed too.
holing = False
# Open connections: their hole and their client's first bytes (None until they come).
live = {}


def note(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def matches(first, match):
    return match is None or (first is not None and match in first)


async def pipe(reader, writer, limit=None, hole=None, first=None, match=None):
    """Forwards until EOF; `limit`: bytes after the HTTP head, then stop (a cut); `first`:
    the client's side, whose first bytes it keeps (a blackhole may start with them)."""
    passed = bytearray()
    while True:
        data = await reader.read(65536)
        if not data:
            return
        if first is not None and first[0] is None:
            first[0] = data
            if holing and matches(data, match):
                hole.set()
        if hole is not None and hole.is_set():
            await asyncio.Future()  # blackholed: swallow and hold
        if limit is not None:
            before = len(passed)
            passed += data
            head = passed.find(b"\r\n\r\n")
            if head >= 0 and len(passed) >= head + 4 + limit:
                end = head + 4 + limit
                if end > before:
                    writer.write(bytes(passed[before:end]))
                    await writer.drain()
                await asyncio.sleep(0.1)
                return
        writer.write(data)
        await writer.drain()


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--refuse", type=int, default=0)
    parser.add_argument("--cut-frames", type=int)
    parser.add_argument("--blackhole-after", type=float)
    parser.add_argument("--hole-match", type=lambda text: text.encode())
    args = parser.parse_args()

    def hole_now():
        global holing
        holing = True
        holed = [hole for hole, first in live.values() if matches(first[0], args.hole_match)]
        for hole in holed:
            hole.set()
        announce("HOLE %d" % len(holed))

    def open_again():
        global holing
        holing = False
        announce("OPEN")

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, hole_now)
    loop.add_signal_handler(signal.SIGUSR2, open_again)

    async def handle(reader, writer):
        global count
        count += 1
        index = count
        note(args.log, f"conn {index}")
        sock = writer.get_extra_info("socket")
        if index <= args.refuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
            return
        first = index == args.refuse + 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", args.target)
        hole = asyncio.Event()
        if holing and args.hole_match is None:
            hole.set()
        client_first = [None]
        live[index] = (hole, client_first)
        limit = args.cut_frames * 4 + 2 if first and args.cut_frames is not None else None
        if first and args.blackhole_after is not None:
            asyncio.get_running_loop().call_later(args.blackhole_after, hole.set)
        tasks = [asyncio.create_task(pipe(reader, up_writer, hole=hole, first=client_first, match=args.hole_match)),
                 asyncio.create_task(pipe(up_reader, writer, limit=limit, hole=hole))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if not hole.is_set():
            del live[index]
        if hole.is_set():
            await asyncio.Future()  # never close a blackholed connection
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            try:
                w.transport.abort()
            except Exception:
                pass

    server = await asyncio.start_server(handle, args.host, args.port)
    announce("PORT %d" % server.sockets[0].getsockname()[1])
    await asyncio.Future()


asyncio.run(main())
