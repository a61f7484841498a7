"""A NATS publisher speaking the raw client protocol (nats-server ships no CLI; BusTests).

    nats_pub.py [--tls CAFILE] PORT SUBJECT [TOKEN-OR-USER:PASS] < messages

Each stdin line is one message in hex. Connects to 127.0.0.1:PORT, reads INFO, sends
CONNECT, then a PUB per line, then PING; exits 0 once the PONG came (the server took them
all), 1 on -ERR. With --tls, TLS starts after the INFO line (as NATS does), trusting CAFILE.
"""
import json
import socket
import ssl
import sys

ca = None
if sys.argv[1] == "--tls":
    ca = sys.argv[2]
    del sys.argv[1:3]

port, subject = int(sys.argv[1]), sys.argv[2].encode()
connect = {"verbose": False, "pedantic": False, "echo": False}
if len(sys.argv) > 3:
    if ":" in sys.argv[3]:
        connect["user"], connect["pass"] = sys.argv[3].split(":", 1)
    else:
        connect["auth_token"] = sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=30)
f = s.makefile("rb")
if not f.readline().startswith(b"INFO "):
    sys.exit("no INFO")
if ca:
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="127.0.0.1")
    f = s.makefile("rb")
    connect["tls_required"] = True
out = [b"CONNECT " + json.dumps(connect).encode() + b"\r\n"]
for line in sys.stdin.read().split():
    payload = bytes.fromhex(line)
    out.append(b"PUB %s %d\r\n%s\r\n" % (subject, len(payload), payload))
out.append(b"PING\r\n")
s.sendall(b"".join(out))
while True:
    answer = f.readline()
    if answer.startswith(b"PONG"):
        sys.exit(0)
    if not answer or answer.startswith(b"-ERR"):
        sys.exit(f"nats_pub: {answer!r}")
