"""An HTTP CONNECT proxy on asyncio streams, recording what clients asked for.

For each CONNECT it records the request line, the target, the request headers in order and
the Proxy-Authorization value it received (base64 decoded, for the test to compare), then
either refuses (--refuse STATUS, or 407 when --auth is given and the credentials are
missing or wrong) or connects to the target and relays bytes both ways (502 when the target
cannot be reached). After answering it appends the record to the JSON list in --record FILE
(atomically) and prints `RECORDED <n>`. Any other method is answered 405.

    proxy.py --record FILE [--port 0] [--auth USER:PASS] [--refuse 403] [--tls CERT KEY]
             [--scheme Basic]

With --tls the proxy itself speaks TLS (an https:// proxy); --scheme changes the scheme
offered in Proxy-Authenticate (e.g. Negotiate).
"""
import asyncio
import base64

from common import Recorder, announce_port, base_parser, relay, tls_context

REASONS = {403: "Forbidden", 407: "Proxy Authentication Required", 502: "Bad Gateway", 405: "Method Not Allowed"}


class Proxy(Recorder):
    async def refuse(self, writer, status, extra=""):
        body = "proxy says %d\n" % status
        writer.write(("HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (status, REASONS.get(status, "Refused"), extra, len(body), body)).encode())
        await writer.drain()
        writer.close()

    async def handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append([name, value.strip()])
        auth = next((value for name, value in headers if name.lower() == "proxy-authorization"), None)
        decoded = None
        if auth and auth.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(auth[6:]).decode()
            except Exception:
                decoded = "<undecodable>"
        record = {"request_line": lines[0], "method": method, "target": target, "headers": headers,
                  "auth": decoded, "status": None}
        if method != "CONNECT":
            record["status"] = 405
            await self.refuse(writer, 405)
            self.finish(record)
            return
        if self.args.refuse:
            record["status"] = self.args.refuse
            extra = 'Proxy-Authenticate: %s realm="test"\r\n' % self.args.scheme if self.args.refuse == 407 else ""
            await self.refuse(writer, self.args.refuse, extra)
            self.finish(record)
            return
        if self.args.auth and decoded != self.args.auth:
            record["status"] = 407
            await self.refuse(writer, 407, 'Proxy-Authenticate: %s realm="test"\r\n' % self.args.scheme)
            self.finish(record)
            return
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        except (OSError, ValueError):
            record["status"] = 502
            await self.refuse(writer, 502)
            self.finish(record)
            return
        record["status"] = 200
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        self.finish(record)

        await relay(reader, writer, upstream_reader, upstream_writer)


async def main():
    parser = base_parser(__doc__)
    parser.add_argument("--record", required=True)
    parser.add_argument("--auth", help="USER:PASS required in Proxy-Authorization (Basic)")
    parser.add_argument("--refuse", type=int, help="answer every CONNECT with this status")
    parser.add_argument("--scheme", default="Basic", help="scheme offered in Proxy-Authenticate")
    args = parser.parse_args()
    proxy = Proxy(args)
    server = await asyncio.start_server(proxy.handle, args.host, args.port, ssl=tls_context(args))
    announce_port(server.sockets)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
