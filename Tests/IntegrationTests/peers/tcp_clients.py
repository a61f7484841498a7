"""TCP clients for --forward-listen's tests (not a server: run to its end).

    tcp_clients.py --port P echo --count N --bytes B [--timeout S] [--half-close]
        N connections at once; each sends B distinct random bytes, reads B bytes back and
        compares, then ends its stream and expects the end of the other's (as a protocol
        over the tunnel would). --half-close: ends its stream right after sending, then
        reads to the end (the end may overtake replies that are still on their way).
        Prints one line per connection, in order: `OK i`, `DIFFER i got G of B`,
        `RESET i`, `TIMEOUT i`; then `DONE ok=K`.
    tcp_clients.py --port P hold --count N
        opens N connections, prints `HELD N`, keeps them until stdin ends.
    tcp_clients.py --port 0 serve-echo
        a TCP echo server (every byte back, the end of stream answered with its own);
        prints `PORT n`, runs until killed.
"""
import argparse
import asyncio
import os
import sys


async def exchange(reader, writer, payload, half_close):
    writer.write(payload)
    await writer.drain()
    if half_close:
        writer.write_eof()
        return await reader.read(-1)
    got = b""
    while len(got) < len(payload):
        data = await reader.read(len(payload) - len(got))
        if not data:
            return got
        got += data
    writer.write_eof()
    return got + await reader.read(-1)


async def one_echo(index, port, size, timeout, half_close):
    payload = os.urandom(size)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        got = await asyncio.wait_for(exchange(reader, writer, payload, half_close), timeout)
        writer.close()
    except asyncio.TimeoutError:
        return "TIMEOUT %d" % index
    except (ConnectionResetError, BrokenPipeError):
        return "RESET %d" % index
    if got == payload:
        return "OK %d" % index
    return "DIFFER %d got %d of %d" % (index, len(got), size)


async def echo(args):
    results = await asyncio.gather(*(one_echo(i, args.port, args.bytes, args.timeout, args.half_close) for i in range(args.count)))
    for line in results:
        print(line)
    print("DONE ok=%d" % sum(1 for line in results if line.startswith("OK ")))


async def hold(args):
    held = []
    for _ in range(args.count):
        held.append(await asyncio.open_connection("127.0.0.1", args.port))
    print("HELD %d" % len(held), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def serve_echo(args):
    async def handle(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.write_eof()
        except (ConnectionResetError, BrokenPipeError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    print("PORT %d" % server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Future()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    sub = parser.add_subparsers(dest="mode", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--count", type=int, default=1)
    e.add_argument("--bytes", type=int, default=1000)
    e.add_argument("--timeout", type=float, default=20)
    e.add_argument("--half-close", action="store_true")
    h = sub.add_parser("hold")
    h.add_argument("--count", type=int, default=1)
    sub.add_parser("serve-echo")
    args = parser.parse_args()
    modes = {"echo": echo, "hold": hold, "serve-echo": serve_echo}
    asyncio.run(modes[args.mode](args))


if __name__ == "__main__":
    main()
