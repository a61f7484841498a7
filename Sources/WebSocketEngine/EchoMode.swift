import WebSocketCore

/// Sends every message back with its type, as it arrives: each received piece goes out as a
/// fragment (a server's frames are unmasked, so the pieces are sent from the receive
/// buffer without copying beyond small ones).
///
/// A client that sends faster than it reads is paused (its reading stops) while its queue
/// is over the driver's `queueLimit`, so memory stays bounded.
public final class EchoMode: ServerMode {
    public init() {}

    public func handler(for connection: ServerConnection) -> ConnectionDelegate { EchoHandler() }
}

/// One client's echo: the type of the message being echoed and whether its first frame
/// went out.
final class EchoHandler: ConnectionDelegate {
    private var kind: Opcode = .text
    private var started = false

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind.opcode
        started = false
    }

    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        guard count > 0 else { return }
        connection.send(started ? .continuation : kind, fin: false, bytes, count: count, in: buffer)
        started = true
    }

    public func connectionDidEndMessage(_ connection: ConnectionDriver) {
        connection.send(started ? .continuation : kind, fin: true, nil, count: 0, in: nil)
        started = false
    }

    public func connectionDidProcessInput(_ connection: ConnectionDriver) {
        if connection.queuedBytes >= connection.options.queueLimit { connection.pauseReading() }
    }

    public func connectionHasRoom(_ connection: ConnectionDriver) {
        connection.resumeReading()
    }

    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
}
