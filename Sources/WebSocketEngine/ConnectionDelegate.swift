import WebSocketCore
import WebSocketTransport

/// What a connection tells its owner. Called on the loop's thread, in order.
///
/// Payload bytes arrive as pieces of the driver's receive buffers (`didReceive`): keep the
/// `ByteBuffer` to keep the bytes; nothing is copied. Text is valid UTF-8 so far; a message
/// counts only once `connectionDidEndMessage` comes (an ending before that drops it). A
/// message that came whole, in one frame of one read, comes in one `didReceiveMessage`
/// call instead (by default: the three calls).
public protocol ConnectionDelegate: AnyObject {
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind)
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer)
    func connectionDidEndMessage(_ connection: ConnectionDriver)
    /// A whole message that arrived in one frame of one read: `didStartMessage`,
    /// `didReceive` (unless empty) and `connectionDidEndMessage` in one call, which is what
    /// the default does. A delegate that makes a message of it at once saves two calls.
    func connection(_ connection: ConnectionDriver, didReceiveMessage kind: MessageKind, bytes: UnsafeMutableRawPointer, count: Int,
                    in buffer: ByteBuffer)
    /// A Ping arrived; the pong is already queued while the connection is open.
    func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8])
    /// A Pong arrived (not the barrier's); `roundTrip` in seconds if it answers our ping.
    func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?)
    /// The peer's Close arrived (its echo, if we closed first, is queued).
    func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload)
    /// The peer broke the protocol: we are failing the connection with `error.closeCode`.
    func connection(_ connection: ConnectionDriver, didFail error: ReceiveError)
    /// Everything of one socket read has been reported (a good moment to flush output).
    func connectionDidProcessInput(_ connection: ConnectionDriver)
    /// The receive buffer is about to be let go or reused (the connection went idle, or
    /// the buffer is full): copy out pieces you hold of it. Called before every reuse and
    /// every release while the connection runs, so a delegate may keep a piece's pointer
    /// without holding the `ByteBuffer` (WSKit's `LoopSide` does); at the ending it is not
    /// called, and nothing of the buffer may be read after `didEnd`.
    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver)
    func connection(_ connection: ConnectionDriver, note: ConnectionNote)
    /// The socket took bytes and the queue is below `queueLimit`: there is room to send.
    func connectionHasRoom(_ connection: ConnectionDriver)
    /// Everything sent before `reportWhenWritten(token)` was written to the socket, for
    /// `token` and every token asked for before it.
    func connection(_ connection: ConnectionDriver, wroteThrough token: UInt64)
    /// The connection is over; the stream is closed and the driver does nothing more.
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding)
    /// While `pausesReading`, the peer shut down its sending side or the socket hung up:
    /// nothing will come after what is buffered (the ending follows once reading resumes).
    /// An owner whose output is stuck can give up on it and unpause.
    func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver)
}

public extension ConnectionDelegate {
    func connection(_ connection: ConnectionDriver, didReceiveMessage kind: MessageKind, bytes: UnsafeMutableRawPointer, count: Int,
                    in buffer: ByteBuffer) {
        self.connection(connection, didStartMessage: kind)
        if count > 0 { self.connection(connection, didReceive: bytes, count: count, in: buffer) }
        connectionDidEndMessage(connection)
    }
    func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8]) {}
    func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {}
    func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {}
    func connection(_ connection: ConnectionDriver, didFail error: ReceiveError) {}
    func connectionDidProcessInput(_ connection: ConnectionDriver) {}
    func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, note: ConnectionNote) {}
    func connectionHasRoom(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, wroteThrough token: UInt64) {}
    func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver) {}
}

/// Where outgoing data frames go: a connection, or (later) a queue that holds messages
/// while there is none. `owner` keeps the payload alive; a large payload may be masked in
/// place there, so do not change it after.
public protocol MessageSink: AnyObject {
    func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?)
    func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8])
}

/// Settings of one connection driver.
public struct ConnectionOptions: Sendable {
    /// Seconds the closing handshake may go without progress (RFC 6455 §7.1.1).
    public var closeTimeout: Double = 5
    /// Seconds between our keepalive pings; nil: none.
    public var pingInterval: Double?
    /// Seconds to wait for a pong once a ping is written; nil: no limit.
    public var pingTimeout: Double?
    /// Size of a receive buffer, in bytes (taken from the pool when reading, let go when
    /// idle).
    public var receiveBufferSize = 256 * 1024
    /// Framed bytes waiting for the socket beyond which sends wait as messages (framed only
    /// when the socket takes the queue below this) and pongs wait in the core.
    public var queueLimit = 192 * 1024
    /// Keep the receive buffer and the queue's arena between reads (one busy connection:
    /// a read continues where the last ended). Off: an idle connection holds no buffer.
    public var keepsBuffersWhenIdle = false

    public init() {}
}

/// Told when a driver has ended, after its delegate (`ConnectionDriver.endObserver`).
protocol ConnectionEndObserver: AnyObject {
    func driver(_ driver: ConnectionDriver, didEnd ending: ConnectionEnding)
}
