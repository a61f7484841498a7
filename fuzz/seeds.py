#!/usr/bin/env python3
"""Writes the hand-made seed corpus into fuzz/corpus/TARGET/ (files named seed-*).

Run from anywhere: python3 fuzz/seeds.py. The input layout of each target is described at
the top of fuzz/targets/TARGET.swift. Entries the fuzzer found (named by their SHA-1) are
kept beside these and are not touched.
"""
import gzip
import hashlib
import os
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def frame(opcode, payload=b"", fin=True, rsv=0, mask=None, length=None):
    n = len(payload) if length is None else length
    out = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        out += bytes([mbit | n])
    elif n <= 0xFFFF:
        out += bytes([mbit | 126]) + n.to_bytes(2, "big")
    else:
        out += bytes([mbit | 127]) + n.to_bytes(8, "big")
    if mask:
        out += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return out + payload


def frames(flags, stream, cuts=()):
    return bytes([flags | len(cuts)]) + bytes(cuts) + stream


SMALL_LIMIT, NIL_EMPTY, CLOSE_FIRST, BYTEWISE, CUTS16 = 8, 16, 32, 64, 128
TEXT, BINARY, CONT, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10
bye = frame(CLOSE, b"\x03\xe8bye")
RFC_REQUEST = (b"GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\n"
               b"Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\n")

SEEDS = {
    "frames": {
        "text-hello": frames(0, frame(TEXT, b"Hello")),
        "fragmented-text": frames(0, frame(TEXT, b"Hel", fin=False) + frame(CONT, b"lo") + bye, cuts=(3, 4)),
        "ping-between-fragments": frames(0, frame(TEXT, b"Hel", fin=False) + frame(PING, b"Hello")
                                         + frame(CONT, b"lo") + bye, cuts=(1, 5, 9, 0)),
        "binary-16bit-length": frames(0, frame(BINARY, bytes(range(256))) + bye, cuts=(2, 2)),
        "binary-64bit-length": frames(CUTS16, frame(BINARY, length=65536) + b"\x00" * 64, cuts=(1, 3)),
        "length-2-63": frames(0, b"\x82\x7f\x80" + b"\x00" * 7),
        "length-2-63-minus-1": frames(0, b"\x82\x7f\x7f" + b"\xff" * 7 + b"abc"),
        "length-2-64-minus-1": frames(0, b"\x82\x7f" + b"\xff" * 8),
        "continuation-overflow": frames(0, b"\x02\x7f\x7f" + b"\xff" * 7 + b"\x80\x7f\x7f" + b"\xff" * 7),
        "close-empty": frames(0, frame(CLOSE)),
        "close-one-byte": frames(0, frame(CLOSE, b"\x03")),
        "close-1005": frames(0, frame(CLOSE, b"\x03\xed")),
        "close-bad-reason": frames(0, frame(CLOSE, b"\x0f\xa0\xc3\x28")),
        "masked-from-server": frames(0, frame(TEXT, b"Hello", mask=b"\x37\xfa\x21\x3d")),
        "rsv1": frames(0, frame(TEXT, b"Hello", rsv=4)),
        "reserved-opcode": frames(0, b"\x83\x00"),
        "ping-126": frames(0, frame(PING, b"p" * 126)),
        "fragmented-ping": frames(0, frame(PING, b"p", fin=False)),
        "invalid-utf8": frames(0, frame(TEXT, b"ok\xc3\x28")),
        "utf8-across-frames": frames(0, frame(TEXT, b"\xe2", fin=False) + frame(CONT, b"\x82\xac") + frame(PONG, b"abc"),
                                     cuts=(3,)),
        "utf8-truncated-at-end": frames(0, frame(TEXT, b"a\xf0\x9f\x98")),
        "continuation-alone": frames(0, frame(CONT, b"ab")),
        "new-message-inside-fragmented": frames(0, frame(TEXT, b"a", fin=False) + frame(TEXT, b"b")),
        "too-big-small-limit": frames(SMALL_LIMIT, frame(BINARY, b"x" * 60, fin=False) + frame(CONT, b"y" * 60)),
        "bytewise": frames(BYTEWISE | NIL_EMPTY, frame(TEXT, "h\u00e9llo \u20ac\U0001d11e".encode()) + frame(PING) + bye),
        "close-first": frames(CLOSE_FIRST, frame(PING, b"x") + frame(BINARY, b"") + bye, cuts=(0, 0, 7)),
    },
    "handshake": {
        "rfc-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x05Hello",
        "subprotocol": b"HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n"
                       b"Sec-WebSocket-Accept:  s3pPLMBiTxaQ9kYGzzhZRbK+xOo= \r\nSec-WebSocket-Protocol: chat\r\n\r\n",
        "bare-lf": b"HTTP/1.0 101 x\nUpgrade: websocket\nConnection: Upgrade\n"
                   b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\n\n",
        "obs-fold": b"HTTP/1.1 101 OK\r\nUpgrade:\r\n websocket\r\nConnection: Upgrade\r\n"
                    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nX-Long: a\r\n\tb\r\n\r\n",
        "extension": b"HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                     b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n",
        "two-protocols": b"HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat, x\r\n\r\n",
        "400": b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nnope\n",
        "not-http": b"SSH-2.0-OpenSSH_9.2p1\r\n",
        "bad-status": b"HTTP/1.1 1O1 x\r\n\r\n",
        "bad-header": b"HTTP/1.1 101 x\r\nNo colon here\r\n\r\n",
        "huge-head": b"\xff\x7eHTTP/1.1 101 Switching Protocols\r\nX-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        "huge-head-over": b"\xff\xf0HTTP/1.1 101 Switching Protocols\r\nX-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        "huge-fold": b"\xff\x00HTTP/1.1 101 x\r\nX: a\r\n\tfolded line of a header value\r\n",
    },
    "request": {
        "rfc": b"\x00" + RFC_REQUEST,
        "rfc-cut": b"\x13\x05\x40\x02" + RFC_REQUEST + frame(TEXT, b"Hello", mask=b"\x37\xfa\x21\x3d"),
        "extensions": b"\x00" + RFC_REQUEST[:-2] + b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits,"
                      b" x-test; level=\"2\"\r\nsec-websocket-extensions: permessage-deflate\r\n\r\n",
        "any-case": b"\x00GET ws://h/p?q HTTP/1.1\nhost: h\nupgrade: WebSocket\nconnection: keep-alive, UPGRADE\n"
                    b"sec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\nsec-websocket-version: 13\n\n",
        "version-8": b"\x00" + RFC_REQUEST.replace(b"Version: 13", b"Version: 8"),
        "plain-get": b"\x00GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        "post": b"\x00POST /chat HTTP/1.0\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
        "bad-key": b"\x00" + RFC_REQUEST.replace(b"dGhlIHNhbXBsZSBub25jZQ==", b"dGhlIHNhbXBsZSBub25jZQ"),
        "small-limit": b"\x08" + RFC_REQUEST[:-2] + b"X-Pad: " + b"a" * 64 + b"\r\n\r\n",
        "folded": b"\x10" + RFC_REQUEST[:-2] + b"X-Long: a\r\n\tb\r\n\r\n",
        "huge-head": b"\xff\x80GET / HTTP/1.1\r\nX-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
    },
    "utf8": {
        "ascii": b"\x03\x07" + b"hello, world: plain ASCII text",
        "multibyte": b"\x02\x05" + "h\u00e9llo \u20ac \U0001d11e \u4e2d\u6587".encode(),
        "overlong": b"\x01\x02" + b"ab\xc0\x80cd",
        "surrogate": b"\x04\x01" + b"abc\xed\xa0\x80",
        "above-10ffff": b"\x00\x03" + b"\xf4\x90\x80\x80",
        "truncated": b"\x05\x06" + b"smile\xf0\x9f\x98",
        "long-ascii-then-euro": b"\x29\x2a" + b"A" * 40 + b"\xe2\x82\xac" + b"B" * 9 + b"\xe2\x28",
        "stray-continuation": b"\x08\x10" + b"12345678\x80",
    },
    "url": {
        "plain": b"\x00ws://example.com/chat",
        "userinfo": b"\x00wss://user:pa%40ss@Host.example:8443/p?q=1&r=%20",
        "secret": b"\x01ws://h.example:80/x",
        "ipv6": b"\x00ws://[::1]:9000/",
        "ipv4": b"\x00ws://127.0.0.1?x",
        "path-escapes": "\x00ws://h/p a\u00e9\t".encode(),
        "http": b"\x00http://x/",
        "fragment": b"\x00ws://h/#frag",
        "slash-in-password": b"\x01ws://u:p/ss@h/",
        "bad-port": b"\x00ws://h:99999/",
    },
    # Byte 0 bit 0: the O_NOFOLLOW walk instead of openat2; the rest is the raw path.
    "path": {
        "program": b"\x00/x/more/info",
        "deep": b"\x01/a/b/prog/rest/",
        "dotdot": b"\x00/a/../x",
        "encoded-dotdot": b"\x00/%2e%2e/outside/secret",
        "double-encoded": b"\x01/%252e%252e/x",
        "symlink-out": b"\x00/out",
        "symlink-dir-out": b"\x01/up/secret",
        "symlink-in": b"\x00/in",
        "loop": b"\x00/a/loop/loop/b/prog",
        "dotfile": b"\x00/.secret",
        "backslash": b"\x00/..\\outside",
        "nul": b"\x01/x%00.txt",
        "query": b"\x00/x?/../../etc/passwd",
        "fifo": b"\x00/fifo",
        "root": b"\x01/",
    },
    # Bytes 0-3 a size (shifted right by byte 0's low 3 bits), 4-7 a time; then a Range value,
    # a validator header's value (If-None-Match when byte 0 bit 0, else If-Modified-Since), a name.
    "staticrules": {
        "range": b"\x00\x00\x10\x00\x01\x02\x03\x04bytes=0-499\nSun, 06 Nov 1994 08:49:37 GMT\nindex.html",
        "suffix": b"\x00\x01\x00\x00\x05\x06\x07\x08bytes=-7\n\"x\", W/\"y\"\napp.js",
        "open-end": b"\x02\xff\xff\x00\x05\x06\x07\x08bytes=100-\n*\na.tar.gz",
        "past-end": b"\x00\x0d\x00\x00\x00\x00\x00\x01bytes=13-\nThu, 01 Jan 1970 00:00:00 GMT\n.env",
        "several": b"\x01\x0d\x00\x00\x00\x00\x00\x01bytes=0-1,3-4\n\"a\"\nREADME",
        "empty-file": b"\x00\x00\x00\x00\x00\x00\x00\x00bytes=0-0\n\nx.",
        "huge": b"\x00\xff\xff\xff\xff\xff\xff\x7fbytes=99999999999999999999-\nFri, 31 Dec 9999 23:59:59 GMT\nx.PNG",
    },
}


def deflated(data, wbits=-15, sync=True):
    """data deflated as permessage-deflate sends it (sync flush, tail removed), or whole."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH if sync else zlib.Z_FINISH)
    return out[:-4] if sync else out


# inflate: flags byte (window 8 + bits 0-2, text, 1 KiB limit, reset, format), cut stride, messages
# separated by ff fe.
SEEDS["inflate"] = {
    "rfc-hello": b"\x0f\x00" + bytes([0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]),
    "rfc-hello-kept": b"\x0f\x02" + bytes([0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]) + b"\xff\xfe" + bytes([0xf2, 0x00, 0x11, 0x00, 0x00]),
    "rfc-stored": b"\x27\x03" + bytes([0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00]),
    "rfc-bfinal": b"\x2f\x01" + bytes([0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00]),
    "json-text": b"\x0c\x10" + deflated(b'{"id":1,"price":1000.25,"sym":"BTC-USD"}' * 20, -12),
    "bomb-small-limit": b"\x17\x00" + deflated(bytes(200_000), -15),
    "bad-utf8": b"\x0f\x00" + deflated("é".encode() * 50 + b"\xc3", -15),
    "zlib": b"\x47\x05" + zlib.compress(b"hello zlib " * 30),
    "gzip": b"\x87\x00" + gzip.compress(b"hello gzip " * 30, mtime=0),
    "two-messages": b"\x0b\x07" + deflated(b"first " * 30, -11) + b"\xff\xfe" + deflated(b"second " * 30, -11),
}


# bus: two cut points, the bulk limit (255: 1 MiB), then what a Redis or NATS server sends.
SEEDS["bus"] = {
    "subscribe-message": b"\x05\x20\xff+OK\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\nticker\r\n:1\r\n"
                         b"*3\r\n$7\r\nmessage\r\n$6\r\nticker\r\n$8\r\n\x01{\"p\":1}\r\n",
    "binary-message": b"\x10\x30\xff*3\r\n$7\r\nmessage\r\n$1\r\nt\r\n$5\r\n\x02\x00\r\n\xff\r\n",
    "oversized": b"\x07\x21\x08*3\r\n$7\r\nmessage\r\n$1\r\nt\r\n$20\r\n" + b"x" * 20 + b"\r\n+PONG\r\n",
    "errors": b"\x00\x00\xff-WRONGPASS invalid username-password pair or user is disabled.\r\n-NOAUTH Authentication required.\r\n",
    "publish-replies": b"\x03\x09\xff:3\r\n:0\r\n:-1\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n",
    "pong-nested": b"\x02\x11\xff*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n*1\r\n:7\r\n*1\r\n+a\r\n",
    "url": b"\x00\x00\xffrediss://app:s%40cret@[::1]:6380/chat.in",
    "url-plain": b"\x00\x00\xffredis://127.0.0.1/ticker",
    "nats-session": b"\x06\x30\xffINFO {\"server_id\":\"x\",\"max_payload\":1048576}\r\n+OK\r\nPING\r\nPONG\r\n"
                    b"MSG ticker 1 8\r\n\x01{\"p\":1}\r\nMSG ticker 1 reply.to 3\r\n\x02\r\n\r\n-ERR 'Authorization Violation'\r\n",
    "nats-oversized": b"\x05\x19\x04MSG t 1 10\r\n0123456789\r\nmsg t 1 0\r\n\r\n",
    "url-nats": b"\x00\x00\xffnats://user:pa%20ss@127.0.0.1:4222/chat.in",
}

# match: byte 0 (bit 0: 0 PATH=VALUE, 1 a regular expression), the spec, 0xFF, a text payload.
SEEDS["match"] = {
    "jsonrpc-id": b"\x00id=9007199254740993\xff{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"result\":{\"ok\":true}}",
    "jsonrpc-id-near": b"\x00id=9007199254740992\xff{\"id\":9007199254740993}",
    "event-string": b"\x00event=authenticated\xff{\"event\":\"authenticated\",\"user\":\"x\"}",
    "nested-index": b"\x00result.items[0].id=\"a\\u00e9\"\xff{\"result\":{\"items\":[{\"id\":\"a\u00c3\u00a9\"}]}}",
    "top-index": b"\x00[2][0]=1.0e0\xff[0,1,[10e-1]]",
    "quoted-keys": b"\x00\"a.b\".\"x=y\".\"q\\\"\\\\\"=null\xff{\"a.b\":{\"x=y\":{\"q\\\"\\\\\":null}}}",
    "object-value": b"\x00o={\"b\":[1,2],\"a\":{\"c\":-0}}\xff{\"o\":{\"a\":{\"c\":0.0},\"b\":[1,2e0]}}",
    "surrogates": b"\x00s=\"\\ud83d\\ude00\"\xff{\"s\":\"\\ud83d\\ude00\"}",
    "repeated-name": b"\x00k=2\xff{\"k\":1,\"k\":2}",
    "bad-path": b"\x00a..b[x]=1\xff{}",
    "depth": b"\x00[0][0][0]=1\xff" + b"[" * 70 + b"]" * 70,
    "regex-ready": b"\x01^(ready|ok)[[:space:]]*$\xffready  ",
    "regex-nul": b"\x01x[^a]y|b$\xffx\x00y",
    "regex-anchor-newline": b"\x01z|^ok\xffa\nok",
    "regex-brackets": b"\x01[]\\1)[:alpha:]](a)\xff]a",
    "regex-backref": b"\x01(a)\\1\xffaa",
    "regex-word": b"\x01\\<wo|d\\>|\\bx\xffa word x",
    "regex-catastrophic": b"\x01(a|aa)*c\xff" + b"a" * 200,
}


# consolekeys: byte 0 the columns (1-128), two cut points, the paste limit (255: 1 MiB), then
# what a terminal sends: keys, escape sequences, UTF-8, bracketed pastes.
ESC, CSI = b"\x1b", b"\x1b["
PASTE_START, PASTE_END = CSI + b"200~", CSI + b"201~"
SEEDS["consolekeys"] = {
    "typing-and-arrows": b"\x50\x03\x09\xff" + b"ac" + CSI + b"D" + b"b" + CSI + b"H" + b"<" + ESC + b"OF" + b">\r",
    "home-end-delete": b"\x28\x02\x05\xff" + b"abc" + CSI + b"1~" + CSI + b"3~" + CSI + b"4~" + CSI + b"7~" + CSI + b"8~\r",
    "emacs-keys": b"\x50\x00\x00\xff" + b"one two three\x17\x01\x0bx\x19\x05\x02\x06\x15\x08\x7f\x04\x03\x03",
    "history-and-search": b"\x50\x04\x08\xff" + CSI + b"A" + CSI + b"A" + CSI + b"B\x10\x0e\x12he\x12\x12\x7f\x07"
                          b"\x12wor" + CSI + b"Dz\r\x12\x1b\x12x\r",
    "tab": b"\x50\x00\x00\xff/pi\t\r/q\t\t//x\t",
    "cjk-wrap": b"\x07\x02\x04\xff" + "日本語のテキスト👍🇫🇷👨\u200d👩\u200d👧e\u0301".encode() + CSI + b"D" * 3,
    "four-byte-split": b"\x0a\x05\x06\xff" + "x😀y".encode() + b"\xf0\x9f" + b"z" + b"\xed\xa0\x80\xc0\xaf",
    "paste-lines": b"\x50\x07\x0c\xff" + b"ab" + CSI + b"D" + PASTE_START + b"1\r\n2\n3" + PASTE_END + b"\r",
    "paste-controls": b"\x50\x09\x10\xff" + PASTE_START + b"a\x1b]0;title\x07\x1b[2J\t\x85" + PASTE_END,
    "paste-limit": b"\x50\x03\x40\x08" + PASTE_START + b"x" * 40 + b"\n" + b"y" * 10 + PASTE_END + b"z",
    "paste-unfinished": b"\x50\x03\x10\xff" + PASTE_START + b"never ends" + ESC + b"[20",
    "lone-escapes": b"\x50\x01\x02\xff" + ESC + ESC + b"x" + CSI + b"1" + ESC + b"O",
    "malformed-csi": b"\x50\x02\x03\xff" + CSI + b"1\x01a" + CSI + b"?25h" + CSI + b"1;5C" + CSI + b"2" * 40 + b"A",
    "one-column": b"\x00\x00\x00\xff" + "日x\u0301".encode() + PASTE_START + b"\x01\x1b" + PASTE_END,
    "ctrl-d-ctrl-z": b"\x50\x00\x00\xff\x04x\x01\x04\x04\x1a\x0c",
}


# proxyheader: a connection's first bytes (a PROXY v1 line or v2 header, then its data).
V2 = b"\r\n\r\n\x00\r\nQUIT\n"
SEEDS["proxyheader"] = {
    "v1-tcp4": b"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\nGET / HTTP/1.1\r\n",
    "v1-tcp6": b"PROXY TCP6 2001:db8::1 ::1 4711 80\r\n\x16\x03\x01",
    "v1-unknown": b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n",
    "v1-longest": b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
    "v1-malformed": b"PROXY TCP4 203.0.113.7 192.0.2.1 56324\r\n",
    "v2-tcp4": V2 + b"\x21\x11\x00\x0c" + bytes([198, 51, 100, 9, 127, 0, 0, 1, 0x10, 0x92, 0x01, 0xbb]) + b"GET",
    "v2-tcp6-tlv": V2 + b"\x21\x21\x00\x2a" + bytes(range(32)) + b"\x00\x50\x1f\x90" + b"\x05\x00\x03abc" + b"\x16",
    "v2-local": V2 + b"\x20\x00\x00\x00",
    "v2-unix": V2 + b"\x21\x31\x00\xd8" + b"/" * 216,
    "v2-unknown-family": V2 + b"\x21\x51\x00\x0c" + bytes(12),
    "v2-too-long": V2 + b"\x21\x11\xff\xff",
    "tls": b"\x16\x03\x01\x02\x00\x01",
}

# clientaddress: byte 0 (bit 0 Forwarded, bit 1 trusted peer, bit 2 2001:db8::/32 trusted), then header lines.
SEEDS["clientaddress"] = {
    "xff": b"\x02203.0.113.9, 10.0.0.5\n10.0.0.7",
    "xff-claims": b"\x021.1.1.1, 203.0.113.9:8080, [2001:db8::1]:4711, 10.0.0.5",
    "xff-untrusted-peer": b"\x00203.0.113.9",
    "xff-unknown": b"\x06unknown, 2001:db8::9, ::ffff:10.1.1.1",
    "forwarded": b"\x03for=192.0.2.43, for=\"[2001:db8:cafe::17]:4711\";proto=https;by=10.0.0.1",
    "forwarded-obfuscated": b"\x07For=_hidden, for=\"192.0.2.43:_port\", for=unknown",
    "forwarded-quotes": b"\x03for=\"[2001:db8::1],x\", for=\"\\1\\9\\2.0.2.5\";for=1.2.3.4\nfor=\"unclosed",
    "ranges": b"\x0210.0.0.0/8\n::ffff:10.0.0.0/104\nunix\n2001:db8::/129",
}


def main():
    for target, seeds in SEEDS.items():
        directory = os.path.join(HERE, "corpus", target)
        os.makedirs(directory, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(directory, "seed-" + name), "wb") as f:
                f.write(data)
    print("wrote", sum(len(s) for s in SEEDS.values()), "seeds")


if __name__ == "__main__":
    main()
