#!/usr/bin/env python3
"""A WebSocket server that does not read until told: it answers one handshake, with a
small receive buffer (SO_RCVBUF, set before listening so the window stays small), then
leaves the client's frames in the kernel until the file given with --go exists; then it
reads every frame, answers the Close and exits.

    slow_reader.py --go FILE [--rcvbuf BYTES] [--port 0]
"""
import argparse
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accept_value  # noqa: E402


def read_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--go", required=True)
    parser.add_argument("--rcvbuf", type=int, default=16384)
    args = parser.parse_args()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(1)
    listener.settimeout(20)
    print("PORT %d" % listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    conn.settimeout(20)
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(4096)
    lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines if ":" in line]
    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: %s\r\n\r\n" % accept_value(headers)).encode())
    deadline = time.monotonic() + 20
    while not os.path.exists(args.go) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        while True:
            first, second = read_exactly(conn, 2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack("!H", read_exactly(conn, 2))[0]
            elif length == 127:
                length = struct.unpack("!Q", read_exactly(conn, 8))[0]
            read_exactly(conn, (4 if second & 0x80 else 0) + length)
            if first & 0x0F == 0x8:
                conn.sendall(b"\x88\x02\x03\xe8")
                break
    except (ConnectionError, socket.timeout):
        pass
    conn.close()


if __name__ == "__main__":
    main()
