#!/usr/bin/env python3
"""A local file store over WebSocket for the wspipe examples (Python `websockets`).

  ws://HOST:PORT/upload/NAME    the client sends ONE binary message, the file; the server
                                keeps it under NAME and answers with one text message
                                {"stored":"NAME","bytes":N,"sha256":"<hex>"}; the
                                connection stays open until the client closes it.
                                A text message instead: {"error":...} and Close 4000.
  ws://HOST:PORT/download/NAME  the server sends the file as ONE binary message, then
                                Close 1000; an unknown NAME: Close 4004 "no such file".

Files are kept in memory (or in --dir DIR) while the server runs. Messages of any size
are accepted.

Usage:
  .venv/bin/python examples/servers/storage_server.py [--port 8768] [--host 127.0.0.1] [--dir DIR]
With --port 0 the kernel picks a free port. In every case the first stdout line is
"PORT <n>", printed once the server is listening. Stop it with Ctrl-C or SIGTERM.
"""

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def parse_args():
    parser = argparse.ArgumentParser(description="file store for the wspipe examples")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8768, help="TCP port; 0 picks a free one (default 8768)")
    parser.add_argument("--dir", help="keep the files in this directory instead of in memory")
    return parser.parse_args()


class Store:
    def __init__(self, directory):
        self.directory = directory
        self.files = {}

    def put(self, name, data):
        if self.directory:
            with open(os.path.join(self.directory, name), "wb") as handle:
                handle.write(data)
        else:
            self.files[name] = data

    def get(self, name):
        if self.directory:
            try:
                with open(os.path.join(self.directory, name), "rb") as handle:
                    return handle.read()
            except OSError:
                return None
        return self.files.get(name)


def main():
    args = parse_args()
    store = Store(args.dir)

    async def handler(ws):
        path = ws.request.path.split("?", 1)[0]
        action, _, name = path.lstrip("/").partition("/")
        if not name or "/" in name or name.startswith("."):
            await ws.close(4000, "use /upload/NAME or /download/NAME")
            return
        try:
            if action == "upload":
                async for message in ws:
                    if isinstance(message, str):
                        await ws.send(json.dumps({"error": "send the file as one binary message"}))
                        await ws.close(4000, "binary expected")
                        return
                    store.put(name, message)
                    await ws.send(json.dumps({"stored": name, "bytes": len(message),
                                              "sha256": hashlib.sha256(message).hexdigest()}))
            elif action == "download":
                data = store.get(name)
                if data is None:
                    await ws.close(4004, "no such file")
                    return
                await ws.send(data)
                await ws.close(1000, "done")
            else:
                await ws.close(4000, "use /upload/NAME or /download/NAME")
        except ConnectionClosed:
            pass

    async def run():
        stop = asyncio.get_running_loop().create_future()
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, stop.cancel)
        async with serve(handler, args.host, args.port, max_size=None, max_queue=None,
                         compression=None) as server:
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
