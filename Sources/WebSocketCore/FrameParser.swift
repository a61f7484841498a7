/// An incremental frame parser (RFC 6455 §5.2): bytes in, frame headers and payload ranges
/// out, with no copying of payload bytes and no allocation.
///
/// Feed it whatever arrived, in any pieces: `next(_:_:)` returns one event at a time and
/// advances `index` past the bytes it consumed; nil means every byte was consumed and more
/// input is needed. A header split between two inputs is kept in 16 bytes of inline storage
/// (the longest header is 14 bytes: 2 + 8 length + 4 mask). Payload events are ranges of
/// the input buffer, so the caller can use the bytes where they lie.
///
/// The parser checks only what it needs to find frame boundaries: reserved opcodes and a
/// 64-bit length with its most significant bit set (§5.2) are protocol errors. Message
/// rules (masking, RSV, fragmentation, control-frame limits) belong to `MessageReader`.
public struct FrameParser: Sendable {
    public enum Event: Equatable, Sendable {
        /// A frame's header; its payload follows as `.payload` events.
        case header(FrameHeader)
        /// Payload bytes of the current frame at `range` of the input; `frameEnd` on the
        /// last piece. A frame with an empty payload yields one empty range with `frameEnd`.
        case payload(Range<Int>, frameEnd: Bool)
    }

    private enum State: Sendable {
        case header
        case payload(remaining: UInt64)
    }

    private var state = State.header
    private var partial: (UInt64, UInt64) = (0, 0)  // 16 bytes for a split header (at most 14)
    private var partialCount = 0

    public init() {}

    /// True between frames: no header or payload bytes of a frame are pending.
    public var isAtFrameBoundary: Bool {
        if case .header = state { return partialCount == 0 }
        return false
    }

    /// Payload bytes of the current frame still to come (0 between frames).
    public var payloadRemaining: UInt64 {
        if case .payload(let remaining) = state { return remaining }
        return 0
    }

    /// The next event from `input[index...]`, or nil when more input is needed.
    /// Throws `.protocolError` for a reserved opcode or an oversized 64-bit length.
    public mutating func next(_ input: UnsafeRawBufferPointer, _ index: inout Int) throws(ReceiveError) -> Event? {
        switch state {
        case .payload(let remaining):
            if remaining == 0 {
                state = .header
                return .payload(index..<index, frameEnd: true)
            }
            let available = input.count - index
            if available <= 0 { return nil }
            let take = UInt64(available) < remaining ? available : Int(remaining)
            let range = index..<(index + take)
            index += take
            let left = remaining - UInt64(take)
            if left == 0 {
                state = .header
                return .payload(range, frameEnd: true)
            }
            state = .payload(remaining: left)
            return .payload(range, frameEnd: false)
        case .header:
            guard let base = input.baseAddress else { return nil }
            if partialCount == 0 {
                // Fast path: the whole header is in this input.
                let available = input.count - index
                if available <= 0 { return nil }
                if let (header, size) = try FrameParser.parseHeader(base + index, available: available) {
                    index += size
                    state = .payload(remaining: header.payloadLength)
                    return .header(header)
                }
            }
            // Slow path: gather header bytes across inputs.
            return try withUnsafeMutableBytes(of: &partial) { (storage) throws(ReceiveError) -> Event? in
                let buffer = storage.baseAddress!
                while true {
                    let need = partialCount < 2 ? 2 : FrameParser.headerSize(buffer)
                    if partialCount >= 2 && partialCount == need { break }
                    if index >= input.count { return nil }
                    let take = min(need - partialCount, input.count - index)
                    (buffer + partialCount).copyMemory(from: base + index, byteCount: take)
                    partialCount += take
                    index += take
                }
                guard let (header, _) = try FrameParser.parseHeader(UnsafeRawPointer(buffer), available: partialCount)
                else { return nil }
                partialCount = 0
                state = .payload(remaining: header.payloadLength)
                return .header(header)
            }
        }
    }

    /// Header size implied by the first two bytes at `p`.
    @inline(__always)
    private static func headerSize(_ p: UnsafeRawPointer) -> Int {
        let second = p.load(fromByteOffset: 1, as: UInt8.self)
        let lengthCode = second & 0x7F
        return 2 + (lengthCode == 126 ? 2 : lengthCode == 127 ? 8 : 0) + (second & 0x80 != 0 ? 4 : 0)
    }

    /// Parses a header from `available` contiguous bytes; nil if they are not enough.
    /// (`MessageReader.nextWholeMessage` reads a whole frame's header with it too.)
    @inline(__always)
    static func parseHeader(_ p: UnsafeRawPointer, available: Int) throws(ReceiveError) -> (FrameHeader, Int)? {
        if available < 2 { return nil }
        let size = headerSize(p)
        if available < size { return nil }
        let first = p.load(as: UInt8.self)
        let second = p.load(fromByteOffset: 1, as: UInt8.self)
        guard let opcode = Opcode(rawValue: first & 0x0F) else {
            throw .protocolError("frame with reserved opcode 0x\(String(first & 0x0F, radix: 16, uppercase: true))")
        }
        var length = UInt64(second & 0x7F)
        var offset = 2
        if length == 126 {
            length = UInt64(UInt16(bigEndian: p.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
            offset = 4
        } else if length == 127 {
            length = UInt64(bigEndian: p.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
            offset = 10
            guard length >> 63 == 0 else {
                throw .protocolError("frame length has its most significant bit set (RFC 6455 §5.2)")
            }
        }
        var key: MaskingKey?
        if second & 0x80 != 0 {
            key = MaskingKey(p.load(fromByteOffset: offset, as: UInt8.self), p.load(fromByteOffset: offset + 1, as: UInt8.self),
                             p.load(fromByteOffset: offset + 2, as: UInt8.self), p.load(fromByteOffset: offset + 3, as: UInt8.self))
        }
        let header = FrameHeader(fin: first & 0x80 != 0, rsv: (first >> 4) & 7, opcode: opcode, maskingKey: key,
                                 payloadLength: length)
        return (header, size)
    }
}
