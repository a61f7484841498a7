/// One whole WebSocket message (RFC 6455 §5.6): text is valid UTF-8, checked as it arrived.
public enum Message: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
}

/// The messages of a connection, in order, as they arrive: a single-consumer
/// `AsyncSequence`. It ends (returns nil) after the peer's Close, including a Close with a
/// code other than 1000 (read `WebSocket.closeCode`), and throws `WebSocketError` when the
/// connection fails. Cancelling the iterating task closes the connection with 1001 and
/// throws `.cancelled`.
///
/// Backpressure: at most `WebSocketOptions.receiveBufferLimit` bytes of whole messages
/// wait for the consumer; beyond that the socket is not read until it catches up.
public struct Messages: AsyncSequence, Sendable {
    public typealias Element = Message
    public typealias Failure = WebSocketError
    let socket: WebSocket

    public func makeAsyncIterator() -> Iterator { Iterator(socket: socket) }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = Message
        public typealias Failure = WebSocketError
        let socket: WebSocket

        /// The next message; nil after the peer's Close. Throws `WebSocketError`.
        // Runs on the caller's executor: a message already buffered costs no executor hop.
        nonisolated(nonsending) public mutating func next() async throws(WebSocketError) -> Message? {
            try await socket.receive()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(WebSocketError) -> Message? {
            try await socket.receive()
        }
    }
}
