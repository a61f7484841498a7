/// One whole WebSocket message (RFC 6455 §5.6): text is valid UTF-8, checked as it arrived.
public enum Message: Sendable, Equatable {
    /// A text message (opcode 0x1).
    case text(String)
    /// A binary message (opcode 0x2).
    case binary([UInt8])
}

/// The messages of a connection, in order, as they arrive: an `AsyncSequence` whose
/// iterators all take from the same queue. It ends (returns nil) after the peer's Close,
/// including a Close with a code other than 1000 (read `WebSocket.closeCode`), and throws
/// `WebSocketError` when the connection fails. Cancelling the iterating task closes the
/// connection with 1001 and throws `.cancelled`.
///
/// Several tasks may await `next()` at once (on one iterator or several): each message
/// goes to one of them, in the order they started waiting, so none waits for a message
/// another took. A waiting task that is cancelled is resumed at once with `.cancelled`
/// (the others are then resumed by the connection's end); when the connection ends, the
/// first waiter still waiting gets its failure and the rest the end (nil).
///
/// Backpressure: at most `WebSocketOptions.receiveBufferLimit` bytes of whole messages
/// wait for the consumer; beyond that the socket is not read until it catches up.
public struct Messages: AsyncSequence, Sendable {
    /// A whole message.
    public typealias Element = Message
    /// What iterating throws: the connection failed, or the iterating task was cancelled.
    public typealias Failure = WebSocketError
    let socket: WebSocket

    /// An iterator; every iterator of a connection takes from the same messages.
    public func makeAsyncIterator() -> Iterator { Iterator(socket: socket) }

    /// The iterator of `Messages`. Tasks awaiting `next()` at once get one message each, in
    /// the order they started waiting.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A whole message.
        public typealias Element = Message
        /// What `next()` throws.
        public typealias Failure = WebSocketError
        let socket: WebSocket

        /// The next message; nil after the peer's Close. Throws `WebSocketError`:
        /// `.cancelled` when the waiting task is cancelled (also before it waits).
        // Runs on the caller's executor: a message already buffered costs no executor hop.
        nonisolated(nonsending) public mutating func next() async throws(WebSocketError) -> Message? {
            // A buffered message is taken without the frame of another async call.
            if let message = socket.receiveNow() { return message }
            return try await socket.receive()
        }

        /// The next message, as `next()`; the form `for try await` uses (inside an actor or
        /// not). Runs on the caller's executor, as `next()`: an `isolated` parameter would
        /// switch executors on every call, a buffered message or not.
        nonisolated(nonsending) public mutating func next(isolation actor: (any Actor)?) async throws(WebSocketError) -> Message? {
            if let message = socket.receiveNow() { return message }
            return try await socket.receive()
        }
    }
}
