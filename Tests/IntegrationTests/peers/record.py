"""WebSocket server (Python `websockets`) that records what each client did.

For every connection it records the request path (with query, as sent), the request
headers in order, the subprotocol it chose, every message received (type and base64
payload), the payloads of the pings received, the Close frame received (code, reason)
and which side started the closing handshake. When the connection is over, the list of
all records so far is written as JSON to --record FILE (atomically) and `RECORDED <n>` is
printed on stdout (n: connections recorded so far).

What it does on each connection, in order:
  1. with --wait-for TEXT, waits until a text message equal to TEXT arrives;
  2. sends the scripted messages (--send-text X and --send-binary-hex H, repeatable, in
     the order given), --repeat N times, or again and again with --send-forever until the
     connection closes;
  3. with --close-code C [--close-reason R], starts the closing handshake; otherwise keeps
     the connection open, receiving, until the client closes it.

    record.py --record FILE [--port 0] [--tls CERT KEY] [--subprotocols a,b] [...]
"""
import asyncio
import base64

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from common import announce, announce_port, base_parser, tls_context, write_json_atomically


class RecordingConnection(ServerConnection):
    """Notes the payload of every Ping frame before the library answers it."""

    def process_event(self, event):
        if isinstance(event, Frame) and event.opcode is Opcode.PING:
            self.received_pings.append(base64.b64encode(bytes(event.data)).decode())
        super().process_event(event)

    received_pings = None


def b64(data):
    return base64.b64encode(data).decode()


class Recorder:
    def __init__(self, args):
        self.args = args
        self.records = []

    async def handle(self, websocket):
        args = self.args
        record = {
            "path": websocket.request.path,
            "headers": [[name, value] for name, value in websocket.request.headers.raw_items()],
            "subprotocol": websocket.subprotocol,
            "messages": [],
            "pings": websocket.received_pings,
            "close": None,
            "client_started_close": None,
            "sent": 0,
        }
        go = asyncio.Event()
        if args.wait_for is None:
            go.set()

        async def receive():
            try:
                async for message in websocket:
                    if isinstance(message, str):
                        record["messages"].append({"type": "text", "data": b64(message.encode())})
                        if message == args.wait_for:
                            go.set()
                    else:
                        record["messages"].append({"type": "binary", "data": b64(message)})
            except ConnectionClosed:
                pass

        receiver = asyncio.create_task(receive())
        try:
            waiting = asyncio.create_task(go.wait())
            await asyncio.wait([waiting, receiver], return_when=asyncio.FIRST_COMPLETED)
            if go.is_set():
                rounds = 0
                while args.send_forever or rounds < args.repeat:
                    for kind, data in args.send:
                        await websocket.send(data)
                        record["sent"] += 1
                        # send() need not suspend while the client reads fast; let the
                        # event loop read what the client sends (its Close) meanwhile.
                        await asyncio.sleep(0)
                    rounds += 1
                if args.close_code is not None:
                    await websocket.close(args.close_code, args.close_reason)
            waiting.cancel()
        except ConnectionClosed:
            pass
        await receiver
        await websocket.wait_closed()
        protocol = websocket.protocol
        if protocol.close_rcvd is not None:
            record["close"] = {"code": int(protocol.close_rcvd.code), "reason": protocol.close_rcvd.reason}
        record["client_started_close"] = protocol.close_rcvd_then_sent
        self.records.append(record)
        write_json_atomically(args.record, self.records)
        announce("RECORDED %d" % len(self.records))


def main():
    parser = base_parser(__doc__)
    parser.add_argument("--record", required=True, help="JSON file for the records")
    parser.add_argument("--subprotocols", default="", help="comma-separated subprotocols the server accepts")
    parser.add_argument("--send-text", dest="send", action="append", default=[],
                        type=lambda text: ("text", text), help="send this text message (repeatable)")
    parser.add_argument("--send-binary-hex", dest="send", action="append",
                        type=lambda text: ("binary", bytes.fromhex(text)), help="send these bytes as a binary message")
    parser.add_argument("--repeat", type=int, default=1, help="send the scripted messages N times")
    parser.add_argument("--send-forever", action="store_true", help="send the scripted messages until closed")
    parser.add_argument("--wait-for", help="send only after receiving this text message")
    parser.add_argument("--close-code", type=int, help="then close with this code")
    parser.add_argument("--close-reason", default="", help="and this reason")
    args = parser.parse_args()
    subprotocols = [name for name in args.subprotocols.split(",") if name] or None
    recorder = Recorder(args)

    class Connection(RecordingConnection):
        def __init__(self, *positional, **keywords):
            super().__init__(*positional, **keywords)
            self.received_pings = []

    async def run():
        async with serve(recorder.handle, args.host, args.port, ssl=tls_context(args), subprotocols=subprotocols,
                         compression=None, max_size=None, ping_interval=None, create_connection=Connection) as server:
            announce_port(server.sockets)
            await asyncio.Future()

    asyncio.run(run())


if __name__ == "__main__":
    main()
