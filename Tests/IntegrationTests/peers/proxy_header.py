"""A relay that plays a proxy speaking the PROXY protocol (ServerMatrixTests' proxy-protocol
cases): it accepts TCP connections and relays each, byte for byte both ways, to TARGET_PORT
on 127.0.0.1 after first sending a PROXY v1 line that names CLIENT (the address the server
should then report) as the connection's source. TLS passes through untouched, since the
header goes before it (as HAProxy's send-proxy does).

    proxy_header.py TARGET_PORT --client 203.0.113.7:4711 [--port 0]

Prints `PORT <port>` once listening.
"""
import asyncio
import sys

from common import announce_port, base_parser


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        try:
            writer.write_eof()  # half-close: the other direction may still carry data
        except (OSError, RuntimeError):
            pass


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("target_port", type=int)
    parser.add_argument("--client", required=True, help="ADDRESS:PORT the PROXY line names")
    args = parser.parse_args()
    address, _, port = args.client.rpartition(":")

    async def relay(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", args.target_port)
        except OSError:
            client_writer.close()
            return
        server_writer.write(("PROXY TCP4 %s 127.0.0.1 %s %d\r\n" % (address, port, args.target_port)).encode())
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        client_writer.close()
        server_writer.close()

    server = await asyncio.start_server(relay, args.host, args.port)
    announce_port(server.sockets)
    await server.serve_forever()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
