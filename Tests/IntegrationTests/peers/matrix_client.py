"""The server matrix's Python `websockets` client (ServerMatrixTests), at its defaults
(permessage-deflate offered, max_size 1 MiB) unless --no-deflate.

    matrix_client.py URL MESSAGES [--no-deflate] [--bearer T] [--origin O] [--cafile CA]
                     [--bytes] [--get URL] [--header 'Name: value']...
    matrix_client.py --probe URL [--bearer T] [--origin O] [--cafile CA] [--crowd | --burst N | --flood N]
    matrix_client.py --fetch URL [--bearer T] [--cafile CA]

Sends every text message of MESSAGES (a JSON list) at once, then reads until the same
messages came back (--bytes: the same bytes, however framed, as --forward's target echoes
them), closes with 1000 and prints `EXT <agreed extensions or none>`, `GOT ok` (or `GOT
different ...`) and `CLOSE <the code the server answered>`. --get first fetches URL with a
plain GET and prints `GET <status> <body>`. --probe only opens the handshake and prints
`REFUSED <status>` or `ACCEPTED`; with --crowd it makes that handshake while a first
connection (with the same credentials) stays open, and closes the first with 1000 after;
with --burst it makes up to N handshakes one after another, each closed at once, and prints
`REFUSED <status> AFTER <handshakes admitted>` at the first refusal (or `ACCEPTED N`);
with --flood it sends N small text messages at once on one connection and prints `CLOSE
<the code the server closed with>` (`CLOSE none` when it was still open 5 s after).
--fetch prints the body of a plain GET of URL.
"""
import argparse
import asyncio
import json
import ssl
import sys
import urllib.request

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus


def options(args):
    headers = {}
    if args.bearer:
        headers["Authorization"] = "Bearer " + args.bearer
    if args.origin:
        headers["Origin"] = args.origin
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    kwargs = dict(additional_headers=headers, open_timeout=20)
    if args.cafile and args.url.startswith("wss:"):
        kwargs["ssl"] = ssl.create_default_context(cafile=args.cafile)
    if args.no_deflate:
        kwargs["compression"] = None
    return kwargs


def get(url, args):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + args.bearer} if args.bearer else {})
    context = ssl.create_default_context(cafile=args.cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, context=context, timeout=20) as answer:
            print("GET %d %s" % (answer.status, answer.read().decode().strip()), flush=True)
    except urllib.error.HTTPError as error:
        print("GET %d" % error.code, flush=True)


async def exchange(args):
    with open(args.messages) as f:
        messages = json.load(f)
    async with connect(args.url, **options(args)) as ws:
        print("EXT %s" % (ws.response.headers.get("Sec-WebSocket-Extensions") or "none"), flush=True)
        for message in messages:
            await ws.send(message)
        got = []
        want = "".join(messages).encode()
        while (len(b"".join(got)) < len(want)) if args.bytes else (len(got) < len(messages)):
            answer = await asyncio.wait_for(ws.recv(), 20)
            got.append(answer.encode() if isinstance(answer, str) else answer)
        same = b"".join(got) == want if args.bytes else got == [m.encode() for m in messages]
        print("GOT ok" if same else "GOT different: %d answers, %d bytes" % (len(got), len(b"".join(got))), flush=True)
        await ws.close(1000)
    print("CLOSE %s" % ws.close_code, flush=True)


async def probe(args):
    if args.burst:
        for admitted in range(args.burst):
            try:
                async with connect(args.url, **options(args)):
                    pass
            except InvalidStatus as error:
                print("REFUSED %d AFTER %d" % (error.response.status_code, admitted), flush=True)
                return
        print("ACCEPTED %d" % args.burst, flush=True)
        return
    if args.flood:
        async with connect(args.url, **options(args)) as ws:
            try:
                for n in range(args.flood):
                    await ws.send("flood %d" % n)
                await asyncio.wait_for(ws.wait_closed(), 5)
            except (ConnectionClosed, asyncio.TimeoutError):
                pass
            print("CLOSE %s" % (ws.close_code if ws.protocol.close_rcvd is not None else "none"), flush=True)
        return
    if args.crowd:
        async with connect(args.url, **options(args)) as first:
            args.crowd = False
            await probe(args)
            await first.close(1000)
        return
    try:
        async with connect(args.url, **options(args)):
            print("ACCEPTED", flush=True)
    except InvalidStatus as error:
        print("REFUSED %d" % error.response.status_code, flush=True)


def fetch(args):
    context = ssl.create_default_context(cafile=args.cafile) if args.url.startswith("https:") else None
    request = urllib.request.Request(args.url, headers={"Authorization": "Bearer " + args.bearer} if args.bearer else {})
    with urllib.request.urlopen(request, context=context, timeout=20) as answer:
        sys.stdout.write(answer.read().decode())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--crowd", action="store_true")
    parser.add_argument("--burst", type=int)
    parser.add_argument("--flood", type=int)
    parser.add_argument("--fetch", action="store_true")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("url")
    parser.add_argument("messages", nargs="?")
    parser.add_argument("--no-deflate", action="store_true")
    parser.add_argument("--bearer")
    parser.add_argument("--origin")
    parser.add_argument("--cafile")
    parser.add_argument("--bytes", action="store_true")
    parser.add_argument("--get")
    args = parser.parse_args()
    if args.fetch:
        return fetch(args)
    if args.get:
        get(args.get, args)
    asyncio.run(probe(args) if args.probe else exchange(args))


if __name__ == "__main__":
    sys.exit(main())
