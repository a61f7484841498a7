"""Python `websockets` clients that drive WSKit's WebSocketServer in WSKitTests.

    wskit_client.py connect URL [--header NAME:VALUE]... [--subprotocols a,b] [--send TEXT]...
                    [--cafile PEM] [--cert PEM --key PEM] [--tls-max 1.2] [--deflate]
        Connects (status refusals print "status N" and exit 0); on success prints
        "open SUBPROTOCOL-or--", sends each --send text, prints "message TEXT" for every message
        received until the server closes, then "closed CODE REASON". For wss://, --cafile
        is the CA to trust and --cert/--key a client certificate (mutual TLS). --deflate
        offers permessage-deflate (websockets' default offer) and prints "extensions HEADER"
        (the 101's Sec-WebSocket-Extensions, "-" for none) after "open".
Every step is bounded (10 s open timeout, 20 s in all).
"""
import argparse
import asyncio
import ssl
import sys


async def connect(args):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    headers = [tuple(item.split(":", 1)) for item in args.header]
    subprotocols = [name for name in args.subprotocols.split(",") if name] or None
    context = None
    if args.url.startswith("wss:"):
        context = ssl.create_default_context(cafile=args.cafile)
        if args.cert:
            context.load_cert_chain(args.cert, args.key)
        if args.tls_max == "1.2":
            context.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        ws = await connect(args.url, additional_headers=headers, subprotocols=subprotocols,
                           compression="deflate" if args.deflate else None,
                           ping_interval=None, open_timeout=10, ssl=context)
    except InvalidStatus as error:
        print(f"status {error.response.status_code}", flush=True)
        print(f"body {error.response.body.decode('utf-8', 'replace').strip()}", flush=True)
        return
    print(f"open {ws.subprotocol or '-'}", flush=True)
    if args.deflate:
        print(f"extensions {ws.response.headers.get('Sec-WebSocket-Extensions') or '-'}", flush=True)
    for text in args.send:
        await ws.send(text)
    try:
        async for message in ws:
            print(f"message {message}", flush=True)
    except ConnectionClosed:
        pass
    print(f"closed {ws.close_code} {ws.close_reason}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("connect")
    c.add_argument("url")
    c.add_argument("--header", action="append", default=[])
    c.add_argument("--subprotocols", default="")
    c.add_argument("--send", action="append", default=[])
    c.add_argument("--cafile")
    c.add_argument("--cert")
    c.add_argument("--key")
    c.add_argument("--tls-max", choices=["1.2"])
    c.add_argument("--deflate", action="store_true")
    args = parser.parse_args()
    asyncio.run(asyncio.wait_for(connect(args), 20))


if __name__ == "__main__":
    sys.exit(main())
