#!/usr/bin/env python3
"""A local echo server for the wspipe examples (Python `websockets`).

Every message is sent back unchanged and with its type: text as text, binary as binary.
Messages of any size are accepted (no 1 MiB limit), so files can be round-tripped.

Usage:
  .venv/bin/python examples/servers/echo_server.py [--port 8766] [--host 127.0.0.1]
                                                   [--token T] [--subprotocols a,b]
--token T answers 401 to a handshake without "Authorization: Bearer T"; --subprotocols
selects the first of these the client offers.
With --port 0 the kernel picks a free port. In every case the first stdout line is
"PORT <n>", printed once the server is listening. Stop it with Ctrl-C or SIGTERM.
"""

import argparse
import asyncio
import signal
import sys

from http import HTTPStatus

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def parse_args():
    parser = argparse.ArgumentParser(description="echo server for the wspipe examples")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8766, help="TCP port; 0 picks a free one (default 8766)")
    parser.add_argument("--token", help='require the header "Authorization: Bearer TOKEN" (else 401)')
    parser.add_argument("--subprotocols", default="", help="comma-separated subprotocols to accept")
    return parser.parse_args()


async def echo(ws):
    try:
        async for message in ws:
            # str for text messages, bytes for binary ones: send() keeps the type.
            await ws.send(message)
    except ConnectionClosed:
        pass


def main():
    args = parse_args()

    def check_token(connection, request):
        if args.token and request.headers.get("Authorization") != f"Bearer {args.token}":
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required")
        return None

    subprotocols = [name for name in args.subprotocols.split(",") if name] or None

    async def run():
        stop = asyncio.get_running_loop().create_future()
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, stop.cancel)
        async with serve(echo, args.host, args.port, max_size=None, max_queue=None,
                         compression=None, process_request=check_token, subprotocols=subprotocols) as server:
            port = server.sockets[0].getsockname()[1]
            print(f"PORT {port}", flush=True)
            try:
                await stop
            except asyncio.CancelledError:
                pass

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
