import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import WSPipeBridge
import WSPipeBus

// Every option, one declaration each: names, value, --help text, and what it sets. Values
// are checked when the option is read; combinations and files in `Settings.finish`.

extension Option {
    /// Every option, in --help order within each category (`Category.options`). The
    /// registry the parser, --help and the tests read; a declaration missing from it is
    /// found by CommandLineTests.testEveryDeclarationIsRegistered.
    public static let allCases: [Option] = [
        text, binary, null, chunkSize, interactive, noInteractive, noHistory, jsonl, timestamps, base64, wholeInput, maxMessages, oneMessage,
        requireCount, send, timeout, idleTimeout, receiveOnly, sendOnly, noClose, linger, closeCode,
        closeReason, closeTimeout, connectTimeout, maxMessageSize, pingInterval, pingTimeout, staleTimeout,
        printPingRTT, noDeflate, deflateClientWindowBits, deflateServerWindowBits,
        deflateClientNoContextTakeover, deflateServerNoContextTakeover, decompress, reconnect, reconnectOnClose,
        retryDelay, retryMaxDelay, maxRetries, retryReset, queueSize, queueBytes, queuePolicy, sendFile, expect,
        expectJSON, expectTimeout, until, untilJSON, printMatchOnly, proxy,
        socks5, noproxy, unixSocket, connectTo, resolve, ipv4, ipv6, location, maxRedirs, insecure, cacert,
        cert, key, keyPassEnv, keyPassFile, tlsMin, sni, header, subprotocol, origin, userAgent, bearerFile,
        bearer, verbose, quiet, stats, help, version, listen, reuseport, echo, broadcast, oneshot, maxClients,
        maxClientsPerIP, maxHandshakesPerIP, ipv6Prefix, rateLimit, byteRate, rateLimitAction, handshakeTimeout, responseHeader, clientCA, path, allowOrigin, sameOrigin, requireProtocol,
        requireBearer, health, metrics, metricsPublic, staticFiles, staticDir, devConsole, bus, busInbound,
        busPasswordFile, busPing, exec, sh, dir, closeGrace, maxChildren, passenv, forward, forwardTokens,
        forwardListen,
        trustProxy, proxyProtocol, clientAddressHeader
    ]

    /// The client's TLS options (a URL without a scheme is ws://, which they do not apply to).
    static var tls: [Option] { Category.tls.options }

    // MARK: Modes

    static let text = Option("--text", "t", in: .modes, applies: [.client, .stdioServer, .broadcast, .exec],
                             help: "stdin lines -> text messages; each message -> stdout + newline (default)") {
        $0.config.stdio.mode = .text
    }
    static let binary = Option("--binary", "b", in: .modes, applies: [.client, .stdioServer, .broadcast, .exec],
                               help: "stdin bytes -> binary messages; messages -> stdout raw") {
        $0.config.stdio.mode = .binary
    }
    static let null = Option("--null", "0", in: .modes, applies: [.client, .stdioServer, .broadcast],
                             help: "text mode with NUL instead of newline, both ways") {
        $0.config.stdio.separator = 0
    }
    static let chunkSize = Option("--chunk-size", value: "BYTES",
                                  in: .modes, applies: [.client, .forwardListen, .stdioServer, .broadcast],
                                  help: "binary mode: largest message made from stdin (default 64K)") { text, name throws(UsageError) in
        let size = try parseSize(text, option: name)
        guard size >= 1 && size <= 1 << 30 else { throw UsageError("\(name) must be between 1 byte and 1 GiB") }
        return { $0.config.stdio.chunkSize = Int(size) }
    }

    static let interactive = Option("--interactive", in: .modes, applies: [.client, .stdioServer],
                                    help: "a console even where wspipe would not choose one (stdin and stdout",
                                    "must be terminals): prompt, line editing, history, /commands") {
        $0.interactive = true
    }
    static let noInteractive = Option("--no-interactive", in: .modes, applies: [.client, .stdioServer],
                                      help: "never a console: stdin and stdout stay a byte pipe at a terminal too") {
        $0.interactive = false
    }

    static let noHistory = Option("--no-history", in: .modes, applies: [.client, .stdioServer],
                                  help: "the console keeps no history (default: $XDG_STATE_HOME/wspipe/history)") {
        $0.keepsHistory = false
    }

    // MARK: Formats

    static let jsonl = Option("--jsonl", in: .formats, applies: [.client, .server],
                              help: #"JSON Lines both ways: {"type":"text","data":...}, {"type":"binary","base64":...},"#,
                              #"{"type":"close","code":...,"reason":...}; stdin may also send {"type":"ping"}"#) {
        $0.config.stdio.jsonLines = true
    }
    static let timestamps = Option("--timestamps", in: .formats, applies: [.client, .stdioServer, .broadcast],
                                   help: #"with --jsonl: add "ts" (Unix seconds) to each line written; in the"#,
                                   "console: a time column") {
        $0.config.stdio.timestamps = true
    }
    static let base64 = Option("--base64", in: .formats, applies: [.client, .stdioServer, .broadcast],
                               help: "binary messages written as one base64 line each; with -b, stdin lines",
                               "are base64 and each becomes one binary message") {
        $0.config.stdio.base64 = true
    }
    static let wholeInput = Option("--whole-input", in: .formats, applies: [.client, .stdioServer],
                                   help: "all of stdin up to EOF is ONE message (text, or binary with -b),",
                                   "sent in frames of --chunk-size") {
        $0.config.stdio.wholeInput = true
    }

    // MARK: Counts and time limits

    static let maxMessages = Option("--max-messages", "n", value: "N",
                                    in: .limits, applies: [.client, .stdioServer, .echo, .broadcast],
                                    help: "close and exit after N received messages (like head -n; websocat's -n",
                                    "means something else); stdin EOF then does not close") { text, name throws(UsageError) in
        guard let count = Int(text), count >= 1 else {
            throw UsageError(Habits.countTakenForURL(text, option: name) ?? "\(name) '\(text)' is not a positive number of messages")
        }
        return { $0.config.stdio.maxMessages = count }
    }
    static let oneMessage = Option("--one-message", "1",
                                   in: .limits, applies: [.client, .stdioServer],
                                   help: "send stdin's first message (or none), print one reply, close (-n 1)") {
        $0.config.stdio.oneMessage = true
    }
    static let requireCount = Option("--require-count", in: .limits, applies: [.client, .stdioServer],
                                     help: "with -n N, -1 or --until: exit 11 when the connection ends before N messages",
                                     "came (default: 0 for a clean close, however many came)") {
        $0.config.stdio.requireCount = true
    }
    static let send = Option("--send", value: "TEXT",
                             in: .limits, applies: [.client, .stdioServer, .echo, .broadcast, .exec],
                             help: "send this text message right after the handshake, before stdin (repeatable;",
                             "in order with --send-file and --expect)") { text, _ in
        {
            $0.config.stdio.sendMessages.append(text)  // each client's greeting, when serving
            $0.config.client.conversation.steps.append(.send(text))
        }
    }
    static let timeout = seconds("--timeout", in: .limits, applies: [.client, .server],
                                 help: "limit for the whole session: then a closing handshake and exit 124") {
        $0.config.stdio.sessionTimeout = $1
    }
    static let idleTimeout = seconds("--idle-timeout", in: .limits, applies: [.client, .server],
                                     help: "close cleanly (exit 0) after SECS without a message either way") {
        $0.config.stdio.idleTimeout = $1
    }
    static let receiveOnly = Option("--receive-only", in: .limits, applies: [.client, .stdioServer, .broadcast],
                                    help: "never read stdin (for services and cron, where stdin is /dev/null)") {
        $0.config.stdio.receiveOnly = true
    }
    static let sendOnly = Option("--send-only", in: .limits, applies: [.client, .stdioServer, .broadcast],
                                 help: "never write stdout; end after stdin EOF and the closing handshake") {
        $0.config.stdio.sendOnly = true
    }
    static let stats = Option("--stats", in: .output, applies: [.client, .stdioServer],
                              help: "print a one-line JSON summary on stderr at exit") {
        $0.config.stdio.stats = true
    }

    // MARK: Ending

    static let noClose = Option("--no-close", in: .ending, applies: [.client, .stdioServer, .broadcast],
                                help: "stdin EOF does not close; run until the server closes (or a signal)") {
        $0.config.stdio.closeOnEndOfInput = false
    }
    static let linger = seconds("--linger", in: .ending, applies: [.client, .stdioServer],
                                help: "after stdin EOF, wait SECS (printing replies) before closing") {
        $0.config.stdio.linger = $1
    }
    static let closeCode = Option("--close-code", value: "CODE", in: .ending, applies: [.client, .stdioServer, .broadcast],
                                  help: "close code sent at stdin EOF (default 1000)") { text, name throws(UsageError) in
        guard let number = UInt16(text) else { throw UsageError("\(name) '\(text)' is not a number") }
        let code = CloseCode(number)
        guard code.isSendable else {
            throw UsageError("\(name) \(number) may not be sent (use 1000-1003, 1007-1014 or 3000-4999)")
        }
        return { $0.config.stdio.closeCode = code }
    }
    static let closeReason = Option("--close-reason", value: "TEXT",
                                    in: .ending, applies: [.client, .stdioServer, .broadcast],
                                    help: "close reason sent at stdin EOF (at most 123 bytes)") { text, name throws(UsageError) in
        guard text.utf8.count <= ClosePayload.maximumReasonLength else {
            throw UsageError("\(name) is \(text.utf8.count) bytes; at most \(ClosePayload.maximumReasonLength) fit in a Close frame")
        }
        return { $0.config.stdio.closeReason = text }
    }
    static let closeTimeout = seconds("--close-timeout", in: .ending, applies: .everywhere,
                                      help: "give up ending after this long without progress (default 5)") {
        $0.config.closeTimeout = $1
    }

    // MARK: Compression

    static let noDeflate = Option("--no-deflate", in: .compression, applies: .everywhere,
                                  help: "offer no compression (permessage-deflate is offered by default);",
                                  "with -l: accept none") {
        $0.compression.disabled = true
    }
    static let deflateClientWindowBits = windowBits("--deflate-client-window-bits", lowest: 9,
                                                    in: .compression, applies: .everywhere,
                                                    help: "offer client_max_window_bits=BITS: we compress with at most",
                                                    "2^BITS bytes of window (9-15; default: offered without a value);",
                                                    "with -l: the window asked of clients that let us choose (default 12)") {
        $0.compression.offer.clientMaxWindowBits = .bits($1)
    }
    static let deflateServerWindowBits = windowBits("--deflate-server-window-bits", lowest: 8,
                                                    in: .compression, applies: .everywhere,
                                                    help: "offer server_max_window_bits=BITS: ask the server to compress",
                                                    "with at most 2^BITS bytes of window (8-15; less memory here);",
                                                    "with -l: the server's own window, at most (9-15, default 12)") {
        $0.compression.offer.serverMaxWindowBits = $1
    }
    static let deflateClientNoContextTakeover = Option("--deflate-client-no-context-takeover",
                                                       in: .compression, applies: .everywhere,
                                                       help: "offer client_no_context_takeover: each message we send is compressed alone;",
                                                       "with -l: asked of every client") {
        $0.compression.offer.clientNoContextTakeover = true
        $0.compression.tuning.append("--deflate-client-no-context-takeover")
    }
    static let deflateServerNoContextTakeover = Option("--deflate-server-no-context-takeover",
                                                       in: .compression, applies: .everywhere,
                                                       help: "offer server_no_context_takeover: ask the server to compress each message alone;",
                                                       "with -l: the server does so for every client (--broadcast compresses once)") {
        $0.compression.offer.serverNoContextTakeover = true
        $0.compression.tuning.append("--deflate-server-no-context-takeover")
    }

    static let decompress = Option("--decompress", value: "FORMAT",
                                   in: .compression, applies: [.client, .notYetServing],
                                   help: "inflate each binary message's payload (gzip, zlib or deflate: compressed",
                                   "by the application) before stdout; --max-message-size applies inflated") { text, name throws(UsageError) in
        guard let format = CompressionFormat(rawValue: text) else {
            throw UsageError("\(name) '\(text)' is not gzip, zlib or deflate")
        }
        return { $0.config.stdio.decompress = format }
    }

    /// A window-bits option: `lowest`...15 (9 for our own compressor: zlib makes no raw
    /// 8-bit streams; 8 for the server's). A parameter rather than a look at the name:
    /// String.contains(String) was the session's first use of _StringProcessing and cost
    /// 170,000 instructions at every start (callgrind).
    private static func windowBits(_ longName: String, lowest: Int, in category: Category, applies scope: Scope, help: String...,
                                   apply: @escaping @Sendable (inout Settings, Int) -> Void) -> Option {
        return Option(longName, nil, value: "BITS", in: category, applies: scope, help: help, action: .set { text, name throws(UsageError) in
            guard let bits = Int(text), (lowest...15).contains(bits) else {
                throw UsageError("\(name) '\(text)' is not a window size in bits from \(lowest) to 15")
            }
            return {
                apply(&$0, bits)
                $0.compression.tuning.append(longName)
            }
        })
    }

    // MARK: Connection

    static let connectTimeout = seconds("--connect-timeout", in: .connection, applies: .clientConnection,
                                        help: "limit for DNS + TCP + TLS + handshake (default 10)") {
        $0.config.client.connectTimeout = $1
    }
    static let maxMessageSize = Option("--max-message-size", value: "BYTES",
                                       in: .connection, applies: .everywhere,
                                       help: "largest message accepted; bigger ones close with 1009 (default 64M)") { text, name throws(UsageError) in
        let size = try parseSize(text, option: name)
        guard size >= 1 else { throw UsageError("\(name) must be at least 1 byte") }
        return { $0.config.maxMessageSize = size }
    }
    static let pingInterval = seconds("--ping-interval", in: .connection, applies: .everywhere,
                                      help: "send a ping every SECS seconds") {
        $0.config.pingInterval = $1
    }
    static let pingTimeout = seconds("--ping-timeout", in: .connection, applies: .everywhere,
                                     help: "fail (exit 7) when a written ping gets no pong within SECS;",
                                     "alone, it also sends a ping every SECS seconds") {
        $0.config.pingTimeout = $1
    }

    static let staleTimeout = seconds("--stale-timeout", in: .connection, applies: .client,
                                      help: "no message received for SECS: the connection is dead",
                                      "(reconnect, or exit 7 without --reconnect)") {
        $0.config.client.staleTimeout = $1
    }
    static let printPingRTT = Option("--print-ping-rtt", in: .connection, applies: .client,
                                     help: "print each keepalive ping's round trip on stderr") {
        $0.config.client.printPingRTT = true
    }

    // MARK: Staying connected

    static let reconnect = Option("--reconnect", in: .reconnect, applies: [.client, .reconnect],
                                  help: "reconnect after a connection is lost or refused for a while",
                                  "(retried failures: RECONNECTION in the man page)") {
        $0.reconnect = true
    }
    static let reconnectOnClose = Option("--reconnect-on-close", in: .reconnect, applies: [.client, .reconnect],
                                         help: "with --reconnect: also after any Close from the server") {
        $0.reconnection.policy.reconnectOnClose = true
    }
    static let retryDelay = seconds("--retry-delay", in: .reconnect, applies: [.client, .reconnect],
                                    help: "first retry's longest wait; doubles per retry (default 0.5)") {
        $0.reconnection.backoff.baseDelay = $1
    }
    static let retryMaxDelay = seconds("--retry-max-delay", in: .reconnect, applies: [.client, .reconnect],
                                       help: "longest wait between attempts (default 30;",
                                       "a Retry-After is honoured up to 600)") {
        $0.reconnection.backoff.maxDelay = $1
    }
    static let maxRetries = reconnectCount("--max-retries", minimum: 0, what: "number of retries",
                                           in: .reconnect, applies: [.client, .reconnect],
                                           help: "give up after N retries in a row (default: unlimited; 0: none)") {
        $0.backoff.maxRetries = $1
    }
    static let retryReset = seconds("--retry-reset", in: .reconnect, applies: [.client, .reconnect],
                                    help: "a connection up this long starts the retry count afresh",
                                    "(default 10)") {
        $0.reconnection.backoff.resetAfter = $1
    }
    static let queueSize = reconnectCount("--queue-size", minimum: 1, what: "positive number of messages",
                                          in: .reconnect, applies: [.client, .reconnect],
                                          help: "offline queue: at most N stdin messages while disconnected (default 10000)") {
        $0.queueSize = $1
    }
    static let queueBytes = Option("--queue-bytes", value: "SIZE",
                                   in: .reconnect, applies: [.client, .reconnect],
                                   help: "offline queue: at most SIZE bytes of messages (default 16M)") { text, name throws(UsageError) in
        let size = try parseSize(text, option: name)
        guard size >= 1 && size <= 1 << 40 else { throw UsageError("\(name) must be between 1 byte and 1 TiB") }
        return {
            $0.reconnection.queueBytes = Int(size)
        }
    }
    static let queuePolicy = Option("--queue-policy", value: "POLICY",
                                    in: .reconnect, applies: [.client, .reconnect],
                                    help: "when the queue is full: block (stop reading stdin; default),",
                                    "drop-oldest, drop-newest (counted), fail (exit 10)") { text, name throws(UsageError) in
        guard let policy = QueuePolicy(rawValue: text) else {
            throw UsageError("\(name) '\(text)' is not block, drop-oldest, drop-newest or fail")
        }
        return {
            $0.reconnection.queuePolicy = policy
        }
    }
    static let sendFile = Option("--send-file", value: "FILE",
                                 in: .reconnect, applies: .client,
                                 help: "send FILE's lines (JSON lines with --jsonl) after every handshake, in order",
                                 "with --send and --expect") { text, _ in
        {
            $0.sendFile = text
            $0.config.client.conversation.steps.append(.sendFile)
        }
    }

    // MARK: Network

    static let proxy = Option("--proxy", value: "URL",
                              in: .network, applies: .clientConnection,
                              help: "tunnel through this proxy: http://[user:pass@]host[:port], https://...,",
                              "socks5://... (names resolved here), socks5h://... (by the proxy);",
                              "an empty URL uses no proxy at all") { text, name throws(UsageError) in
        guard !text.isEmpty else { return { $0.config.client.network.proxy = .none } }
        let parsed: ProxyURL
        do {
            parsed = try ProxyURL(parsing: text)
        } catch {
            throw UsageError("\(name): \(error)")
        }
        return { $0.config.client.network.proxy = .url(parsed) }
    }
    static let socks5 = Option("--socks5", value: "HOST:PORT", in: .network, applies: .clientConnection,
                               help: "the same as --proxy socks5://HOST:PORT") { text, name throws(UsageError) in
        let parsed: ProxyURL
        do {
            parsed = try ProxyURL(parsing: text, defaultKind: .socks5)
        } catch {
            throw UsageError("\(name): \(error)")
        }
        guard parsed.kind.isSOCKS else {
            throw UsageError("\(name) takes HOST:PORT or a socks5:// or socks5h:// URL (use --proxy for \(parsed.kind.rawValue)://)")
        }
        return { $0.config.client.network.proxy = .url(parsed) }
    }
    static let noproxy = Option("--noproxy", value: "LIST", in: .network, applies: .clientConnection,
                                help: "hosts that go direct (replaces no_proxy; '*': all)") { text, _ in
        { $0.config.client.network.noProxy = text }
    }
    static let unixSocket = Option("--unix-socket", value: "PATH",
                                   in: .network, applies: .clientConnection,
                                   help: "connect to this Unix socket; the URL still gives Host and path") { text, name throws(UsageError) in
        guard !text.isEmpty, text.utf8.count <= WebSocketURL.maximumUnixPathLength, !text.utf8.contains(0) else {
            throw UsageError("\(name) needs a socket path of 1 to \(WebSocketURL.maximumUnixPathLength) bytes")
        }
        return { $0.unixSocket = text }
    }
    static let connectTo = Option("--connect-to", value: "HOST:PORT",
                                  in: .network, applies: .clientConnection,
                                  help: "dial HOST:PORT instead; Host, SNI and certificate name stay the URL's") { text, name throws(UsageError) in
        guard HostPort(parsing: text) != nil || HostPort(parsing: text, defaultPort: 1) != nil else {
            throw UsageError("\(name) '\(text)' is not HOST:PORT (an IPv6 address in brackets: [::1]:8443)")
        }
        return { $0.connectTo = text }
    }
    static let resolve = Option("--resolve", value: "HOST:PORT:ADDR[,ADDR...]",
                                in: .network, applies: .clientConnection,
                                help: "use these addresses for HOST:PORT instead of DNS") { text, name throws(UsageError) in
        guard let entry = ResolveOverride(parsing: text) else {
            throw UsageError("\(name) '\(text)' is not HOST:PORT:ADDRESS[,ADDRESS...] (IP addresses)")
        }
        return { $0.config.client.network.connect.overrides.append(entry) }
    }
    static let ipv4 = Option("--ipv4", "4", in: .network, applies: .clientConnection,
                             help: "IPv4 only") { $0.config.client.network.connect.family = .ipv4 }
    static let ipv6 = Option("--ipv6", "6", in: .network, applies: .clientConnection,
                             help: "IPv6 only (default: both, raced IPv6 first: happy eyeballs)") {
        $0.config.client.network.connect.family = .ipv6
    }
    static let location = Option("--location", "L", in: .network, applies: .clientConnection,
                                 help: "follow redirects (301/302/303/307/308), never from wss:// to ws://;",
                                 "credentials go only to the URL's own host and port") {
        $0.config.client.followRedirects = true
    }
    static let maxRedirs = Option("--max-redirs", value: "N", in: .network, applies: .clientConnection,
                                  help: "follow at most N redirects with -L (default 5)") { text, name throws(UsageError) in
        guard let number = Int(text), number >= 0, number <= 1000 else {
            throw UsageError("\(name) '\(text)' is not a number from 0 to 1000")
        }
        return { $0.config.client.maxRedirects = number }
    }

    // MARK: TLS

    static let insecure = Option("--insecure", "k", in: .tls, applies: .clientConnection,
                                 help: "do not verify the server's TLS certificate") {
        $0.config.client.insecure = true
    }
    static let cacert = Option("--cacert", value: "FILE",
                               in: .tls, applies: .clientConnection,
                               help: "trust the CA certificates in FILE (PEM) instead of the system store") { text, _ throws(UsageError) in
        guard access(text, R_OK) == 0 else {
            throw UsageError("cannot read CA file '\(text)': \(String(cString: strerror(errno)))", pointsAtHelp: false)
        }
        return { $0.config.client.caFile = text }
    }
    static let cert = Option("--cert", value: "FILE", in: .tls, applies: .everywhere,
                             help: "client certificate (PEM; the file may hold the key too);",
                             "with -l the server's own: serve wss://") { text, name throws(UsageError) in
        let path = try readableFile(text, option: name)
        return { $0.tls.certificate = path }
    }
    static let key = Option("--key", value: "FILE",
                            in: .tls, applies: .everywhere,
                            help: "the --cert certificate's private key (PEM; default: the --cert file)") { text, name throws(UsageError) in
        let path = try readableFile(text, option: name)
        return { $0.tls.key = path }
    }
    static let keyPassEnv = Option("--key-pass-env", value: "VAR",
                                   in: .tls, applies: .everywhere,
                                   help: "the key's passphrase is in environment variable VAR") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs the name of an environment variable") }
        return { $0.tls.keyPassEnv = text }
    }
    static let keyPassFile = Option("--key-pass-file", value: "FILE", in: .tls, applies: .everywhere,
                                    help: "the key's passphrase is in FILE (one line)") { text, name throws(UsageError) in
        let path = try readableFile(text, option: name)
        return { $0.tls.keyPassFile = path }
    }
    static let tlsMin = Option("--tls-min", value: "VERSION", in: .tls, applies: .everywhere,
                               help: "lowest TLS version accepted: 1.2 (default) or 1.3") { text, name throws(UsageError) in
        let normalized = text.lowercased().replacingPrefix("tlsv", "").replacingPrefix("tls", "")
        guard let version = TLSVersion(rawValue: normalized) else {
            throw UsageError("\(name) '\(text)' is not a TLS version (1.2 or 1.3)")
        }
        return { $0.config.client.network.minimumTLSVersion = version }
    }
    static let sni = Option("--sni", value: "NAME",
                            in: .tls, applies: .clientConnection,
                            help: "TLS server name and certificate name (default: the URL's host)") { text, name throws(UsageError) in
        guard !text.isEmpty, text.utf8.count <= 253,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"/?#@[]:,".utf8.contains($0) }) || IPAddress(text) != nil else {
            throw UsageError("\(name) '\(text)' is not a host name")
        }
        return { $0.config.client.network.serverName = text }
    }

    // MARK: Request

    static let header = Option("--header", "H", value: "'Name: value'",
                               in: .request, applies: .clientConnection,
                               help: "add a request header (repeatable); a Host header replaces the default") { text, name throws(UsageError) in
        do {
            let header = try HTTPHeader(parsing: text)
            try ClientHandshake.validateUserHeaders([header])
            guard header.hasName("Sec-WebSocket-Protocol") else { return { $0.config.client.headers.append(header) } }
            let names = HTTPText.list(header.value)
            for item in names { try checkSubprotocol(item, option: name) }
            return { settings in for item in names { settings.addSubprotocol(item) } }
        } catch {
            throw UsageError("-H '\(text.prefix(60))': \(error)")
        }
    }
    static let subprotocol = Option("--protocol", value: "NAME",
                                    in: .request, applies: .everywhere,
                                    help: "offer a subprotocol (repeatable); -v shows the one chosen, or none") { text, name throws(UsageError) in
        try checkSubprotocol(text, option: name)
        return { $0.addSubprotocol(text) }
    }
    static let origin = Option("--origin", value: "URL", in: .request, applies: .clientConnection,
                               help: "send an Origin header") { text, name throws(UsageError) in
        try checkHeaderValue(text, option: name)
        return { $0.config.client.origin = text }
    }
    static let userAgent = Option("--user-agent", value: "TEXT",
                                  in: .request, applies: .clientConnection,
                                  help: "User-Agent (default wspipe/\(wspipeVersion); empty: none)") { text, name throws(UsageError) in
        try checkHeaderValue(text, option: name)
        return { $0.config.client.userAgent = text.isEmpty ? nil : text }
    }
    static let bearerFile = Option("--bearer-file", value: "FILE",
                                   in: .request, applies: .everywhere,
                                   help: "send 'Authorization: Bearer <token>' with the token read from FILE") { text, _ in
        { $0.bearerFile = text }
    }
    static let bearer = Option("--bearer", value: "TOKEN", in: .request, applies: .clientConnection,
                               help: "the same with the token on the command line (visible in ps and",
                               "shell history: prefer --bearer-file or WSPIPE_BEARER)") { text, name throws(UsageError) in
        try checkToken(text, source: name)
        return { $0.config.client.bearerToken = text }
    }

    // MARK: Output

    static let verbose = Option("--verbose", "v", in: .output, applies: .everywhere,
                                help: "show handshake headers (secrets redacted), pings and closes on stderr") {
        $0.config.verbosity = 1
    }
    static let quiet = Option("--quiet", "q", in: .output, applies: .everywhere,
                              help: "errors only on stderr") { $0.config.verbosity = -1 }
    static let help = Option("--help", "h", value: nil, in: .output, applies: .everywhere, help: ["this text"], action: .help)
    static let version = Option("--version", "V", value: nil, in: .output, applies: .everywhere,
                                help: ["print the version"], action: .version)

    // MARK: Server

    static let listen = Option("--listen", "l", value: "[ADDR:]PORT",
                               in: .server, applies: .server,
                               help: "serve on PORT (127.0.0.1 unless ADDR; [::1]:PORT; unix:PATH; port 0: any free);",
                               "fd:N: a listening socket passed by the parent; systemd: socket activation",
                               "(LISTEN_FDS; see SERVICE in the man page);",
                               "prints 'listening on ws://ADDR:PORT/' on stderr; with no mode option,",
                               "stdin and stdout go to one client at a time") { text, name throws(UsageError) in
        if let port = portWithoutAddress(text) {
            throw UsageError("-l ':\(port)' names no address: -l \(port) listens on loopback (127.0.0.1), "
                             + "-l 0.0.0.0:\(port) on every interface")
        }
        // localhost: its loopback addresses, 127.0.0.1 and [::1] where the host has it.
        let localhost = text.lowercased().hasPrefix("localhost:")
        do throws(ListenAddress.ParseError) {
            let address = try ListenAddress(parsing: localhost ? "127.0.0.1" + text.dropFirst("localhost".count) : text)
            return {
                $0.listen = address
                $0.listenLocalhost = localhost
            }
        } catch {
            throw UsageError("\(name) \(error)")
        }
    }
    static let reuseport = Option("--reuseport", in: .server, applies: .server,
                                  help: "SO_REUSEPORT: several wspipe processes serve one TCP port, the kernel",
                                  "spreads connections (limits and clients are per process)") {
        $0.reusePort = true
    }
    // The mode flags set nothing: `ServerModeDescriptor.given` chooses the mode from the
    // options given (Settings.given).
    static let echo = Option("--echo", in: .server, applies: .echo,
                             help: "server mode: every message back to its client, with its type") { _ in }
    static let broadcast = Option("--broadcast", in: .server, applies: .broadcast,
                                  help: "server mode: every stdin message to every client; client messages to",
                                  "stdout (--jsonl: with \"client\"); a client that falls behind gets 1013") { _ in }
    static let bus = Option("--bus", value: "URL", in: .bus, applies: .broadcast,
                            help: "with --broadcast: redis://[[USER]:PASSWORD@]HOST[:PORT]/CHANNEL (rediss://",
                            "over TLS) or nats://.../SUBJECT (tls://): stdin publishes there, clients get what it carries (BUS)") { text, name throws(UsageError) in
        do throws(BusAddress.Problem) {
            let address = try BusAddress(parsing: text)
            return { $0.bus.address = address }
        } catch {
            throw UsageError("\(name) '\(Diagnostics.redactedURL(text))': \(busProblem(error))")
        }
    }
    static let busInbound = Option("--bus-inbound", value: "CHANNEL",
                                   in: .bus, applies: .broadcast,
                                   help: "with --bus: also publish every client message on CHANNEL") { text, name throws(UsageError) in
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw UsageError("\(name) '\(text)' is not a channel name (no spaces or control characters)")
        }
        return { $0.bus.inbound = text }
    }
    static let busPasswordFile = Option("--bus-password-file", value: "FILE",
                                        in: .bus, applies: .broadcast,
                                        help: "with --bus: the bus's password from FILE (or WSPIPE_BUS_PASSWORD)") { text, _ in
        { $0.bus.passwordFile = text }
    }
    static let busPing = Option("--bus-ping", value: "SECS", in: .bus, applies: .broadcast,
                                help: "with --bus: a PING after SECS without a byte from the bus; nothing",
                                "within SECS more: the bus is lost (default 30; 0: no PING)") { text, name throws(UsageError) in
        var seconds = 0.0
        if Double(text) != 0 { seconds = try parseSeconds(text, option: name) }
        return { [seconds] in $0.bus.pingSeconds = seconds }
    }
    static let oneshot = Option("--oneshot", in: .server, applies: .server,
                                help: "serve one client, then exit with the status its ending gives (as the",
                                "client's: 0 for a normal close)") {
        $0.oneshot = true
    }
    static let path = Option("--path", value: "PATH", in: .access, applies: .server,
                             help: "serve only this path (404 elsewhere)") { text, name throws(UsageError) in
        guard text.hasPrefix("/"), !text.contains("?"), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw UsageError("\(name) '\(text)' is not a path (it starts with /, without spaces or a query)")
        }
        return { $0.policy.path = text }
    }
    static let allowOrigin = Option("--allow-origin", value: "ORIGIN",
                                    in: .access, applies: .server,
                                    help: "accept only this Origin (repeatable; 403 otherwise)") { text, name throws(UsageError) in
        try checkHeaderValue(text, option: name)
        try checkOrigin(text, option: name)
        return { $0.policy.allowedOrigins.append(text) }
    }
    static let sameOrigin = Option("--sameorigin", in: .access, applies: .server,
                                   help: "accept an Origin only when it names this server as the Host header does",
                                   "(a client without Origin is accepted; 403 otherwise)") {
        $0.policy.requiresSameOrigin = true
    }
    static let requireProtocol = Option("--require-protocol",
                                        in: .access, applies: .server,
                                        help: "refuse (400) a client offering none of the --protocol names") {
        $0.policy.requiresSubprotocol = true
    }
    static let requireBearer = Option("--require-bearer", in: .access, applies: .server,
                                      help: "require 'Authorization: Bearer TOKEN' (401 otherwise); the",
                                      "token from WSPIPE_BEARER or --bearer-file") {
        $0.requireBearer = true
    }
    static let health = Option("--health", value: "PATH", in: .web, applies: .server,
                               help: "answer a plain GET of PATH with 200 (health checks)") { text, name throws(UsageError) in
        guard text.hasPrefix("/"), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw UsageError("\(name) '\(text)' is not a path (it starts with /)")
        }
        return { $0.policy.healthPath = text }
    }
    static let metrics = Option("--metrics", value: "PATH",
                                in: .web, applies: .server,
                                help: "answer a plain GET of PATH with Prometheus metrics (see SERVER in the man page)") { text, name throws(UsageError) in
        guard text.hasPrefix("/"), text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw UsageError("\(name) '\(text)' is not a path (it starts with /)")
        }
        return { $0.policy.metricsPath = text }
    }
    static let metricsPublic = Option("--metrics-public", in: .web, applies: .server,
                                      help: "serve --metrics without --require-bearer on a non-loopback listener") {
        $0.metricsPublic = true
    }
    static let staticFiles = Option("--static", value: "DIR",
                                    in: .web, applies: .server,
                                    help: "answer plain GETs with the files under DIR (see Static files in the man page)") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a directory") }
        return { $0.site.root = text }
    }
    static let staticDir = Option("--staticdir", value: "DIR", in: .web, applies: .server,
                                  help: "the same as --static (websocketd's name)") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a directory") }
        return { $0.site.root = text }
    }
    static let devConsole = Option("--devconsole", in: .web, applies: .server,
                                   help: "answer a plain GET of a WebSocket path with a console page for it") {
        $0.site.devConsole = true
    }
    static let responseHeader = Option("--response-header", value: "'Name: value'",
                                       in: .server, applies: .server,
                                       help: "add a header to the 101 answer (repeatable)") { text, name throws(UsageError) in
        do {
            let header = try HTTPHeader(parsing: text)
            _ = try ServerHandshake.accept(ServerHandshakeProbe.request, headers: [header])
            return { $0.policy.responseHeaders.append(header) }
        } catch {
            throw UsageError("\(name) '\(text.prefix(60))': \(error)")
        }
    }
    static let maxClients = Option("--max-clients", value: "N",
                                   in: .server, applies: .server,
                                   help: "connected clients beyond which handshakes get 503 (default 10000)") { text, name throws(UsageError) in
        guard let count = Int(text), count >= 1 else { throw UsageError("\(name) '\(text)' is not a positive number of clients") }
        return { $0.maxClients = count }
    }
    static let maxClientsPerIP = Option("--max-clients-per-ip", value: "N", in: .server, applies: .server,
                                        help: "connected clients from one address beyond which handshakes get 429",
                                        "(an IPv6 address counts by its --ipv6-prefix; per process)") { text, name throws(UsageError) in
        guard let count = Int(text), count >= 1 else { throw UsageError("\(name) '\(text)' is not a positive number of clients") }
        return { $0.addressLimits.maximumClients = count }
    }
    static let maxHandshakesPerIP = Option("--max-handshakes-per-ip", value: "N/s[:BURST]", in: .server, applies: .server,
                                           help: "requests (handshakes and plain GETs) one address may make; 429 beyond") { text, name throws(UsageError) in
        let rate = try parseRate(text, option: name) { Double($0) }
        return { $0.addressLimits.requestRate = rate }
    }
    static let ipv6Prefix = Option("--ipv6-prefix", value: "BITS", in: .server, applies: .server,
                                   help: "IPv6 addresses count together by their first BITS bits for the per-address limits (default 64)") { text, name throws(UsageError) in
        guard let bits = Int(text), (1...128).contains(bits) else { throw UsageError("\(name) '\(text)' is not a prefix length from 1 to 128") }
        return { $0.ipv6PrefixBits = bits }
    }
    static let rateLimit = Option("--rate-limit", value: "N/s[:BURST]", in: .server, applies: .server,
                                  help: "messages one client may send; beyond, its connection is not read until it is under the rate") { text, name throws(UsageError) in
        let rate = try parseRate(text, option: name) { Double($0) }
        return { $0.rates.messages = rate }
    }
    static let byteRate = Option("--byte-rate", value: "SIZE/s[:BURST]", in: .server, applies: .server,
                                 help: "payload bytes one client may send (K, M, G suffixes), as --rate-limit") { text, name throws(UsageError) in
        let rate = try parseRate(text, option: name) { amount in
            // Not `.map(Double.init)`: that is init(bitPattern:) for a UInt64.
            (try? parseSize(String(amount), option: name)).map { Double($0) }
        }
        return { $0.rates.bytes = rate }
    }
    static let rateLimitAction = Option("--rate-limit-action", value: "pause|close", in: .server, applies: .server,
                                        help: "over --rate-limit or --byte-rate: stop reading (pause, the default) or close with 1008") { text, name throws(UsageError) in
        switch text {
        case "pause": return { $0.rates.action = .pause }
        case "close": return { $0.rates.action = .close }
        default: throw UsageError("\(name) '\(text)' is not pause or close")
        }
    }
    static let handshakeTimeout = seconds("--handshake-timeout",
                                          in: .server, applies: .server,
                                          help: "drop a client whose request head has not come within SECS (default 10)") {
        $0.handshakeTimeout = $1
    }

    // MARK: A program per connection

    static let exec = Option("--exec", value: "PROGRAM", in: .programs, applies: .exec,
                             help: "server mode: run PROGRAM [ARGS...] for each client, its stdin and",
                             "stdout as the messages; everything after it is the program's") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a program") }
        return { $0.execProgram = text }
    }
    static let sh = Option("--sh", value: "COMMAND", in: .programs, applies: .exec,
                           help: "server mode: like --exec with /bin/sh -c COMMAND") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a command") }
        return { $0.execShell = text }
    }
    static let dir = Option("--dir", value: "DIR", in: .programs, applies: .exec,
                            help: "server mode: ws://HOST/NAME/REST runs the program DIR/NAME for",
                            "the client (REST in PATH_INFO); other paths, symlinks too, get 404") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a directory") }
        return { $0.execDirectory = text }
    }
    static let closeGrace = seconds("--close-grace", in: .programs, applies: [.exec, .forward],
                                    help: "after a client closes or leaves, SECS its program may still write and",
                                    "exit in; then its group gets SIGTERM (SIGKILL 0.5 s later; default 1);",
                                    "with --forward: SECS the target may still send after the client's Close") {
        $0.closeGrace = $1
    }
    static let maxChildren = Option("--max-children", value: "N",
                                    in: .programs, applies: .exec,
                                    help: "programs at once beyond which handshakes get 503 (default 1024)") { text, name throws(UsageError) in
        guard let count = Int(text), count >= 1 else { throw UsageError("\(name) '\(text)' is not a positive number of programs") }
        return { $0.maxChildren = count }
    }
    static let passenv = Option("--passenv", value: "NAME",
                                in: .programs, applies: .exec,
                                help: "pass this variable of ours to the programs (repeatable; PATH always)") { text, name throws(UsageError) in
        guard !text.isEmpty, !text.contains("="), !text.utf8.contains(0) else {
            throw UsageError("\(name) '\(text)' is not a variable name")
        }
        return { $0.passing.append(text) }
    }

    // MARK: The gateway

    static let forward = Option("--forward", value: "TARGET", in: .gateway, applies: .forward,
                                help: "server mode: relay each client's message bytes to its own connection",
                                "to TARGET (tcp:HOST:PORT or unix:PATH), dialled before the 101 (502/504);",
                                "see GATEWAY in the man page") { text, name throws(UsageError) in
        // websockify's HOST:PORT is tcp:HOST:PORT.
        guard let target = StreamTarget(parsing: text) ?? (text.hasPrefix("unix:") ? nil : StreamTarget(parsing: "tcp:" + text)) else {
            throw UsageError("\(name) '\(text)' is not [tcp:]HOST:PORT ([IPv6] in brackets) or unix:PATH")
        }
        return { $0.forward.target = target }
    }
    static let forwardTokens = Option("--forward-tokens", value: "FILE",
                                      in: .gateway, applies: .forward,
                                      help: "server mode: like --forward, the target chosen by the client's ?token= (or",
                                      "token cookie) in FILE ('TOKEN: HOST:PORT' lines, websockify's format)") { text, name throws(UsageError) in
        guard !text.isEmpty else { throw UsageError("\(name) needs a file") }
        return { $0.forward.tokenFile = text }
    }

    static let clientCA = Option("--client-ca", value: "FILE", in: .server, applies: .server,
                                 help: "with -l and --cert: require a client certificate signed by a CA",
                                 "in FILE (PEM; mutual TLS); without one the TLS handshake fails") { text, name throws(UsageError) in
        let path = try readableFile(text, option: name)
        return { $0.tls.clientCA = path }
    }

    /// A --reconnect option whose value is a count of at least `minimum`.
    private static func reconnectCount(_ longName: String, minimum: Int, what: String, in category: Category, applies scope: Scope,
                                       help: String, set: @escaping @Sendable (inout ClientConfiguration.Reconnection, Int) -> Void) -> Option {
        Option(longName, nil, value: "N", in: category, applies: scope, help: [help], action: .set { text, name throws(UsageError) in
            guard let number = Int(text), number >= minimum else { throw UsageError("\(name) '\(text)' is not a \(what)") }
            return { set(&$0.reconnection, number) }
        })
    }

    /// An option whose value is a positive number of seconds.
    private static func seconds(_ longName: String, in category: Category, applies scope: Scope, help: String...,
                                set: @escaping @Sendable (inout Settings, Double) -> Void) -> Option {
        Option(longName, nil, value: "SECS", in: category, applies: scope, help: help, action: .set { text, name throws(UsageError) in
            let value = try parseSeconds(text, option: name)
            return { set(&$0, value) }
        })
    }

}

/// `:PORT` (an address left out, as Go's and Node's servers take it): the port text.
func portWithoutAddress(_ text: String) -> Substring? {
    guard text.hasPrefix(":"), text.utf8.count > 1, text.utf8.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    return text.dropFirst()
}

/// A --bus URL's problem, worded.
func busProblem(_ problem: BusAddress.Problem) -> String {
    switch problem {
    case .scheme(let scheme): return "'\(scheme)' is not a bus scheme (redis://, rediss://, nats:// or tls://)"
    case .noHost: return "no host"
    case .badHost(let host): return "'\(host)' is not a host name or a bracketed IPv6 address"
    case .badPort(let port): return "'\(port)' is not a port"
    case .noChannel: return "no channel: write it as the path (redis://HOST/CHANNEL)"
    case .badChannel(let channel):
        return "'\(channel)' is not a channel name (no spaces or control characters; a NATS subject has no wildcards or empty tokens)"
    case .badEscape: return "a %-escape in the user or password is not two hex digits, or not UTF-8"
    }
}
