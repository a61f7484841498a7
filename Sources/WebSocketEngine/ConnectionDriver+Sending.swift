import WebSocketCore
import WebSocketTransport

// MARK: - What the owner sends, and how it is framed

extension ConnectionDriver {
    /// Whether a send is framed at once: nothing waits unframed and the socket queue has
    /// room (else it waits as a message, so control frames need not queue behind it).
    private var framesNow: Bool { waiting.isEmpty && outbound.byteCount < options.queueLimit }

    /// Queues a Ping (at most 125 bytes) behind the messages sent before it and ahead of
    /// those sent after (unless messages wait unframed: control frames go ahead of them).
    /// False once closing.
    @discardableResult
    public func ping(_ payload: [UInt8]) -> Bool {
        guard ended == nil, core.ping(payload) else { return false }
        if framesNow { queueControlFrames() }
        scheduleService()
        return true
    }

    /// Sends one data frame (a whole message with `fin`, or a fragment). `owner` keeps the
    /// payload alive; a large payload is masked in place there, so do not change it after.
    /// Does nothing once `canSendData` is false.
    public func send(_ opcode: Opcode, fin: Bool = true, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        guard closing.acceptsData else { return }
        if fin { messagesSent &+= 1 }
        if framesNow {
            frame(opcode, fin: fin, payload, count: count, in: owner)
        } else {
            waiting.append(opcode, fin: fin, payload, count: count, in: owner, copyLimit: ConnectionDriver.copyLimit)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends one whole message already deflated for this connection's agreed parameters
    /// (RFC 7692 §7.2.1, the tail removed), as one frame with RSV1: a broadcast compressed
    /// once for every client without server context takeover. `payloadSize` is the size
    /// before deflating (for the counts). `owner` keeps the bytes; they are never changed
    /// (a server does not mask). Call only when `compression` is agreed.
    public func sendCompressed(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer, count: Int, in owner: ByteBuffer?, payloadSize: Int) {
        guard closing.acceptsData, deflate != nil else { return }
        if framesNow {
            framePrecompressed(opcode, payload, count: count, in: owner, payloadSize: payloadSize)
        } else {
            waiting.append(opcode, fin: true, payload, count: count, in: owner, copyLimit: ConnectionDriver.copyLimit,
                           precompressedSize: payloadSize)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends `messages` whole messages already encoded as frames for the server role
    /// (unmasked, RSV bits clear: valid on any server connection, with extensions or
    /// without). The bytes stay in `owner` and are referenced, not copied, so one buffer
    /// goes to every client of a broadcast; they must not change afterwards. Does nothing
    /// once `canSendData` is false.
    public func sendFrames(_ frames: UnsafeMutableRawPointer, count: Int, in owner: ByteBuffer, messages: Int) {
        precondition(!core.role.masksOutgoingFrames, "encoded frames are a server's (unmasked)")
        guard closing.acceptsData else { return }
        messagesSent &+= UInt64(messages)
        if framesNow {
            outbound.appendEncoded(owner, frames, count: count)
        } else {
            waiting.appendEncoded(owner, frames, count: count)
        }
        if !serviceQueued { scheduleService() }
    }

    /// Sends a data frame from bytes (copied).
    public func send(_ opcode: Opcode, fin: Bool = true, bytes: [UInt8]) {
        var copy = bytes
        copy.withUnsafeMutableBytes { send(opcode, fin: fin, $0.baseAddress, count: $0.count, in: nil) }
    }

    private func frame(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        if deflate != nil, frameCompressed(opcode, fin: fin, payload, count: count) { return }
        let header = core.makeHeader(opcode: opcode, fin: fin, payloadLength: count)
        if count <= ConnectionDriver.copyLimit || owner == nil {
            outbound.appendFrame(header, copying: payload, count: count)
        } else if let owner, let payload {
            outbound.appendFrame(header, inPlace: owner, payload, count: count)
        }
    }

    private func framePrecompressed(_ opcode: Opcode, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?,
                                    payloadSize: Int) {
        let header = core.makeHeader(opcode: opcode, fin: true, rsv: .rsv1, payloadLength: count)
        if count <= ConnectionDriver.copyLimit || owner == nil {
            outbound.appendFrame(header, copying: payload, count: count)
        } else if let owner, let payload {
            outbound.appendFrame(header, inPlace: owner, payload, count: count)
        }
        deflate?.countPrecompressed(wire: count, payload: payloadSize)
    }

    /// Calls `connection(_:wroteThrough:)` with `token` once every byte of what was sent
    /// before is written to the socket (tokens ascending; a report may cover several). False,
    /// and nothing is reported, once data is no longer accepted (what was just sent was
    /// dropped). Bytes never written (the connection ended first) are never reported.
    public func reportWhenWritten(_ token: UInt64) -> Bool {
        guard closing.acceptsData else { return false }
        if waiting.isEmpty {
            writtenMarks.add(token: token, end: outbound.totalQueued)
        } else {
            writtenMarks.add(token: token, afterWaiting: waiting.count)
        }
        if !serviceQueued { scheduleService() }
        return true
    }

    /// Frames waiting messages while the socket queue has room.
    func frameWaiting() {
        while outbound.byteCount < options.queueLimit, let message = waiting.popFirst() {
            if message.encoded, let owner = message.owner, let start = message.start {
                outbound.appendEncoded(owner, start, count: message.count)
            } else if let size = message.precompressedSize {
                message.withPayload { framePrecompressed(message.opcode, $0, count: $1, in: message.owner, payloadSize: size) }
            } else {
                message.withPayload { frame(message.opcode, fin: message.fin, $0, count: $1, in: message.owner) }
            }
            if writtenMarks.waitsForFraming { writtenMarks.framedOne(total: outbound.totalQueued) }
        }
        releaseQueuedClose()
        queueBarrierIfReady()
    }
}
