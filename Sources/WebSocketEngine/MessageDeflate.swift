import WebSocketCore

/// permessage-deflate (RFC 7692 §6, §7.2) of one connection, when agreed: inflates the
/// received messages that have RSV1, deflates and frames outgoing ones, and counts both.
/// The driver holds one only when the extension was agreed, so a connection that
/// negotiated nothing pays one nil check per message start and per frame sent.
final class MessageDeflate {
    let configuration: DeflateConfiguration
    /// Nil when zlib refuses the window: compressed messages then deliver nothing.
    private var inflater: Inflater?
    /// Nil for a window below 9 bits: such a connection sends uncompressed (always allowed).
    private var deflater: Deflater?
    /// Compressed messages received and sent: wire bytes against payload bytes.
    private(set) var received = CompressionCount()
    private(set) var sent = CompressionCount()
    /// The message being sent (fragmented) is compressed.
    private var sendingCompressed = false
    /// Its first frame's opcode while no frame of it is framed yet (zlib kept the bytes).
    private var unsentOpcode: Opcode?

    /// Messages below this many bytes go uncompressed: deflate's block header and the
    /// flush make them no smaller, and the CPU is not worth it.
    static let threshold = 64

    /// Nil unless the core's extensions include an agreed `PerMessageDeflate`. zlib must be
    /// loaded.
    init?(core: WebSocketConnection) {
        guard !core.extensions.isEmpty,
              let deflate = core.extensions.lazy.compactMap({ $0 as? PerMessageDeflate }).first,
              let agreed = deflate.configuration else { return nil }
        configuration = agreed
        inflater = Inflater(windowBits: max(agreed.incomingWindowBits, 9), limit: core.maximumMessageSize)
        deflater = Deflater(windowBits: agreed.outgoingWindowBits, memoryLevel: deflate.memoryLevel,
                            resetsContext: agreed.outgoingNoContextTakeover)
    }

    // MARK: - Receiving

    /// A message starts; true when it is compressed (`rsv` of its first frame has RSV1).
    func beginMessage(_ kind: MessageKind, rsv: RSVBits) -> Bool {
        guard rsv.contains(.rsv1) else { return false }
        if let inflater {
            inflater.begin(text: kind == .text)
            received.messages += 1
        }
        return true
    }

    /// Inflates a piece of a compressed message, giving `emit` each inflated piece.
    func inflate(_ bytes: UnsafeMutableRawPointer, count: Int,
                 emit: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) {
        guard let inflater else { return }
        received.wire += UInt64(count)
        try inflater.feed(bytes, count: count, emit: emit)
    }

    /// The compressed message's last frame ended: what zlib still holds goes to `emit`.
    func finishMessage(emit: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) {
        guard let inflater else { return }
        try inflater.finish(resetsContext: configuration.incomingNoContextTakeover, emit: emit)
        received.payload += inflater.messageSize
    }

    // MARK: - Sending

    /// Frames a data frame compressed into `outbound`, if its message is (or, for a first
    /// frame, should be): RSV1 on the first frame only. False: frame it as it is. A
    /// non-final frame whose bytes zlib keeps for now is not framed: the message's next
    /// frame takes its place (with the first frame's opcode and RSV1 if none went out yet).
    func frame(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int,
               core: inout WebSocketConnection, into outbound: inout OutboundQueue) -> Bool {
        guard let deflater, !opcode.isControl else { return false }
        if opcode != .continuation {
            sendingCompressed = count >= MessageDeflate.threshold
            unsentOpcode = sendingCompressed ? opcode : nil
        }
        guard sendingCompressed else { return false }
        if fin { sendingCompressed = false }
        guard let compressed = deflater.compress(payload.map { UnsafeRawPointer($0) }, count: count, final: fin) else {
            // zlib could not make its state: this message (a first frame) goes as it is.
            if opcode != .continuation { sendingCompressed = false; unsentOpcode = nil }
            return false
        }
        sent.payload += UInt64(count)
        if !fin && compressed.count == 0 { return true }
        let first = unsentOpcode
        unsentOpcode = nil
        let header = core.makeHeader(opcode: first ?? .continuation, fin: fin, rsv: first == nil ? [] : .rsv1,
                                     payloadLength: compressed.count)
        outbound.appendFrame(header, copying: compressed.baseAddress, count: compressed.count)
        sent.wire += UInt64(compressed.count)
        if first != nil { sent.messages += 1 }
        return true
    }

    /// A message deflated by the owner (`sendCompressed`) was framed.
    func countPrecompressed(wire: Int, payload: Int) {
        sent.wire += UInt64(wire)
        sent.payload += UInt64(payload)
        sent.messages += 1
    }

    /// The connection ended: zlib's state goes with it (the configuration and the counts stay).
    func end() {
        inflater = nil
        deflater = nil
    }

    /// The connection went idle: zlib's buffers go back, except those of a message under
    /// way (`receiving`: one is being inflated). The inflater's 64 KiB output buffer was
    /// most of what 1,000 idle deflate clients cost once their traffic had touched it
    /// (scripts/bench-server, deflate row); pieces handed out keep theirs.
    func releaseBuffers(receiving: Bool) {
        if !receiving { inflater?.releaseBuffer() }
        if !sendingCompressed { deflater?.releaseScratch() }
    }
}
