"""The combination matrix's echo server (MatrixTests): Python `websockets` at its defaults
(permessage-deflate on, max_size 1 MiB, keepalive pings every 20 s): every message back
unchanged, text as text and binary as binary. After each connection it prints
`CLOSED <path> code=<close code received> messages=<n> bytes=<payload bytes>` so the test
sees what the peer received. SIGTERM closes every connection with 1001 and exits.

    matrix_echo.py [--port 0] [--tls CERT KEY] [--unix PATH]
"""
import asyncio
import signal

from websockets.asyncio.server import serve, unix_serve
from websockets.exceptions import ConnectionClosed

from common import announce, announce_port, base_parser, tls_context


async def echo(websocket):
    messages = received = 0
    try:
        async for message in websocket:
            messages += 1
            received += len(message.encode() if isinstance(message, str) else message)
            await websocket.send(message)
    except ConnectionClosed:
        pass
    received_close = websocket.protocol.close_rcvd
    code = received_close.code if received_close is not None else "none"
    announce("CLOSED %s code=%s messages=%d bytes=%d" % (websocket.request.path, code, messages, received))


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--unix", help="serve on this Unix socket path instead of TCP")
    args = parser.parse_args()
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    if args.unix:
        async with unix_serve(echo, args.unix, ssl=tls_context(args)):
            announce("PORT 0")
            await stop
        return
    async with serve(echo, args.host, args.port, ssl=tls_context(args)) as server:
        announce_port(server.sockets)
        await stop  # leaving closes every connection with 1001


if __name__ == "__main__":
    asyncio.run(main())
