import WebSocketCore
import WebSocketTransport

// MARK: - permessage-deflate (RFC 7692 §6, §7.2)

extension ConnectionDriver {
    /// The agreed permessage-deflate configuration, if any.
    public var compression: DeflateConfiguration? { deflate?.configuration }
    /// Whether permessage-deflate was agreed (cheaper to ask than `compression`): then a
    /// received message's pieces may come from the inflater's buffer, which it reuses.
    public var isCompressing: Bool { deflate != nil }
    /// Compressed messages received and sent: wire bytes against payload bytes.
    public var compressionIn: CompressionCount { deflate?.received ?? CompressionCount() }
    public var compressionOut: CompressionCount { deflate?.sent ?? CompressionCount() }
    /// Data messages received whole.
    public var messagesReceived: UInt64 { core.dataMessagesReceived }
    /// Payload bytes of data messages received, inflated (a compressed message counts once
    /// it is whole).
    public var payloadReceived: UInt64 {
        let compressed = compressionIn
        return core.dataPayloadReceived &- compressed.wire &+ compressed.payload
    }
    /// Messages below this many bytes go uncompressed (`MessageDeflate.threshold`).
    public static let compressionThreshold = MessageDeflate.threshold

    // The inflated pieces go to the delegate through unretained references: the closure
    // runs before these return, while the caller holds both, and each retain and release
    // of the driver spared was 20 % of wspipe's CPU on a feed of small compressed messages.

    @inline(never)
    func inflate(_ bytes: UnsafeMutableRawPointer, count: Int, delegate: ConnectionDelegate) throws(ReceiveError) {
        guard let deflate else { return }
        let driver = Unmanaged.passUnretained(self)
        unowned(unsafe) let owner = delegate
        do {
            try deflate.inflate(bytes, count: count) { buffer, start, n in
                driver._withUnsafeGuaranteedRef { owner.connection($0, didReceive: start, count: n, in: buffer) }
            }
        } catch {
            inflating = false
            core.fail(error)
            throw error
        }
    }

    @inline(never)
    func finishInflating(delegate: ConnectionDelegate) throws(ReceiveError) {
        inflating = false
        guard let deflate else { return }
        let driver = Unmanaged.passUnretained(self)
        unowned(unsafe) let owner = delegate
        do {
            try deflate.finishMessage { buffer, start, n in
                driver._withUnsafeGuaranteedRef { owner.connection($0, didReceive: start, count: n, in: buffer) }
            }
        } catch {
            core.fail(error)
            throw error
        }
    }

    /// Out of line: inlined, `MessageDeflate.frame` made `frame` too big to inline into
    /// `send`, 17 instructions per message more on every connection (scripts/profile,
    /// lines-up 491 -> 508).
    @inline(never)
    func frameCompressed(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int) -> Bool {
        guard let deflate else { return false }
        return deflate.frame(opcode, fin: fin, payload, count: count, core: &core, into: &outbound)
    }
}
