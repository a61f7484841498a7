"""Helpers shared by the integration-test peers (not a peer itself).

Every peer binds the port given by --port (0: a free one chosen by the kernel) and prints
`PORT <n>` as its first stdout line, flushed, once it accepts connections. Later stdout
lines are events for the test (`RECORDED <n>` and the like). Peers run until killed.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import ssl
import struct
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def base_parser(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (::1 for IPv6)")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve wss:// with this PEM pair")
    return parser


def tls_context(args):
    if not args.tls:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.tls[0], args.tls[1])
    return context


def announce(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def announce_port(server_sockets):
    announce("PORT %d" % server_sockets[0].getsockname()[1])


def write_json_atomically(path, value):
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(value, handle)
    os.replace(temporary, path)


class Recorder:
    """Keeps one record per connection in --record (a JSON list) and announces each."""

    def __init__(self, args):
        self.args = args
        self.records = []

    def finish(self, record):
        self.records.append(record)
        write_json_atomically(self.args.record, self.records)
        announce("RECORDED %d" % len(self.records))


# --- WebSocket bits the scripted servers write by hand (RFC 6455) ---------------------------

def header(opcode, length, fin=True):
    """A server (unmasked) frame header for `length` payload bytes."""
    head = bytes([(0x80 if fin else 0) | opcode])
    if length < 126:
        return head + bytes([length])
    if length < 1 << 16:
        return head + bytes([126]) + struct.pack("!H", length)
    return head + bytes([127]) + struct.pack("!Q", length)


def frame(opcode, payload, fin=True):
    """A server (unmasked) frame."""
    return header(opcode, len(payload), fin) + payload


def close_frame(code, reason=b""):
    return frame(0x8, struct.pack("!H", code) + reason)


async def read_frame(reader):
    """One frame from `reader`, unmasked: (opcode, fin, payload)."""
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(length)))
    return first & 0x0F, bool(first & 0x80), payload


async def read_request(reader):
    """The client's HTTP request head: (request target, [[name, value], ...])."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append([name, value.strip()])
    return lines[0].split(" ")[1], headers


def accept_value(headers):
    """Sec-WebSocket-Accept for the request's Sec-WebSocket-Key (RFC 6455 §4.2.2)."""
    key = next(value for name, value in headers if name.strip().lower() == "sec-websocket-key")
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


async def relay(reader, writer, upstream_reader, upstream_writer):
    """Copies bytes both ways until both sides end (a proxy's tunnel), then closes both."""

    async def pipe(source, sink):
        try:
            while True:
                data = await source.read(65536)
                if not data:
                    break
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                if sink.can_write_eof():
                    sink.write_eof()
                else:
                    sink.close()
            except (OSError, RuntimeError):
                pass

    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
    writer.close()
    upstream_writer.close()
