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
        // The conversation (issue 37): expect: `--send` a marker and `--expect` its echo, a
        // preamble that runs again after every reconnect, before stdin; until: `--until` a
        // marker message that stdin sends last, with --print-match-only. The console
        // (--interactive) is no value: it needs a pseudo-terminal on both stdin and stdout and
        // takes no -b, --jsonl or --whole-input; ConsoleTests drive it (reconnect included).
        PairwiseParameter("conversation", ["none", "expect", "until"]),
    ], excluding: [
        PairwiseExclusion(.init("peer", "websocat"), .init("size", "0"),
                          "websocat 1.13 takes a zero-length message for the end of the stream: its mirror: stops echoing there"),
        PairwiseExclusion(.init("peer", "websocat"), .init("size", "1048576"),
                          "websocat 1.13's mirror: echoes a message over its 64 KiB buffer (-B 65536 by default) as several"),
        PairwiseExclusion(.init("conversation", "until"), .init("format", "binary"),
                          "-b sends stdin as binary messages, an echo returns them binary, and --until matches text messages only"),
        PairwiseExclusion(.init("conversation", "until"), .init("format", "base64"),
                          "-b --base64 sends stdin as binary messages, an echo returns them binary, and --until matches text messages only"),
    ] + ["binary", "base64"].flatMap { format in
        ["websocat", "wspipe-exec"].map { peer in
            PairwiseExclusion(.init("conversation", "expect"), .init("format", format), when: .init("peer", peer),
                              "under -b, websocat -b mirror: and -l -b --exec cat echo --send's text message as a binary one, which --expect never matches")
        }
    })

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
        // Issue 38's limits. rate-limit: --rate-limit and --byte-rate low enough that the
        // messages pause the connection (wspipe_limited_total says so); rate-close: rates
        // the messages keep, --rate-limit-action close, and a flood after them gets 1008. per-ip:
        // --max-clients-per-ip 1 (a second connection beside a first gets 429) and
        // --max-handshakes-per-ip. proxy-protocol: --proxy-protocol --trust-proxy, the client
        // through a relay that prepends a PROXY v1 line (peers/proxy_header.py); forwarded:
        // --trust-proxy --client-address-header Forwarded, the client sends the header. Both
        // check that the server names the claimed address.
        PairwiseParameter("limits", ["none", "rate-limit", "rate-close", "per-ip", "proxy-protocol", "forwarded"]),
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
        PairwiseExclusion(.init("client", "chromium"), .init("limits", "forwarded"),
                          "a page's WebSocket cannot send a Forwarded header"),
    ])
}
