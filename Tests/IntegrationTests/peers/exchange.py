"""An exchange-like feed for the conversation tests (--send/--expect/--until; Python `websockets`).

    exchange.py [--port 0] --log FILE [--greeting TEXT] [--drop-after-first-tick] [--deny CODE]

Every message received is logged to FILE as one JSON line {"t": monotonic seconds,
"conn": N, "got": text}, with {"conn": N, "event": ...} lines for what the server did.
Per connection:
- {"op":"auth"}: answered with {"event":"authenticated"} after 300 ms; a
  {"op":"subscribe"} before that answer is dropped (logged as "dropped"), one after it
  gets {"event":"subscribed"} and then {"event":"tick","n":K} every 100 ms.
- --drop-after-first-tick: the first connection closes with 1001 right after its first
  tick; every connection needs its own auth.
- {"jsonrpc":"2.0","id":...,"method":...}: two notifications, a reply whose id is
  9007199254740992 (equal to ours as a double), then the reply with id 9007199254740993.
- "big": a 64 MiB text message of "a"s, then (a second later, once the client has read it)
  a Ping; the Pong's delay is logged ({"event":"pong","ms":...}).
- --greeting TEXT: sent as each connection opens.
- --deny CODE: {"op":"auth"} is answered with a Close of CODE ("unauthorized") instead.
Other messages are only logged.
"""
import asyncio
import json
import time

from websockets.asyncio.server import serve

from common import announce_port, base_parser

connections = 0


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--log", required=True)
    parser.add_argument("--greeting")
    parser.add_argument("--drop-after-first-tick", action="store_true")
    parser.add_argument("--deny", type=int)
    args = parser.parse_args()

    def note(**entry):
        entry["t"] = time.monotonic()
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    async def handler(ws):
        global connections
        connections += 1
        conn = connections
        note(conn=conn, event="connected")
        state = {"authed": False, "ticking": None}

        async def authenticate():
            await asyncio.sleep(0.3)
            state["authed"] = True
            await ws.send(json.dumps({"event": "authenticated"}))
            note(conn=conn, event="authenticated")

        async def tick():
            n = 0
            while True:
                n += 1
                await ws.send(json.dumps({"event": "tick", "n": n}))
                if args.drop_after_first_tick and conn == 1:
                    note(conn=conn, event="closing")
                    await ws.close(1001, "restarting")
                    return
                await asyncio.sleep(0.1)

        if args.greeting:
            await ws.send(args.greeting)
        tasks = []
        async for message in ws:
            note(conn=conn, got=message if isinstance(message, str) else "<binary>")
            if message == "big":
                await ws.send("a" * (64 << 20))
                await asyncio.sleep(1)
                started = time.monotonic()
                pong = await ws.ping()
                await pong
                note(conn=conn, event="pong", ms=(time.monotonic() - started) * 1000)
                continue
            try:
                request = json.loads(message)
            except ValueError:
                continue
            if not isinstance(request, dict):
                continue
            if request.get("op") == "auth" and args.deny:
                note(conn=conn, event="denied")
                await ws.close(args.deny, "unauthorized")
            elif request.get("op") == "auth":
                tasks.append(asyncio.create_task(authenticate()))
            elif request.get("op") == "subscribe":
                if not state["authed"]:
                    note(conn=conn, event="dropped")
                elif state["ticking"] is None:
                    await ws.send(json.dumps({"event": "subscribed"}))
                    state["ticking"] = asyncio.create_task(tick())
            elif "method" in request and "id" in request:
                await ws.send(json.dumps({"jsonrpc": "2.0", "method": "note", "params": {"n": 1}}))
                await ws.send(json.dumps({"jsonrpc": "2.0", "method": "note", "params": {"n": 2}}))
                await ws.send('{"jsonrpc":"2.0","id":9007199254740992,"result":"not ours"}')
                await ws.send('{"jsonrpc":"2.0","id":9007199254740993,"result":"ours"}')
        for task in tasks + [state["ticking"]]:
            if task:
                task.cancel()

    async with serve(handler, args.host, args.port, max_size=None) as server:
        announce_port(server.sockets)
        await asyncio.Future()


asyncio.run(main())
