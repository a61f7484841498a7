import Glibc
import Synchronization
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// A WebSocket server (RFC 6455 §4.2) on the process's shared engine thread: the engine's
/// own server (the one `wspipe -l` runs), with each handshake held for the caller to look
/// at and accept or reject.
///
/// ```swift
/// let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
/// await withTaskGroup(of: Void.self) { group in
///     for await pending in server {
///         guard pending.request.path == "/chat" else { try? pending.reject(status: 404); continue }
///         group.addTask {
///             guard let ws = try? await pending.accept() else { return }
///             do { for try await message in ws.messages { try await ws.send(message) } } catch {}
///         }
///     }
/// }
/// ```
///
/// The server is an `AsyncSequence` of `PendingConnection`s (tasks waiting at once get
/// one each, in the order they started waiting). Iteration
/// ends after `close()`; cancelling the iterating task closes the server too (it stops
/// accepting and closes every client with 1001, RFC 6455 §7.4.1).
///
/// wss:// is `WebSocketServerOptions.tls` (the CLI's `--cert`): each connection's TLS
/// handshake runs on the engine thread within the handshake timeout, and the request shows
/// `isSecure` and, under mutual TLS, the client certificate's subject.
///
/// Limits (`WebSocketServerOptions`), as the CLI's server: a handshake beyond
/// `maximumClients` connected clients is refused with 503; a request head larger than
/// `maximumRequestHeadSize` with 431; a client that takes longer than `handshakeTimeout`
/// (from TCP accept to the written 101, the handler's decision included) is dropped.
/// permessage-deflate (RFC 7692) is accepted as the CLI's server does
/// (`WebSocketServerOptions.deflate`).
///
/// Memory per client, beyond the connection itself: its sends waiting for the socket (a
/// `send` suspends once 768 KiB wait, counted as payload and 24 bytes per message, so the
/// message that crosses the limit, and one per task sending to that client at once, come
/// on top), and its messages that no task has taken (reading stops at
/// `receiveBufferLimit`, past it by at most the last read or one message of up to
/// `maximumMessageSize`). A server that keeps sending to every client adds that up over
/// its clients: 10,000 that stop reading are 7.3 GiB of sends by that count (less where
/// one message's payload is shared between clients, more with small messages' allocation
/// overhead and the kernel's socket buffers). Bound it in the handler (drop or skip a
/// client whose `send` has not returned) or with `maximumClients`.
public final class WebSocketServer: AsyncSequence, Sendable {
    /// Each handshake waiting for the handler's verdict.
    public typealias Element = PendingConnection
    /// Iteration never throws; it ends after `close()`.
    public typealias Failure = Never

    /// The bound address: "127.0.0.1:PORT", "[::1]:PORT", or "unix:PATH".
    public let localAddress: String
    /// The bound TCP port (the one chosen by the system for port 0); nil for a Unix socket.
    public let port: Int?
    /// The settings the server runs with.
    public let options: WebSocketServerOptions

    let engine: EngineThread
    let inbox: ServerInbox
    private let side: ServerSide

    private init(localAddress: String, port: Int?, options: WebSocketServerOptions, engine: EngineThread,
                 inbox: ServerInbox, side: ServerSide) {
        self.localAddress = localAddress
        self.port = port
        self.options = options
        self.engine = engine
        self.inbox = inbox
        self.side = side
    }

    deinit {
        // Nobody can take connections any more: stop as `close()` does.
        side.shutdown(engine: engine, within: options.closeTimeout.seconds)
    }

    /// Listens on `address`: `"PORT"`, `"ADDR:PORT"`, `"[IPv6]:PORT"` (port 0: any free
    /// port, read it from `port`), or `"unix:PATH"`. Accepting starts at once; handshakes
    /// wait for a consumer of the sequence (within the handshake timeout). With
    /// `options.tls`, every connection is TLS first (wss://, RFC 6455 §4.2.1 over TLS): the
    /// certificate, key and client CA file are loaded here, before anything is bound.
    /// - Throws: `.invalidArgument` for an address that is not one (a name instead of an IP
    ///   address, a port outside 0-65535) or options out of range; `.tls` when the TLS
    ///   certificate, key (or its passphrase) or client CA file cannot be loaded or do not
    ///   match (nothing is bound then); `.cannotListen` when the socket cannot be bound
    ///   (address in use, permission denied).
    public static func bind(to address: String, options: WebSocketServerOptions = .init()) async throws(WebSocketError) -> WebSocketServer {
        let parsed: ListenAddress
        do { parsed = try ListenAddress(parsing: address) } catch { throw .invalidArgument("listen address: \(error)") }
        return try await bind(to: parsed, options: options)
    }

    /// Listens on a parsed address; see `bind(to:options:)` with a string.
    public static func bind(to address: ListenAddress, options: WebSocketServerOptions = .init()) async throws(WebSocketError) -> WebSocketServer {
        let configuration = try options.configuration()
        let tls = try options.tls.map { settings throws(WebSocketError) in try settings.context() }
        if case .descriptor = address { throw .invalidArgument("listen address: \(address) is wspipe's (-l); WebSocketServer binds its own socket") }
        if case .systemd = address { throw .invalidArgument("listen address: systemd is wspipe's (-l); WebSocketServer binds its own socket") }
        let socket: any ListeningSocket
        let port: Int?
        do throws(ListenError) {
            switch address {
            case .tcp(let host, let number):
                let listener = try TCPListener(address: host, port: number)
                socket = listener
                port = Int(listener.port)
            case .unix(let path):
                socket = try UnixListener(path: path)
                port = nil
            case .descriptor, .systemd:
                throw .invalidAddress(address.description)  // refused above
            }
        } catch {
            throw .cannotListen("cannot listen on \(address): \(error)")
        }
        let shown = port == nil ? "unix:\(socket.localAddress)" : socket.localAddress
        let engine = EngineThread.shared
        let inbox = ServerInbox()
        let side = ServerSide()
        let transfer = ListenerTransfer(socket: socket)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            engine.submit {
                side.start(loop: engine.loop, configuration: configuration, socket: transfer.socket, tls: tls,
                           mode: KitServerMode(inbox: inbox, engine: engine, options: options))
                continuation.resume()
            }
        }
        return WebSocketServer(localAddress: shown, port: port, options: options, engine: engine, inbox: inbox, side: side)
    }

    /// Connected clients now (handshakes completed, connections not yet ended).
    public var clientCount: Int { inbox.clientCount }

    /// Stops accepting, refuses the handshakes still waiting, closes every client with 1001
    /// (going away, RFC 6455 §7.4.1), and returns once every connection has ended (each
    /// within `options.closeTimeout`). Iteration ends. Calling it again just waits.
    public func close() async {
        inbox.close()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !inbox.waitForDrain(continuation) { return }
            side.shutdown(engine: engine, within: options.closeTimeout.seconds)
        }
    }

    /// The iterator of the pending connections. Tasks awaiting `next()` at once (on one
    /// iterator or several) get one connection each, in the order they started waiting.
    public func makeAsyncIterator() -> Iterator { Iterator(server: self) }

    /// Hands out the pending connections in the order their requests arrived.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A handshake waiting for a verdict.
        public typealias Element = PendingConnection
        /// Never throws.
        public typealias Failure = Never
        let server: WebSocketServer

        /// The next pending connection; nil once the server is closed (or the task cancelled,
        /// which closes the server).
        nonisolated(nonsending) public mutating func next() async -> PendingConnection? {
            await server.next()
        }

        /// As `next()`, on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> PendingConnection? {
            await server.next()
        }
    }

    nonisolated(nonsending) func next() async -> PendingConnection? {
        if let ready = inbox.take() { return ready }
        let server = self
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PendingConnection?, Never>) in
                if let ready = inbox.wait(continuation) { continuation.resume(returning: ready) }
            }
        } onCancel: {
            server.inbox.close()
            server.side.shutdown(engine: server.engine, within: server.options.closeTimeout.seconds)
        }
    }
}

/// A client's opening handshake, held until the handler accepts or rejects it. The request
/// is complete and valid (RFC 6455 §4.2.1) and passed the options' path and origin checks.
///
/// Dropping it undecided refuses the client with 503. The server's handshake timeout keeps
/// running: an `accept` after it (or after the client left, or the server closed) throws.
public final class PendingConnection: Sendable {
    /// The request: path, query, headers, remote address, origin, offered subprotocols.
    public let request: WebSocket.Request
    let engine: EngineThread
    let options: WebSocketServerOptions
    let decision: Decision
    private let handshake: HandshakeBox

    init(handshake: PendingHandshake, engine: EngineThread, options: WebSocketServerOptions) {
        let request = handshake.request
        self.request = WebSocket.Request(path: request.path, query: request.query,
                                         headers: request.headers.map { (name: $0.name, value: $0.value) },
                                         remoteAddress: handshake.remoteAddress, origin: request.origin,
                                         subprotocols: request.subprotocols, isSecure: handshake.isSecure,
                                         clientCertificateSubject: handshake.clientCertificateSubject)
        self.engine = engine
        self.options = options
        self.handshake = HandshakeBox(handshake)
        let decision = Decision()
        self.decision = decision
        handshake.onOutcome = { connection in decision.finish(connection) }
    }

    deinit {
        guard decision.markDecided() else { return }
        let handshake = self.handshake
        engine.submit { try? handshake.value.refuse(status: 503, body: "the server did not accept the connection") }
    }

    /// Answers 101 Switching Protocols (RFC 6455 §4.2.2) and returns the connection once the
    /// response is written. The socket is the same `WebSocket` type as a client's (send,
    /// `messages`, ping, close); its `request` is this request and `url` is nil.
    /// - Parameters:
    ///   - subprotocol: one of `request.subprotocols` (§4.2.2 item 5.4), or nil for none.
    ///   - headers: extra response headers (not the handshake's own).
    /// - Throws: `.invalidArgument` for a subprotocol the client did not offer, a header that
    ///   is not valid, or a second decision; `.connectionLost` when the handshake is over
    ///   (timed out, the client left, the server closed); a 503 when the server filled up
    ///   meanwhile counts as over too.
    public func accept(subprotocol: String? = nil, headers: [(name: String, value: String)] = []) async throws(WebSocketError) -> WebSocket {
        var extra: [HTTPHeader] = []
        do {
            for header in headers { extra.append(try HTTPHeader(validating: header.name, header.value)) }
        } catch {
            throw .invalidArgument("header: \(error)")
        }
        if let subprotocol, !request.subprotocols.contains(subprotocol) {
            throw .invalidArgument("the client did not offer the subprotocol '\(subprotocol)' (offered: \(request.subprotocols.joined(separator: ", ")))")
        }
        guard decision.markDecided() else { throw .invalidArgument("this connection was already accepted or rejected") }
        let socket = WebSocket(serving: request, subprotocol: subprotocol, engine: engine, options: options.connectionOptions)
        let side = LoopSide.serving(socket)
        let (handshake, decision) = (self.handshake, self.decision)
        let chosen = extra
        let result: Result<WebSocket, WebSocketError> = await withCheckedContinuation { continuation in
            decision.wait(for: continuation, socket: socket, side: side)
            engine.submit {
                do throws(ResponseBuildError) {
                    try handshake.value.accept(subprotocol: subprotocol, headers: chosen, delegate: side)
                } catch {
                    decision.fail(.invalidArgument("response: \(error)"))
                }
            }
        }
        return try result.get()
    }

    /// Refuses the handshake with `status` (400-599) and a one-line `reason` as the body
    /// (default: the status's reason phrase); the client's connect fails with that status.
    /// - Throws: `.invalidArgument` for a status outside 400-599, a 401 (it needs
    ///   `WWW-Authenticate`: pass it in `headers`), a reason with a line break, an invalid
    ///   header, or a second decision.
    public func reject(status: Int, reason: String = "", headers: [(name: String, value: String)] = []) throws(WebSocketError) {
        var extra: [HTTPHeader] = []
        do {
            for header in headers { extra.append(try HTTPHeader(validating: header.name, header.value)) }
            _ = try HTTPResponse.refusal(status: status, headers: extra, body: reason.isEmpty ? nil : reason)
        } catch {
            throw .invalidArgument("refusal: \(error)")
        }
        guard decision.markDecided() else { throw .invalidArgument("this connection was already accepted or rejected") }
        let handshake = self.handshake
        let chosen = extra
        engine.submit { try? handshake.value.refuse(status: status, headers: chosen, body: reason) }
    }
}

/// Settings of a `WebSocketServer`: the limits of the CLI's server and each client's
/// connection settings.
public struct WebSocketServerOptions: Sendable {
    /// Connected clients beyond which a handshake is refused with 503 (and `Retry-After: 1`).
    /// Default 10,000, as the CLI.
    public var maximumClients = 10_000
    /// From TCP accept to the written 101, the handler's decision included; a client still
    /// in its handshake then is dropped. Default 10 s.
    public var handshakeTimeout: Duration = .seconds(10)
    /// Largest request head, in bytes; a bigger one is refused with 431. Default 16 KiB.
    public var maximumRequestHeadSize = HTTPRequestHead.defaultMaximumSize
    /// Largest message received from a client, in bytes; a bigger one fails that connection
    /// with 1009. Default 64 MiB.
    public var maximumMessageSize: Int = 64 << 20
    /// The only path served (nil: every path); other paths are refused with 404 before the
    /// handler sees them.
    public var path: String?
    /// Origins allowed (exact, ASCII case-insensitive; empty: any, also none); others are
    /// refused with 403 before the handler sees them (RFC 6455 §10.2).
    public var allowedOrigins: [String] = []
    /// Accept an `Origin` only when it names this server as the request's Host header does
    /// (scheme https with `tls`, else http; same host and port, default ports filled in), as
    /// `wspipe -l --sameorigin`; a client without Origin (not a browser) is accepted. With
    /// `allowedOrigins` as well, either admits. Others are refused with 403 before the
    /// handler sees them. Default false.
    public var requiresSameOrigin = false
    /// The token `Authorization: Bearer` must carry (RFC 6750 §2.1, compared in constant
    /// time); others are refused with 401 and `WWW-Authenticate` before the handler sees them.
    public var bearerToken: String?
    /// A path that answers a plain GET with 200 "ok" (load balancers' health checks).
    public var healthPath: String?
    /// Serve wss://: the server's certificate and key, and for mutual TLS the CAs of client
    /// certificates. Nil (the default): plain ws://.
    public var tls: TLS?
    /// Keepalive Ping interval per client; nil: none.
    public var pingInterval: Duration?
    /// Fail a client (`.timedOut`) whose Pong is this late; nil: no limit.
    public var pingTimeout: Duration?
    /// How long a closing handshake may go without progress (RFC 6455 §7.1.1); also the
    /// bound on each client's ending in `close()`. Default 5 s.
    public var closeTimeout: Duration = .seconds(5)
    /// Bytes of whole received messages buffered per client for a consumer that is behind
    /// (see `WebSocketOptions.receiveBufferLimit`). Default 1 MiB.
    public var receiveBufferLimit: Int = 1 << 20
    /// permessage-deflate (RFC 7692) as the server answers a client's offer: accepted by
    /// default, as `wspipe -l` does (4 KiB windows, memLevel 5: about 53 KiB per compressing
    /// client); nil declines every offer (no extension in the 101). What was agreed with a
    /// client is its `WebSocket.extensions` and `WebSocket.deflate`.
    public var deflate: Deflate? = Deflate()

    /// - Parameters mirror the properties of the same names; the others keep their defaults.
    ///   Checked by `WebSocketServer.bind` (`.invalidArgument` for a limit below 1).
    public init(maximumClients: Int = 10_000, path: String? = nil, allowedOrigins: [String] = []) {
        self.maximumClients = maximumClients
        self.path = path
        self.allowedOrigins = allowedOrigins
    }

    /// A TLS server's certificate and what it asks of clients (as `wspipe -l` with `--cert`,
    /// `--key`, `--key-pass-env`, `--tls-min` and `--client-ca`). Loaded by
    /// `WebSocketServer.bind`, which throws `.tls` for a file that cannot be used.
    public struct TLS: Sendable {
        /// PEM file of the server's certificate, optionally followed by its chain.
        public var certificateFile: String
        /// PEM file of its private key (may be `certificateFile`).
        public var keyFile: String
        /// The passphrase of an encrypted key; nil: none. Never printed.
        public var keyPassword: String?
        /// Lowest TLS version accepted. Default 1.2.
        public var minimumVersion: TLSVersion
        /// PEM file of the CAs whose client certificates are accepted. Set, every client
        /// must present a valid certificate signed by one of them (mutual TLS) or its TLS
        /// handshake fails; its subject is `PendingConnection.request.clientCertificateSubject`.
        public var clientCAFile: String?

        /// - Parameters mirror the properties of the same names. Nothing is read until
        ///   `WebSocketServer.bind`.
        public init(certificateFile: String, keyFile: String, keyPassword: String? = nil,
                    minimumVersion: TLSVersion = .tls12, clientCAFile: String? = nil) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.keyPassword = keyPassword
            self.minimumVersion = minimumVersion
            self.clientCAFile = clientCAFile
        }

        /// The loaded context; `.tls` with the transport's sentence (these settings' names).
        func context() throws(WebSocketError) -> TLSServerContext {
            let options = TLSServerOptions(certificateFile: certificateFile, keyFile: keyFile,
                                           keyPassword: keyPassword.map { Array($0.utf8) },
                                           minimumVersion: minimumVersion, clientCAFile: clientCAFile)
            do { return try TLSServerContext(options) } catch {
                throw .tls(error.serverSentence(.libraryServer, clientCA: "tls.clientCAFile"))
            }
        }
    }

    /// How the server answers permessage-deflate offers (RFC 7692 §7.1). Window bits are
    /// base-2 logarithms of the LZ77 window in bytes (12: 4 KiB); each compressing client
    /// costs about 2^(windowBits+2) + 2^(memoryLevel+9) bytes for our compressor plus
    /// 2^clientWindowBits (at most 32 KiB) for its inflater.
    public struct Deflate: Sendable, Equatable {
        /// Our compressor's window (§7.1.2.1, answered as `server_max_window_bits` when it
        /// is below 15 or the client asked): 9...15 (zlib makes no 8-bit streams). Default 12.
        public var windowBits: Int
        /// The largest window allowed a client that offered `client_max_window_bits`
        /// (§7.1.2.2; with a value N: min(N, this)): 8...15; a client that did not offer it
        /// may compress with 15. Default 12.
        public var clientWindowBits: Int
        /// zlib's memLevel for our compressor, 1...9 (its hash table is 2^(memoryLevel+9)
        /// bytes). Default 5.
        public var memoryLevel: Int
        /// Answer `server_no_context_takeover` (§7.1.1.1) to every offer: our compressor is
        /// reset after each message (less compression; a message sent to many clients
        /// compresses the same for each).
        public var serverNoContextTakeover: Bool
        /// Answer `client_no_context_takeover` (§7.1.1.2) to every offer: clients reset
        /// theirs after each message.
        public var clientNoContextTakeover: Bool

        /// - Parameters mirror the properties of the same names; checked by
        ///   `WebSocketServer.bind` (`.invalidArgument` outside their ranges).
        public init(windowBits: Int = 12, clientWindowBits: Int = 12, memoryLevel: Int = 5,
                    serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false) {
            self.windowBits = windowBits
            self.clientWindowBits = clientWindowBits
            self.memoryLevel = memoryLevel
            self.serverNoContextTakeover = serverNoContextTakeover
            self.clientNoContextTakeover = clientNoContextTakeover
        }

        /// The engine's server extension; `.invalidArgument` naming a value out of range.
        func engineExtension() throws(WebSocketError) -> PerMessageDeflate {
            guard (9...15).contains(windowBits) else { throw .invalidArgument("deflate: windowBits \(windowBits) is not 9...15") }
            guard (8...15).contains(clientWindowBits) else {
                throw .invalidArgument("deflate: clientWindowBits \(clientWindowBits) is not 8...15")
            }
            guard (1...9).contains(memoryLevel) else { throw .invalidArgument("deflate: memoryLevel \(memoryLevel) is not 1...9") }
            return .server(windowBits: windowBits, clientWindowBits: clientWindowBits, memoryLevel: memoryLevel,
                           serverNoContextTakeover: serverNoContextTakeover, clientNoContextTakeover: clientNoContextTakeover)
        }
    }

    /// The client-side options that carry the same per-connection settings.
    var connectionOptions: WebSocketOptions {
        var options = WebSocketOptions(pingInterval: pingInterval, pingTimeout: pingTimeout)
        options.closeTimeout = closeTimeout
        options.maximumMessageSize = maximumMessageSize
        options.receiveBufferLimit = receiveBufferLimit
        return options
    }

    func configuration() throws(WebSocketError) -> ServerConfiguration {
        guard maximumClients >= 1 else { throw .invalidArgument("maximumClients must be at least 1") }
        guard maximumRequestHeadSize >= 256 else { throw .invalidArgument("maximumRequestHeadSize must be at least 256 bytes") }
        guard maximumMessageSize >= 1 else { throw .invalidArgument("maximumMessageSize must be at least 1 byte") }
        guard handshakeTimeout > .zero else { throw .invalidArgument("handshakeTimeout must be positive") }
        var configuration = ServerConfiguration()
        configuration.policy.path = path
        configuration.policy.allowedOrigins = allowedOrigins
        configuration.policy.requiresSameOrigin = requiresSameOrigin
        configuration.policy.servesTLS = tls != nil
        configuration.policy.bearerToken = bearerToken
        configuration.policy.healthPath = healthPath
        configuration.connection = LoopSide.connectionOptions(connectionOptions)
        configuration.maximumMessageSize = UInt64(maximumMessageSize)
        configuration.maximumClients = maximumClients
        configuration.handshakeTimeout = handshakeTimeout.seconds
        configuration.maximumHeadSize = maximumRequestHeadSize
        configuration.deflate = try deflate?.engineExtension()
        return configuration
    }
}

// MARK: - Between the caller's tasks and the engine thread

/// The pending connections not yet taken, the consumers waiting (in order) and the close.
final class ServerInbox: Sendable {
    private struct State {
        var queue = FIFO<PendingConnection>()
        /// Consumers awaiting `next()` at once get one connection each, first come first.
        var consumers: [CheckedContinuation<PendingConnection?, Never>] = []
        var closed = false
        var drained = false
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var clients = 0
    }
    private let state = Mutex(State())

    var clientCount: Int { state.withLock { $0.clients } }

    /// A buffered connection (`.some`), the end after the close (`.some(nil)`), or nil: wait.
    func take() -> PendingConnection?? {
        state.withLock { state in
            if let next = state.queue.popFirst() { return .some(next) }
            return state.closed ? .some(nil) : nil
        }
    }

    /// Waits unless something is ready (returned: resume with it).
    func wait(_ consumer: CheckedContinuation<PendingConnection?, Never>) -> PendingConnection?? {
        state.withLock { state in
            if let next = state.queue.popFirst() { return .some(next) }
            if state.closed { return .some(nil) }
            state.consumers.append(consumer)
            return nil
        }
    }

    /// From the engine thread: a new handshake.
    func deliver(_ pending: PendingConnection) {
        let consumer = state.withLock { state -> CheckedContinuation<PendingConnection?, Never>? in
            if state.closed { return nil }
            if !state.consumers.isEmpty { return state.consumers.removeFirst() }
            state.queue.append(pending)
            return nil
        }
        consumer?.resume(returning: pending)
    }

    /// Ends iteration: the waiting consumers get nil, buffered handshakes are let go (their
    /// deinit refuses them, or the shutdown ends them).
    func close() {
        let (consumers, dropped) = state.withLock { state -> ([CheckedContinuation<PendingConnection?, Never>], [PendingConnection]) in
            state.closed = true
            defer { state.consumers.removeAll() }
            return (state.consumers, state.queue.takeAll())
        }
        for consumer in consumers { consumer.resume(returning: nil) }
        _ = dropped  // released here, outside the lock
    }

    /// Registers a `close()` waiter; false when the server already drained (resumed here).
    func waitForDrain(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
        let drained = state.withLock { state -> Bool in
            if state.drained { return true }
            state.drainWaiters.append(waiter)
            return false
        }
        if drained { waiter.resume() }
        return !drained
    }

    func drained() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.drained = true
            defer { state.drainWaiters = [] }
            return state.drainWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func clientsChanged(by delta: Int) { state.withLock { $0.clients += delta } }
}

/// One pending connection's verdict and outcome, shared by the caller's `accept` and the
/// engine's `onOutcome` (which must not hold the `PendingConnection`: its deinit refuses).
final class Decision: Sendable {
    private struct State {
        var decided = false
        /// The handshake ended before an accept was answered.
        var over = false
        var waiter: CheckedContinuation<Result<WebSocket, WebSocketError>, Never>?
        var socket: WebSocket?
        var side: LoopSide?
    }
    private let state = Mutex(State())

    /// True for the first decision.
    func markDecided() -> Bool {
        state.withLock { state in
            defer { state.decided = true }
            return !state.decided
        }
    }

    func wait(for waiter: CheckedContinuation<Result<WebSocket, WebSocketError>, Never>, socket: WebSocket, side: LoopSide) {
        let over = state.withLock { state -> Bool in
            if state.over { return true }
            state.waiter = waiter
            state.socket = socket
            state.side = side
            return false
        }
        if over { waiter.resume(returning: .failure(Decision.gone)) }
    }

    /// The 101 could not be built: the caller's error, and the handshake may be decided again.
    func fail(_ error: WebSocketError) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<WebSocket, WebSocketError>, Never>? in
            state.decided = false
            state.socket = nil
            state.side = nil
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: .failure(error))
    }

    /// On the engine thread, exactly once: the started connection, or nil.
    func finish(_ connection: ServerConnection?) {
        let (waiter, socket, side) = state.withLock { state in
            state.over = true
            defer { state.waiter = nil; state.socket = nil; state.side = nil }
            return (state.waiter, state.socket, state.side)
        }
        guard let waiter else { return }
        guard let connection, let driver = connection.driver, let socket, let side else {
            return waiter.resume(returning: .failure(Decision.gone))
        }
        socket.agreed(deflate: connection.info.deflate)
        side.attach(driver)
        waiter.resume(returning: .success(socket))
    }

    static let gone = WebSocketError.connectionLost(
        "the handshake is over: it timed out, the client left, the server closed, or it was full (503)")
}

/// The engine's server and its listener, touched only on the engine thread.
final class ServerSide: @unchecked Sendable {
    private var server: WebSocketEngine.ServerDriver?
    private var mode: KitServerMode?
    private var stopping = false

    func start(loop: EventLoop, configuration: ServerConfiguration, socket: any ListeningSocket, tls: TLSServerContext?,
               mode: KitServerMode) {
        let server = WebSocketEngine.ServerDriver(loop: loop, configuration: configuration, mode: mode)
        self.server = server
        self.mode = mode
        let inbox = mode.inbox
        server.onEvent = { event in
            switch event {
            case .connected: inbox.clientsChanged(by: 1)
            case .disconnected: inbox.clientsChanged(by: -1)
            case .refused, .notHTTP, .tlsFailed, .proxyHeaderRefused, .compressionUnavailable, .notServed: break
            }
        }
        // The server (and so this side) lives until its last client has ended.
        server.onDrained = { [self] in
            self.server?.onDrained = nil
            self.server = nil
            self.mode = nil
            inbox.drained()
        }
        server.listen(on: socket, tls: tls)
    }

    /// From any thread: shuts the server down on the engine thread (once).
    func shutdown(engine: EngineThread, within limit: Double) {
        engine.submit { [self] in
            guard !stopping, let server else { return }
            stopping = true
            server.shutdown(ClosePayload(code: .goingAway), within: limit)
        }
    }
}

/// The mode of a WSKit server: every accepted handshake waits for the caller's verdict.
final class KitServerMode: ServerMode, @unchecked Sendable {
    let inbox: ServerInbox
    let engine: EngineThread
    let options: WebSocketServerOptions

    init(inbox: ServerInbox, engine: EngineThread, options: WebSocketServerOptions) {
        self.inbox = inbox
        self.engine = engine
        self.options = options
    }

    var decidesLater: Bool { true }

    func review(_ handshake: PendingHandshake) {
        inbox.deliver(PendingConnection(handshake: handshake, engine: engine, options: options))
    }

    /// Not reached: every accepted handshake names its delegate (a `LoopSide`).
    func handler(for connection: ServerConnection) -> ConnectionDelegate { Unreached() }

    private final class Unreached: ConnectionDelegate {
        func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}
        func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {}
        func connectionDidEndMessage(_ connection: ConnectionDriver) {}
        func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
    }
}

/// A handshake crossing to the engine thread (only touched there).
struct HandshakeBox: @unchecked Sendable {
    let value: PendingHandshake
    init(_ value: PendingHandshake) { self.value = value }
}

/// A bound listening socket crossing to the engine thread (only touched there).
struct ListenerTransfer: @unchecked Sendable {
    let socket: any ListeningSocket
}
