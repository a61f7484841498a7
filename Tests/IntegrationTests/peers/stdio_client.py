"""Python `websockets` clients for the stdio server mode tests (`wspipe -l` without a mode).

    stdio_client.py take URL N [CODE]       receives N messages (prints "got M" each), then closes with
                                            CODE (1000); prints "closed CODE"
    stdio_client.py wait URL [SEND...]      sends each SEND as a text message, prints every message
                                            ("got M") until the server closes; prints "closed CODE after S"
"""
import asyncio
import sys
import time


async def take(url, n, code):
    from websockets.asyncio.client import connect
    async with connect(url, compression=None, ping_interval=None) as ws:
        for _ in range(n):
            print(f"got {await ws.recv()}", flush=True)
        await ws.close(code)
    print(f"closed {ws.close_code}", flush=True)


async def wait(url, sends):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed
    started = time.monotonic()
    async with connect(url, compression=None, ping_interval=None) as ws:
        for text in sends:
            await ws.send(text)
        try:
            while True:
                print(f"got {await ws.recv()}", flush=True)
        except ConnectionClosed:
            pass
    print(f"closed {ws.close_code} after {time.monotonic() - started:.1f}", flush=True)


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "take":
        asyncio.run(asyncio.wait_for(take(args[0], int(args[1]), int(args[2]) if len(args) > 2 else 1000), 30))
    elif command == "wait":
        asyncio.run(asyncio.wait_for(wait(args[0], args[1:]), 30))
    else:
        sys.exit(f"unknown command {command}")


main()
