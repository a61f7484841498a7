#!/usr/bin/env python3
"""A local collecting server for the wspipe examples (Python `websockets`): it keeps every
message clients send and answers nothing (an ingestion endpoint for logs or events).

Each text message is appended as one line to --output FILE (flushed at once), or printed
on stdout after the PORT line without --output; a binary message is written as a line
"<binary N bytes>". Messages of any size are accepted. The connection stays open until the
client closes it.

Usage:
  .venv/bin/python examples/servers/collect_server.py [--port 8769] [--host 127.0.0.1] [--output FILE]
With --port 0 the kernel picks a free port. In every case the first stdout line is
"PORT <n>", printed once the server is listening. Stop it with Ctrl-C or SIGTERM.
"""

import argparse
import asyncio
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def parse_args():
    parser = argparse.ArgumentParser(description="collecting server for the wspipe examples")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8769, help="TCP port; 0 picks a free one (default 8769)")
    parser.add_argument("--output", help="append the messages to this file (default: stdout)")
    return parser.parse_args()


def main():
    args = parse_args()
    sink = open(args.output, "a", encoding="utf-8") if args.output else sys.stdout

    async def handler(ws):
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    message = "<binary %d bytes>" % len(message)
                sink.write(message + "\n")
                sink.flush()
        except ConnectionClosed:
            pass

    async def run():
        stop = asyncio.get_running_loop().create_future()
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, stop.cancel)
        async with serve(handler, args.host, args.port, max_size=None, compression=None) as server:
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
