#!/usr/bin/env python3
"""A local JSON-RPC 2.0 server over WebSocket for the wspipe examples (Python `websockets`).

Each text message is one JSON-RPC 2.0 request (or a batch: an array of them); each
request with an "id" gets one response message, a notification (no "id") gets none.

Methods:
  sum        params: an array of numbers             result: their sum
  subtract   params: [minuend, subtrahend] or {"minuend": a, "subtrahend": b}
  echo       params: anything                        result: the params, unchanged
  ping       no params                               result: "pong"
Errors (JSON-RPC 2.0): -32700 parse error, -32600 invalid request, -32601 method not
found, -32602 invalid params.

With --notifications N, each response comes after N notifications
({"jsonrpc":"2.0","method":"progress","params":{"n":K}}), as servers that stream progress
or events on the same connection do.

The connection stays open for more requests until the client closes it.

Usage:
  .venv/bin/python examples/servers/jsonrpc_server.py [--port 8767] [--host 127.0.0.1] [--notifications N]
With --port 0 the kernel picks a free port. In every case the first stdout line is
"PORT <n>", printed once the server is listening. Stop it with Ctrl-C or SIGTERM.
"""

import argparse
import asyncio
import json
import numbers
import signal
import sys

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed


def parse_args():
    parser = argparse.ArgumentParser(description="JSON-RPC 2.0 server for the wspipe examples")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8767, help="TCP port; 0 picks a free one (default 8767)")
    parser.add_argument("--notifications", type=int, default=0, help="notifications sent before each response")
    return parser.parse_args()


class InvalidParams(Exception):
    pass


def is_number(value):
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def method_sum(params):
    if not isinstance(params, list) or not all(is_number(x) for x in params):
        raise InvalidParams("sum expects an array of numbers")
    return sum(params)


def method_subtract(params):
    if isinstance(params, list) and len(params) == 2:
        minuend, subtrahend = params
    elif isinstance(params, dict) and set(params) == {"minuend", "subtrahend"}:
        minuend, subtrahend = params["minuend"], params["subtrahend"]
    else:
        raise InvalidParams("subtract expects [minuend, subtrahend] or {\"minuend\":..., \"subtrahend\":...}")
    if not (is_number(minuend) and is_number(subtrahend)):
        raise InvalidParams("subtract expects numbers")
    return minuend - subtrahend


METHODS = {
    "sum": method_sum,
    "subtract": method_subtract,
    "echo": lambda params: params,
    "ping": lambda params: "pong",
}


def error(code, message, request_id=None):
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": request_id}


def answer(request):
    """The response to one request object, or None for a notification."""
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        return error(-32600, "Invalid Request", request.get("id") if isinstance(request, dict) else None)
    has_id = "id" in request
    method = METHODS.get(request["method"])
    if method is None:
        response = error(-32601, "Method not found: %s" % request["method"], request.get("id"))
    else:
        try:
            response = {"jsonrpc": "2.0", "result": method(request.get("params")), "id": request.get("id")}
        except InvalidParams as problem:
            response = error(-32602, "Invalid params: %s" % problem, request.get("id"))
    return response if has_id else None


def handle_text(text):
    try:
        request = json.loads(text)
    except ValueError:
        return error(-32700, "Parse error")
    if isinstance(request, list):
        if not request:
            return error(-32600, "Invalid Request")
        responses = [r for r in (answer(item) for item in request) if r is not None]
        return responses or None
    return answer(request)


NOTIFICATIONS = 0


async def handler(ws):
    try:
        async for message in ws:
            if isinstance(message, bytes):
                await ws.send(json.dumps(error(-32600, "Invalid Request: binary message")))
                continue
            response = handle_text(message)
            if response is not None:
                for n in range(1, NOTIFICATIONS + 1):
                    await ws.send(json.dumps({"jsonrpc": "2.0", "method": "progress", "params": {"n": n}}))
                await ws.send(json.dumps(response, separators=(",", ":")))
    except ConnectionClosed:
        pass


def main():
    global NOTIFICATIONS
    args = parse_args()
    NOTIFICATIONS = args.notifications

    async def run():
        stop = asyncio.get_running_loop().create_future()
        for number in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(number, stop.cancel)
        async with serve(handler, args.host, args.port, compression=None) as server:
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
