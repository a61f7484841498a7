"""A server that stalls at one phase of the opening handshake, for tests that cancel a
client there. Plain asyncio streams (no WebSocket library); no TLS of its own.

  --phase tls      reads the client's first bytes (a TLS ClientHello) and never answers
  --phase request  reads the HTTP request and never answers
  --phase open     reads the request and answers a correct 101, then sends nothing; reads
                   the client's frames (with --answer: Pongs for Pings, the Close echoed)

Per connection, stdout gets `STALLED` once the phase is reached, then `PING`, `CLOSE CODE
SECONDS` for frames the client sends and `EOF SECONDS` when it closes the connection (end
of stream or reset); SECONDS since STALLED.

    stall.py --phase NAME [--answer] [--port 0]
"""
import asyncio
import struct
import time

from common import accept_value, announce, announce_port, base_parser, frame, read_frame, read_request


async def handle(reader, writer, args):
    stalled = None
    try:
        if args.phase == "tls":
            await reader.read(1)
        else:
            _, headers = await read_request(reader)
            if args.phase == "open":
                writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Accept: %s\r\n\r\n" % accept_value(headers)).encode())
                await writer.drain()
        stalled = time.monotonic()
        announce("STALLED")
        while True:
            if args.phase != "open":
                if not await reader.read(65536):
                    break
                continue
            opcode, _, payload = await read_frame(reader)
            if opcode == 0x9:
                announce("PING")
                if args.answer:
                    writer.write(frame(0xA, payload))
            elif opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                announce("CLOSE %d %.3f %s" % (code, time.monotonic() - stalled, payload[2:].decode("utf-8", "replace")))
                if args.answer:
                    writer.write(frame(0x8, payload))
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    if stalled is not None:
        announce("EOF %.3f" % (time.monotonic() - stalled))
    writer.close()


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--phase", choices=["tls", "request", "open"], required=True)
    parser.add_argument("--answer", action="store_true", help="answer Pings and echo the Close (phase open)")
    args = parser.parse_args()
    server = await asyncio.start_server(lambda r, w: handle(r, w, args), args.host, args.port)
    announce_port(server.sockets)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
