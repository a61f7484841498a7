"""TLS clients of `wspipe -l --cert` in the server TLS tests (Python `websockets` and `ssl`).

    tls_client.py echo URL CA [CERT KEY]  a websockets client over wss (trusting CA; with a client
                                          certificate when given): messages of both types; prints
                                          "text:..." / "binary:N:same" per answer, then "closed CODE";
                                          a refused TLS handshake prints "refused TYPE: REASON"
    tls_client.py version PORT CA MAX     a TLS handshake allowing at most TLS MAX (1.2 or 1.3); prints
                                          "ok VERSION" or "refused REASON"
    tls_client.py garbage PORT            sends bytes that are not a ClientHello; prints "closed" when the
                                          server closes the connection (or "still open" after 10 s)
    tls_client.py pipelined PORT CA N     right after the TLS handshake, corked, the request and N masked
                                          text frames "m0".."mN-1", each its own TLS record; prints
                                          the status line, then the N answers
    tls_client.py stall PORT SECS         connects and sends nothing; prints "closed after S" when the
                                          server drops it (or "still open" after SECS)
"""
import asyncio
import os
import socket
import ssl
import sys
import time


def context(ca, cert=None, key=None):
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


async def echo(url, ca, cert=None, key=None):
    from websockets.asyncio.client import connect
    try:
        async with connect(url, ssl=context(ca, cert, key), compression=None, ping_interval=None,
                           open_timeout=10) as ws:
            for message in ["hello", b"\x00\x01\xff", "", "é" * 1000, os.urandom(300_000)]:
                await ws.send(message)
                answer = await ws.recv()
                if isinstance(answer, str):
                    print(f"text:{answer if len(answer) < 50 else f'{len(answer)} chars'}", flush=True)
                else:
                    print(f"binary:{len(answer)}:{'same' if answer == message else 'DIFFERENT'}", flush=True)
        print(f"closed {ws.close_code}", flush=True)
    except (ssl.SSLError, ConnectionError, EOFError) as error:
        print(f"refused {type(error).__name__}: {error}", flush=True)
    except Exception as error:  # websockets wraps a TLS alert after the handshake (TLS 1.3)
        cause = error.__cause__ or error.__context__
        if isinstance(cause, (ssl.SSLError, ConnectionError, EOFError)):
            print(f"refused {type(cause).__name__}: {cause}", flush=True)
        else:
            raise


def version(port, ca, maximum):
    ctx = context(ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2 if maximum == "1.2" else ssl.TLSVersion.TLSv1_3
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    try:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            print("ok", tls.version(), flush=True)
    except (ssl.SSLError, ConnectionError) as error:
        print("refused", error, flush=True)


def garbage(port):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(b"\x16\x03\x01\x00\x05hello, this is no ClientHello\r\n" * 4)
    try:
        while s.recv(4096):
            pass
        print("closed", flush=True)
    except ConnectionResetError:
        print("closed", flush=True)
    except socket.timeout:
        print("still open", flush=True)


def pipelined(port, ca, count):
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    with context(ca).wrap_socket(raw, server_hostname="localhost") as tls:
        request = (b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        # Corked: the request and each frame a TLS record of its own, all in a few segments.
        tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        tls.sendall(request)
        for i in range(int(count)):
            payload = f"m{i}".encode()
            tls.sendall(bytes([0x81, 0x80 | len(payload)]) + b"\0\0\0\0" + payload)
        tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        data = b""
        while b"\r\n\r\n" not in data:
            data += tls.recv(65536)
        head, _, data = data.partition(b"\r\n\r\n")
        print(head.split(b"\r\n")[0].decode(), flush=True)
        answers, message = [], b""
        while len(answers) < int(count):
            while len(data) < 2 or len(data) < 2 + data[1]:
                chunk = tls.recv(65536)
                if not chunk:
                    print("closed early after", len(answers), flush=True)
                    return
                data += chunk
            # The echo may come as fragments (small unmasked frames): a message ends at FIN.
            message += data[2:2 + data[1]]
            if data[0] & 0x80:
                answers.append(message.decode())
                message = b""
            data = data[2 + data[1]:]
        print(" ".join(answers) if len(answers) < 5 else f"{answers[0]} ... {answers[-1]} ({len(answers)}, in order: "
              f"{answers == [f'm{i}' for i in range(int(count))]})", flush=True)


def stall(port, seconds):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.settimeout(float(seconds))
    start = time.monotonic()
    try:
        data = s.recv(1)
        print(f"closed after {time.monotonic() - start:.1f}" if not data else "answered", flush=True)
    except ConnectionResetError:
        print(f"closed after {time.monotonic() - start:.1f}", flush=True)
    except socket.timeout:
        print("still open", flush=True)


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "echo":
        asyncio.run(echo(*arguments))
    elif command == "version":
        version(*arguments)
    elif command == "garbage":
        garbage(*arguments)
    elif command == "pipelined":
        pipelined(*arguments)
    elif command == "stall":
        stall(*arguments)
    else:
        sys.exit(f"unknown command {command}")
