"""Raw HTTP/1.1 on one connection for the static-file tests (no library that would tidy
what the server sends).

    http_client.py PORT SPEC [--tls] [--send-all]
        SPEC is a JSON list of requests, each {"method", "target", "headers": {..}} or
        {"raw": "..."}; they go one by one on ONE connection (with --send-all: all in one
        write, pipelined). Each answer is read by its Content-Length (none for HEAD, 304 and
        101). Prints one JSON object per answer: {"status", "headers": [[name, value]...],
        "length", "body" (text, first 200 bytes), "sha256"}; then {"closed": true} if the
        server closed the connection after the last answer (within 2 s) or {"closed": false}.
    http_client.py slow PORT TARGET N SECS
        N connections GET TARGET and each reads 4 KiB every 100 ms (SO_RCVBUF 16 KiB) for
        SECS; prints {"connections": N, "read": bytes read in all, "statuses": [...]}.
    http_client.py many PORT TARGET N [--upgrade]
        N connections at once, each GET TARGET (a WebSocket upgrade with --upgrade) and held
        open; prints {"statuses": {STATUS: count}} of the answers that came within 3 s (the
        rest are not counted).
"""
import hashlib
import json
import socket
import ssl
import sys
import time


def connect(port, tls):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        s = context.wrap_socket(s, server_hostname="localhost")
    return s


def encode(request):
    if "raw" in request:
        return request["raw"].encode("latin-1")
    lines = [f'{request.get("method", "GET")} {request["target"]} HTTP/{request.get("version", "1.1")}', "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in request.get("headers", {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Reader:
    def __init__(self, s):
        self.s = s
        self.data = b""

    def more(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise EOFError
        self.data += chunk

    def head(self):
        while b"\r\n\r\n" not in self.data:
            self.more()
        head, self.data = self.data.split(b"\r\n\r\n", 1)
        return head.decode("latin-1")

    def body(self, n):
        digest = hashlib.sha256()
        first = b""
        while n > 0:
            if not self.data:
                self.more()
            piece, self.data = self.data[:n], self.data[n:]
            n -= len(piece)
            digest.update(piece)
            if len(first) < 200:
                first += piece[: 200 - len(first)]
        return first, digest.hexdigest()


def answer(reader, method):
    head = reader.head()
    lines = head.split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = [line.split(": ", 1) for line in lines[1:]]
    length = 0
    if method != "HEAD" and status not in (101, 304):
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    first, digest = reader.body(length)
    return {"status": status, "reason": lines[0].split(" ", 2)[2], "headers": headers, "length": length,
            "body": first.decode("utf-8", "replace"), "sha256": digest}


def exchange(port, spec, tls, send_all):
    requests = json.loads(spec)
    s = connect(port, tls)
    reader = Reader(s)
    if send_all:
        s.sendall(b"".join(encode(r) for r in requests))
    for r in requests:
        if not send_all:
            s.sendall(encode(r))
        method = r.get("method", "GET") if "raw" not in r else r["raw"].split(" ")[0]
        print(json.dumps(answer(reader, method)), flush=True)
    s.settimeout(2)
    try:
        reader.more()
        closed = False
    except EOFError:
        closed = True
    except (socket.timeout, TimeoutError):
        closed = False
    except (ConnectionResetError, ssl.SSLError):
        closed = True
    print(json.dumps({"closed": closed}), flush=True)


def many(port, target, n, upgrade=False):
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
               "Sec-WebSocket-Version": "13"} if upgrade else {}
    sockets = []
    for _ in range(int(n)):
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
        s.sendall(encode({"target": target, "headers": headers}))
        sockets.append(s)
    statuses = {}
    end = time.monotonic() + 3
    for s in sockets:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            line = s.recv(64).split(b"\r\n")[0].decode("latin-1")
        except (socket.timeout, TimeoutError, ConnectionResetError):
            continue
        if line:
            status = line.split(" ")[1]
            statuses[status] = statuses.get(status, 0) + 1
    print(json.dumps({"statuses": statuses}), flush=True)


def slow(port, target, n, seconds):
    sockets = []
    for _ in range(int(n)):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(10)
        s.connect(("127.0.0.1", int(port)))
        s.sendall(encode({"target": target}))
        sockets.append(s)
    total = 0
    statuses = set()
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        for s in sockets:
            s.setblocking(False)
            try:
                chunk = s.recv(4096)
                if total < 100 * 4096 and chunk.startswith(b"HTTP/1.1 "):
                    statuses.add(int(chunk[9:12]))
                total += len(chunk)
            except BlockingIOError:
                pass
        time.sleep(0.1)
    print(json.dumps({"connections": len(sockets), "read": total, "statuses": sorted(statuses)}), flush=True)
    for s in sockets:
        s.close()


if __name__ == "__main__":
    if sys.argv[1] == "slow":
        slow(*sys.argv[2:6])
    elif sys.argv[1] == "many":
        many(*sys.argv[2:5], upgrade="--upgrade" in sys.argv)
    else:
        exchange(sys.argv[1], sys.argv[2], "--tls" in sys.argv, "--send-all" in sys.argv)
