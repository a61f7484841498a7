"""Clients for the client-address tests (--trust-proxy, --proxy-protocol): raw sockets,
bound to a chosen local address (127.0.0.2: a client that is not the proxy).

    client_address.py --port P [--bind A] ask [--header 'Name: value']... [--prefix-hex HEX]
                      [--tls CAFILE] [--unix PATH]
        One connection (to PATH with --unix): the prefix (a PROXY header), then (over TLS
        with --tls, the server's certificate for localhost) a WebSocket upgrade with the
        headers. Prints `MESSAGE text` (the first text message after the 101), `STATUS n`
        (another answer), or `CLOSED n` (the server closed after n bytes and no status line).
    client_address.py --port P [--bind A] bad --count N
        N connections, one after another, cycling through: a PROXY v1 line cut short (then
        our side ends), a malformed v1 line, a v2 header with an unknown family, a v2 header
        cut short, and a valid v1 header from 10.9.9.9 followed by an upgrade whose X-Forwarded-For
        fills the 16 KiB head with 10/8 hops (trust 10.0.0.0/8: every hop is walked). Prints `DONE closed=C upgraded=U other=O` (closed: no byte came back).
    client_address.py --port P hold --from A [--from A]...
        One upgrade from each address in turn, each kept open while the next is made.
        Prints `STATUSES s1 s2 ...` (0: closed without a status).
"""
import argparse
import socket
import ssl
import struct
import sys

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def upgrade(headers):
    lines = [b"GET / HTTP/1.1", b"Host: localhost", b"Upgrade: websocket", b"Connection: Upgrade",
             b"Sec-WebSocket-Key: " + KEY, b"Sec-WebSocket-Version: 13"] + headers
    return b"\r\n".join(lines) + b"\r\n\r\n"


def send(sock, payload):
    try:
        sock.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed before the whole payload went: read_answer says so


def connect(port, bind):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    if bind:
        sock.bind((bind, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def read_answer(sock):
    """(status or None, bytes after the head, total bytes) once the head or the end came."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:  # closed with our bytes unread: a reset, no answer
            chunk = b""
        if not chunk:
            return None, b"", len(data)
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ")[1])
    return status, rest, len(data)


def first_text(sock, rest):
    data = rest
    while len(data) < 2 or len(data) < 2 + (data[1] & 0x7F):
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[2:2 + (data[1] & 0x7F)].decode()


def ask(args):
    if args.unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(args.unix)
    else:
        sock = connect(args.port, args.bind)
    headers = [h.encode() for h in args.header]
    if args.tls:
        send(sock, bytes.fromhex(args.prefix_hex))
        sock = ssl.create_default_context(cafile=args.tls).wrap_socket(sock, server_hostname="localhost")
        send(sock, upgrade(headers))
    else:
        send(sock, bytes.fromhex(args.prefix_hex) + upgrade(headers))
    status, rest, total = read_answer(sock)
    if status is None:
        print(f"CLOSED {total}")
    elif status == 101:
        print(f"MESSAGE {first_text(sock, rest)}")
    else:
        print(f"STATUS {status}")
    sock.close()


def bad_kinds():
    v1 = b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n"
    body = socket.inet_aton("198.51.100.9") + socket.inet_aton("127.0.0.1") + struct.pack(">HH", 1, 2)
    v2_unknown = V2_SIGNATURE + bytes([0x21, 0x51]) + struct.pack(">H", len(body)) + body
    v2_cut = V2_SIGNATURE + bytes([0x21, 0x11]) + struct.pack(">H", len(body)) + body[:4]
    hops = ", ".join(f"10.{i // 250}.{i % 250}.1" for i in range(1500))
    xff = b"X-Forwarded-For: 203.0.113.5, " + hops.encode()
    xff = xff[:16 * 1024 - 300]
    xff = xff[:xff.rindex(b",")]
    trusted = b"PROXY TCP4 10.9.9.9 127.0.0.1 5555 80\r\n"  # a proxy in 10/8: every hop is walked
    return [("cut", v1[:20]), ("malformed", b"PROXY TCP4 203.0.113.7 127.0.0.1 5555\r\n"),
            ("unknown-family", v2_unknown), ("v2-cut", v2_cut), ("xff", trusted + upgrade([xff]))]


def bad(args):
    kinds = bad_kinds()
    closed = upgraded = other = 0
    for i in range(args.count):
        name, payload = kinds[i % len(kinds)]
        sock = connect(args.port, args.bind)
        send(sock, payload)
        if name in ("cut", "v2-cut"):
            sock.shutdown(socket.SHUT_WR)
        status, _, total = read_answer(sock)
        if status is None and total == 0:
            closed += 1
        elif status == 101:
            upgraded += 1
        else:
            other += 1
            print(f"{name}: status {status} after {total} bytes", file=sys.stderr)
        sock.close()
    print(f"DONE closed={closed} upgraded={upgraded} other={other}")


def hold(args):
    held, statuses = [], []
    for address in args.sources:
        sock = connect(args.port, address)
        send(sock, upgrade([]))
        status, _, _ = read_answer(sock)
        statuses.append(str(status or 0))
        held.append(sock)
    print("STATUSES " + " ".join(statuses))
    for sock in held:
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bind")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("ask")
    one.add_argument("--header", action="append", default=[])
    one.add_argument("--prefix-hex", default="")
    one.add_argument("--tls")
    one.add_argument("--unix")
    many = sub.add_parser("bad")
    many.add_argument("--count", type=int, default=1000)
    keep = sub.add_parser("hold")
    keep.add_argument("--from", dest="sources", action="append", required=True)
    args = parser.parse_args()
    {"ask": ask, "bad": bad, "hold": hold}[args.command](args)


if __name__ == "__main__":
    main()
