"""TCP clients for --forward-listen's tests (not a server: run to its end).

    tcp_clients.py --port P echo --count N --bytes B [--timeout S]
        N connections at once; each sends B distinct random bytes, half-closes, reads
        until the end and compares. Prints one line per connection, in order:
        `OK i`, `DIFFER i got G of B`, `RESET i`, `TIMEOUT i`; then `DONE ok=K`.
    tcp_clients.py --port P hold --count N
        opens N connections, prints `HELD N`, keeps them until stdin ends.
"""
import argparse
import asyncio
import os
import sys


async def one_echo(index, port, size, timeout):
    payload = os.urandom(size)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.write(payload)
        await writer.drain()
        writer.write_eof()
        got = await asyncio.wait_for(reader.read(-1), timeout)
        writer.close()
    except asyncio.TimeoutError:
        return "TIMEOUT %d" % index
    except ConnectionResetError:
        return "RESET %d" % index
    if got == payload:
        return "OK %d" % index
    return "DIFFER %d got %d of %d" % (index, len(got), size)


async def echo(args):
    results = await asyncio.gather(*(one_echo(i, args.port, args.bytes, args.timeout) for i in range(args.count)))
    for line in results:
        print(line)
    print("DONE ok=%d" % sum(1 for line in results if line.startswith("OK ")))


async def hold(args):
    held = []
    for _ in range(args.count):
        held.append(await asyncio.open_connection("127.0.0.1", args.port))
    print("HELD %d" % len(held), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    sub = parser.add_subparsers(dest="mode", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--count", type=int, default=1)
    e.add_argument("--bytes", type=int, default=1000)
    e.add_argument("--timeout", type=float, default=20)
    h = sub.add_parser("hold")
    h.add_argument("--count", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(echo(args) if args.mode == "echo" else hold(args))


if __name__ == "__main__":
    main()
