#!/usr/bin/env python3
"""A local JSON ticker feed for the wspipe examples (Python `websockets`).

Protocol (one JSON object per text message):
  client: {"op":"subscribe","ch":"ticker"}
  server: N messages {"ch":"ticker","seq":1,"price":100.12} ... then Close 1000 "end of feed"

  client: {"op":"snapshot","ch":"ticker"}
  server: one message {"ch":"ticker","seq":0,"price":...,"snapshot":true}; the connection
          stays open for further requests (the client closes it)
          (with --no-snapshot: no message, Close 1000 "no snapshot yet")

  anything else: {"error":"..."} and Close 4000 (wspipe then exits with status 8)

With --login KEY each connection logs in first, as exchange APIs want:
  client: {"op":"auth","key":KEY}
  server: {"event":"authenticated"} 300 ms later (a wrong key: {"error":...} and Close 1008)
A subscribe that comes before that answer is dropped without a word (a client that does
not wait for it loses its subscription).

With --token TOKEN the handshake must carry "Authorization: Bearer TOKEN"; otherwise the
server answers HTTP 401 (wspipe exits with status 5).

Usage:
  .venv/bin/python examples/servers/feed_server.py [--port 8765] [--count 5] [--interval 0]
                                                   [--seed 1] [--token TOKEN] [--snapshot-delay 0]
                                                   [--no-snapshot] [--login KEY]
With --port 0 the kernel picks a free port. In every case the first stdout line is
"PORT <n>", printed once the server is listening. Stop it with Ctrl-C or SIGTERM.
"""

import argparse
import asyncio
import http
import json
import random
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def parse_args():
    parser = argparse.ArgumentParser(description="JSON ticker feed for the wspipe examples")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port; 0 picks a free one (default 8765)")
    parser.add_argument("--count", type=int, default=5, help="ticker messages per subscription (default 5)")
    parser.add_argument("--interval", type=float, default=0.0,
                        help="seconds between ticker messages (default 0)")
    parser.add_argument("--seed", type=int, default=1, help="seed for the price walk (default 1)")
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN'")
    parser.add_argument("--login", default=None, help="each connection logs in with this key first")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="answer a snapshot request with Close 1000 \"no snapshot yet\" and no message")
    parser.add_argument("--snapshot-delay", type=float, default=0.0,
                        help="seconds to wait before answering a snapshot request (default 0)")
    return parser.parse_args()


class Ticker:
    """A reproducible random walk of prices, two decimals."""

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.cents = 10000

    def next(self):
        self.cents = max(1, self.cents + self.random.randint(-150, 150))
        return self.cents / 100


def main():
    args = parse_args()

    def check_token(connection, request):
        if args.token is None:
            return None
        if request.headers.get("Authorization") != f"Bearer {args.token}":
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token\n")
        return None

    async def log_in(ws, key, session):
        await asyncio.sleep(0.3)
        if key != args.login:
            await ws.send(json.dumps({"error": "wrong key"}))
            await ws.close(1008, "wrong key")
            return
        session["authenticated"] = True
        await ws.send(json.dumps({"event": "authenticated"}))

    async def handler(ws):
        ticker = Ticker(args.seed)
        session = {"authenticated": args.login is None, "login": None}
        try:
            async for message in ws:
                try:
                    request = json.loads(message)
                except (TypeError, ValueError):
                    request = None
                if args.login is not None and isinstance(request, dict) and request.get("op") == "auth":
                    session["login"] = asyncio.create_task(log_in(ws, request.get("key"), session))
                    continue
                if isinstance(request, dict) and request.get("op") == "subscribe" and not session["authenticated"]:
                    continue  # dropped: not logged in (yet)
                if not isinstance(request, dict) or request.get("ch") != "ticker":
                    await ws.send(json.dumps({"error": "expected {\"op\":...,\"ch\":\"ticker\"}"}))
                    await ws.close(4000, "bad request")
                    return
                if request.get("op") == "snapshot" and args.no_snapshot:
                    await ws.close(1000, "no snapshot yet")
                    return
                if request.get("op") == "snapshot":
                    if args.snapshot_delay > 0:
                        await asyncio.sleep(args.snapshot_delay)
                    await ws.send(json.dumps({"ch": "ticker", "seq": 0, "price": ticker.next(), "snapshot": True}))
                elif request.get("op") == "subscribe":
                    for seq in range(1, args.count + 1):
                        await ws.send(json.dumps({"ch": "ticker", "seq": seq, "price": ticker.next()}))
                        if args.interval > 0:
                            await asyncio.sleep(args.interval)
                    await ws.close(1000, "end of feed")
                    return
                else:
                    await ws.send(json.dumps({"error": f"unknown op {request.get('op')!r}"}))
                    await ws.close(4000, "bad request")
                    return
        except ConnectionClosed:
            pass

    async def run():
        stop = asyncio.get_running_loop().create_future()
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, stop.cancel)
        async with serve(handler, args.host, args.port, process_request=check_token,
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
