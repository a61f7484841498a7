import WebSocketCore

/// Sends every message back with its type, as it arrives: a message whole within one read
/// as one frame, one still arriving as fragments (a server's frames are unmasked, so the
/// pieces are sent from the receive buffer without copying beyond small ones).
///
/// A client that sends faster than it reads is paused (its reading stops) while its queue
/// is over the driver's `queueLimit`, so memory stays bounded.
public final class EchoMode: ServerMode {
    public init() {}

    public func handler(for connection: ServerConnection) -> ConnectionDelegate { EchoHandler() }

    /// An echo client that sends nothing costs no driver until it does.
    public var parksIdleClients: Bool { true }
}

/// One client's echo. A message whole within one read goes back as one final frame
/// (`81 05 hello`, not a fragment and an empty final continuation: clients with weak
/// fragmentation support pay for those): the latest piece is held until the message ends
/// or the read has been processed, and a piece that continues it in the same buffer (what
/// inflating writes) joins it. A message still arriving streams as fragments.
final class EchoHandler: ConnectionDelegate {
    private var kind: Opcode = .text
    /// Whether the message's first frame went out.
    private var started = false
    /// The piece held back (valid while its buffer is held).
    private var held: (start: UnsafeMutableRawPointer, count: Int, buffer: ByteBuffer)?

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {
        self.kind = kind.opcode
        started = false
    }

    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        guard count > 0 else { return }
        if let piece = held {
            if piece.buffer === buffer && piece.start + piece.count == bytes {
                held = (piece.start, piece.count + count, buffer)
                return
            }
            sendHeld(connection, fin: false)
        }
        held = (bytes, count, buffer)
    }

    public func connectionDidEndMessage(_ connection: ConnectionDriver) {
        if held != nil {
            sendHeld(connection, fin: true)
        } else {
            connection.send(started ? .continuation : kind, fin: true, nil, count: 0, in: nil)
        }
        started = false
    }

    private func sendHeld(_ connection: ConnectionDriver, fin: Bool) {
        guard let piece = held else { return }
        held = nil
        connection.send(started ? .continuation : kind, fin: fin, piece.start, count: piece.count, in: piece.buffer)
        started = true
    }

    public func connectionDidProcessInput(_ connection: ConnectionDriver) {
        sendHeld(connection, fin: false)  // the rest of the message is still arriving
        if connection.queuedBytes >= connection.options.queueLimit { connection.pauseReading() }
    }

    public func connectionHasRoom(_ connection: ConnectionDriver) {
        connection.resumeReading()
    }

    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
}
