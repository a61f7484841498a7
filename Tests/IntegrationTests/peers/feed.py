"""A restartable feed for reconnection tests (Python `websockets`).

    feed.py [--port 0] --log FILE [--start K] [--count N] [--refuse STATUS] [--refusals R]
            [--retry-after TEXT] [--then hold|close CODE]

Each connection: the first R handshakes are answered with STATUS (and Retry-After when
given), counted in FILE as `refused`; an accepted connection appends `connected`, then
`sub <first message>` to FILE, then sends text messages m<K>..m<K+N-1> (20 ms apart),
echoes what it receives after that as `got <text>` lines in FILE, and holds the connection
open (or closes with CODE).
"""
import asyncio
import http

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

from common import announce_port, base_parser

refused = 0


def note(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--log", required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--refuse", type=int, default=503)
    parser.add_argument("--refusals", type=int, default=0)
    parser.add_argument("--retry-after")
    parser.add_argument("--then", nargs="+", default=["hold"])
    args = parser.parse_args()

    def process_request(connection, request):
        global refused
        if refused < args.refusals:
            refused += 1
            note(args.log, "refused")
            headers = Headers([("Content-Type", "text/plain")])
            if args.retry_after:
                headers["Retry-After"] = args.retry_after
            return Response(args.refuse, http.HTTPStatus(args.refuse).phrase, headers, b"not now\n")
        return None

    async def handler(ws):
        note(args.log, "connected")
        sub = await ws.recv()
        note(args.log, f"sub {sub}")
        for i in range(args.start, args.start + args.count):
            await ws.send(f"m{i}")
            await asyncio.sleep(0.02)
        if args.then[0] == "close":
            await ws.close(int(args.then[1]), "bye")
            return
        async for message in ws:
            note(args.log, f"got {message}")

    async with serve(handler, args.host, args.port, process_request=process_request, compression=None) as server:
        announce_port(server.sockets)
        await asyncio.Future()


asyncio.run(main())
