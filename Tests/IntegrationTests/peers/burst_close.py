"""A client that sends a burst of binary messages and its Close in one TCP write, then reads
until the server's Close, and compares what came back with what it sent (an echo server's
answer must follow the echoes of every message received before the Close, RFC 6455 §5.5.1).

    burst_close.py URL SHAPE ROUNDS [--deflate] [--cacert FILE] [--seconds S] [--stream]
                   [--half-close]

SHAPE: big (one 200,000-byte message), many (twelve of 16 KiB and one of 3,392 bytes),
fragmented (five messages of 40,000 bytes, each in frames of 7,000 bytes and the rest),
mixed (all three, one after the other). ROUNDS connections, one after the other, each with
fresh random payloads (stopped early after --seconds, default 60). Prints one line per
round that lost something ("short ROUND: got N of M bytes, K of L messages, close CODE",
N counting a last message without its final frame, which is not counted in K; the Close's
CODE is None when it did not come or could not be parsed after an unfinished message)
and then "rounds R short S": the count of rounds whose echo was not the whole burst.

--stream compares the bytes only, not the messages (--exec cat: a program's output is
framed as it comes, not as the client's messages were).

--half-close shuts down the client's sending side of TCP after the Close (ws:// only): the
server must still write what it owes.

Uses websockets' sans-I/O client protocol on a blocking socket, so that the burst and the
Close are one sendall (a library's connection would flush them separately).
"""
import argparse
import os
import socket
import ssl
import sys
import time
from urllib.parse import urlsplit

from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri


def burst(shape):
    """The messages as lists of fragments."""
    if shape == "big":
        return [[os.urandom(200_000)]]
    if shape == "many":
        return [[os.urandom(16384)] for _ in range(12)] + [[os.urandom(3392)]]
    if shape == "fragmented":
        messages = []
        for _ in range(5):
            payload = os.urandom(40_000)
            messages.append([payload[i:i + 7000] for i in range(0, len(payload), 7000)])
        return messages
    return burst("big") + burst("many") + burst("fragmented")


def one_round(url, shape, deflate, cacert, timeout, stream=False, half_close=False):
    uri = parse_uri(url)
    extensions = [ClientPerMessageDeflateFactory()] if deflate else None
    protocol = ClientProtocol(uri, extensions=extensions, max_size=None)
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
    if parts.scheme == "wss":
        context = ssl.create_default_context(cafile=cacert)
        context.check_hostname = False
        sock = context.wrap_socket(sock, server_hostname=parts.hostname)
    try:
        protocol.send_request(protocol.connect())
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.handshake_exc is None and protocol.state.name == "CONNECTING":
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("closed during the handshake")
            protocol.receive_data(data)
            protocol.events_received()
        if protocol.handshake_exc is not None:
            raise protocol.handshake_exc
        messages = burst(shape)
        for fragments in messages:
            for index, piece in enumerate(fragments):
                last = index == len(fragments) - 1
                if index == 0:
                    protocol.send_binary(piece, fin=last)
                else:
                    protocol.send_continuation(piece, fin=last)
        protocol.send_close(1000)
        sock.sendall(b"".join(protocol.data_to_send()))
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received, current, close_code = [], [], None
        deadline = time.monotonic() + timeout
        while close_code is None and time.monotonic() < deadline:
            try:
                data = sock.recv(262144)
            except (ConnectionResetError, ssl.SSLError, socket.timeout):
                break
            if not data:
                break
            protocol.receive_data(data)
            for event in protocol.events_received():
                if isinstance(event, Frame):
                    if event.opcode == Opcode.CLOSE:
                        close_code = int.from_bytes(event.data[:2], "big") if len(event.data) >= 2 else 1005
                    elif event.opcode in (Opcode.BINARY, Opcode.TEXT, Opcode.CONT):
                        current.append(bytes(event.data))
                        if event.fin:
                            received.append(b"".join(current))
                            current = []
        cut = b"".join(current)  # a message whose last frame did not come before the Close
        sent = [b"".join(fragments) for fragments in messages]
        sent_bytes = sum(map(len, sent))
        got_bytes = sum(map(len, received)) + len(cut)
        whole = sum(1 for a, b in zip(sent, received) if a == b)
        if stream:
            ok = b"".join(received) + cut == b"".join(sent) and close_code == 1000
        else:
            ok = received == sent and not cut and close_code == 1000
        return ok, "got %d of %d bytes, %d of %d messages, close %s%s" % (
            got_bytes, sent_bytes, whole, len(sent), close_code,
            " (%s)" % protocol.parser_exc if protocol.parser_exc else "")
    finally:
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("shape", choices=["big", "many", "fragmented", "mixed"])
    parser.add_argument("rounds", type=int)
    parser.add_argument("--deflate", action="store_true")
    parser.add_argument("--cacert")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--half-close", action="store_true")
    args = parser.parse_args()
    start = time.monotonic()
    rounds = short = 0
    for number in range(args.rounds):
        if time.monotonic() - start > args.seconds:
            break
        ok, facts = one_round(args.url, args.shape, args.deflate, args.cacert, timeout=10, stream=args.stream,
                               half_close=args.half_close)
        rounds += 1
        if not ok:
            short += 1
            print("short %d: %s" % (number, facts), flush=True)
    print("rounds %d short %d" % (rounds, short), flush=True)


if __name__ == "__main__":
    main()
