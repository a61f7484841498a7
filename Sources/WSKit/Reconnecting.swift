import Synchronization
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// When and how `WebSocket.reconnecting` tries again: the CLI's `--reconnect` settings
/// (same defaults, same engine code: exponential backoff with full jitter, `Retry-After`,
/// the retried failures, the offline queue).
public struct ReconnectPolicy: Sendable {
    /// Upper bound of the first retry's jittered wait (retry n: up to `baseDelay` × 2ⁿ,
    /// at most `maxDelay`, at least 10 ms). Default 0.5 s.
    public var baseDelay: Duration = .milliseconds(500)
    /// No jittered wait is longer. A server's `Retry-After` (RFC 9110 §10.2.3, on a 429 or
    /// 503) is honoured above it, up to 10 minutes. Default 30 s.
    public var maxDelay: Duration = .seconds(30)
    /// Retries after consecutive failures; nil: unlimited (the default); 0: none.
    public var maxRetries: Int?
    /// A connection up this long starts the retry count afresh, and its first retry goes at
    /// once. Default 10 s.
    public var resetAfter: Duration = .seconds(10)
    /// Also reconnect after a Close with any code (by default only after 1001, 1011-1014;
    /// never after a Close we started).
    public var reconnectOnClose = false
    /// Sent after every handshake, in order, before the queued messages (resubscription).
    public var resubscribe: [Message] = []
    /// The offline queue: messages sent while disconnected wait here (at most `queueSize`
    /// messages and `queueBytes` payload bytes) and go out, in order, after the next
    /// handshake's `resubscribe` messages. Default 10,000 messages.
    public var queueSize = 10_000
    /// Payload bytes the offline queue holds at most. Default 16 MiB.
    public var queueBytes = 16 << 20
    /// What a send does when the queue is full.
    public var queuePolicy: QueuePolicy = .block

    /// What `send` does with a message that does not fit the offline queue.
    public enum QueuePolicy: Sendable, Equatable {
        /// Suspend the sender until the queue is drained by a connection (lossless).
        case block
        /// Drop the oldest queued messages (`ReconnectEvent.dropped` tells how many).
        case dropOldest
        /// Drop the new message (counted in `.dropped`).
        case dropNewest
        /// Throw `.offlineQueueFull` from `send` and end the sequence with it.
        case fail
    }

    /// - Parameters mirror the properties of the same names; the others keep their defaults.
    public init(maxRetries: Int? = nil, resubscribe: [Message] = [], queuePolicy: QueuePolicy = .block) {
        self.maxRetries = maxRetries
        self.resubscribe = resubscribe
        self.queuePolicy = queuePolicy
    }

    var backoff: Backoff {
        Backoff(baseDelay: baseDelay.seconds, maxDelay: maxDelay.seconds, maxRetries: maxRetries, resetAfter: resetAfter.seconds)
    }

    var engineQueuePolicy: WebSocketEngine.QueuePolicy {
        switch queuePolicy {
        case .block: return .block
        case .dropOldest: return .dropOldest
        case .dropNewest: return .dropNewest
        case .fail: return .fail
        }
    }
}

/// What a `ReconnectingWebSocket` says, in order.
public enum ReconnectEvent: Sendable, Equatable {
    /// A handshake succeeded (attempt counts from 1 over the whole run); the `resubscribe`
    /// messages and then the queued ones are sent.
    case connected(Connection)
    /// A message received on the current connection.
    case message(Message)
    /// A connection ended or an attempt failed. `error`: why (`.closed(code:reason:)` for a
    /// closing handshake). `retryIn`: the wait before the next attempt; nil: no more
    /// attempts (not retried, retries spent, or `close()`), and the sequence ends next.
    case disconnected(WebSocketError, retryIn: Duration?)
    /// Messages the offline queue dropped under `.dropOldest`/`.dropNewest` since the last
    /// such event.
    case dropped(count: Int)

    /// One connection of the run.
    public struct Connection: Sendable, Equatable {
        /// The URL connected to (after redirects).
        public let url: WebSocketURL
        /// The subprotocol the server selected, if any.
        public let subprotocol: String?
        /// The extensions the server accepted (e.g. `permessage-deflate`).
        public let extensions: [String]
        /// Attempts so far, this one included.
        public let attempt: Int
    }
}

extension WebSocket {
    /// A connection that stays up: connects to `url`, and after a retried failure (refused,
    /// timed out, lost, a 429/5xx handshake answer, a Close 1001/1011-1014) connects again
    /// after the policy's backoff, until `close()`, a failure not retried, or the retries
    /// are spent. Nothing happens until the sequence is iterated (single consumer).
    /// - Throws: `.invalidURL` for a URL that is not ws://, wss:// or ws+unix://.
    public static func reconnecting(to url: String, options: WebSocketOptions = .init(),
                                    policy: ReconnectPolicy = .init()) throws(WebSocketError) -> ReconnectingWebSocket {
        let parsed: WebSocketURL
        do { parsed = try WebSocketURL(parsing: url) } catch { throw .invalidURL(error.description) }
        return reconnecting(to: parsed, options: options, policy: policy)
    }

    /// See `reconnecting(to:options:policy:)` with a string.
    public static func reconnecting(to url: WebSocketURL, options: WebSocketOptions = .init(),
                                    policy: ReconnectPolicy = .init()) -> ReconnectingWebSocket {
        ReconnectingWebSocket(url: url, options: options, policy: policy)
    }
}

/// A run of connections to one URL as one `AsyncSequence` of `ReconnectEvent`s; `send`
/// works whether connected or not (the offline queue). Iterate it from one task: the
/// connecting, waiting and receiving happen inside its `next()`. Cancelling that task
/// closes the current connection with 1001 and ends the sequence with `.cancelled`.
public final class ReconnectingWebSocket: AsyncSequence, Sendable {
    /// Connections, messages, disconnections, drops, in order.
    public typealias Element = ReconnectEvent
    /// `.cancelled` when the iterating task is cancelled, the options' error (`.invalidArgument`)
    /// when they cannot make a connection at all; attempt failures are events, not throws.
    public typealias Failure = WebSocketError

    /// The URL every attempt starts from.
    public let url: WebSocketURL
    /// The options of every attempt.
    public let options: WebSocketOptions
    /// When to try again, what to resend, the offline queue.
    public let policy: ReconnectPolicy

    private enum Phase {
        /// Connect now (after `delay` seconds).
        case connect(delay: Double)
        case connected(WebSocket)
        /// The last event was said: the sequence ends (with this error, thrown once).
        case finished(WebSocketError?)
    }

    private struct State: ~Copyable {
        var phase = Phase.connect(delay: 0)
        var backoff: Backoff
        var jitter = SystemJitter()
        var metrics = ConnectionMetrics(start: .now())
        var attempts = 0
        let queue: OfflineQueue
        /// The connection sends go to, once its queue is flushed.
        var current: WebSocket?
        /// Queued messages are being sent to a new connection: new sends queue behind them.
        var flushing = false
        var closing: (code: Int, reason: String)?
        /// `deliveryConfirmed` of the connection `close()` closed.
        var deliveryConfirmed: Bool?
        /// The iterator waiting out a backoff delay (woken early by `close()`).
        var sleeper: CheckedContinuation<Void, Never>?
        /// Senders waiting for room (`.block`).
        var blocked: [UInt64: CheckedContinuation<Result<Void, WebSocketError>, Never>] = [:]
        var nextSender: UInt64 = 0
    }
    private let state: Mutex<State>

    init(url: WebSocketURL, options: WebSocketOptions, policy: ReconnectPolicy) {
        self.url = url
        self.options = options
        self.policy = policy
        state = Mutex(State(backoff: policy.backoff,
                            queue: OfflineQueue(messageLimit: policy.queueSize, byteLimit: policy.queueBytes,
                                                policy: policy.engineQueuePolicy)))
    }

    /// The open connection now, if any.
    public var current: WebSocket? { state.withLock { $0.current } }
    /// After `close()`: whether the peer confirmed reading every message sent before it
    /// (`WebSocket.deliveryConfirmed` of the connection it closed); nil when there was none.
    public var deliveryConfirmed: Bool? { state.withLock { $0.deliveryConfirmed } }

    /// The iterator that drives the run (single consumer).
    public func makeAsyncIterator() -> Iterator { Iterator(owner: self) }

    /// Connects, waits and receives inside `next()`.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// The run's events.
        public typealias Element = ReconnectEvent
        /// See `ReconnectingWebSocket.Failure`.
        public typealias Failure = WebSocketError
        let owner: ReconnectingWebSocket

        /// The next event; nil after the last `.disconnected(_, retryIn: nil)`.
        nonisolated(nonsending) public mutating func next() async throws(WebSocketError) -> ReconnectEvent? {
            try await owner.next()
        }

        /// As `next()`, on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(WebSocketError) -> ReconnectEvent? {
            try await owner.next()
        }
    }

    // MARK: - Sending

    /// Sends on the current connection, or queues while there is none (and while the queue
    /// is being flushed to a new connection, so order holds). A message in flight when a
    /// connection drops may be lost, as with any socket.
    /// - Throws: `.offlineQueueFull` under `.fail`; `.closed` after `close()`; `.cancelled`
    ///   when the task is cancelled while blocked on a full queue (`.block`).
    nonisolated(nonsending) public func send(_ message: Message) async throws(WebSocketError) {
        enum Route { case socket(WebSocket), queued(dropped: Int), blocked, failed(WebSocketError) }
        let route = state.withLock { state -> Route in
            if case .finished = state.phase { return .failed(.closed(code: nil, reason: "")) }
            if state.closing != nil { return .failed(.closed(code: nil, reason: "")) }
            if let socket = state.current, !state.flushing { return .socket(socket) }
            switch message {
            case .text(let text): state.queue.send(.text, fin: true, bytes: Array(text.utf8))
            case .binary(let bytes): state.queue.send(.binary, fin: true, bytes: bytes)
            }
            if state.queue.overflowed { return .failed(.offlineQueueFull("the offline queue is full (\(state.queue.messageLimit) messages or \(state.queue.byteLimit) bytes)")) }
            if !state.queue.acceptsMore { return .blocked }
            return .queued(dropped: 0)
        }
        switch route {
        case .socket(let socket):
            do throws(WebSocketError) {
                try await socket.send(message)
            } catch {
                if error == .cancelled { throw error }
                // The connection went away under us: the message waits for the next one.
                let queued = state.withLock { state -> Bool in
                    guard state.closing == nil else { return false }
                    if case .finished = state.phase { return false }
                    switch message {
                    case .text(let text): state.queue.send(.text, fin: true, bytes: Array(text.utf8))
                    case .binary(let bytes): state.queue.send(.binary, fin: true, bytes: bytes)
                    }
                    return true
                }
                if !queued { throw error }
            }
        case .queued:
            return
        case .failed(let error):
            throw error
        case .blocked:
            try await waitForRoom()
        }
    }

    nonisolated(nonsending) private func waitForRoom() async throws(WebSocketError) {
        let id = state.withLock { state -> UInt64 in state.nextSender += 1; return state.nextSender }
        let result: Result<Void, WebSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, WebSocketError>, Never>) in
                let ready = state.withLock { state -> Result<Void, WebSocketError>? in
                    if case .finished = state.phase { return .failure(.closed(code: nil, reason: "")) }
                    if state.queue.acceptsMore { return .success(()) }
                    state.blocked[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiting = state.withLock { $0.blocked.removeValue(forKey: id) }
            waiting?.resume(returning: .failure(.cancelled))
        }
        try result.get()
    }

    /// Ends the run: closes the current connection (RFC 6455 §7.1.2, after the messages
    /// already sent) or stops waiting for the next attempt. The sequence then says
    /// `.disconnected(_, retryIn: nil)` and ends. Queued messages are dropped.
    /// - Throws: `.invalidArgument` for a code that may not be sent.
    public func close(code: Int = 1000, reason: String = "") async throws(WebSocketError) {
        guard let raw = UInt16(exactly: code), CloseCode(raw).isSendable else {
            throw .invalidArgument("\(code) is not a close code that may be sent (1000-4999 except 1004-1006 and 1015)")
        }
        let (socket, sleeper, blocked) = state.withLock { state in
            state.closing = state.closing ?? (code, reason)
            defer { state.sleeper = nil; state.blocked = [:] }
            return (state.current, state.sleeper, Array(state.blocked.values))
        }
        sleeper?.resume()
        for sender in blocked { sender.resume(returning: .failure(.closed(code: nil, reason: ""))) }
        if let socket {
            try await socket.close(code: code, reason: reason)
            state.withLock { $0.deliveryConfirmed = socket.deliveryConfirmed }
        }
    }

    // MARK: - The run, driven by the iterator

    nonisolated(nonsending) func next() async throws(WebSocketError) -> ReconnectEvent? {
        while true {
            let phase = state.withLock { $0.phase }
            switch phase {
            case .finished(let error):
                guard let error else { return nil }
                state.withLock { $0.phase = .finished(nil) }
                throw error
            case .connect(let delay):
                if delay > 0 {
                    await sleep(seconds: delay)
                    state.withLock { state in
                        if case .connect = state.phase { state.phase = .connect(delay: 0) }
                    }
                }
                if Task.isCancelled { endRun(.cancelled); continue }
                if let dropped = takeDropped() { return .dropped(count: dropped) }
                if let closing = state.withLock({ $0.closing }) {
                    return finishAfter(.disconnected(.closed(code: closing.code, reason: closing.reason), retryIn: nil))
                }
                if let event = await attempt() { return event }
            case .connected(let socket):
                do throws(WebSocketError) {
                    var messages = socket.messages.makeAsyncIterator()
                    if let message = try await messages.next() { return .message(message) }
                    return ended(socket, error: .closed(code: socket.closeCode, reason: socket.closeReason ?? ""))
                } catch {
                    if error == .cancelled { endRun(.cancelled); continue }
                    return ended(socket, error: error)
                }
            }
        }
    }

    /// One attempt: its event, or nil when the run ended (the loop throws the error).
    nonisolated(nonsending) private func attempt() async -> ReconnectEvent? {
        state.withLock { $0.attempts += 1 }
        switch await WebSocket.open(url, options: options) {
        case .success(let socket):
            let attempts = state.withLock { state -> Int in
                state.metrics.connected(at: .now())
                state.phase = .connected(socket)
                state.current = socket
                state.flushing = true
                return state.attempts
            }
            if let closing = state.withLock({ $0.closing }) {
                // close() came while this attempt was under way: it found no socket to close.
                try? await socket.close(code: closing.code, reason: closing.reason)
                state.withLock { $0.current = nil; $0.deliveryConfirmed = socket.deliveryConfirmed }
                return finishAfter(.disconnected(.closed(code: closing.code, reason: closing.reason), retryIn: nil))
            }
            await flush(to: socket)
            return .connected(.init(url: socket.url ?? url, subprotocol: socket.subprotocol, extensions: socket.extensions,
                                    attempt: attempts))
        case .failure(let failure):
            if failure.error == .cancelled { endRun(.cancelled); return nil }
            guard let attempt = failure.attempt else { endRun(failure.error); return nil }
            var retryAfter: Double?
            if case .handshakeStatus(_, let seconds) = attempt { retryAfter = seconds }
            return retry(after: attempt, retryAfter: retryAfter, error: failure.error)
        }
    }

    /// Resubscription, then the offline queue, then new sends go straight to `socket`.
    nonisolated(nonsending) private func flush(to socket: WebSocket) async {
        for message in policy.resubscribe { try? await socket.send(message) }
        while true {
            let (batch, senders) = state.withLock { state -> ([Message], [CheckedContinuation<Result<Void, WebSocketError>, Never>]) in
                let collector = MessageCollector()
                state.queue.drain(into: collector)
                if collector.messages.isEmpty { state.flushing = false }
                let senders = state.queue.acceptsMore ? Array(state.blocked.values) : []
                if !senders.isEmpty { state.blocked = [:] }
                return (collector.messages, senders)
            }
            for sender in senders { sender.resume(returning: .success(())) }
            if batch.isEmpty { return }
            for message in batch { try? await socket.send(message) }
        }
    }

    /// The current connection ended: say so, and wait or stop.
    private func ended(_ socket: WebSocket, error: WebSocketError) -> ReconnectEvent? {
        let ending = socket.ending
        let closing = state.withLock { state -> Bool in
            let up = state.metrics.disconnected(at: .now())
            state.backoff.connectionEnded(upFor: up)
            state.current = nil
            state.flushing = false
            return state.closing != nil
        }
        if closing { return finishAfter(.disconnected(error, retryIn: nil)) }
        guard let ending else { return finishAfter(.disconnected(error, retryIn: nil)) }
        return retry(after: .ended(ending), retryAfter: nil, error: error)
    }

    private func retry(after failure: AttemptFailure, retryAfter: Double?, error: WebSocketError) -> ReconnectEvent? {
        let delay = state.withLock { state -> Double? in
            guard state.closing == nil, RetryPolicy(reconnectOnClose: policy.reconnectOnClose).retries(failure) else { return nil }
            guard let delay = state.backoff.nextDelay(retryAfter: retryAfter, jitter: &state.jitter) else { return nil }
            state.phase = .connect(delay: delay)
            return delay
        }
        guard let delay else { return finishAfter(.disconnected(error, retryIn: nil)) }
        return .disconnected(error, retryIn: .nanoseconds(Int64((delay * 1e9).rounded())))
    }

    /// Says `event` as the last one.
    private func finishAfter(_ event: ReconnectEvent) -> ReconnectEvent? {
        endRun(nil)
        return event
    }

    /// No more events; the iterator throws `error` (once) and then ends.
    private func endRun(_ error: WebSocketError?) {
        let (socket, blocked) = state.withLock { state in
            state.phase = .finished(error)
            defer { state.current = nil; state.blocked = [:] }
            return (state.current, Array(state.blocked.values))
        }
        for sender in blocked { sender.resume(returning: .failure(.closed(code: nil, reason: ""))) }
        _ = socket  // a socket let go closes with 1001
    }

    private func takeDropped() -> Int? {
        let dropped = state.withLock { $0.queue.takeDropped() }
        return dropped > 0 ? dropped : nil
    }

    /// Waits `seconds`, or less when `close()` or cancellation comes first.
    nonisolated(nonsending) private func sleep(seconds: Double) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let early = state.withLock { state -> Bool in
                    // Checked under the lock: a cancellation either came before (seen here)
                    // or its handler runs after and finds the sleeper.
                    if state.closing != nil || Task.isCancelled { return true }
                    state.sleeper = continuation
                    return false
                }
                if early { return continuation.resume() }
                Task { [self] in
                    try? await Task.sleep(for: .nanoseconds(Int64((seconds * 1e9).rounded())))
                    wake()
                }
            }
        } onCancel: {
            wake()
        }
    }

    private func wake() {
        let sleeper = state.withLock { state in
            defer { state.sleeper = nil }
            return state.sleeper
        }
        sleeper?.resume()
    }
}

/// The offline queue's messages, as WSKit messages (each queued whole, one frame).
final class MessageCollector: MessageSink {
    var messages: [Message] = []

    func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        send(opcode, fin: fin, bytes: payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
    }

    func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {
        messages.append(opcode == .text ? .text(String(decoding: bytes, as: UTF8.self)) : .binary(bytes))
    }
}
