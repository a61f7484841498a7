"""A Python `websockets` echo server at its defaults (compression on, keepalive pings),
reporting each connection's life on stdout: `OPEN n` when its handshake completed and
`CLOSED n CODE SECONDS` when it ended (CODE: the client's close code, 1006 for a
connection that ended without a Close; SECONDS: how long it was open).

    lifecycle.py [--host H] [--port 0] [--tls CERT KEY]
"""
import asyncio
import time

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from common import announce, announce_port, base_parser, tls_context

COUNT = 0


async def echo(websocket):
    global COUNT
    COUNT += 1
    number, opened = COUNT, time.monotonic()
    announce("OPEN %d" % number)
    try:
        async for message in websocket:
            await websocket.send(message)
    except ConnectionClosed:
        pass
    await websocket.wait_closed()
    code = websocket.close_code if websocket.close_code is not None else 1006
    announce("CLOSED %d %d %.3f" % (number, code, time.monotonic() - opened))


async def main():
    args = base_parser(__doc__).parse_args()
    async with serve(echo, args.host, args.port, ssl=tls_context(args)) as server:
        announce_port(server.sockets)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
