"""A WebSocket server on plain asyncio streams that records every frame it receives, for
the tests of --jsonl, --base64, --whole-input, counts and timeouts (PipelineTests.swift).
No WebSocket library: what the client put on the wire is recorded as it was, fragments
and control frames included.

Per connection, in order:
  1. with --wait-messages N, waits until N data messages have arrived;
  2. after --delay S seconds, sends the scripted messages (--send-text T, --send-text-hex H,
     --send-binary-hex H, repeatable, in the order given) --repeat N times, --interval S apart; a message
     is sent in one frame, or in fragments of --fragment BYTES;
  3. with --close-code C [--close-reason R], starts the closing handshake (with
     --send-empty-close: a Close without a status code).
The 101 response goes out after --handshake-delay S; times in the record count from it.
Meanwhile it reads the client's frames: answers pings with pongs (unless --no-pong),
echoes each complete data message after --echo-delay S with --echo (same type, one
frame), and when the client's Close arrives, answers it with the same code (unless
--no-close-echo) and closes TCP (after --linger-after-close S, if given).

Record (JSON list, one object per connection, written to --record FILE atomically when the
connection ends, then `RECORDED <n>` on stdout):
  frames    [[opcode, fin, payload length, seconds since the handshake], ...] as received
  messages  [{"type": "text"|"binary", "length": n, "sha256": hex, "data": base64 or
            null if longer than 1 MiB, "frames": number of frames it came in}, ...]
  pings     payloads of the pings received (base64); pongs likewise
  close     {"code": n or null, "reason": text, "at": seconds since the handshake} or null
  sent      number of scripted messages sent

    frames.py --record FILE [--port 0] [...]
"""
import argparse
import asyncio
import base64
import hashlib
import struct
import time

from common import Recorder, accept_value, announce_port, frame, read_request

def unmask(payload, mask):
    if not payload:
        return payload
    repeated = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(len(payload), "big")


async def read_frame(reader):
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if second & 0x80 else None
    payload = await reader.readexactly(length)
    if mask is not None:
        payload = unmask(payload, mask)
    return first & 0x0F, bool(first & 0x80), payload


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", required=True)
    parser.add_argument("--send-text", dest="send", action="append", default=[],
                        type=lambda text: (0x1, text.encode()))
    parser.add_argument("--send-text-hex", dest="send", action="append",
                        type=lambda text: (0x1, bytes.fromhex(text)), help="a text message given in hex (NUL, ...)")
    parser.add_argument("--send-binary-hex", dest="send", action="append",
                        type=lambda text: (0x2, bytes.fromhex(text)))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--fragment", type=int, default=0, help="send messages in fragments of this size")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between scripted messages")
    parser.add_argument("--handshake-delay", type=float, default=0.0, help="seconds before answering the handshake")
    parser.add_argument("--wait-messages", type=int, default=0)
    parser.add_argument("--send-empty-close", action="store_true", help="then close without a status code")
    parser.add_argument("--close-code", type=int)
    parser.add_argument("--close-reason", default="")
    parser.add_argument("--echo", action="store_true")
    parser.add_argument("--echo-delay", type=float, default=0.0)
    parser.add_argument("--no-pong", action="store_true")
    parser.add_argument("--no-close-echo", action="store_true")
    return parser.parse_args()


class Server(Recorder):
    async def handle(self, reader, writer):
        args = self.args
        record = {"frames": [], "messages": [], "pings": [], "pongs": [], "close": None, "sent": 0}
        start = time.monotonic()
        received = asyncio.Condition()
        tasks = []
        try:
            _, headers = await read_request(reader)
            accept = accept_value(headers)
            if args.handshake_delay:
                await asyncio.sleep(args.handshake_delay)
            start = time.monotonic()
            writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
            await writer.drain()

            async def script():
                async with received:
                    await received.wait_for(lambda: len(record["messages"]) >= args.wait_messages)
                if args.delay:
                    await asyncio.sleep(args.delay)
                for _ in range(args.repeat):
                    for opcode, payload in args.send:
                        if record["close"] is not None:
                            return
                        if args.fragment and len(payload) > args.fragment:
                            pieces = [payload[i:i + args.fragment] for i in range(0, len(payload), args.fragment)]
                            for index, piece in enumerate(pieces):
                                writer.write(frame(opcode if index == 0 else 0x0, piece, fin=index == len(pieces) - 1))
                        else:
                            writer.write(frame(opcode, payload))
                        record["sent"] += 1
                        await writer.drain()
                        if args.interval:
                            await asyncio.sleep(args.interval)
                if record["close"] is not None:
                    return
                if args.send_empty_close:
                    writer.write(frame(0x8, b""))
                elif args.close_code is not None:
                    writer.write(frame(0x8, struct.pack("!H", args.close_code) + args.close_reason.encode()))
                await writer.drain()

            async def echo_later(opcode, payload):
                await asyncio.sleep(args.echo_delay)
                if record["close"] is None:
                    writer.write(frame(opcode, payload))
                    await writer.drain()

            tasks.append(asyncio.create_task(script()))
            kind, parts, count = None, [], 0
            while True:
                try:
                    opcode, fin, payload = await read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                record["frames"].append([opcode, fin, len(payload), round(time.monotonic() - start, 4)])
                if opcode == 0x9:
                    record["pings"].append(base64.b64encode(payload).decode())
                    if not args.no_pong:
                        writer.write(frame(0xA, payload))
                elif opcode == 0xA:
                    record["pongs"].append(base64.b64encode(payload).decode())
                elif opcode == 0x8:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    record["close"] = {"code": code, "reason": payload[2:].decode("utf-8", "replace"),
                                       "at": round(time.monotonic() - start, 4)}
                    if not args.no_close_echo:
                        writer.write(frame(0x8, payload[:2]))
                        await writer.drain()
                        break
                    await reader.read()  # hold the connection open until the client goes
                    break
                elif opcode in (0x0, 0x1, 0x2):
                    if opcode != 0x0:
                        kind, parts, count = opcode, [], 0
                    parts.append(payload)
                    count += 1
                    if fin:
                        data = b"".join(parts)
                        record["messages"].append({
                            "type": "text" if kind == 0x1 else "binary",
                            "length": len(data),
                            "sha256": hashlib.sha256(data).hexdigest(),
                            "data": base64.b64encode(data).decode() if len(data) <= 1 << 20 else None,
                            "frames": count,
                        })
                        async with received:
                            received.notify_all()
                        if args.echo:
                            tasks.append(asyncio.create_task(echo_later(kind, data)))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            writer.close()
            self.finish(record)


async def main():
    args = parse_args()
    server = Server(args)
    listener = await asyncio.start_server(server.handle, args.host, args.port, limit=1 << 20)
    announce_port(listener.sockets)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
