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
/// Differences that remain: there is no `URLSession` (no delegate, no cookies, no
/// credential storage, no caching); `state` is WSKit's, not `URLSessionTask.State`;
/// `closeCode` is this type's `CloseCode` (the same cases and raw values as
/// `URLSessionWebSocketTask.CloseCode`, plus `.other(Int)` for 3000-4999); errors are
/// `WebSocketError` rather than `NSError`/`URLError`; completion handlers run on an
/// arbitrary thread, as Apple's run on the session's delegate queue. Messages sent before
/// `resume()` (or before the connection opens) wait for it, as on Apple platforms.
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
        /// No code (0): no Close has come.
        case invalid
        /// 1000: the purpose of the connection is fulfilled.
        case normalClosure
        /// 1001: an endpoint is going away (a server shutting down, a page left).
        case goingAway
        /// 1002: a protocol error.
        case protocolError
        /// 1003: a kind of data the endpoint cannot accept.
        case unsupportedData
        /// 1005: a Close without a code (never sent on the wire).
        case noStatusReceived
        /// 1006: the connection ended without a Close (never sent on the wire).
        case abnormalClosure
        /// 1007: a text message that is not valid UTF-8, or similar inconsistent data.
        case invalidFramePayloadData
        /// 1008: a message that violates the endpoint's policy.
        case policyViolation
        /// 1009: a message too big to process.
        case messageTooBig
        /// 1010: the client needed an extension the server did not agree to.
        case mandatoryExtensionMissing
        /// 1011: the server met an unexpected condition.
        case internalServerError
        /// 1015: the TLS handshake failed (never sent on the wire).
        case tlsHandshakeFailure
        /// Any other code: registered (3000-3999) or private (4000-4999).
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

        /// The case of a code on the wire: 0 is `.invalid`, an unnamed code `.other`.
        public init(rawValue: Int) {
            let known: [CloseCode] = [.normalClosure, .goingAway, .protocolError, .unsupportedData, .noStatusReceived,
                                      .abnormalClosure, .invalidFramePayloadData, .policyViolation, .messageTooBig,
                                      .mandatoryExtensionMissing, .internalServerError, .tlsHandshakeFailure]
            self = rawValue == 0 ? .invalid : known.first { $0.rawValue == rawValue } ?? .other(rawValue)
        }
    }

    private struct State {
        var resumed = false
        var socket: WebSocket?
        var failure: WebSocketError?
        var waiters: [CheckedContinuation<Result<WebSocket, WebSocketError>, Never>] = []
        var iterator: Messages.Iterator?
        var closeCode: CloseCode = .invalid
        var closeReason: Data?
        var maximumMessageSize = 1 << 20
    }
    private let state = Mutex(State())
    private let url: URL
    private let headers: [String: String]
    private let protocols: [String]

    /// A task for `url` (ws://, wss://; http(s) is mapped as Apple does). Nothing happens
    /// before `resume()`.
    public convenience init(with url: URL, protocols: [String] = []) {
        self.init(with: URLRequest(url: url), protocols: protocols)
    }

    /// A task for `request`: its URL and every header field are sent with the handshake
    /// (a `Sec-WebSocket-Protocol` field adds offered subprotocols).
    public init(with request: URLRequest, protocols: [String] = []) {
        url = request.url ?? URL(fileURLWithPath: "/")
        headers = request.allHTTPHeaderFields ?? [:]
        self.protocols = protocols
    }

    /// Largest message received, in bytes (Apple's default: 1 MiB); set it before `resume()`.
    public var maximumMessageSize: Int {
        get { state.withLock { $0.maximumMessageSize } }
        set { state.withLock { $0.maximumMessageSize = newValue } }
    }

    /// The peer's close code (`.invalid` until a Close came).
    public var closeCode: CloseCode { state.withLock { $0.closeCode } }
    /// The peer's close reason, as UTF-8 data (nil until a Close came, or when empty).
    public var closeReason: Data? { state.withLock { $0.closeReason } }
    /// The negotiated subprotocol ("" as Apple's `Sec-WebSocket-Protocol` field when none).
    public var negotiatedProtocol: String? { state.withLock { $0.socket?.subprotocol } }

    /// Starts connecting (once; later calls do nothing).
    public func resume() {
        let start = state.withLock { state -> Int? in
            if state.resumed { return nil }
            state.resumed = true
            return state.maximumMessageSize
        }
        guard let maximum = start else { return }
        var options = WebSocketOptions()
        options.headers = headers.sorted { $0.key < $1.key }.compactMap { name, value in
            name.lowercased() == "sec-websocket-protocol" ? nil : (name: name, value: value)
        }
        let offered = headers.first { $0.key.lowercased() == "sec-websocket-protocol" }?.value
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        options.subprotocols = protocols + offered
        options.maximumMessageSize = maximum
        let text = url.absoluteString.replacingOccurrences(of: "^http", with: "ws", options: .regularExpression)
        Task { [self] in
            let result: Result<WebSocket, WebSocketError>
            do throws(WebSocketError) {
                result = .success(try await WebSocket.connect(to: text, options: options))
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state in
                switch result {
                case .success(let socket):
                    state.socket = socket
                    state.iterator = socket.messages.makeAsyncIterator()
                case .failure(let error): state.failure = error
                }
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: result) }
        }
    }

    /// The open connection (waits for `resume()`'s connect).
    private func opened() async throws(WebSocketError) -> WebSocket {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<WebSocket, WebSocketError>, Never>) in
            let ready = state.withLock { state -> Result<WebSocket, WebSocketError>? in
                if let socket = state.socket { return .success(socket) }
                if let failure = state.failure { return .failure(failure) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        return try result.get()
    }

    /// Sends a message; returns once it is queued for the socket (suspends while it is full).
    /// - Throws: `WebSocketError` (not connected, closed, failed).
    public func send(_ message: Message) async throws {
        let socket = try await opened()
        switch message {
        case .string(let text): try await socket.send(.text(text))
        case .data(let data): try await socket.send(.binary([UInt8](data)))
        }
    }

    /// Sends a message and calls `completionHandler` with nil or the error.
    public func send(_ message: Message, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        Task {
            do { try await send(message); completionHandler(nil) } catch { completionHandler(error) }
        }
    }

    /// The next message. Throws when the connection closed (with the close code in
    /// `closeCode`) or failed. One receive at a time, as Apple's.
    public func receive() async throws -> Message {
        let socket = try await opened()
        var iterator = state.withLock { $0.iterator } ?? socket.messages.makeAsyncIterator()
        let next: WSKit.Message?
        do {
            next = try await iterator.next()
        } catch {
            noteClose(of: socket)
            throw error
        }
        state.withLock { $0.iterator = iterator }
        guard let next else {
            noteClose(of: socket)
            throw WebSocketError.closed(code: socket.closeCode, reason: socket.closeReason ?? "")
        }
        switch next {
        case .text(let text): return .string(text)
        case .binary(let bytes): return .data(Data(bytes))
        }
    }

    /// Receives the next message and calls `completionHandler` with it or the error.
    public func receive(completionHandler: @escaping @Sendable (Result<Message, any Error>) -> Void) {
        Task {
            do { completionHandler(.success(try await receive())) } catch { completionHandler(.failure(error)) }
        }
    }

    /// Sends a Ping; `pongReceiveHandler` gets nil when its Pong arrives, else the error.
    public func sendPing(pongReceiveHandler: @escaping @Sendable ((any Error)?) -> Void) {
        Task {
            do {
                _ = try await opened().ping()
                pongReceiveHandler(nil)
            } catch {
                pongReceiveHandler(error)
            }
        }
    }

    /// Closes with `closeCode` and `reason` (UTF-8, at most 123 bytes are sent). A task
    /// never resumed or still connecting is just ended.
    public func cancel(with closeCode: CloseCode, reason: Data?) {
        let socket = state.withLock { state -> WebSocket? in
            if state.socket == nil && state.failure == nil { state.failure = .cancelled }
            return state.socket
        }
        guard let socket else { return }
        let text = reason.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let code = closeCode == .invalid ? 1000 : closeCode.rawValue
        Task {
            try? await socket.close(code: code, reason: text)
            noteClose(of: socket)
        }
    }

    /// Cancels the task as Apple's `cancel()`: Close 1001 (going away).
    public func cancel() { cancel(with: .goingAway, reason: nil) }

    private func noteClose(of socket: WebSocket) {
        let code = socket.closeCode
        let reason = socket.closeReason
        state.withLock { state in
            if let code { state.closeCode = CloseCode(rawValue: code) }
            if let reason, !reason.isEmpty { state.closeReason = Data(reason.utf8) }
        }
    }
}
