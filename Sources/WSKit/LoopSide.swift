import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The engine-thread half of a `WebSocket`: the driver's delegate. Assembles whole
/// messages, hands them to the consumer, feeds queued sends to the driver and settles the
/// ending. Everything here runs on the engine thread (hence unchecked: it is only ever
/// handed to that thread's submitted work).
final class LoopSide: ConnectionDelegate, @unchecked Sendable {
    /// Weak: a WebSocket nobody holds any more closes its connection from `deinit`.
    private weak var owner: WebSocket?
    private var driver: ConnectionDriver?
    private var kind = MessageKind.text
    /// A message's first piece stays in the receive buffer (one copy, into the message);
    /// a second piece moves it into `assembled`.
    private var first: (start: UnsafeMutableRawPointer, count: Int, buffer: ByteBuffer)?
    private var assembled: [UInt8] = []
    private var pieces = 0
    /// Kept alive until the ending: the socket's own reference is weak in spirit (deinit
    /// closes).
    private var closeRequested = false

    private init(socket: WebSocket) { owner = socket }

    /// The driver settings for `options`.
    static func connectionOptions(_ options: WebSocketOptions) -> ConnectionOptions {
        var connection = ConnectionOptions()
        connection.closeTimeout = options.closeTimeout.seconds
        connection.pingInterval = options.pingInterval?.seconds
        connection.pingTimeout = options.pingTimeout?.seconds
        connection.queueLimit = WebSocket.sendLimit
        // A busy connection continues reading where the last read ended; an idle one gives
        // its buffers back anyway once the consumer has taken its messages.
        connection.keepsBuffersWhenIdle = options.keepsBuffersWhenIdle
        return connection
    }

    /// A client connection: starts its driver over the opened stream.
    static func start(_ socket: WebSocket, transfer: StreamTransfer, options: WebSocketOptions) {
        let side = LoopSide(socket: socket)
        let driver = ConnectionDriver(loop: socket.engine.loop, stream: transfer.opened.stream, agreement: transfer.opened.agreement,
                                      maximumMessageSize: UInt64(max(options.maximumMessageSize, 0)), options: connectionOptions(options),
                                      received: transfer.buffer, parsed: transfer.opened.headLength, delegate: side)
        side.attach(driver)
        driver.start()
    }

    /// A server's client: the engine's server makes and starts the driver (`attach` follows).
    static func serving(_ socket: WebSocket) -> LoopSide { LoopSide(socket: socket) }

    func attach(_ driver: ConnectionDriver) {
        self.driver = driver
        owner?.shared.withLock { $0.side = self }
    }

    // MARK: - Owner's requests (submitted by the WebSocket)

    func drainOutbox() {
        guard let socket = owner else { return }
        let items = socket.shared.withLock { state -> [Outgoing] in
            state.drainScheduled = false
            state.outboxBytes = 0
            defer { state.outbox.removeAll(keepingCapacity: true) }
            return state.outbox
        }
        guard let driver else { return }
        for item in items {
            switch item {
            case .text(var text):
                text.withUTF8 { driver.send(.text, fin: true, UnsafeMutableRawPointer(mutating: $0.baseAddress), count: $0.count, in: nil) }
            case .binary(let bytes):
                bytes.withUnsafeBytes { driver.send(.binary, fin: true, UnsafeMutableRawPointer(mutating: $0.baseAddress), count: $0.count, in: nil) }
            case .ping(let payload):
                ping(payload)
            case .written(let token):
                if !driver.reportWhenWritten(token) {
                    // The driver dropped that message: a Close was sent or received.
                    completeWritten(through: token, .failure(.closed(code: socket.closeCode, reason: socket.closeReason ?? "")))
                }
            }
        }
        reportRoom()
    }

    func ping(_ payload: [UInt8]) {
        guard let socket = owner else { return }
        guard let driver, driver.ping(payload) else {
            let waiting = socket.shared.withLock { $0.pings.removeValue(forKey: payload) }
            waiting?(.failure(.closed(code: nil, reason: "")))
            return
        }
    }

    /// `afterDelivery`: first make sure the peer has read everything sent (a Ping behind
    /// the messages; the Close follows its Pong): some servers (Python `websockets`) drop
    /// replies to messages that arrive in the same read as a Close.
    func close(code: UInt16, reason: [UInt8], afterDelivery: Bool = false) {
        guard let driver, !closeRequested else { return }
        closeRequested = true
        drainOutbox()  // messages sent before the close go first
        let payload = ClosePayload(code: CloseCode(code), reason: reason)
        if afterDelivery { driver.closeAfterDelivery(payload) } else { driver.close(payload) }
        boundEndingIfPaused()
    }

    /// Paused reading stops the close timeout (the peer's answer may wait behind what is
    /// unread), so a consumer that never reads again would keep a closing connection open:
    /// once both hold, the close timeout is a hard limit.
    private func boundEndingIfPaused() {
        guard closeRequested, let driver, driver.pausesReading else { return }
        driver.limitEnding(within: driver.options.closeTimeout)
    }

    func resumeReading() {
        driver?.resumeReading()
    }

    private func reportRoom() {
        guard let socket = owner else { return }
        guard let driver else { return }
        let queued = driver.queuedBytes
        let senders = socket.shared.withLock { state -> [CheckedContinuation<Result<Void, WebSocketError>, Never>] in
            state.engineQueued = queued
            guard state.outboxBytes + queued < socket.sendLimit, !state.senders.isEmpty else { return [] }
            defer { state.senders.removeAll() }
            return state.senders
        }
        for sender in senders { sender.resume(returning: .success(())) }
    }

    // MARK: - ConnectionDelegate

    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind
        pieces = 0
        first = nil
    }

    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        pieces += 1
        if pieces == 1 {
            first = (bytes, count, buffer)
            return
        }
        if let held = first {
            assembled.removeAll(keepingCapacity: true)
            assembled.append(contentsOf: UnsafeRawBufferPointer(start: held.start, count: held.count))
            first = nil
        }
        assembled.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {
        // The buffer will be reused: a held first piece moves out of it.
        guard let held = first else { return }
        assembled.removeAll(keepingCapacity: true)
        assembled.append(contentsOf: UnsafeRawBufferPointer(start: held.start, count: held.count))
        first = nil
    }

    func connectionDidEndMessage(_ connection: ConnectionDriver) {
        guard let socket = owner else { return }
        let message: Message
        if let held = first {
            let bytes = UnsafeRawBufferPointer(start: held.start, count: held.count)
            message = kind == .text ? .text(String(decoding: bytes, as: UTF8.self)) : .binary(Array(bytes))
            first = nil
        } else if pieces == 0 {
            message = kind == .text ? .text("") : .binary([])
        } else {
            message = kind == .text ? .text(String(decoding: assembled, as: UTF8.self)) : .binary(assembled)
            assembled = []
        }
        pieces = 0
        let limit = socket.receiveLimit
        // Whole messages go to the inbox; a waiting consumer is resumed once per socket read
        // (`connectionDidProcessInput`), not per message: one task hop per batch.
        socket.shared.withLock { state in
            state.inbox.append(message)
            state.inboxBytes += message.byteCount
            if state.inboxBytes >= limit && !state.readingPaused {
                state.readingPaused = true
                connection.pauseReading()
            }
        }
        boundEndingIfPaused()
        hasNews = true
    }

    /// Set when messages were added to the inbox during this socket read.
    private var hasNews = false

    func connectionDidProcessInput(_ connection: ConnectionDriver) {
        guard hasNews, let socket = owner else { return }
        hasNews = false
        let (handOffs, caughtUp) = socket.shared.withLock { state in
            (state.takeHandOffs(), state.unpauseIfCaughtUp(limit: socket.receiveLimit))
        }
        // As in `receive`: a message that filled the inbox by itself must not leave reading
        // paused once it is handed over (the Pong a close waits for would never be read).
        if caughtUp { connection.resumeReading() }
        for (receiver, message) in handOffs { receiver.resume(returning: .success(message)) }
    }

    func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        guard let socket = owner else { return }
        let waiting = socket.shared.withLock { $0.pings.removeValue(forKey: payload) }
        waiting?(.success(()))
    }

    func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {
        guard let socket = owner else { return }
        socket.shared.withLock { state in
            state.closeCode = payload.code.map { Int($0.rawValue) }
            state.closeReason = payload.reasonText
            if state.state == .open { state.state = .closing }
        }
    }

    func connectionHasRoom(_ connection: ConnectionDriver) {
        reportRoom()
    }

    func connection(_ connection: ConnectionDriver, wroteThrough token: UInt64) {
        completeWritten(through: token, .success(()))
    }

    /// Calls the write waiters up to `token` (in order) with `result`.
    private func completeWritten(through token: UInt64, _ result: Result<Void, WebSocketError>) {
        guard let socket = owner else { return }
        let done = socket.shared.withLock { state in
            var done: [@Sendable (Result<Void, WebSocketError>) -> Void] = []
            while let first = state.writeWaiters.first, first.token <= token {
                _ = state.writeWaiters.popFirst()
                done.append(first.onWritten)
            }
            return done
        }
        for onWritten in done { onWritten(result) }
    }

    func connection(_ connection: ConnectionDriver, note: ConnectionNote) {
        let confirmed: Bool
        switch note {
        case .barrierAnswered: confirmed = true
        case .barrierUnanswered: confirmed = false
        default: return
        }
        owner?.shared.withLock { $0.deliveryConfirmed = confirmed }
    }

    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {
        driver = nil
        guard let socket = owner else { return }
        let failure = WebSocketError(ending, role: connection.role)
        let waiting = socket.shared.withLock { state in
            state.state = .closed
            state.ending = failure
            state.connectionEnding = ending
            state.side = nil
            // Consumers waiting while messages are in the inbox get them, in order; the rest
            // get the end (the failure goes to the first of them).
            var receivers = state.takeHandOffs().map { ($0.0, Result<Message?, WebSocketError>.success($0.1)) }
            for waiting in state.receivers { receivers.append((waiting.continuation, state.takeEndResult())) }
            state.receivers.removeAll()
            defer {
                state.senders.removeAll()
                state.pings.removeAll()
                state.closeWaiters.removeAll()
                state.outbox.removeAll()
            }
            let written = state.writeWaiters.takeAll().map(\.onWritten)
            return (receivers, state.senders, Array(state.pings.values), state.closeWaiters, written)
        }
        // Logged before anyone waiting is resumed: the last line is there once they return.
        socket.log?(ConnectionLog.ending(failure: failure, code: socket.closeCode, reason: socket.closeReason))
        let gone = failure ?? .closed(code: socket.closeCode, reason: socket.closeReason ?? "")
        for (receiver, result) in waiting.0 { receiver.resume(returning: result) }
        for sender in waiting.1 { sender.resume(returning: .failure(gone)) }
        for ping in waiting.2 { ping(.failure(gone)) }
        for onWritten in waiting.4 { onWritten(.failure(gone)) }
        for closer in waiting.3 { closer.resume() }
    }
}
