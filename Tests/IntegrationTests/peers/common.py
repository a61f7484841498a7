"""Helpers shared by the integration-test peers (not a peer itself).

Every peer binds the port given by --port (0: a free one chosen by the kernel) and prints
`PORT <n>` as its first stdout line, flushed, once it accepts connections. Later stdout
lines are events for the test (`RECORDED <n>` and the like). Peers run until killed.
"""
import argparse
import json
import os
import ssl
import sys


def base_parser(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (::1 for IPv6)")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve wss:// with this PEM pair")
    return parser


def tls_context(args):
    if not args.tls:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.tls[0], args.tls[1])
    return context


def announce(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def announce_port(server_sockets):
    announce("PORT %d" % server_sockets[0].getsockname()[1])


def write_json_atomically(path, value):
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(value, handle)
    os.replace(temporary, path)
