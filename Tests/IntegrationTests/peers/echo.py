"""WebSocket echo server (Python `websockets`): every message comes back unchanged,
text as text and binary as binary. No compression, no size limit, no keepalive pings.

    echo.py [--host H] [--port 0] [--tls CERT KEY] [--subprotocols a,b]
"""
import asyncio

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from common import announce_port, base_parser, tls_context


async def echo(websocket):
    try:
        async for message in websocket:
            await websocket.send(message)
    except ConnectionClosed:
        pass


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--subprotocols", default="", help="comma-separated subprotocols the server accepts")
    args = parser.parse_args()
    subprotocols = [name for name in args.subprotocols.split(",") if name] or None
    async with serve(echo, args.host, args.port, ssl=tls_context(args), subprotocols=subprotocols,
                     compression=None, max_size=None, ping_interval=None) as server:
        announce_port(server.sockets)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
