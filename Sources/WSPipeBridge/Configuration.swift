import WebSocketCore
import WebSocketEngine
import WebSocketExec
import WebSocketTransport

/// Everything a run needs to know, as values: the CLI fills it in, tests build it
/// directly. In parts: `client` (where to connect and how: a client run's only), `stdio`
/// (stdin and stdout, counts and the ending: the client's and the stdio server mode's,
/// per client in the other modes), `serve` (-l), and the connection settings of both roles.
public struct BridgeConfiguration: Sendable {
    public var client: ClientConfiguration
    public var stdio = StdioConfiguration()
    /// -l/--listen: serve instead of connecting (`client` is then unused).
    public var serve: ServeConfiguration?
    /// --forward-listen: listen for TCP on this address, each connection relayed over its
    /// own client connection to `client.url` (`stdio` is then unused).
    public var forwardListen: ListenAddress?

    // Every connection, either role.
    /// -1 quiet (errors only), 0 normal, 1 verbose.
    public var verbosity = 0
    /// Seconds to wait for the peer's Close (and then its TCP close) after ours.
    public var closeTimeout: Double = 5
    /// Largest message accepted from the peer, in bytes (larger: close 1009).
    public var maxMessageSize: UInt64 = 64 << 20
    /// Seconds between pings we send; nil: none.
    public var pingInterval: Double?
    /// Seconds to wait for a pong after a ping was written; nil: no limit.
    public var pingTimeout: Double?
    /// Subprotocols (--protocol), in order: offered by the client, supported by the server.
    public var subprotocols: [String] = []

    public init(url: WebSocketURL) { client = ClientConfiguration(url: url) }

    /// Whether stdin EOF starts the closing handshake: as `StdioConfiguration` says, and not
    /// when --until decides the end (a cron job's `</dev/null` must not close before the
    /// reply it waits for, as with -n).
    var closesAtEndOfInput: Bool { stdio.closesAtEndOfInput && client.conversation.until == nil }
}

/// The client's part: the URL, how to reach it, the request, and staying connected.
public struct ClientConfiguration: Sendable {
    public var url: WebSocketURL
    /// Seconds allowed for DNS, TCP, TLS and the WebSocket handshake together.
    public var connectTimeout: Double = 10
    /// Extra request headers (-H), validated.
    public var headers: [HTTPHeader] = []
    public var origin: String?
    public var userAgent: String? = "wspipe/\(wspipeVersion)"
    /// Sent as `Authorization: Bearer <token>` unless a -H Authorization is given.
    public var bearerToken: String?
    public var caFile: String?
    public var insecure = false
    /// How to reach the server: proxies, --connect-to, --sni, -4/-6, --resolve, client
    /// certificate, --tls-min. (`caFile`, `insecure` and `userAgent` above are copied in
    /// when connecting.)
    public var network = DialOptions()
    /// The TLS options given, by long name ("--cacert", "--insecure"...), in `Option.tls`
    /// order: those no hop of the route uses are said at the start (`Opener.unusedTLSOptions`).
    public var tlsOptionsGiven: [String] = []
    /// -L/--location: follow 301/302/303/307/308 answers to the handshake.
    public var followRedirects = false
    /// --max-redirs: at most this many redirects are followed.
    public var maxRedirects = 5
    /// The argument `url` was made from when it had no scheme (wscat's `localhost:8080`),
    /// for -v to say so.
    public var schemeTakenFrom: String?
    /// permessage-deflate (RFC 7692): the client's offer, nil with --no-deflate (nothing
    /// offered). Offered by default as `permessage-deflate; client_max_window_bits` (see
    /// `PerMessageDeflate.defaultOffer`).
    public var deflate: DeflateParameters? = PerMessageDeflate.defaultOffer
    /// The extensions the handshake offers.
    public var offeredExtensions: [any WebSocketExtension] {
        deflate.map { [PerMessageDeflate.client($0)] } ?? []
    }

    // Staying connected (--reconnect and friends; docs in the man page's RECONNECTION).
    /// Retry policy and backoff; nil: one connection, failures end the run (the default).
    public var reconnect: Reconnection?
    /// Seconds without a received message after which the connection counts as dead.
    public var staleTimeout: Double?
    /// Print each keepalive ping's round trip on stderr.
    public var printPingRTT = false
    /// --send-file's contents: framed like stdin after every handshake, at its place among
    /// the preamble's steps.
    public var sendFile: [UInt8]?
    /// The preamble (--send, --send-file, --expect in command-line order), --until and
    /// their settings (Conversation/Conversation.swift).
    package var conversation = ConversationScript()
    /// --bearer-file, read again before every reconnection attempt (tokens rotate).
    public var bearerFile: String?

    /// What --reconnect sets: which failures are retried, when, and the offline queue.
    public struct Reconnection: Sendable, Equatable {
        public var policy = RetryPolicy()
        public var backoff = Backoff()
        /// Offline queue bounds: whole messages, and payload bytes.
        public var queueSize = 10_000
        public var queueBytes = 16 << 20
        public var queuePolicy = QueuePolicy.block
        public init() {}
    }

    public init(url: WebSocketURL) { self.url = url }

    /// The handshake request headers beyond the mandatory ones, in order.
    public var requestHeaders: [HTTPHeader] { requestHeaders(credentials: true, userHost: true) }

    /// The same for a redirect target. Without `credentials` (another host than the
    /// URL's), the bearer token and every -H header whose value is secret (Authorization,
    /// Cookie, names with token, key, secret...) are left out; without `userHost`, a -H Host.
    func requestHeaders(credentials: Bool, userHost: Bool) -> [HTTPHeader] {
        var list = headers.filter { (credentials || !$0.isSensitive) && (userHost || !$0.hasName("Host")) }
        func has(_ name: String) -> Bool { list.contains { $0.hasName(name) } }
        if let origin, !has("Origin") { list.append(HTTPHeader(name: "Origin", value: origin)) }
        if let userAgent, !has("User-Agent") { list.append(HTTPHeader(name: "User-Agent", value: userAgent)) }
        if credentials, let bearerToken, !has("Authorization") {
            list.append(HTTPHeader(name: "Authorization", value: "Bearer \(bearerToken)"))
        }
        return list
    }
}

/// The stdio part: how stdin becomes messages and messages are written, the counts and
/// limits of a session, and its ending at the end of stdin.
public struct StdioConfiguration: Sendable {
    public enum Mode: Sendable, Equatable {
        /// Lines ⇄ text messages (each received message is followed by the separator).
        case text
        /// Bytes ⇄ binary messages (received messages are written raw).
        case binary
    }

    public var mode: Mode = .text
    /// Line separator in text mode, both ways: newline, or NUL with -0.
    public var separator: UInt8 = 0x0A
    /// Binary mode: largest message made from stdin, in bytes.
    public var chunkSize: Int = 64 * 1024
    /// Whether stdin EOF starts the closing handshake (false with --no-close).
    public var closeOnEndOfInput = true
    /// Close sent at stdin EOF.
    public var closeCode: CloseCode = .normalClosure
    public var closeReason: String = ""

    // Formats and counted sessions.
    /// --base64: binary messages as base64 lines out; in binary mode, stdin lines are base64.
    public var base64 = false
    /// --jsonl: JSON Lines both ways (see `OutputFormat.jsonLines` and `InputFramer`).
    public var jsonLines = false
    /// --timestamps: "ts" in --jsonl output.
    public var timestamps = false
    /// wspipe as a console (a person at a terminal: `ConsoleRule`); nil in a pipeline.
    public var console: ConsoleSettings?
    /// --whole-input: all of stdin up to EOF is one message.
    public var wholeInput = false
    /// -n: close and exit after this many received messages.
    public var maxMessages: Int?
    /// -1: send only stdin's first message (and -n 1).
    public var oneMessage = false
    /// --require-count: a session that would end with 0 before -n's count came ends with
    /// `ExitStatus.countNotReached` instead.
    public var requireCount = false
    /// --send: text messages sent right after the handshake, before stdin.
    public var sendMessages: [String] = []
    /// --timeout: seconds for the whole session (then a closing handshake and exit 124).
    public var sessionTimeout: Double?
    /// --idle-timeout: seconds without a message either way (then a clean close, exit 0).
    public var idleTimeout: Double?
    /// --linger: seconds to wait after stdin EOF before closing.
    public var linger: Double?
    /// --receive-only: never read stdin. --send-only: never write stdout.
    public var receiveOnly = false
    public var sendOnly = false
    /// --decompress: binary payloads are inflated from this format before stdout.
    public var decompress: CompressionFormat?
    /// --stats: a one-line JSON summary on stderr at exit.
    public var stats = false

    /// --send, -n, --timeout and --idle-timeout as one value, applied by the engine's
    /// `LimitKeeper` in every mode; `span` and `idleClock` are what the mode documents.
    public func limits(span: ConnectionLimits.Span, idleClock: ConnectionLimits.IdleClock) -> ConnectionLimits {
        ConnectionLimits(greeting: sendMessages.map { Array($0.utf8) }, idleTimeout: idleTimeout, timeLimit: sessionTimeout,
                         maximumMessages: maxMessages, idleClock: idleClock, span: span)
    }

    /// Whether stdin EOF starts the closing handshake: not with --no-close, and not when a
    /// message count (-n, -1) decides the end.
    var closesAtEndOfInput: Bool { closeOnEndOfInput && maxMessages == nil && !receiveOnly }

    /// How stdin becomes messages.
    var inputMode: InputFramer.Mode {
        if jsonLines { return .jsonLines }
        if wholeInput { return .whole(mode == .text ? .text : .binary, fragmentSize: chunkSize) }
        switch mode {
        case .text: return .lines(separator: separator)
        case .binary: return base64 ? .base64Lines(separator: separator) : .chunks(size: chunkSize)
        }
    }

    /// How received messages are written.
    public var outputFormat: OutputFormat {
        if jsonLines { return .jsonLines(timestamps: timestamps) }
        if base64 { return .base64(separator: separator) }
        return .raw(separator: mode == .text ? separator : nil)
    }

    public init() {}
}

public let wspipeVersion = "0.1.0"

/// Server mode (-l/--listen): where to listen, what to do with each client, and the
/// engine server's policy and limits.
public struct ServeConfiguration: Sendable {
    /// What each connected client gets.
    public enum Mode: Sendable, Equatable {
        /// --echo: every message back with its type.
        case echo
        /// --exec/--sh: a child process per client.
        case exec(ExecServing)
        /// --broadcast: stdin messages to every client, client messages to stdout.
        case broadcast
        /// --forward/--forward-tokens: each client relayed to a TCP or Unix connection.
        case forward(ForwardServing)
        /// No mode given: stdin and stdout bridged to one client at a time.
        case stdio
    }

    public var listen: ListenAddress
    /// With `listen` `.systemd`: the descriptors the CLI found in LISTEN_FDS for this process.
    public var activatedDescriptors: [Int32] = []
    /// --reuseport: SO_REUSEPORT on the TCP listener.
    public var reusePort = false
    /// -l localhost:PORT: `listen` is 127.0.0.1:PORT, and [::1] on the same port is listened
    /// on too where the host has it.
    public var alsoIPv6Loopback = false
    public var mode: Mode = .stdio
    /// --oneshot: serve one client, then exit with the status its ending gives.
    public var oneshot = false
    /// Policy (--path, --allow-origin, --protocol, --require-bearer, --health,
    /// --response-header) and limits (--max-clients, --max-message-size, pings).
    public var server = ServerConfiguration()
    /// --cert/--key with -l: serve wss:// (--tls-min, --client-ca for mutual TLS).
    public var tls: TLSServerOptions?
    /// --broadcast --bus URL: the message bus between processes.
    public var bus: BusServing?

    public init(listen: ListenAddress) { self.listen = listen }
}

/// --exec PROGRAM [ARGS...] / --sh COMMAND and their settings.
public struct ExecServing: Sendable, Equatable {
    public var command: ChildCommand
    /// --close-grace: seconds between the client's end and SIGTERM to the program's group.
    public var closeGrace: Double = 1
    /// --max-children: programs at once (503 beyond).
    public var maxChildren = 1024
    /// --passenv: variables of ours the programs also get.
    public var passing: [String] = []
    /// --dir DIR: the program comes from each request's path under DIR (`command` unused).
    public var directory: String?

    public init(command: ChildCommand) { self.command = command }

    /// --dir DIR: a program per path.
    public init(directory: String) {
        self.command = ChildCommand(program: directory)
        self.directory = directory
    }
}

/// --forward TARGET / --forward-tokens FILE and their settings (the gateway, GATEWAY in the
/// man page).
public struct ForwardServing: Sendable, Equatable {
    /// Where every client goes (--forward), or nil with a token file.
    public var target: StreamTarget?
    /// --forward-tokens: websockify's token file, checked at start-up and on each client.
    public var tokenFile: String?
    /// --close-grace: seconds the target has after the client's Close to finish.
    public var closeGrace: Double = 1

    public init() {}
}
