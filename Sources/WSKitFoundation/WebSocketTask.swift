import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import WSKit

/// A WebSocket task with the names and semantics of Apple's `URLSessionWebSocketTask`, on
/// WSKit: code written for Apple platforms moves to Linux by changing how the task is made:
///
/// ```swift
/// // Apple:  let task = URLSession.shared.webSocketTask(with: request)
/// let task = WebSocketTask(with: request)
/// task.resume()
/// try await task.send(.string("hello"))
/// let reply = try await task.receive()
/// task.cancel(with: .goingAway, reason: nil)
/// ```
///
/// As Apple's task: calls made from one thread or task take effect in call order, whatever
/// their form (a `send` with a completion handler, an awaited `send`, `sendPing`); calls
/// made before `resume()` or before the connection opens wait for it. Completion handlers
/// and delegate calls run one at a time, in the order their events happened, on the
/// delegate queue. Every completion handler runs exactly once; a send's when its bytes were
/// written to the socket (or it failed). A running task is kept alive (as a session keeps
/// its tasks) until it completes.
///
/// What differs from Apple's task is listed in the article "Moving from
/// URLSessionWebSocketTask" (there is no `URLSession`; the delegate is
/// `WebSocketTaskDelegate`, given here; errors are `WebSocketError`).
public final class WebSocketTask: Sendable {
    /// A message, as `URLSessionWebSocketTask.Message`.
    public enum Message: Sendable, Equatable {
        /// A text message.
        case string(String)
        /// A binary message.
        case data(Data)
    }

    /// Close codes, as `URLSessionWebSocketTask.CloseCode` (RFC 6455 §7.4.1), plus codes
    /// registered or private (3000-4999) as `.other`.
    public enum CloseCode: Sendable, Equatable {
        /// No code (0): none was received, or the task has not closed.
        case invalid
        /// 1000: the purpose of the connection is fulfilled.
        case normalClosure
        /// 1001: an endpoint is going away (`cancel()` sends it).
        case goingAway
        /// 1002: a protocol error.
        case protocolError
        /// 1003: a kind of data the endpoint cannot accept.
        case unsupportedData
        /// 1005: a Close without a code (never sent).
        case noStatusReceived
        /// 1006: the connection ended without a Close (never sent).
        case abnormalClosure
        /// 1007: text that is not UTF-8.
        case invalidFramePayloadData
        /// 1008: a message that violates the endpoint's policy.
        case policyViolation
        /// 1009: a message too big to process.
        case messageTooBig
        /// 1010: the client needed an extension the server did not agree to.
        case mandatoryExtensionMissing
        /// 1011: the server met an unexpected condition.
        case internalServerError
        /// 1015: TLS failed (never sent).
        case tlsHandshakeFailure
        /// Any other code (3000-4999: registered or private).
        case other(Int)

        /// The code on the wire (0 for `.invalid`).
        public var rawValue: Int {
            switch self {
            case .invalid: return 0
            case .normalClosure: return 1000
            case .goingAway: return 1001
            case .protocolError: return 1002
            case .unsupportedData: return 1003
            case .noStatusReceived: return 1005
            case .abnormalClosure: return 1006
            case .invalidFramePayloadData: return 1007
            case .policyViolation: return 1008
            case .messageTooBig: return 1009
            case .mandatoryExtensionMissing: return 1010
            case .internalServerError: return 1011
            case .tlsHandshakeFailure: return 1015
            case .other(let code): return code
            }
        }

        /// The case for a code on the wire (`.other` for codes without a name).
        public init(rawValue: Int) {
            let known: [CloseCode] = [.normalClosure, .goingAway, .protocolError, .unsupportedData, .noStatusReceived,
                                      .abnormalClosure, .invalidFramePayloadData, .policyViolation, .messageTooBig,
                                      .mandatoryExtensionMissing, .internalServerError, .tlsHandshakeFailure]
            self = rawValue == 0 ? .invalid : known.first { $0.rawValue == rawValue } ?? .other(rawValue)
        }
    }

    /// Where the task is: Apple's phases, with connecting apart from open.
    fileprivate enum Phase {
        case suspended, connecting, open, canceling, completed
    }

    /// A send or a ping, waiting for the connection or for room in its queue.
    fileprivate enum Call {
        case send(WSKit.Message, Completion<Void>)
        case ping(Completion<Void>)
    }

    private struct State {
        var phase = Phase.suspended
        var socket: WebSocket?
        var connect: Task<Void, Never>?
        /// The connect under way: a cancel ends it with its code.
        var attempt: ConnectAttempt?
        /// Calls not given to the socket yet, in call order.
        var calls: [Call] = []
        var callsHead = 0
        /// The socket's queue is full: calls wait in `calls` until it has room.
        var blocked = false
        /// Receives in call order; the first is being read while `reading`.
        var receives: [Completion<Message>] = []
        var reading = false
        var nextPing = 0
        /// Set by `cancel(with:reason:)`.
        var cancelled: (code: Int, reason: String)?
        var error: WebSocketError?
        var closeCode: CloseCode = .invalid
        var closeReason: Data?
        var maximumMessageSize = 1 << 20
        /// Held strongly until the task completes, as URLSession holds its delegate.
        var delegate: DelegateBox?

        var hasWaitingCalls: Bool { callsHead < calls.count }

        mutating func takeCalls() -> ArraySlice<Call> {
            defer { calls.removeAll(keepingCapacity: true); callsHead = 0 }
            return calls[callsHead...]
        }
    }

    private let locked: Mutex<State>
    /// Pings whose Pongs have not come (failed at cancel). Apart from `locked`: a refused
    /// ping calls its handler at once, inside `flushCalls`, which holds `locked`.
    private let pings = Mutex<[Int: Completion<Void>]>([:])
    private let callbacks: CallbackQueue
    private let url: URL
    private let headers: [String: String]
    private let protocols: [String]

    /// A task for `url` (ws://, wss://; http(s) is mapped as Apple does). Nothing happens
    /// before `resume()`.
    /// - Parameters:
    ///   - url: the server's URL.
    ///   - protocols: subprotocols to offer (`Sec-WebSocket-Protocol`), in order of preference.
    ///   - delegate: told of the opening, the close and the completion; held until the
    ///     task completes.
    ///   - delegateQueue: where the delegate and every completion handler run (one at a
    ///     time); nil: a serial queue of the task's own.
    public convenience init(with url: URL, protocols: [String] = [], delegate: (any WebSocketTaskDelegate)? = nil,
                            delegateQueue: OperationQueue? = nil) {
        self.init(with: URLRequest(url: url), protocols: protocols, delegate: delegate, delegateQueue: delegateQueue)
    }

    /// A task for `request`: its URL and every header field are sent with the handshake
    /// (a `Sec-WebSocket-Protocol` field adds offered subprotocols). `delegate` and
    /// `delegateQueue` as for `init(with:protocols:delegate:delegateQueue:)` with a URL.
    public init(with request: URLRequest, protocols: [String] = [], delegate: (any WebSocketTaskDelegate)? = nil,
                delegateQueue: OperationQueue? = nil) {
        url = request.url ?? URL(fileURLWithPath: "/")
        headers = request.allHTTPHeaderFields ?? [:]
        self.protocols = protocols
        var initial = State()
        initial.delegate = delegate.map(DelegateBox.init)
        locked = Mutex(initial)
        callbacks = CallbackQueue(delegateQueue)
    }

    // MARK: - Properties

    /// Largest message received, in bytes (Apple's default: 1 MiB); set it before `resume()`.
    public var maximumMessageSize: Int {
        get { locked.withLock { $0.maximumMessageSize } }
        set { locked.withLock { $0.maximumMessageSize = newValue } }
    }

    /// `.suspended` until `resume()`, `.running` while connecting and open, `.canceling`
    /// from `cancel(with:reason:)` until the connection is over, then `.completed`.
    public var state: URLSessionTask.State {
        switch locked.withLock({ $0.phase }) {
        case .suspended: return .suspended
        case .connecting, .open: return .running
        case .canceling: return .canceling
        case .completed: return .completed
        }
    }

    /// Why the task failed (connecting, the connection, or `WebSocketError.cancelled` when
    /// cancelled before it opened); nil while running and after a closing handshake.
    public var error: (any Error)? { locked.withLock { $0.error } }

    /// The close code: the peer's (`.invalid` until a Close came); after our own
    /// `cancel(with:reason:)`, the code we sent, as Apple's task.
    public var closeCode: CloseCode { locked.withLock { $0.closeCode } }
    /// The close reason, as UTF-8 data (nil while there is none, or it was empty): the
    /// peer's, or after our own cancel the reason we sent.
    public var closeReason: Data? { locked.withLock { $0.closeReason } }
    /// The negotiated subprotocol (nil when the server chose none, or before opening).
    public var negotiatedProtocol: String? { locked.withLock { $0.socket?.subprotocol } }

    // MARK: - Connecting

    /// Starts connecting (once; later calls, and calls after `cancel`, do nothing).
    public func resume() {
        let start = locked.withLock { state -> Int? in
            guard state.phase == .suspended else { return nil }
            state.phase = .connecting
            return state.maximumMessageSize
        }
        guard let maximum = start else { return }
        TaskRegistry.shared.keep(self)
        var options = WebSocketOptions()
        options.headers = headers.sorted { $0.key < $1.key }.compactMap { name, value in
            name.lowercased() == "sec-websocket-protocol" ? nil : (name: name, value: value)
        }
        let offered = headers.first { $0.key.lowercased() == "sec-websocket-protocol" }?.value
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        options.subprotocols = protocols + offered
        options.maximumMessageSize = maximum
        let text = url.absoluteString.replacingOccurrences(of: "^http", with: "ws", options: .regularExpression)
        let attempt = ConnectAttempt()
        let connect = Task { [self] in
            let result: Result<WebSocket, WebSocketError>
            do throws(WebSocketError) {
                result = .success(try await WebSocket.connect(to: text, options: options, attempt: attempt))
            } catch {
                result = .failure(error)
            }
            connected(result)
        }
        let cancelled = locked.withLock { state -> (code: Int, reason: String)? in
            guard state.phase == .connecting else { return state.cancelled }
            state.connect = connect
            state.attempt = attempt
            return nil
        }
        if let cancelled { attempt.cancel(code: UInt16(cancelled.code), reason: cancelled.reason) }
    }

    private func connected(_ result: Result<WebSocket, WebSocketError>) {
        switch result {
        case .failure(let error):
            finish(error: locked.withLock { $0.cancelled } == nil ? error : .cancelled)
        case .success(let socket):
            let cancelled = locked.withLock { state -> (code: Int, reason: String)? in
                state.connect = nil
                state.attempt = nil
                guard state.cancelled == nil else { return state.cancelled }
                state.socket = socket
                state.phase = .open
                state.delegate?.call(on: callbacks) { $0.webSocketTask(self, didOpenWithProtocol: socket.subprotocol) }
                flushCalls(&state)
                startReading(&state)
                return nil
            }
            if let cancelled {
                // Cancelled while connecting: the connection opened all the same; close it now.
                Task { try? await socket.close(code: cancelled.code, reason: cancelled.reason) }
                finish(error: .cancelled)
                return
            }
            Task { [self] in
                await socket.ended()
                finish(socket: socket)
            }
        }
    }

    // MARK: - Sending

    /// Sends a message, in call order with every other send and ping; returns once its
    /// bytes were written to the socket.
    /// - Throws: `WebSocketError` (`.cancelled` after `cancel`; closed, failed).
    nonisolated(nonsending) public func send(_ message: Message) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            submit(.send(message.wire, Completion(continuation)))
        }
    }

    /// Sends a message and calls `completionHandler` with nil once its bytes were written to
    /// the socket, or with the error (`WebSocketError`; also when the connection ended
    /// before they were written).
    public func send(_ message: Message, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        submit(.send(message.wire, Completion { completionHandler($0.error) }))
    }

    /// Sends a Ping behind the messages sent before it; `pongReceiveHandler` gets nil when
    /// its Pong arrives, else the error.
    public func sendPing(pongReceiveHandler: @escaping @Sendable ((any Error)?) -> Void) {
        submit(.ping(Completion { pongReceiveHandler($0.error) }))
    }

    private func submit(_ call: Call) {
        locked.withLock { state in
            switch state.phase {
            case .suspended, .connecting:
                state.calls.append(call)
            case .open:
                state.calls.append(call)
                if !state.blocked { flushCalls(&state) }
            case .canceling, .completed:
                call.completion.complete(.failure(endError(state)), on: callbacks)
            }
        }
    }

    /// Gives the waiting calls to the socket, in order, until its queue is full. Runs under
    /// the lock: calls from other threads wait behind, and completions are queued in order.
    private func flushCalls(_ state: inout State) {
        guard let socket = state.socket else { return }
        while state.hasWaitingCalls && !state.blocked {
            let call = state.calls[state.callsHead]
            state.callsHead += 1
            switch call {
            case .send(let message, let completion):
                do throws(WebSocketError) {
                    let written: @Sendable (Result<Void, WebSocketError>) -> Void = { [callbacks] result in
                        completion.complete(result.mapError { $0 as any Error }, on: callbacks)
                    }
                    if try socket.sendNow(message, onWritten: written) {
                        state.blocked = true
                        Task { [self] in await roomCame(socket) }
                    }
                } catch {
                    completion.complete(.failure(error), on: callbacks)
                }
            case .ping(let completion):
                state.nextPing += 1
                let id = state.nextPing
                pings.withLock { $0[id] = completion }
                socket.ping { [self] result in
                    let completion = pings.withLock { $0.removeValue(forKey: id) }
                    completion?.complete(result.mapError { $0 as any Error }, on: callbacks)
                }
            }
        }
        if !state.hasWaitingCalls { state.calls.removeAll(keepingCapacity: true); state.callsHead = 0 }
    }

    private func roomCame(_ socket: WebSocket) async {
        // A failure here reaches the send's completion from the socket (never written).
        try? await socket.waitForRoom()
        locked.withLock { state in
            state.blocked = false
            if state.phase == .open { flushCalls(&state) }
        }
    }

    // MARK: - Receiving

    /// The next message. Throws when the connection closed (`WebSocketError.closed`, with
    /// the peer's code in `closeCode`), failed, or the task was cancelled (`.cancelled`).
    /// Receives are answered in call order, with either form.
    nonisolated(nonsending) public func receive() async throws -> Message {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Message, any Error>) in
            submitReceive(Completion(continuation))
        }
    }

    /// Receives the next message and calls `completionHandler` with it or the error.
    public func receive(completionHandler: @escaping @Sendable (Result<Message, any Error>) -> Void) {
        submitReceive(Completion(completionHandler))
    }

    private func submitReceive(_ completion: Completion<Message>) {
        locked.withLock { state in
            // After a cancel, or an end without a connection; otherwise what arrived before
            // the end is still read.
            if state.cancelled != nil || (state.phase == .completed && state.socket == nil) {
                completion.complete(.failure(endError(state)), on: callbacks)
                return
            }
            // A buffered message is taken at once (no task) when no receive is ahead.
            if state.receives.isEmpty, !state.reading, let socket = state.socket, let message = socket.receiveNow() {
                completion.complete(.success(Message(message)), on: callbacks)
                return
            }
            state.receives.append(completion)
            startReading(&state)
        }
    }

    /// One reader at a time answers the receives in order.
    private func startReading(_ state: inout State) {
        guard !state.reading, !state.receives.isEmpty, let socket = state.socket else { return }
        state.reading = true
        Task { [self] in await readLoop(socket) }
    }

    private func readLoop(_ socket: WebSocket) async {
        while true {
            let next = locked.withLock { state -> Completion<Message>? in
                guard let first = state.receives.first else { state.reading = false; return nil }
                return first
            }
            guard let completion = next else { return }
            let result: Result<Message, any Error>
            do throws(WebSocketError) {
                if let message = try await socket.receive() {
                    result = .success(Message(message))
                } else {
                    noteClose(of: socket)
                    result = .failure(WebSocketError.closed(code: socket.closeCode, reason: socket.closeReason ?? ""))
                }
            } catch {
                noteClose(of: socket)
                result = .failure(error)
            }
            locked.withLock { state in
                if state.receives.first === completion { state.receives.removeFirst() }
                completion.complete(result, on: callbacks)
            }
        }
    }

    // MARK: - Ending

    /// Closes with `closeCode` and `reason` (UTF-8, at most 123 bytes are sent) once the
    /// calls made before it have gone out (a ping given to the connection gets its Pong);
    /// a task not resumed yet is ended at once, one still connecting where its connect
    /// waits (a handshake that completed all the same gets the Close). Calls still waiting
    /// (for the connection, or for room in its queue) and receives fail with
    /// `WebSocketError.cancelled`. Codes that may not be sent (`.invalid`, 1005, 1006, 1015)
    /// close with 1000. Later calls do nothing.
    public func cancel(with closeCode: CloseCode, reason: Data?) {
        let text = reason.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let code = WebSocketTask.sendable(closeCode) ? closeCode.rawValue : 1000
        let outcome = locked.withLock { state -> (phase: Phase, socket: WebSocket?, attempt: ConnectAttempt?)? in
            let phase = state.phase
            guard phase == .suspended || phase == .connecting || phase == .open else { return nil }
            state.cancelled = (code, text)
            state.phase = .canceling
            if phase == .open {
                state.closeCode = CloseCode(rawValue: code)
                state.closeReason = reason.flatMap { $0.isEmpty ? nil : $0 }
            }
            // Pings already given to the connection go before the Close: their Pongs come.
            failWaiting(&state, with: .cancelled, pingsToo: phase != .open)
            state.connect?.cancel()
            return (phase, state.socket, state.attempt)
        }
        guard let outcome else { return }
        switch outcome.phase {
        case .suspended: finish(error: .cancelled)
        case .open: if let socket = outcome.socket { Task { try? await socket.close(code: code, reason: text) } }
        default:
            // Connecting: the connect ends where it waits, or closes what opened with this code;
            // `connected` finishes with the failure (or closes a socket that opened just after).
            outcome.attempt?.cancel(code: UInt16(code), reason: text)
        }
    }

    /// Cancels the task as Apple's `cancel()`: Close 1001 (going away).
    public func cancel() { cancel(with: .goingAway, reason: nil) }

    private static func sendable(_ code: CloseCode) -> Bool {
        switch code.rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// Every call waiting for the connection fails, and every receive; with `pingsToo`, the
    /// pings waiting for their Pongs (otherwise the connection's end settles them).
    private func failWaiting(_ state: inout State, with error: WebSocketError, pingsToo: Bool = true) {
        for call in state.takeCalls() { call.completion.complete(.failure(error), on: callbacks) }
        let waiting: [Completion<Void>] = !pingsToo ? [] : pings.withLock { pings in
            defer { pings.removeAll() }
            return Array(pings.values)
        }
        for ping in waiting { ping.complete(.failure(error), on: callbacks) }
        for receive in state.receives { receive.complete(.failure(error), on: callbacks) }
        state.receives.removeAll()
    }

    /// The connection is over (its socket ended), or there never was one.
    private func finish(socket: WebSocket? = nil, error: WebSocketError? = nil) {
        if let socket { noteClose(of: socket) }
        locked.withLock { state in
            guard state.phase != .completed else { return }
            let failure = error ?? socket?.failure
            state.phase = .completed
            state.connect = nil
            state.error = failure
            // Calls still waiting fail; receives read on what arrived before the end.
            for call in state.takeCalls() { call.completion.complete(.failure(endError(state)), on: callbacks) }
            if socket == nil { failWaiting(&state, with: failure ?? .cancelled) }
            if let delegate = state.delegate {
                if socket != nil && failure == nil {
                    let code = state.closeCode, reason = state.closeReason
                    delegate.call(on: callbacks) { $0.webSocketTask(self, didCloseWith: code, reason: reason) }
                }
                delegate.call(on: callbacks) { $0.webSocketTask(self, didCompleteWithError: failure) }
            }
            state.delegate = nil
        }
        TaskRegistry.shared.release(self)
    }

    /// What a call made after the end fails with.
    private func endError(_ state: State) -> WebSocketError {
        if state.cancelled != nil { return .cancelled }
        if let error = state.error { return error }
        return .closed(code: state.closeCode == .invalid ? nil : state.closeCode.rawValue,
                       reason: state.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? "")
    }

    /// The peer's Close, unless our own cancel set the code.
    private func noteClose(of socket: WebSocket) {
        let code = socket.closeCode
        let reason = socket.closeReason
        locked.withLock { state in
            guard state.cancelled == nil else { return }
            if let code { state.closeCode = CloseCode(rawValue: code) }
            if let reason, !reason.isEmpty { state.closeReason = Data(reason.utf8) }
        }
    }
}

extension WebSocketTask.Message {
    var wire: WSKit.Message {
        switch self {
        case .string(let text): return .text(text)
        case .data(let data): return .binary([UInt8](data))
        }
    }

    init(_ message: WSKit.Message) {
        switch message {
        case .text(let text): self = .string(text)
        case .binary(let bytes): self = .data(Data(bytes))
        }
    }
}

extension WebSocketTask.Call {
    var completion: Completion<Void> {
        switch self {
        case .send(_, let completion), .ping(let completion): return completion
        }
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// One call's completion, which happens exactly once: a completion handler (run on the
/// delegate queue, in turn with the others) or the awaiting task's continuation.
final class Completion<Value: Sendable>: Sendable {
    private enum Target {
        case handler(@Sendable (Result<Value, any Error>) -> Void)
        case continuation(CheckedContinuation<Value, any Error>)
    }
    private let target: Mutex<Target?>

    init(_ handler: @escaping @Sendable (Result<Value, any Error>) -> Void) { target = Mutex(.handler(handler)) }
    init(_ continuation: CheckedContinuation<Value, any Error>) { target = Mutex(.continuation(continuation)) }

    /// Does nothing when it has completed already (a receive answered by a cancel).
    func complete(_ result: Result<Value, any Error>, on callbacks: CallbackQueue) {
        let taken = target.withLock { target -> Target? in
            defer { target = nil }
            return target
        }
        switch taken {
        case .handler(let handler): callbacks.run { handler(result) }
        case .continuation(let continuation): continuation.resume(with: result)
        case nil: break
        }
    }
}

/// Runs completion handlers and delegate calls one at a time, in the order given, on the
/// delegate queue: one operation drains everything queued so far, so a burst costs one
/// hand-off and even a concurrent queue runs them in turn.
final class CallbackQueue: Sendable {
    /// The delegate queue given, else a serial dispatch queue of the task's own: a drain
    /// costs one `async` there (an `OperationQueue` operation costs several times that).
    private let queue: OperationQueue?
    private let own: DispatchQueue?
    private let pending = Mutex<(items: [@Sendable () -> Void], scheduled: Bool)>(([], false))

    init(_ queue: OperationQueue?) {
        self.queue = queue
        own = queue == nil ? DispatchQueue(label: "WebSocketTask delegate queue") : nil
    }

    func run(_ item: @escaping @Sendable () -> Void) {
        let schedule = pending.withLock { pending -> Bool in
            pending.items.append(item)
            if pending.scheduled { return false }
            pending.scheduled = true
            return true
        }
        guard schedule else { return }
        if let own { own.async { [self] in drain() } } else { queue?.addOperation { [self] in drain() } }
    }

    private func drain() {
        while true {
            let batch = pending.withLock { pending -> [@Sendable () -> Void] in
                if pending.items.isEmpty { pending.scheduled = false }
                defer { pending.items.removeAll(keepingCapacity: true) }
                return pending.items
            }
            if batch.isEmpty { return }
            for item in batch { item() }
        }
    }
}

/// The running tasks, held as a session holds its tasks: a task nobody references keeps
/// running until it completes.
final class TaskRegistry: Sendable {
    static let shared = TaskRegistry()
    private let running = Mutex<[ObjectIdentifier: WebSocketTask]>([:])

    func keep(_ task: WebSocketTask) { running.withLock { $0[ObjectIdentifier(task)] = task } }
    func release(_ task: WebSocketTask) { _ = running.withLock { $0.removeValue(forKey: ObjectIdentifier(task)) } }
}
