"""WebSocket echo server for --forward-listen's tests (Python `websockets`): every message
back unchanged; prints `OPEN <n>` when its n-th connection is open and, when one ends,
`CLOSED <code> <bytes>`: the close code the client sent (1006 for none) and the payload
bytes it had received before (with --largest, `LARGEST <n>` first: its largest message). --stall-first S: the first
connection's handshake waits S seconds before its 101 (a slow server: the other
connections must not wait behind it). --refuse-first: the first handshake gets 401.

    fwd_echo.py [--port 0] [--stall-first S] [--refuse-first]
"""
import asyncio
import http

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from common import announce, announce_port, base_parser

STATE = {"handshakes": 0, "opened": 0}
ARGS = None


async def process_request(connection, request):
    STATE["handshakes"] += 1
    if STATE["handshakes"] == 1:
        if ARGS.refuse_first:
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "no\n")
        if ARGS.stall_first:
            await asyncio.sleep(ARGS.stall_first)
    return None


async def echo(websocket):
    STATE["opened"] += 1
    announce("OPEN %d" % STATE["opened"])
    count = 0
    largest = 0
    try:
        async for message in websocket:
            count += len(message)
            largest = max(largest, len(message))
            try:
                await websocket.send(message)
            except ConnectionClosed:
                pass  # a Close came: count what was received before it all the same
    except ConnectionClosed:
        pass
    received = websocket.protocol.close_rcvd
    if ARGS.largest:
        announce("LARGEST %d" % largest)
    announce("CLOSED %d %d" % (received.code if received else 1006, count))


async def main():
    global ARGS
    parser = base_parser(__doc__)
    parser.add_argument("--stall-first", type=float, default=0)
    parser.add_argument("--refuse-first", action="store_true")
    parser.add_argument("--largest", action="store_true", help="print each connection's largest message size")
    ARGS = parser.parse_args()
    async with serve(echo, ARGS.host, ARGS.port, process_request=process_request, compression=None, max_size=None, open_timeout=None,
                     ping_interval=None) as server:
        announce_port(server.sockets)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
