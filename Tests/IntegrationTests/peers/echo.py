"""WebSocket echo server (Python `websockets`): every message comes back unchanged,
text as text and binary as binary. No compression (unless --deflate), no size limit, no
keepalive pings. --greet-zeros N sends N zero bytes as one binary message first (a
decompression bomb when compressed). --pause-every N --pause S: the handler sleeps S seconds
after every N messages (a server slower than its client: the tail is still being echoed
when the client's input ends). SIGTERM closes every connection with 1001 (going away) and
exits: a graceful restart.

    echo.py [--host H] [--port 0] [--tls CERT KEY] [--client-ca CA] [--subprotocols a,b]
            [--unix PATH] [--library-defaults]

--library-defaults serves as `websockets` does when left alone (permessage-deflate on).

--client-ca makes TLS require a client certificate signed by CA (mutual TLS). --unix
serves on a Unix domain socket at PATH instead of TCP (prints `PORT 0` when listening).
Each message is answered unchanged; a text message "whoami" is answered with the
client certificate's subject CN (or "anonymous") instead.
"""
import asyncio
import signal

import ssl

from websockets.asyncio.server import serve, unix_serve
from websockets.exceptions import ConnectionClosed

from common import announce, announce_port, base_parser, tls_context


GREET_ZEROS = 0
PAUSE_EVERY = 0
PAUSE = 0.0


async def echo(websocket):
    try:
        if GREET_ZEROS:
            await websocket.send(bytes(GREET_ZEROS))
        count = 0
        async for message in websocket:
            if message == "whoami":
                peer = websocket.transport.get_extra_info("peercert") or {}
                names = [value for field in peer.get("subject", ()) for key, value in field if key == "commonName"]
                await websocket.send(names[0] if names else "anonymous")
            else:
                await websocket.send(message)
            count += 1
            if PAUSE_EVERY and count % PAUSE_EVERY == 0:
                await asyncio.sleep(PAUSE)
    except ConnectionClosed:
        pass


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--subprotocols", default="", help="comma-separated subprotocols the server accepts")
    parser.add_argument("--client-ca", help="require a client certificate signed by this CA (PEM)")
    parser.add_argument("--unix", help="serve on this Unix socket path instead of TCP")
    parser.add_argument("--deflate", help="accept permessage-deflate with these ServerPerMessageDeflateFactory "
                        "arguments (JSON object, e.g. {\"server_max_window_bits\": 10})")
    parser.add_argument("--library-defaults", action="store_true",
                        help="serve with the library's defaults (permessage-deflate on, 1 MiB max_size, pings), as most servers run")
    parser.add_argument("--greet-zeros", type=int, default=0, help="send a binary message of this many zero bytes first")
    parser.add_argument("--pause-every", type=int, default=0, help="sleep --pause seconds after every N messages")
    parser.add_argument("--pause", type=float, default=0.05, help="seconds of each --pause-every sleep")
    args = parser.parse_args()
    subprotocols = [name for name in args.subprotocols.split(",") if name] or None
    context = tls_context(args)
    if context and args.client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(args.client_ca)
    options = dict(ssl=context, subprotocols=subprotocols, compression=None, max_size=None, ping_interval=None)
    if args.library_defaults:
        options = dict(ssl=context, subprotocols=subprotocols)
    elif args.deflate is not None:
        import json
        from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
        options["extensions"] = [ServerPerMessageDeflateFactory(**json.loads(args.deflate))]
    global GREET_ZEROS
    GREET_ZEROS = args.greet_zeros
    global PAUSE_EVERY, PAUSE
    PAUSE_EVERY, PAUSE = args.pause_every, args.pause
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    if args.unix:
        async with unix_serve(echo, args.unix, **options):
            announce("PORT 0")
            await asyncio.Future()
    async with serve(echo, args.host, args.port, **options) as server:
        announce_port(server.sockets)
        await stop  # leaving closes every connection with 1001


if __name__ == "__main__":
    asyncio.run(main())
