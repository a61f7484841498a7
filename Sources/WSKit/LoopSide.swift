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
    @exclusivity(unchecked) private var kind = MessageKind.text
    /// A message's first piece stays in the receive buffer (one copy, into the message);
    /// a second piece moves it into `assembled`. The receive buffer is not retained: the
    /// driver calls `connectionWillReleaseReceiveBuffer` before it lets go of it or reuses
    /// it while it runs, and the piece moves out then (a retain and a release per message
    /// saved); at the ending, nothing reads the piece after `didEnd`.
    @exclusivity(unchecked) private var first: (start: UnsafeMutableRawPointer, count: Int)?
    /// The first piece's buffer, held under permessage-deflate only: an inflated piece is in
    /// the inflater's buffer, which is reused for the next piece unless held.
    @exclusivity(unchecked) private var firstOwner: ByteBuffer?
    @exclusivity(unchecked) private var assembled: [UInt8] = []
    @exclusivity(unchecked) private var pieces = 0
    /// Kept alive until the ending: the socket's own reference is weak in spirit (deinit
    /// closes).
    private var closeRequested = false

    private init(socket: WebSocket) {
        owner = socket
        draining = BlockQueue(keepsLargeSpare: socket.keepsBuffersWhenIdle)
    }

    /// The driver settings for `options`.
    static func connectionOptions(_ options: WebSocketOptions) -> ConnectionOptions {
        var connection = ConnectionOptions()
        connection.closeTimeout = options.closeTimeout.seconds
        connection.pingInterval = options.pingInterval?.seconds
        connection.pingTimeout = options.pingTimeout?.seconds
        connection.queueLimit = WebSocket.socketQueueLimit
        // A busy connection continues reading where the last read ended; an idle one gives
        // its buffers back anyway once the consumer has taken its messages.
        connection.keepsBuffersWhenIdle = options.keepsBuffersWhenIdle
        return connection
    }

    /// A client connection: starts its driver over the opened stream.
    static func start(_ socket: WebSocket, transfer: StreamTransfer, options: WebSocketOptions) {
        let side = LoopSide(socket: socket)
        var connection = connectionOptions(options)
        // A client reads up to 1 MiB at a time while data keeps coming (an idle connection
        // gives the buffer back unless `keepsBuffersWhenIdle`): a 64 KiB download then wakes
        // the consumer and the engine a quarter as often (CPU per 2 GiB: 1.09 -> 1.03 s).
        // A server's clients keep the engine's 256 KiB: there may be thousands.
        connection.receiveBufferSize = WebSocket.clientReadSize
        let driver = ConnectionDriver(loop: socket.engine.loop, stream: transfer.opened.stream, agreement: transfer.opened.agreement,
                                      maximumMessageSize: UInt64(max(options.maximumMessageSize, 0)), options: connection,
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

    /// The sends being given to the driver: the outbox's blocks, taken whole at each drain.
    /// (Its emptied blocks go back to the outbox then, for the callers to fill.)
    private var draining: BlockQueue<Outgoing>

    /// Gives queued sends to the driver while its queue is under its own limit (`all`:
    /// every one, before a close). The rest stay first in the outbox until
    /// `connectionHasRoom`: a send past the driver's limit would wait in the driver as a copy
    /// of its own (an allocation per message), and the caller's `send` waits on the outbox's
    /// weight and the driver's bytes (the send limit, twice the driver's) all the same.
    ///
    /// `drainScheduled` (a caller's send wakes the engine only while it is false) stays set
    /// while the engine will come back by itself: the driver holds bytes, and once it has
    /// written them it calls `connectionHasRoom`, which drains again. So a caller that keeps
    /// sending while the engine writes adds to the outbox without a wake of its own; waking
    /// the engine after every drain made each drain small and cost the caller a syscall
    /// (an engine on the other core: 2.5 times the wall time of 2 M 15-byte sends).
    func drainOutbox(all: Bool = false) {
        guard let socket = owner else { return }
        // Taken out for the drain (what a callback might start cannot reach it), its spare
        // block and settings kept.
        var items = BlockQueue<Outgoing>()  // empty: no allocation
        swap(&items, &draining)
        defer { swap(&items, &draining) }
        guard let driver else {
            socket.shared.withLock { $0.drainScheduled = false }
            return  // the connection is over
        }
        let limit = driver.options.queueLimit
        // One more pass once data cannot go out, not a loop as long as a caller keeps sending.
        var passedClosed = false
        while true {
            // What is taken keeps its weight until the driver has it (a sender meanwhile
            // counts it once: in the outbox's weight, not yet in `engineQueued`).
            socket.shared.withLock { state in
                items.append(taking: &state.outbox)
                state.outbox.takeSpare(from: &items)
            }
            var given = 0
            while all || driver.queuedBytes < limit, let item = items.removeFirst() {
                given += item.weight
                // Moved out of the queue: the message's storage is released once, here.
                switch consume item {
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
            // The driver comes back (`connectionHasRoom`) once it has written what it holds
            // while data may still go out; otherwise only a wake brings the engine back.
            let open = driver.canSendData && driver.ending == nil
            let queued = driver.queuedBytes
            let comesBack = open && queued > 0
            let (again, senders) = socket.shared.withLock { state -> (Bool, [CheckedContinuation<Result<Void, WebSocketError>, Never>]) in
                state.outboxWeight -= given
                state.engineQueued = queued
                if !items.isEmpty {
                    state.outbox.prepend(taking: &items)
                    // `connectionHasRoom` drains the rest: no submitted drain is needed.
                    state.drainScheduled = true
                } else if !comesBack && !state.outbox.isEmpty && (open || !passedClosed) {
                    // Sent while this drain ran, behind no wake (it framed nothing, or data
                    // can no longer go out: their marks fail now, once): drain them now.
                    return (true, [])
                } else {
                    state.drainScheduled = comesBack
                }
                guard state.outboxWeight + queued < socket.sendLimit, !state.senders.isEmpty else { return (false, []) }
                defer { state.senders.removeAll() }
                return (false, state.senders)
            }
            for sender in senders { sender.resume(returning: .success(())) }
            if !again { return }
            passedClosed = passedClosed || !open
        }
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
        drainOutbox(all: true)  // messages sent before the close go first
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

    // MARK: - ConnectionDelegate

    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind
        pieces = 0
        first = nil
        firstOwner = nil  // a message abandoned half-way may have held it
    }

    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        pieces += 1
        if pieces == 1 {
            first = (bytes, count)
            if connection.isCompressing { firstOwner = buffer }
            return
        }
        moveHeldPiece(connection, before: count)
        assembled.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func connection(_ connection: ConnectionDriver, didReceiveMessage kind: MessageKind, bytes: UnsafeMutableRawPointer, count: Int,
                    in buffer: ByteBuffer) {
        // Between messages: nothing held or assembled.
        unposted.append(LoopSide.message(kind, UnsafeRawBufferPointer(start: bytes, count: count)))
        unpostedBytes += count
    }

    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {
        // The buffer will be reused: a held first piece moves out of it.
        moveHeldPiece(connection, before: 0)
    }

    /// Moves the held first piece into `assembled`, sized for the rest of its frame (`next`
    /// bytes already parsed come next): a message split between two socket reads is copied
    /// once, into one allocation, instead of into an array that doubles (a 64 KiB message
    /// would copy its first part twice and ask for 128 KiB, which malloc maps and unmaps).
    /// The part of the frame not arrived yet counts up to 1 MiB: a peer that announces a
    /// large frame and sends it slowly does not get its memory before its bytes.
    private func moveHeldPiece(_ connection: ConnectionDriver, before next: Int) {
        guard let held = first else { return }
        first = nil
        defer { firstOwner = nil }
        let expected = held.count + next + Int(min(connection.core.frameBytesRemaining, 1 << 20))
        assembled.removeAll(keepingCapacity: true)
        assembled.reserveCapacity(expected)
        assembled.append(contentsOf: UnsafeRawBufferPointer(start: held.start, count: held.count))
    }

    func connectionDidEndMessage(_ connection: ConnectionDriver) {
        // No look at the weak `owner` here (a side-table load and a slow release per
        // message): `postMessages` checks it once per read.
        let message: Message
        if let held = first {
            message = LoopSide.message(kind, UnsafeRawBufferPointer(start: held.start, count: held.count))
            first = nil
            firstOwner = nil
        } else if pieces == 0 {
            message = kind == .text ? .text("") : .binary([])
        } else {
            message = kind == .text ? .text(assembled.withUnsafeBytes { LoopSide.checkedText($0) }) : .binary(assembled)
            assembled = []
        }
        pieces = 0
        // Whole messages wait here until the end of the socket read
        // (`connectionDidProcessInput`): one lock, and at most one wake of a waiting
        // consumer, per read rather than per message. Reading stops at the end of a read
        // all the same, so the receive limit holds as before.
        unpostedBytes += message.byteCount
        unposted.append(message)  // its last use: moved in
    }

    /// A message of `kind` copied from `bytes` (text not checked again: `checkedText`).
    static func message(_ kind: MessageKind, _ bytes: UnsafeRawBufferPointer) -> Message {
        kind == .text ? .text(checkedText(bytes)) : .binary(Array(bytes))
    }

    /// A text message's bytes as a String, not checked again: the engine checked them as
    /// UTF-8 (the core as they arrived, the inflater once inflated), and the message ends
    /// only after its last check. `String(decoding:)` would check them a second time: 32 µs
    /// for 64 KiB of non-ASCII text against 0.7 µs, 338 ns against 54 ns for 1 KB of JSON
    /// with an accent in it; no difference for short ASCII.
    /// (A debug build checks; a release build trusts the engine: bytes it let through
    /// unchecked would make a malformed String, so its checks must stay before the end.)
    static func checkedText(_ bytes: UnsafeRawBufferPointer) -> String {
        assert(String(validating: bytes, as: UTF8.self) != nil, "text the engine let through is not UTF-8")
        return String(copying: UTF8Span(unchecked: Span(_unsafeBytes: bytes)))
    }

    /// Messages of the current socket read not yet in the inbox, and their bytes. (The
    /// per-message state is only touched on the engine thread, one access at a time:
    /// unchecked, as the engine's own.)
    @exclusivity(unchecked) private var unposted = MessageQueue()
    @exclusivity(unchecked) private var unpostedBytes = 0

    func connectionDidProcessInput(_ connection: ConnectionDriver) {
        postMessages(connection)
    }

    /// Moves this read's messages to the inbox under one lock, pauses reading when the
    /// inbox is full, and resumes the consumers waiting (one task hop per read).
    private func postMessages(_ connection: ConnectionDriver) {
        guard !unposted.isEmpty, let socket = owner else { return }
        let limit = socket.receiveLimit
        let (handOff, handOffs, pause, caughtUp) = socket.shared.withLock { state in
            state.inbox.append(taking: &unposted)
            unposted.takeSpare(from: &state.inbox)
            state.inboxBytes += unpostedBytes
            var pause = false
            if state.inboxBytes >= limit && !state.readingPaused {
                state.readingPaused = true
                pause = true
            }
            // Usually one consumer waits, or none: an array only for more.
            let first = state.takeHandOff()
            let more = first == nil ? [] : state.takeHandOffs()
            return (first, more, pause, state.unpauseIfCaughtUp(limit: limit))
        }
        unpostedBytes = 0
        // As in `receive`: a message that filled the inbox by itself must not leave reading
        // paused once it is handed over (the Pong a close waits for would never be read).
        if pause && !caughtUp { connection.pauseReading() }
        if !pause && caughtUp { connection.resumeReading() }
        boundEndingIfPaused()
        if let (receiver, message) = handOff { receiver.resume(returning: .success(message)) }
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
        drainOutbox()  // what waited for room, then the waiting senders
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
            // Messages of the last read not posted yet (normally posted at its end).
            state.inbox.append(taking: &unposted)
            state.inboxBytes += unpostedBytes
            // Consumers waiting while messages are in the inbox get them, in order; the rest
            // get the end (the failure goes to the first of them).
            var receivers = state.takeHandOffs().map { ($0.0, Result<Message?, WebSocketError>.success($0.1)) }
            for waiting in state.receivers { receivers.append((waiting.continuation, state.takeEndResult())) }
            state.receivers.removeAll()
            defer {
                state.senders.removeAll()
                state.pings.removeAll()
                state.closeWaiters.removeAll()
                state.outbox = BlockQueue()
            }
            let written = state.writeWaiters.takeAll().map(\.onWritten)
            return (receivers, state.senders, Array(state.pings.values), state.closeWaiters, written)
        }
        unposted = MessageQueue()
        unpostedBytes = 0
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
