// The combination matrices of issue 34: their parameters and the checked-in list of pairs
// that cannot meet, each with its reason (MatrixCoverageTests proves every other pair is in
// a generated case). ClientMatrixTests and ServerMatrixTests run the cases.
import TestSupport

enum MatrixDimensions {
    // MARK: wspipe as a client

    static let client = PairwiseMatrix([
        // Echo servers at their defaults: Python `websockets` (permessage-deflate on), Node
        // `ws` with perMessageDeflate: true, websocat (no permessage-deflate), wspipe -l --echo
        // and wspipe -l --exec cat.
        PairwiseParameter("peer", ["python", "node", "websocat", "wspipe-echo", "wspipe-exec"]),
        // proxy: ws:// through an HTTP CONNECT proxy (peers/proxy.py).
        PairwiseParameter("transport", ["ws", "wss", "unix", "proxy"]),
        PairwiseParameter("deflate", ["default", "no-deflate", "client-no-context-takeover", "window-bits-9"]),
        PairwiseParameter("format", ["text", "jsonl", "binary", "base64", "whole-input"]),
        // restart: --reconnect, and the server is stopped (SIGTERM: a Close with 1001) and
        // started again mid-stream; restart-killed: the same with SIGKILL (no Close: 1006).
        PairwiseParameter("mode", ["plain", "reconnect", "ping-interval", "restart", "restart-killed"]),
        // Bytes per message (per stdin line; -b and --whole-input: all of stdin).
        PairwiseParameter("size", ["0", "125", "126", "65535", "65536", "1048576"]),
    ], excluding: [
        PairwiseExclusion(.init("peer", "websocat"), .init("size", "0"),
                          "websocat 1.13 takes a zero-length message for the end of the stream: its mirror: stops echoing there"),
        PairwiseExclusion(.init("peer", "websocat"), .init("size", "1048576"),
                          "websocat 1.13's mirror: echoes a message over its 64 KiB buffer (-B 65536 by default) as several"),
    ])

    // MARK: wspipe as a server

    static let server = PairwiseMatrix([
        // stdio: the test relays each line of the server's stdout back to its stdin.
        // static: --echo with --static DIR (a plain GET of a file, then the WebSocket).
        PairwiseParameter("mode", ["stdio", "echo", "broadcast", "exec", "dir", "forward", "static"]),
        PairwiseParameter("client", ["python", "node", "websocat", "chromium"]),
        PairwiseParameter("transport", ["ws", "wss"]),
        // offered: the client offers permessage-deflate (its default) and the server agrees;
        // not-offered: the client offers none; server-refuses: the client offers, -l --no-deflate.
        PairwiseParameter("deflate", ["offered", "not-offered", "server-refuses"]),
        PairwiseParameter("access", ["open", "require-bearer", "allow-origin", "path"]),
    ], excluding: [
        PairwiseExclusion(.init("client", "websocat"), .init("deflate", "offered"),
                          "websocat 1.13 has no permessage-deflate: it cannot offer it"),
        PairwiseExclusion(.init("client", "websocat"), .init("deflate", "server-refuses"),
                          "websocat 1.13 offers no permessage-deflate, so there is no offer to refuse"),
        PairwiseExclusion(.init("client", "chromium"), .init("deflate", "not-offered"),
                          "Chromium always offers permessage-deflate; a page cannot turn it off"),
        PairwiseExclusion(.init("client", "chromium"), .init("access", "require-bearer"),
                          "a page's WebSocket cannot send an Authorization header"),
        PairwiseExclusion(.init("client", "websocat"), .init("mode", "static"),
                          "websocat makes no plain HTTP GET, so it cannot fetch the static file"),
    ])
}
