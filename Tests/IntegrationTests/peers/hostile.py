"""Hostile and measuring WebSocket servers on plain asyncio streams (no WebSocket library),
for the HostilePeerTests / LocalInputTests / NoDataLossTests suites. After reading the
client's request and answering 101 (except `endless-headers`), it acts out --scenario:

  sink             reads the client's frames with a streaming parser (payloads are never
                   held whole: a 1 GiB upload costs no memory) and checks them; answers
                   pings, echoes the Close, then closes TCP (with --hold: records, then keeps
                   TCP open forever, whatever the client does). --start-delay S waits before
                   the first read, --read-delay S sleeps after every read of --read-size
                   bytes (a slow reader). --check lines: text message i (1-based) must be
                   "L<i>"; --check pattern: the payload bytes of all messages, put end to
                   end, must be PATTERN (below) repeated, from offset 0.
  ping-flood       sends --count pings (payload: 8-byte big-endian index, padded with "p"
                   to --size bytes) as fast as it can without reading, then reads until the
                   pong for the last ping (counting pongs), then Close 1000; then like sink.
  deaf-ping-flood  never reads while it sends --count pings (as ping-flood) and then waits
                   --quiet S more; then reads what the client sent until EOF (counting
                   pongs, messages and its Close; `pongs_after_gap`: the pongs after the
                   first ping left unanswered). Prints FLOODED after the flood. --rcvbuf B shrinks the listening socket's
                   receive buffer (so the kernel holds little of what the client writes).
  flood            sends --count binary messages of --size bytes (the 8-byte big-endian
                   index, then PATTERN bytes), then Close 1000; then like sink.
  send-close       sends --count text messages (message(i) below), then Close 1000; then
                   like sink (--then behave) or closes TCP at once (--then close).
  endless-headers  answers "HTTP/1.1 101 Switching Protocols" and then header lines, forever
                   (or --limit bytes, then holds), until the client goes away.
  huge-stream      sends a text message "before", then a binary frame header announcing
                   2^62 payload bytes, then payload bytes forever while reading the client.
  fragment-overflow  sends fragments of --size bytes of one binary message, never FIN,
                   forever while reading the client (the client must refuse it with 1009
                   once the total passes its --max-message-size).
  echo-secrets     a 101 whose headers echo secrets (Set-Cookie, X-Api-Key), then like sink.

Per connection a JSON record goes to --record FILE (a list, one entry per connection,
written atomically) and `RECORDED <n>` to stdout; `PROGRESS <bytes>` lines report payload
bytes received (sink) every 16 MiB. Record fields: messages, bytes, types, frames,
max_frame, close {code, reason}, close_at (seconds from the 101 to the client's Close),
errors (a list: partial frame at EOF, data after Close, bad mask bit, content mismatch...),
pings, pongs, last_pong, sent, and `sizes` (the first 1000 message sizes).

    hostile.py --scenario NAME --record FILE [--port 0] [options]
"""
import asyncio
import base64
import socket
import struct
import time

from common import (Recorder, accept_value, announce, announce_port, base_parser, close_frame, frame, header,
                    read_request)

# 251 bytes (a prime: never aligned with frame or buffer sizes); the tests build the same.
PATTERN = bytes((i * 37 + 11) & 0xFF for i in range(251))
# Printable (for text payloads): 61 ASCII characters.
TEXT_PATTERN = bytes(0x30 + (i * 7) % 61 for i in range(61))


def message(i):
    """send-close's message i (0-based): "m<i>:" then (i * 7919) % 9000 letters."""
    return b"m%d:" % i + bytes([0x61 + i % 26]) * ((i * 7919) % 9000)


def unmask(data, mask, offset):
    """XOR `data` with the 4-byte `mask` starting at mask position `offset` (fast, no loop)."""
    n = len(data)
    if n == 0:
        return b""
    shift = offset % 4
    key = (mask[shift:] + mask[:shift]) * (n // 4 + 1)
    return (int.from_bytes(data, "little") ^ int.from_bytes(key[:n], "little")).to_bytes(n, "little")


class Sink:
    """Streaming parser of client frames; checks and counts, never holds a payload whole."""

    def __init__(self, args, record, writer, started):
        self.args = args
        self.record = record
        self.writer = writer
        self.started = started
        self.buffer = bytearray()
        self.header = None          # (fin, opcode, length, mask) of the frame being read
        self.frame_done = 0         # payload bytes of the current frame already read
        self.control = bytearray()  # payload of the current control frame
        self.message_type = None
        self.message_bytes = 0
        self.line_parts = []        # --check lines: pieces of the current text message
        self.pattern_offset = 0     # --check pattern: stream offset
        self.closed = False
        self.next_progress = 16 << 20
        self.expected_pattern = None
        self.pong_order = None      # deaf-ping-flood: {"next": index expected, "after_gap": count}

    def error(self, text):
        if len(self.record["errors"]) < 20:
            self.record["errors"].append(text)

    def feed(self, data):
        if self.closed:
            if data:
                self.error("%d bytes after the Close" % len(data))
            return
        self.buffer += data
        position = 0
        buffer = self.buffer
        while not self.closed:
            if self.header is None:
                available = len(buffer) - position
                if available < 2:
                    break
                first, second = buffer[position], buffer[position + 1]
                length = second & 0x7F
                need = 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if second & 0x80 else 0)
                if available < need:
                    break
                index = position + 2
                if length == 126:
                    length = struct.unpack_from("!H", buffer, index)[0]
                    index += 2
                elif length == 127:
                    length = struct.unpack_from("!Q", buffer, index)[0]
                    index += 8
                if second & 0x80:
                    mask = bytes(buffer[index:index + 4])
                    index += 4
                else:
                    mask = b"\0\0\0\0"
                    self.error("unmasked client frame")
                if first & 0x70:
                    self.error("reserved bits set")
                position = index
                self.header = (bool(first & 0x80), first & 0x0F, length, mask)
                self.frame_done = 0
                self.control = bytearray()
                self.record["frames"] += 1
                self.record["max_frame"] = max(self.record["max_frame"], length)
                self.start_frame()
            fin, opcode, length, mask = self.header
            take = min(length - self.frame_done, len(buffer) - position)
            if take > 0:
                chunk = unmask(bytes(buffer[position:position + take]), mask, self.frame_done)
                position += take
                self.frame_done += take
                self.payload(opcode, chunk)
            if self.frame_done < length:
                break
            self.header = None
            self.end_frame(fin, opcode)
        del self.buffer[:position]
        if self.closed and self.buffer:
            self.error("%d bytes after the Close" % len(self.buffer))
            self.buffer.clear()

    def start_frame(self):
        fin, opcode, length, mask = self.header
        if opcode in (0x1, 0x2):
            if self.message_type is not None:
                self.error("new message inside a fragmented one")
            self.message_type = "text" if opcode == 0x1 else "binary"
            self.message_bytes = 0
            self.line_parts = []
        elif opcode == 0x0:
            if self.message_type is None:
                self.error("continuation without a message")
        elif opcode in (0x8, 0x9, 0xA):
            if length > 125 or not fin:
                self.error("bad control frame")
        else:
            self.error("reserved opcode %d" % opcode)

    def payload(self, opcode, chunk):
        if opcode >= 0x8:
            self.control += chunk
            return
        self.message_bytes += len(chunk)
        self.record["bytes"] += len(chunk)
        if self.record["bytes"] >= self.next_progress:
            announce("PROGRESS %d" % self.record["bytes"])
            self.next_progress += 16 << 20
        check = self.args.check
        if check == "lines":
            self.line_parts.append(chunk)
        elif check == "pattern":
            pattern = TEXT_PATTERN if self.message_type == "text" else PATTERN
            start = self.pattern_offset % len(pattern)
            expected = (pattern * ((start + len(chunk)) // len(pattern) + 2))[start:start + len(chunk)]
            if chunk != expected:
                self.error("content differs from the pattern at stream offset %d" % self.pattern_offset)
            self.pattern_offset += len(chunk)

    def end_frame(self, fin, opcode):
        record = self.record
        if opcode == 0x9:
            record["pings"] += 1
            self.writer.write(frame(0xA, bytes(self.control)))
        elif opcode == 0xA:
            record["pongs"] += 1
            record["last_pong"] = base64.b64encode(bytes(self.control)).decode()
            order = self.pong_order
            if order is not None and len(self.control) >= 8:
                # Pongs answer pings 0, 1, 2... until the first one skipped; count those after it.
                index = struct.unpack("!Q", bytes(self.control[:8]))[0]
                if order["after_gap"] or index != order["next"]:
                    order["after_gap"] += 1
                order["next"] = index + 1
        elif opcode == 0x8:
            payload = bytes(self.control)
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
            record["close"] = {"code": code, "reason": payload[2:].decode("utf-8", "replace")}
            record["close_at"] = round(time.monotonic() - self.started, 3)
            record["messages_before_close"] = record["messages"]
            self.writer.write(close_frame(code) if len(payload) >= 2 else frame(0x8, b""))
            self.closed = True
        elif fin and opcode in (0x0, 0x1, 0x2) and self.message_type is not None:
            record["messages"] += 1
            record["types"][self.message_type] = record["types"].get(self.message_type, 0) + 1
            if len(record["sizes"]) < 1000:
                record["sizes"].append(self.message_bytes)
            if self.args.check == "lines":
                text = b"".join(self.line_parts)
                if self.message_type != "text" or text != b"L%d" % record["messages"]:
                    self.error("message %d is %r" % (record["messages"], text[:40]))
            self.message_type = None

    def finish(self):
        """The client closed TCP (EOF)."""
        if not self.closed and (self.header is not None or self.buffer):
            fin, opcode, length, mask = self.header or (None, None, None, None)
            self.error("EOF inside a frame (opcode %s, %s of %s payload bytes, %d bytes unparsed)"
                       % (opcode, self.frame_done, length, len(self.buffer)))
        if self.message_type is not None and not self.closed:
            self.error("EOF inside a fragmented message")


class Server(Recorder):
    async def sink(self, reader, writer, record, started, first_delay=0.0):
        args = self.args
        parser = Sink(args, record, writer, started)
        delay = args.start_delay if first_delay == 0.0 else first_delay
        if delay:
            await asyncio.sleep(delay)
        while not parser.closed:
            try:
                data = await reader.read(args.read_size)
            except ConnectionError as error:
                parser.error("read failed: %s" % error)
                break
            if not data:
                parser.finish()
                break
            parser.feed(data)
            await writer.drain()
            if args.read_delay:
                await asyncio.sleep(args.read_delay)
        if parser.closed:
            # Whatever still comes before the client's TCP close must be nothing.
            try:
                rest = await asyncio.wait_for(reader.read(), None if args.hold else 3)
                if rest:
                    parser.error("%d bytes after the Close" % len(rest))
            except (asyncio.TimeoutError, ConnectionError):
                pass
            if args.hold:
                # Record now, then never close TCP (the client must not wait for it).
                self.finish(record)
                record["held"] = True
                await asyncio.Future()

    async def send_pings(self, writer, record, started):
        """ping-flood's pings, as fast as the socket takes them, without reading; returns the padding."""
        args = self.args
        padding = b"p" * max(0, args.size - 8)
        for i in range(args.count):
            writer.write(frame(0x9, struct.pack("!Q", i) + padding))
            if i % 1000 == 999:
                await writer.drain()
        await writer.drain()
        record["sent"] = args.count
        record["flood_seconds"] = round(time.monotonic() - started, 3)
        return padding

    async def background_sink(self, reader, writer, record, started):
        """Reads the client (answering pings, noting its Close) while we keep sending."""
        task = asyncio.create_task(self.sink(reader, writer, record, started))
        return task

    async def handle(self, reader, writer):
        args = self.args
        scenario = args.scenario
        record = {"path": None, "headers": [], "messages": 0, "bytes": 0, "types": {}, "frames": 0, "max_frame": 0,
                  "sizes": [], "close": None, "close_at": None, "messages_before_close": None, "errors": [],
                  "pings": 0, "pongs": 0, "last_pong": None, "sent": 0, "sent_bytes": 0, "flood_seconds": None}
        try:
            record["path"], record["headers"] = await read_request(reader)
            ok = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: %s\r\n" % accept_value(record["headers"])).encode()
            if scenario == "endless-headers":
                writer.write(b"HTTP/1.1 101 Switching Protocols\r\n")
                line = 0
                while args.limit is None or record["sent_bytes"] < args.limit:
                    chunk = b"".join(b"X-Never-Ending-%d: %s\r\n" % (line + j, b"h" * 40) for j in range(64))
                    line += 64
                    writer.write(chunk)
                    record["sent_bytes"] += len(chunk)
                    await writer.drain()
                await reader.read()
                return
            if scenario == "echo-secrets":
                ok += ("Set-Cookie: session=%s\r\nX-Api-Key: %s\r\n" % (args.secret, args.secret)).encode()
            writer.write(ok + b"\r\n")
            started = time.monotonic()
            if scenario in ("sink", "echo-secrets"):
                await self.sink(reader, writer, record, started)
            elif scenario == "ping-flood":
                padding = await self.send_pings(writer, record, started)
                # Read pongs until the one for the last ping (at most 20 s).
                last = base64.b64encode(struct.pack("!Q", args.count - 1) + padding).decode()
                parser = Sink(args, record, writer, started)
                deadline = time.monotonic() + 20
                while record["last_pong"] != last and time.monotonic() < deadline and not parser.closed:
                    try:
                        data = await asyncio.wait_for(reader.read(65536), max(0.1, deadline - time.monotonic()))
                    except asyncio.TimeoutError:
                        break
                    if not data:
                        parser.finish()
                        break
                    parser.feed(data)
                record["pongs_before_close"] = record["pongs"]
                writer.write(close_frame(1000))
                await writer.drain()
                while not parser.closed:
                    data = await reader.read(65536)
                    if not data:
                        parser.finish()
                        break
                    parser.feed(data)
            elif scenario == "deaf-ping-flood":
                await self.send_pings(writer, record, started)
                announce("FLOODED")
                await asyncio.sleep(args.quiet)
                parser = Sink(args, record, writer, started)
                parser.pong_order = {"next": 0, "after_gap": 0}
                while True:
                    try:
                        data = await reader.read(65536)
                    except ConnectionError as error:
                        parser.error("read failed: %s" % error)
                        break
                    if not data:
                        break
                    parser.feed(data)
                record["pongs_before_close"] = record["pongs"]
                record["pongs_after_gap"] = parser.pong_order["after_gap"]
            elif scenario == "flood":
                task = await self.background_sink(reader, writer, record, started)
                body = (PATTERN * (args.size // len(PATTERN) + 1))[: max(0, args.size - 8)]
                head = header(0x2, args.size)
                for i in range(args.count):
                    writer.write(head + struct.pack("!Q", i))
                    writer.write(body)
                    record["sent"] += 1
                    await writer.drain()
                    if task.done():
                        break
                record["flood_seconds"] = round(time.monotonic() - started, 3)
                writer.write(close_frame(1000))
                await writer.drain()
                await task
            elif scenario == "send-close":
                for i in range(args.count):
                    writer.write(frame(0x1, message(i)))
                    record["sent"] += 1
                    if i % 100 == 99:
                        await writer.drain()
                writer.write(close_frame(1000))
                await writer.drain()
                if args.then == "behave":
                    await self.sink(reader, writer, record, started)
            elif scenario == "huge-stream":
                task = await self.background_sink(reader, writer, record, started)
                writer.write(frame(0x1, b"before") + bytes([0x82, 127]) + struct.pack("!Q", 1 << 62))
                started_huge = time.monotonic()
                zeros = b"\0" * 65536
                while not task.done():
                    writer.write(zeros)
                    record["sent_bytes"] += len(zeros)
                    await writer.drain()
                await task
                if record["close_at"] is not None:
                    record["close_at"] = round(record["close_at"] - (started_huge - started), 3)
            elif scenario == "fragment-overflow":
                task = await self.background_sink(reader, writer, record, started)
                piece = b"f" * args.size
                opcode = 0x2
                while not task.done():
                    writer.write(frame(opcode, piece, fin=False))
                    opcode = 0x0
                    record["sent_bytes"] += len(piece)
                    await writer.drain()
                await task
            else:
                raise SystemExit("unknown scenario " + scenario)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass
            if not record.get("held"):
                self.finish(record)


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--size", type=int, default=65536)
    parser.add_argument("--limit", type=int, help="endless-headers: stop after this many bytes and hold")
    parser.add_argument("--check", choices=["none", "lines", "pattern"], default="none")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--read-delay", type=float, default=0.0)
    parser.add_argument("--read-size", type=int, default=262144)
    parser.add_argument("--then", choices=["behave", "close"], default="behave")
    parser.add_argument("--secret", default="")
    parser.add_argument("--hold", action="store_true", help="sink: after the Close, keep TCP open forever")
    parser.add_argument("--quiet", type=float, default=5.0, help="deaf-ping-flood: seconds without reading after the flood")
    parser.add_argument("--rcvbuf", type=int, help="SO_RCVBUF of the listening socket, bytes")
    args = parser.parse_args()
    server = Server(args)
    sock = None
    if args.rcvbuf:
        sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
        sock.bind((args.host, args.port))
        listener = await asyncio.start_server(server.handle, sock=sock, limit=1 << 20)
    else:
        listener = await asyncio.start_server(server.handle, args.host, args.port, limit=1 << 20)
    announce_port(listener.sockets)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
