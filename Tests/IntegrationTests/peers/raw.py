"""A scripted WebSocket server on plain asyncio streams (no WebSocket library), for servers
that misbehave. It reads the client's HTTP request, then acts out --scenario:

  with-101         101 and two text frames ("first", "second") in one TCP write; then behaves
  cut-frame        101, text frames "one" and "two", then half of a third frame, then TCP close
  invalid-utf8     101, text frame "ok", then a text frame holding invalid UTF-8
  huge-frame       101, then a binary frame header announcing 2^62 payload bytes and 1 KiB of it
  big-text         101, then a 2000-byte text message
  split-binary     101, then a 65,536-byte binary message in two TCP writes 0.2 s apart (its
                   header and 60,000 bytes, then the rest); then behaves
  silent           101, then reads everything and answers nothing (no pong, no Close)
  no-read          101, then neither reads nor sends anything
  stream-no-pong   101, then a text frame "tick" every 10 ms forever; reads the client's frames,
                   answers no ping, echoes the Close (then stops streaming and closes TCP)
  stream-no-close  101, then a text frame "tick" every 10 ms forever; answers pings, never
                   answers the client's Close (it keeps streaming until the client closes TCP)
  pong-then-close  101; the first Ping is answered by its Pong and a Close 1011 "after pong" in
                   one write; then reads until the client's Close and closes TCP
  close-keep-open  101, Close 1000, then reads everything but never closes TCP
  reject-401       a 401 response with a text body, then TCP close
  no-answer        reads the request and never answers
  slow-101         the 101 dribbled 7 bytes at a time, then text frame "slow"; then behaves
  bad-accept       a 101 with a wrong Sec-WebSocket-Accept
  bad-subprotocol  a 101 choosing subprotocol "never-offered"
  fragmented       text "hello wörld" in three fragments (UTF-8 split across two), a Ping
                   between them, then binary "bin" in two; then behaves
  server-ping      101 and Ping "are you there"; then behaves (the Pong is recorded)
  masked-frame     101 and a masked text frame (servers must not mask)
  reserved-opcode  101 and a frame with reserved opcode 0x3
  close-no-code    101, text "x", an empty Close; then behaves
  close-bad-code   101 and a Close with code 1005 (never allowed on the wire)
  script           sends the bytes of the file --script (after replacing the ASCII text {accept}
                   with the right Sec-WebSocket-Accept value); then --then: behave (the
                   default), close (TCP) or hold (read and ignore everything); --delay S
                   waits S seconds before the script

"Behaves" (after its script, unless the scenario says otherwise): reads the client's frames
(unmasking them), answers pings with pongs, and when the client's Close arrives, echoes it
and closes TCP. Per connection, a record like record.py's (path, headers, messages, pings,
close; events: "message" and "ping" in the order they came) goes to --record FILE and
`RECORDED <n>` to stdout when the connection is over.

    raw.py --scenario NAME --record FILE [--port 0] [--tls CERT KEY]
"""
import asyncio
import base64
import struct

from common import (Recorder, accept_value, announce_port, base_parser, close_frame, frame, read_request,
                    tls_context)


def switching_protocols(headers):
    return ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: %s\r\n\r\n" % accept_value(headers)).encode()


async def read_frame(reader):
    first, second = await reader.readexactly(2)
    opcode = first & 0x0F
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
    payload = bytearray(await reader.readexactly(length))
    for i in range(length):
        payload[i] ^= mask[i % 4]
    return opcode, bool(first & 0x80), bytes(payload)


class Server(Recorder):
    async def behave(self, reader, writer, record, answer_pings=True, echo_close=True):
        """Reads client frames until Close or EOF."""
        message = None
        while True:
            try:
                opcode, fin, payload = await read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if opcode == 0xA:
                record["pongs"].append(base64.b64encode(payload).decode())
            elif opcode == 0x9:
                record["pings"].append(base64.b64encode(payload).decode())
                record["events"].append("ping")
                if answer_pings:
                    writer.write(frame(0xA, payload))
            elif opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                record["close"] = {"code": code, "reason": payload[2:].decode("utf-8", "replace")}
                if echo_close:
                    writer.write(close_frame(code) if len(payload) >= 2 else frame(0x8, b""))
                    await writer.drain()
                return
            elif opcode in (0x1, 0x2, 0x0):
                if opcode != 0x0:
                    message = {"type": "text" if opcode == 0x1 else "binary", "data": b""}
                message["data"] += payload
                if fin:
                    record["messages"].append({"type": message["type"],
                                               "data": base64.b64encode(message["data"]).decode()})
                    record["events"].append("message")

    async def handle(self, reader, writer):
        scenario = self.args.scenario
        record = {"path": None, "headers": [], "messages": [], "pings": [], "pongs": [], "close": None, "events": []}
        try:
            record["path"], record["headers"] = await read_request(reader)
            ok = switching_protocols(record["headers"])
            if scenario == "with-101":
                writer.write(ok + frame(0x1, b"first") + frame(0x1, b"second"))
                await self.behave(reader, writer, record)
            elif scenario == "cut-frame":
                writer.write(ok + frame(0x1, b"one") + frame(0x1, b"two"))
                third = frame(0x1, b"three, never complete")
                writer.write(third[: len(third) // 2])
                await writer.drain()
            elif scenario == "invalid-utf8":
                writer.write(ok + frame(0x1, b"ok") + frame(0x1, b"bad \xff\xfe here"))
                await self.behave(reader, writer, record)
            elif scenario == "huge-frame":
                writer.write(ok + bytes([0x82, 127]) + struct.pack("!Q", 1 << 62) + b"\0" * 1024)
                await self.behave(reader, writer, record)
            elif scenario == "big-text":
                writer.write(ok + frame(0x1, b"x" * 2000))
                await self.behave(reader, writer, record)
            elif scenario == "split-binary":
                whole = frame(0x2, bytes(range(256)) * 256)
                writer.write(ok + whole[:60010])
                await writer.drain()
                await asyncio.sleep(0.2)
                writer.write(whole[60010:])
                await self.behave(reader, writer, record)
            elif scenario == "stream-no-read":
                # Keeps sending but never reads again: our pings and Close go unanswered.
                writer.write(ok)
                while True:
                    writer.write(frame(0x1, b"tick"))
                    await writer.drain()
                    await asyncio.sleep(0.01)
            elif scenario == "silent":
                writer.write(ok)
                await self.behave(reader, writer, record, answer_pings=False, echo_close=False)
                await asyncio.Future()
            elif scenario == "no-read":
                writer.write(ok)
                await writer.drain()
                await asyncio.Future()
            elif scenario in ("stream-no-pong", "stream-no-close"):
                writer.write(ok)

                async def stream():
                    while True:
                        writer.write(frame(0x1, b"tick"))
                        await writer.drain()
                        await asyncio.sleep(0.01)
                streaming = asyncio.ensure_future(stream())
                try:
                    if scenario == "stream-no-pong":
                        await self.behave(reader, writer, record, answer_pings=False)
                    else:
                        # The Close is not answered: the ticks go on until the client hangs up.
                        await self.behave(reader, writer, record, echo_close=False)
                        self.finish(record)
                        record = None
                        await streaming
                except (ConnectionError, asyncio.CancelledError):
                    pass
                finally:
                    streaming.cancel()
            elif scenario == "pong-then-close":
                writer.write(ok)
                while True:
                    opcode, _, payload = await read_frame(reader)
                    if opcode == 0x9:
                        record["pings"].append(base64.b64encode(payload).decode())
                        writer.write(frame(0xA, payload) + frame(0x8, struct.pack("!H", 1011) + b"after pong"))
                        await writer.drain()
                    elif opcode == 0x8:
                        record["close"] = {"code": struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005,
                                           "reason": payload[2:].decode("utf-8", "replace")}
                        break
            elif scenario == "close-keep-open":
                writer.write(ok + close_frame(1000))
                await self.behave(reader, writer, record, echo_close=False)
                self.finish(record)
                record = None
                await asyncio.Future()
            elif scenario == "reject-401":
                body = b'{"error": "token expired", "hint": "renew it at https://auth.example/"}'
                writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
            elif scenario == "no-answer":
                await asyncio.Future()
            elif scenario == "script":
                accept = accept_value(record["headers"]).encode()
                if self.args.delay:
                    await asyncio.sleep(self.args.delay)
                with open(self.args.script, "rb") as handle:
                    writer.write(handle.read().replace(b"{accept}", accept))
                await writer.drain()
                if self.args.then == "behave":
                    await self.behave(reader, writer, record)
                elif self.args.then == "hold":
                    await self.behave(reader, writer, record, answer_pings=False, echo_close=False)
                    self.finish(record)
                    record = None
                    await asyncio.Future()
            elif scenario == "slow-101":
                for start in range(0, len(ok), 7):
                    writer.write(ok[start:start + 7])
                    await writer.drain()
                    await asyncio.sleep(0.005)
                writer.write(frame(0x1, b"slow"))
                await self.behave(reader, writer, record)
            elif scenario == "bad-accept":
                writer.write(ok.replace(b"Sec-WebSocket-Accept: ", b"Sec-WebSocket-Accept: x"))
                await writer.drain()
                await reader.read()
            elif scenario == "bad-subprotocol":
                writer.write(ok[:-2] + b"Sec-WebSocket-Protocol: never-offered\r\n\r\n")
                await writer.drain()
                await reader.read()
            elif scenario == "fragmented":
                text = "hello wörld".encode()
                cut = text.index(b"\xc3") + 1  # inside the two bytes of "ö"
                writer.write(ok + frame(0x1, text[:3], fin=False) + frame(0x9, b"between")
                             + frame(0x0, text[3:cut], fin=False) + frame(0x0, text[cut:])
                             + frame(0x2, b"b", fin=False) + frame(0x0, b"in"))
                await self.behave(reader, writer, record)
            elif scenario == "server-ping":
                writer.write(ok + frame(0x9, b"are you there"))
                await self.behave(reader, writer, record)
            elif scenario == "masked-frame":
                writer.write(ok + bytes([0x81, 0x80 | 2]) + b"\x01\x02\x03\x04" + bytes([ord("h") ^ 1, ord("i") ^ 2]))
                await self.behave(reader, writer, record)
            elif scenario == "reserved-opcode":
                writer.write(ok + frame(0x3, b"??"))
                await self.behave(reader, writer, record)
            elif scenario == "close-no-code":
                writer.write(ok + frame(0x1, b"x") + frame(0x8, b""))
                await self.behave(reader, writer, record, echo_close=False)
            elif scenario == "close-bad-code":
                writer.write(ok + close_frame(1005))
                await self.behave(reader, writer, record, echo_close=False)
            else:
                raise SystemExit("unknown scenario " + scenario)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            if record is not None:
                self.finish(record)


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--script", help="scenario script: a file with the bytes to send")
    parser.add_argument("--then", choices=["behave", "close", "hold"], default="behave")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the script's bytes")
    args = parser.parse_args()
    server = Server(args)
    listener = await asyncio.start_server(server.handle, args.host, args.port, ssl=tls_context(args))
    announce_port(listener.sockets)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
