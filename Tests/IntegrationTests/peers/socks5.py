"""A SOCKS5 server (RFC 1928) with optional username/password authentication (RFC 1929),
recording what clients asked for.

For each connection it records the methods offered, the method chosen, the credentials
received, the address type of the CONNECT request ("ipv4", "ipv6" or "domain") and its
target host and port. It then connects (resolving a domain name itself) and relays, or
answers with --fail-reply CODE. The record is appended to the JSON list in --record FILE
and `RECORDED <n>` printed once the CONNECT is answered (or the exchange failed).

    socks5.py --record FILE [--port 0] [--auth USER:PASS] [--fail-reply 5]
"""
import asyncio
import ipaddress
import socket
import struct

from common import Recorder, announce_port, base_parser, relay


class Server(Recorder):
    async def handle(self, reader, writer):
        record = {"methods": None, "method": None, "user": None, "password": None, "atyp": None,
                  "host": None, "port": None, "reply": None}
        try:
            await self.serve(reader, writer, record)
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            record["error"] = repr(error)
            self.finish(record)
            writer.close()

    async def serve(self, reader, writer, record):
        version, count = await reader.readexactly(2)
        methods = list(await reader.readexactly(count))
        record["methods"] = methods
        if version != 5:
            writer.close()
            return self.finish(record)
        wanted = 2 if self.args.auth else 0
        if wanted not in methods:
            record["method"] = 0xFF
            writer.write(bytes([5, 0xFF]))
            await writer.drain()
            writer.close()
            return self.finish(record)
        record["method"] = wanted
        writer.write(bytes([5, wanted]))
        if wanted == 2:
            _, ulen = await reader.readexactly(2)
            user = (await reader.readexactly(ulen)).decode()
            (plen,) = await reader.readexactly(1)
            password = (await reader.readexactly(plen)).decode()
            record["user"], record["password"] = user, password
            ok = "%s:%s" % (user, password) == self.args.auth
            writer.write(bytes([1, 0 if ok else 1]))
            await writer.drain()
            if not ok:
                writer.close()
                return self.finish(record)
        _, command, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
            record["atyp"] = "ipv4"
        elif atyp == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
            record["atyp"] = "ipv6"
        else:
            (length,) = await reader.readexactly(1)
            host = (await reader.readexactly(length)).decode()
            record["atyp"] = "domain"
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        record["host"], record["port"] = host, port

        def reply(code):
            return bytes([5, code, 0, 1]) + socket.inet_aton("127.0.0.1") + struct.pack("!H", 1080)

        if self.args.fail_reply:
            record["reply"] = self.args.fail_reply
            writer.write(reply(self.args.fail_reply))
            await writer.drain()
            writer.close()
            return self.finish(record)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            record["reply"] = 5
            writer.write(reply(5))
            await writer.drain()
            writer.close()
            return self.finish(record)
        record["reply"] = 0
        writer.write(reply(0))
        await writer.drain()
        self.finish(record)

        await relay(reader, writer, upstream_reader, upstream_writer)


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--record", required=True)
    parser.add_argument("--auth", help="USER:PASS required (RFC 1929)")
    parser.add_argument("--fail-reply", type=int, help="answer CONNECT with this reply code")
    args = parser.parse_args()
    server = Server(args)
    listener = await asyncio.start_server(server.handle, args.host, args.port)
    announce_port(listener.sockets)
    async with listener:
        await listener.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
