import Synchronization
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// A client WebSocket connection (RFC 6455) on the process's shared engine thread.
///
/// ```swift
/// let ws = try await WebSocket.connect(to: "wss://feed.example/ws",
///                                      options: .init(subprotocols: ["v2.json"], pingInterval: .seconds(25)))
/// try await ws.send(.text(#"{"op":"subscribe"}"#))
/// for try await message in ws.messages { ... }
/// print(ws.closeCode, ws.closeReason)
/// ```
///
/// Threading: every connection of the process runs on one engine thread (epoll); the
/// blocking connect (DNS, happy eyeballs, proxy, TLS, handshake, under one deadline) runs
/// on a small pool of connect threads (at most 8). Callers' tasks never block: they hand
/// work to the engine and suspend on continuations.
public final class WebSocket: Sendable {
    /// The URL connected to (after redirects); nil for a client of a `WebSocketServer`.
    public let url: WebSocketURL?
    /// What a `WebSocketServer`'s client asked for; nil for a connection we opened.
    public let request: Request?

    /// The opening request of a server's client (RFC 6455 §4.2.1).
    public struct Request: Sendable {
        /// The path of the request target, e.g. "/chat".
        public let path: String
        /// The query, without "?" (nil: none).
        public let query: String?
        /// Every request header, in order.
        public let headers: [(name: String, value: String)]
        /// "ip:port" of the client (the socket path for a Unix listener).
        public let remoteAddress: String
        /// The `Origin` header (RFC 6455 §4.2.1 item 8; browsers always send it), if any.
        public let origin: String?
        /// The subprotocols the client offered, in its order of preference (§4.2.1 item 10).
        public let subprotocols: [String]
        /// Whether the client connected over TLS (wss://, `WebSocketServerOptions.tls`).
        public let isSecure: Bool
        /// The subject of the client's certificate (RFC 2253, "CN=client,O=Example") under
        /// mutual TLS (`WebSocketServerOptions.TLS.clientCAFile`; verified by then), or when
        /// a client sent one unasked; nil otherwise.
        public let clientCertificateSubject: String?

        /// The values of the header `name` (ASCII case-insensitive).
        public func values(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }
    }
    /// The subprotocol the server selected (`Sec-WebSocket-Protocol`), if any.
    public let subprotocol: String?
    /// The extensions the server accepted, as it answered them (`Sec-WebSocket-Extensions`),
    /// e.g. `permessage-deflate; client_max_window_bits=15`; on a server's connection, as
    /// this server answered them in its 101.
    public var extensions: [String] { shared.withLock { $0.extensions } }
    /// What permessage-deflate (RFC 7692) came to when the server agreed to it; nil: messages
    /// go uncompressed. On a server's connection "outgoing" is this server's compressor.
    public var deflate: DeflateAgreement? { shared.withLock { $0.deflate } }

    /// The agreed permessage-deflate windows (base-2 logarithms, 8...15) and context resets.
    public struct DeflateAgreement: Sendable, Equatable {
        /// The window we compress with.
        public let outgoingWindowBits: Int
        /// We reset our compressor after each message.
        public let outgoingNoContextTakeover: Bool
        /// The largest window the peer compresses with.
        public let incomingWindowBits: Int
        /// The peer resets its compressor after each message.
        public let incomingNoContextTakeover: Bool

        init(_ configuration: DeflateConfiguration) {
            outgoingWindowBits = configuration.outgoingWindowBits
            outgoingNoContextTakeover = configuration.outgoingNoContextTakeover
            incomingWindowBits = configuration.incomingWindowBits
            incomingNoContextTakeover = configuration.incomingNoContextTakeover
        }
    }

    let shared: Mutex<Shared>
    let engine: EngineThread
    /// The engine-thread half while the connection runs (under the mutex: `deinit` reads
    /// it on whatever thread lets go of the last reference).
    var side: LoopSide? { shared.withLock { $0.side } }
    /// The driver's queue limit: the bytes it frames ahead of the socket. As the CLI's
    /// queue (384 KiB for binary stdin): at 192 KiB a 64 KiB upload wrote 192 KiB per
    /// `sendmsg`.
    static let socketQueueLimit = 384 * 1024
    /// Bytes waiting for the socket (the outbox and the driver's queue) from which `send`
    /// suspends: twice the driver's queue, so that the outbox still holds messages when the
    /// socket takes bytes and the driver wants more. At the driver's own limit the outbox was
    /// empty whenever the driver was full: each 64 KiB the socket took resumed the sender,
    /// and the engine waited for it (scripts/bench-api's 64 KiB upload: 0.61 s per 2 GiB
    /// against 0.43 s now; the CLI's 0.58 s).
    static let sendLimit = 2 * socketQueueLimit
    var sendLimit: Int { WebSocket.sendLimit }
    /// A client connection's socket reads, at most (see `LoopSide.start`).
    static let clientReadSize = 1 << 20
    let receiveLimit: Int
    /// `WebSocketOptions.keepsBuffersWhenIdle`.
    let keepsBuffersWhenIdle: Bool
    /// `WebSocketOptions.log` (nil on a server's connection).
    let log: (@Sendable (String) -> Void)?

    /// The connection's state.
    public enum State: Sendable, Equatable {
        /// Messages flow both ways.
        case open
        /// A Close was sent or received; the closing handshake is under way.
        case closing
        /// The connection is over (`closeCode`/`closeReason`, or the error `messages` threw).
        case closed
    }

    /// The state now.
    public var state: State { shared.withLock { $0.state } }
    /// The code of the peer's Close (any code 1000-4999 it sent); nil before it or when it
    /// sent none.
    public var closeCode: Int? { shared.withLock { $0.closeCode } }
    /// The reason of the peer's Close (UTF-8); nil before it.
    public var closeReason: String? { shared.withLock { $0.closeReason } }
    /// After `close()`: true when the peer confirmed reading every message sent before it
    /// (it answered the Ping sent behind them), false when the Close went without that
    /// answer (the close timeout passed without progress, or the peer kept sending for 10
    /// close timeouts): replies to the last messages may be missing. Nil before, or when
    /// the connection ended otherwise (the peer closed first, cancellation).
    public var deliveryConfirmed: Bool? { shared.withLock { $0.deliveryConfirmed } }

    /// The received messages (see `Messages`). Tasks awaiting it at once get one message
    /// each, in the order they started waiting.
    public var messages: Messages { Messages(socket: self) }

    init(url: WebSocketURL, negotiated: ClientHandshake.Negotiated, deflate: DeflateConfiguration?, engine: EngineThread,
         options: WebSocketOptions) {
        self.url = url
        request = nil
        subprotocol = negotiated.subprotocol
        var initial = Shared(keepsBuffers: options.keepsBuffersWhenIdle)
        initial.extensions = negotiated.extensions.map { "\($0)" }
        initial.deflate = deflate.map(DeflateAgreement.init)
        self.engine = engine
        shared = Mutex(initial)
        receiveLimit = max(options.receiveBufferLimit, 1)
        keepsBuffersWhenIdle = options.keepsBuffersWhenIdle
        log = options.log
    }

    /// A server's client (the server role).
    init(serving request: Request, subprotocol: String?, engine: EngineThread, options: WebSocketOptions) {
        url = nil
        self.request = request
        self.subprotocol = subprotocol
        self.engine = engine
        shared = Mutex(Shared(keepsBuffers: options.keepsBuffersWhenIdle))
        receiveLimit = max(options.receiveBufferLimit, 1)
        keepsBuffersWhenIdle = options.keepsBuffersWhenIdle
        log = options.log
    }

    /// A server's client: what its 101 agreed (set on the engine thread before `accept`
    /// returns the socket).
    func agreed(deflate: (response: ExtensionOffer, configuration: DeflateConfiguration?)?) {
        shared.withLock { shared in
            shared.extensions = deflate.map { ["\($0.response)"] } ?? []
            shared.deflate = deflate?.configuration.map(DeflateAgreement.init)
        }
    }

    deinit {
        // Nobody can send or receive any more: end the connection as "going away".
        if let side = shared.withLock({ $0.side }) { engine.submit { side.close(code: 1001, reason: []) } }
    }

    // MARK: - Connecting

    /// Connects to `url` (`ws://`, `wss://`, `ws+unix://SOCKET:/path`) and performs the
    /// opening handshake (RFC 6455 §4.1).
    ///
    /// The blocking work runs on one of the library's connect threads, all before
    /// `options.connectTimeout`. Cancelling the calling task ends that work where it
    /// waits (DNS, TCP, TLS, the handshake; the socket is closed, after a Close 1001 when
    /// the server's 101 came all the same) and makes it throw `.cancelled`.
    /// - Throws: `WebSocketError` `.invalidURL`, `.invalidArgument`, `.cannotConnect`, `.tls`,
    ///   `.handshakeRejected`, `.timedOut`, `.cancelled`.
    public static func connect(to url: String, options: WebSocketOptions = .init()) async throws(WebSocketError) -> WebSocket {
        let parsed: WebSocketURL
        do { parsed = try WebSocketURL(parsing: url) } catch { throw .invalidURL(error.description) }
        return try await connect(to: parsed, options: options)
    }

    /// Connects to a parsed URL; see `connect(to:options:)` with a string.
    public static func connect(to url: WebSocketURL, options: WebSocketOptions = .init()) async throws(WebSocketError) -> WebSocket {
        try await open(url, options: options).mapError(\.error).get()
    }

    /// Why an opening failed: the error for the caller and the facts for a retry policy.
    struct OpenFailure: Error {
        let error: WebSocketError
        /// nil: not an attempt that failed (bad options, cancelled).
        let attempt: AttemptFailure?
    }

    /// Connects as `connect(to:options:)` does, cancelled through `attempt` as well as by
    /// cancelling the calling task (WSKitFoundation's task gives its close code that way).
    package static func connect(to url: String, options: WebSocketOptions, attempt: ConnectAttempt) async throws(WebSocketError) -> WebSocket {
        let parsed: WebSocketURL
        do { parsed = try WebSocketURL(parsing: url) } catch { throw .invalidURL(error.description) }
        return try await open(parsed, options: options, attempt: attempt).mapError(\.error).get()
    }

    static func open(_ url: WebSocketURL, options: WebSocketOptions, attempt: ConnectAttempt = ConnectAttempt()) async -> Result<WebSocket, OpenFailure> {
        let result = await attemptOpen(url, options: options, attempt: attempt)
        if case .failure(let failure) = result, let log = options.log { log("failed: \(failure.error.description)") }
        return result
    }

    private static func attemptOpen(_ url: WebSocketURL, options: WebSocketOptions, attempt: ConnectAttempt) async -> Result<WebSocket, OpenFailure> {
        let opener: ClientOpener
        do throws(WebSocketError) { opener = try options.opener(for: url) } catch { return .failure(OpenFailure(error: error, attempt: nil)) }
        let engine = EngineThread.shared
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<WebSocket, OpenFailure>, Never>) in
                ConnectPool.shared.run {
                    let buffer = ByteBuffer(capacity: 256 * 1024)
                    let opened: ClientOpener.Opened
                    do throws(OpenError) {
                        opened = try opener.open(into: buffer, deadline: attempt.deadline(seconds: options.connectTimeout.seconds))
                    } catch {
                        // A cancelled connect's waits end as if their deadline passed.
                        let failure = attempt.isCancelled ? OpenFailure(error: .cancelled, attempt: nil)
                            : OpenFailure(error: WebSocketError(error), attempt: AttemptFailure(error))
                        continuation.resume(returning: .failure(failure))
                        return
                    }
                    if attempt.isCancelled {
                        attempt.abandon(opened.stream)
                        continuation.resume(returning: .failure(OpenFailure(error: .cancelled, attempt: nil)))
                        return
                    }
                    let socket = WebSocket(url: opened.url, negotiated: opened.negotiated, deflate: opened.agreement.deflate?.configuration,
                                           engine: engine, options: options)
                    let transfer = StreamTransfer(opened: opened, buffer: buffer)
                    engine.submit {
                        LoopSide.start(socket, transfer: transfer, options: options)
                        // Cancelled since the check above: the driver sends the Close.
                        if let close = attempt.closing {
                            socket.side?.close(code: close.code, reason: close.reason)
                            continuation.resume(returning: .failure(OpenFailure(error: .cancelled, attempt: nil)))
                        } else {
                            continuation.resume(returning: .success(socket))
                        }
                    }
                }
            }
        } onCancel: {
            attempt.cancel()
        }
    }

    /// Returns once the connection is over (`state == .closed`).
    package func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let over = shared.withLock { state -> Bool in
                if state.state == .closed { return true }
                state.closeWaiters.append(continuation)
                return false
            }
            if over { continuation.resume() }
        }
    }

    /// The failure that ended the connection (nil: open, or ended by a closing handshake).
    package var failure: WebSocketError? { shared.withLock { $0.ending } }

    /// How the connection ended, once it has (the engine's facts, for a retry policy).
    var ending: ConnectionEnding? { shared.withLock { $0.connectionEnding } }

    // MARK: - Sending

    /// Sends one message (RFC 6455 §5.6). Returns once the message is queued and less than
    /// 768 KiB wait for the socket (payload, and 24 bytes per message): while the
    /// peer is slow, `send` suspends.
    /// Cancelling the waiting task closes the connection with 1001 and throws `.cancelled`
    /// (the message may or may not have gone out).
    /// - Throws: `.closed` once a Close was sent or received; the connection's failure.
    nonisolated(nonsending) public func send(_ message: consuming Message) async throws(WebSocketError) {
        if try sendNow(message) { try await waitForRoom() }
    }

    /// Queues `message` for the engine at once (in call order with every other send and
    /// ping) without waiting; true when the queue is full: wait in `waitForRoom()` before
    /// the next. WSKitFoundation's completion-handler sends use it (no task per send).
    package func sendNow(_ message: consuming Message) throws(WebSocketError) -> Bool {
        try queue(message, onWritten: nil)
    }

    /// As `sendNow`, and calls `onWritten` exactly once: when the message's last byte was
    /// written to the socket, or with the failure (the connection ended before). Not called
    /// when this throws. WSKitFoundation's sends complete with it (URLSession's meaning).
    package func sendNow(_ message: consuming Message,
                         onWritten: @escaping @Sendable (Result<Void, WebSocketError>) -> Void) throws(WebSocketError) -> Bool {
        try queue(message, onWritten: onWritten)
    }

    /// Both `sendNow`s: the message is moved, not copied, from the caller into the outbox
    /// (and there to the engine): a retain and a release fewer per message.
    private func queue(_ message: consuming Message,
                       onWritten: (@Sendable (Result<Void, WebSocketError>) -> Void)?) throws(WebSocketError) -> Bool {
        let (wake, full) = try enqueue(Outgoing(message), onWritten: onWritten)
        if wake { scheduleDrain() }
        return full
    }

    /// Sends a Ping (RFC 6455 §5.5.2) and returns the time until its Pong arrived (measured
    /// from the call, so it includes the hand-off to the engine thread, a few µs).
    /// - Throws: `.closed`, the connection's failure, `.cancelled` (the connection stays open).
    nonisolated(nonsending) public func ping() async throws(WebSocketError) -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        let payload = nextPingPayload()
        let result: Result<Void, WebSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, WebSocketError>, Never>) in
                startPing(payload) { continuation.resume(returning: $0) }
            }
        } onCancel: {
            let waiting = shared.withLock { $0.pings.removeValue(forKey: payload) }
            waiting?(.failure(.cancelled))
        }
        try result.get()
        return clock.now - start
    }

    /// Hands a Ping to the engine at once (behind the sends before it) and calls `onPong`
    /// exactly once: when its Pong arrived, or with the failure. For WSKitFoundation's
    /// `sendPing`, whose call order must hold.
    package func ping(onPong: @escaping @Sendable (Result<Void, WebSocketError>) -> Void) {
        startPing(nextPingPayload(), onPong)
    }

    private func nextPingPayload() -> [UInt8] {
        let id = shared.withLock { state -> UInt64 in state.nextPing += 1; return state.nextPing }
        return Array("wskit:".utf8) + withUnsafeBytes(of: id.bigEndian) { Array($0) }
    }

    /// The Ping goes through the outbox, so it keeps its place among the sends.
    private func startPing(_ payload: [UInt8], _ onPong: @escaping @Sendable (Result<Void, WebSocketError>) -> Void) {
        let queued = shared.withLock { state -> Result<Bool, WebSocketError> in
            if let ending = state.ending { return .failure(ending) }
            if state.state != .open { return .failure(.closed(code: state.closeCode, reason: state.closeReason ?? "")) }
            state.pings[payload] = onPong
            let ping = Outgoing.ping(payload)
            state.outboxWeight += ping.weight
            state.outbox.append(ping)
            defer { state.drainScheduled = true }
            return .success(!state.drainScheduled)
        }
        switch queued {
        case .failure(let refused): onPong(.failure(refused))
        case .success(let wake): if wake { scheduleDrain() }
        }
    }

    /// Starts the closing handshake (RFC 6455 §7.1.2) once the peer has read the messages
    /// already sent (a Ping goes behind them and the Close follows its Pong, §5.5.2) and
    /// returns when the connection is over (the peer's Close arrived, or the close timeout
    /// passed). The wait lasts while the peer makes progress (takes our bytes; from the Ping
    /// until its Close, sends anything: its replies), at most the close timeout without it
    /// and 10 close timeouts of the peer sending; without the Pong the Close goes anyway and
    /// `deliveryConfirmed` is false. `messages` then ends once the messages before the
    /// peer's Close are read.
    /// - Parameters:
    ///   - code: 1000-4999, except the codes that may not be sent (1004-1006, 1015).
    ///   - reason: UTF-8, cut to the 123 bytes a Close may carry (at a character boundary).
    /// - Throws: `.invalidArgument` for a code that may not be sent.
    nonisolated(nonsending) public func close(code: Int = 1000, reason: String = "") async throws(WebSocketError) {
        guard let raw = UInt16(exactly: code), CloseCode(raw).isSendable else {
            throw .invalidArgument("\(code) is not a close code that may be sent (1000-4999 except 1004-1006 and 1015)")
        }
        let closingBytes = WebSocket.closeReason(reason)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let over = shared.withLock { state -> Bool in
                if state.state == .closed { return true }
                if state.state == .open { state.state = .closing }
                state.closeWaiters.append(continuation)
                return false
            }
            if over { continuation.resume(); return }
            engine.submit { [self] in side?.close(code: raw, reason: closingBytes, afterDelivery: true) }
        }
    }

    /// `reason` as a Close carries it: UTF-8, cut to 123 bytes at a character boundary.
    static func closeReason(_ reason: String) -> [UInt8] {
        let bytes = Array(reason.utf8)
        guard bytes.count > ClosePayload.maximumReasonLength else { return bytes }
        var end = ClosePayload.maximumReasonLength
        while end > 0 && bytes[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
        return Array(bytes[..<end])
    }

    // MARK: - Receiving

    /// The next message if one is buffered, without waiting (WSKitFoundation's completion
    /// handlers take buffered messages without a task).
    package func receiveNow() -> Message? {
        let taken = shared.withLock { state -> (Message?, Bool) in
            // Callers already waiting come first: each takes the messages in turn.
            guard state.receivers.isEmpty, let message = state.inbox.removeFirst() else { return (nil, false) }
            state.inboxBytes -= message.byteCount
            return (message, state.unpauseIfCaughtUp(limit: receiveLimit))
        }
        if taken.1 { resumeReading() }
        return taken.0
    }

    /// The next message; nil after the peer's Close (what `messages` yields). Callers
    /// waiting at once are answered in the order they started waiting, one message each;
    /// a cancelled one is resumed at once with `.cancelled` (even one cancelled before it
    /// started waiting), and closes the connection with 1001.
    nonisolated(nonsending) package func receive() async throws(WebSocketError) -> Message? {
        if let message = receiveNow() { return message }
        let id = shared.withLock { state -> UInt64 in state.nextReceiver += 1; return state.nextReceiver }
        let result: Result<Message?, WebSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Message?, WebSocketError>, Never>) in
                let ready = shared.withLock { state -> (Result<Message?, WebSocketError>?, Bool) in
                    // Under the lock: a cancellation either came first (seen here) or finds
                    // this waiter registered (the flag is set before the handler runs).
                    if Task.isCancelled { return (.failure(.cancelled), false) }
                    if state.receivers.isEmpty, let message = state.inbox.removeFirst() {
                        state.inboxBytes -= message.byteCount
                        return (.success(message), state.unpauseIfCaughtUp(limit: receiveLimit))
                    }
                    if state.state == .closed && state.inbox.isEmpty { return (state.takeEndResult(), false) }
                    state.receivers.append((id, continuation))
                    return (nil, state.unpauseIfCaughtUp(limit: receiveLimit))
                }
                if ready.1 { resumeReading() }
                if let result = ready.0 { continuation.resume(returning: result) }
            }
        } onCancel: {
            let waiting = shared.withLock { state -> CheckedContinuation<Result<Message?, WebSocketError>, Never>? in
                guard let index = state.receivers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.receivers.remove(at: index).continuation
            }
            waiting?.resume(returning: .failure(.cancelled))
            cancelClose()
        }
        return try result.get()
    }

    // MARK: - Hand-offs to the engine

    /// `onWritten`: a `.written` mark follows the message in the outbox (WSKit's own sends
    /// add none: nothing per message for them).
    private func enqueue(_ outgoing: consuming Outgoing,
                         onWritten: (@Sendable (Result<Void, WebSocketError>) -> Void)? = nil) throws(WebSocketError) -> (wake: Bool, full: Bool) {
        let weight = outgoing.weight
        // Taken inside the lock's closure (a captured value could only be copied).
        var pending: Outgoing? = consume outgoing
        let result = shared.withLock { state -> Result<(Bool, Bool), WebSocketError> in
            // `ending` is only set with `.closed`: the open state is checked first, so a send
            // does not copy the optional error.
            guard state.state == .open else {
                if let ending = state.ending { return .failure(ending) }
                return .failure(.closed(code: state.closeCode, reason: state.closeReason ?? ""))
            }
            if let item = pending.take() { state.outbox.append(item) }
            state.outboxWeight += weight
            if let onWritten {
                state.nextWritten += 1
                let mark = Outgoing.written(state.nextWritten)
                state.outboxWeight += mark.weight
                state.outbox.append(mark)
                state.writeWaiters.append((state.nextWritten, onWritten))
            }
            let wake = !state.drainScheduled
            state.drainScheduled = true
            return .success((wake, state.outboxWeight + state.engineQueued >= sendLimit))
        }
        return try result.get()
    }

    private func scheduleDrain() {
        engine.submit { [self] in side?.drainOutbox() }
    }

    /// Returns once the queue is below its limit (after `sendNow` said it is full).
    nonisolated(nonsending) package func waitForRoom() async throws(WebSocketError) {
        let result: Result<Void, WebSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, WebSocketError>, Never>) in
                let ready = shared.withLock { state -> Result<Void, WebSocketError>? in
                    if let ending = state.ending { return .failure(ending) }
                    if state.state == .closed { return .failure(.closed(code: state.closeCode, reason: state.closeReason ?? "")) }
                    if state.outboxWeight + state.engineQueued < sendLimit { return .success(()) }
                    state.senders.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiting = shared.withLock { state -> [CheckedContinuation<Result<Void, WebSocketError>, Never>] in
                defer { state.senders.removeAll() }
                return state.senders
            }
            for sender in waiting { sender.resume(returning: .failure(.cancelled)) }
            cancelClose()
        }
        try result.get()
    }

    private func resumeReading() {
        engine.submit { [self] in side?.resumeReading() }
    }

    /// A cancelled consumer or sender: close as "going away" (RFC 6455 §7.4.1, 1001).
    private func cancelClose() {
        let first = shared.withLock { state -> Bool in
            guard state.state == .open else { return false }
            state.state = .closing
            return true
        }
        if first { engine.submit { [self] in side?.close(code: 1001, reason: []) } }
    }
}

/// Cancellation of a connect: checked when the blocking work returns, and signalled into
/// its waits (DNS, TCP, TLS, the handshake) so that they end at once. The signal's pipe is
/// made only when the work starts: connects queued for a connect thread hold none. A
/// handshake that completed all the same is ended with a Close carrying the cancel's code.
package final class ConnectAttempt: Sendable {
    private let state = Mutex<(close: (code: UInt16, reason: [UInt8])?, signal: ConnectCancellation?)>((nil, nil))
    var isCancelled: Bool { closing != nil }
    /// The Close for a connection that opens after the cancel (nil: not cancelled).
    var closing: (code: UInt16, reason: [UInt8])? { state.withLock { $0.close } }

    package init() {}

    /// Ends the connect where it is; a connection already open gets a Close with `code`
    /// (one that may be sent) and `reason` (cut to 123 bytes). The first cancel counts.
    package func cancel(code: UInt16 = 1001, reason: String = "") {
        let signal = state.withLock { state -> ConnectCancellation? in
            if state.close == nil { state.close = (code, WebSocket.closeReason(reason)) }
            return state.signal
        }
        signal?.cancel()
    }

    /// A connection whose handshake completed after the cancel (on the connect thread, before
    /// any reading): the Close goes out, then the socket is closed without waiting for the
    /// peer's (a cancel returns at once; the peer sees the code, then the end of the stream).
    func abandon(_ stream: ByteStream) {
        if let close = closing {
            let payload = ClosePayload(code: CloseCode(close.code), reason: close.reason)
            var keys = MaskingKeyGenerator.system
            let frame = FrameEncoder.frame(opcode: .close, payload: payload.bytes, maskingKey: keys.next())
            _ = try? stream.writeAll(frame, until: Deadline(seconds: 1), stage: .sendingHandshake)
            stream.shutdownOutput()
        }
        stream.close()
    }

    /// The deadline for the blocking work, with this attempt's cancellation in it.
    func deadline(seconds: Double) -> Deadline {
        var deadline = Deadline(seconds: seconds)
        let signal = ConnectCancellation()
        let cancelled = state.withLock { state -> Bool in
            state.signal = signal
            return state.close != nil
        }
        if cancelled { signal?.cancel() }
        deadline.cancellation = signal
        return deadline
    }
}

/// The opened stream crossing from a connect thread to the engine thread (nothing else
/// touches it in between).
struct StreamTransfer: @unchecked Sendable {
    let opened: ClientOpener.Opened
    let buffer: ByteBuffer
}

/// What the caller queued for the engine.
enum Outgoing {
    case text(String)
    case binary([UInt8])
    /// A Ping's payload (its Pong resumes `Shared.pings`).
    case ping([UInt8])
    /// Report when the message before is written (`Shared.writeWaiters`, by this token).
    case written(UInt64)

    /// A message to send, moved in.
    init(_ message: consuming Message) {
        switch consume message {
        case .text(let text): self = .text(text)
        case .binary(let bytes): self = .binary(bytes)
        }
    }

    /// What an entry of the outbox weighs against the send limit besides its payload: its
    /// place in a block. Without it, empty messages weighed nothing and a caller sending
    /// them to a peer that does not read was never suspended (the engine's own queues count
    /// an entry too, `MessageQueue.entryCost`).
    static let entryCost = MemoryLayout<Outgoing>.stride

    /// The entry's weight against the send limit: its payload and `entryCost`.
    var weight: Int {
        switch self {
        case .text(let text): return text.utf8.count + Outgoing.entryCost
        case .binary(let bytes): return bytes.count + Outgoing.entryCost
        case .ping(let payload): return payload.count + Outgoing.entryCost
        case .written: return Outgoing.entryCost
        }
    }
}

extension Message {
    var byteCount: Int {
        switch self {
        case .text(let text): return text.utf8.count
        case .binary(let bytes): return bytes.count
        }
    }
}

/// A first-in first-out queue without per-pop copying.
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0
    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: Element? { head < items.count ? items[head] : nil }
    mutating func append(_ item: Element) { items.append(item) }
    /// Appends every element of `more`, leaving it empty: into an empty queue by swapping
    /// the arrays (`more` gets this queue's spare capacity back, nothing is copied).
    mutating func append(taking more: inout [Element]) {
        if isEmpty {
            items.removeAll(keepingCapacity: true)
            head = 0
            swap(&items, &more)
        } else {
            items.append(contentsOf: more)
            more.removeAll(keepingCapacity: true)
        }
    }
    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
    mutating func takeAll() -> [Element] {
        defer { items.removeAll(keepingCapacity: true); head = 0 }
        return head == 0 ? items : Array(items[head...])
    }
}

/// The state both sides see, under the connection's mutex.
struct Shared: ~Copyable {
    /// The handshake's agreement (fixed before the socket reaches the caller).
    var extensions: [String] = []
    var deflate: WebSocket.DeflateAgreement?
    var state = WebSocket.State.open
    var closeCode: Int?
    var closeReason: String?
    /// The failure that ended the connection (thrown once by `messages`, then by sends).
    var ending: WebSocketError?
    /// How the connection ended (set with `state = .closed`).
    var connectionEnding: ConnectionEnding?
    var endReported = false

    var inbox: MessageQueue
    var inboxBytes = 0
    var readingPaused = false
    /// Callers of `receive` waiting, in the order they started (usually none or one).
    var receivers: [(id: UInt64, continuation: CheckedContinuation<Result<Message?, WebSocketError>, Never>)] = []
    var nextReceiver: UInt64 = 0

    var outbox = BlockQueue<Outgoing>()
    /// The outbox's weight against the send limit (`Outgoing.weight`: payload bytes and a
    /// cost per entry).
    var outboxWeight = 0
    /// The engine will look at the outbox without a wake: a drain is submitted, or the
    /// driver holds bytes and drains again once they are written (`LoopSide.drainOutbox`).
    var drainScheduled = false
    /// The driver's queued bytes, as of its last report.
    var engineQueued = 0
    var senders: [CheckedContinuation<Result<Void, WebSocketError>, Never>] = []
    /// Waiting for their messages to be written (`sendNow(_:onWritten:)`), tokens ascending.
    var writeWaiters = FIFO<(token: UInt64, onWritten: @Sendable (Result<Void, WebSocketError>) -> Void)>()
    var nextWritten: UInt64 = 0

    var nextPing: UInt64 = 0
    /// Waiting for their Pongs, by payload: each is called once.
    var pings: [[UInt8]: @Sendable (Result<Void, WebSocketError>) -> Void] = [:]
    var closeWaiters: [CheckedContinuation<Void, Never>] = []
    /// The barrier ping of `close()`: answered (true) or given up on (false).
    var deliveryConfirmed: Bool?
    /// Set on the engine thread when the driver starts, cleared at its ending.
    var side: LoopSide?

    /// `keepsBuffers`: `WebSocketOptions.keepsBuffersWhenIdle`, which keeps the queues'
    /// large blocks as well between bursts.
    init(keepsBuffers: Bool) {
        inbox = MessageQueue(keepsLargeSpare: keepsBuffers)
    }

    /// Reading may resume once half the limit is free (true: tell the engine).
    mutating func unpauseIfCaughtUp(limit: Int) -> Bool {
        guard readingPaused, inboxBytes <= limit / 2 else { return false }
        readingPaused = false
        return true
    }

    /// Pairs waiting receivers with buffered messages, in order (the caller resumes them).
    mutating func takeHandOffs() -> [(CheckedContinuation<Result<Message?, WebSocketError>, Never>, Message)] {
        var handOffs: [(CheckedContinuation<Result<Message?, WebSocketError>, Never>, Message)] = []
        while let handOff = takeHandOff() { handOffs.append(handOff) }
        return handOffs
    }

    /// The first waiting receiver and the first buffered message, if both are there (one
    /// consumer waiting: no array made).
    mutating func takeHandOff() -> (CheckedContinuation<Result<Message?, WebSocketError>, Never>, Message)? {
        guard !receivers.isEmpty, let message = inbox.removeFirst() else { return nil }
        inboxBytes -= message.byteCount
        return (receivers.removeFirst().continuation, message)
    }

    /// What `messages` says after the last message: its failure once, then the end.
    mutating func takeEndResult() -> Result<Message?, WebSocketError> {
        if let ending, !endReported {
            endReported = true
            return .failure(ending)
        }
        return .success(nil)
    }
}
