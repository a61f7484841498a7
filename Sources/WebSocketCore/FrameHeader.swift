/// The fixed part of a frame: everything before the payload (RFC 6455 §5.2).
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-------+-+-------------+-------------------------------+
/// |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
/// |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
/// |N|V|V|V|       |S|             |   (if payload len==126/127)   |
/// | |1|2|3|       |K|             |                               |
/// ```
public struct FrameHeader: Sendable, Equatable {
    /// FIN: this frame is the final fragment of its message.
    public var fin: Bool
    /// RSV1, RSV2, RSV3 as a 3-bit number (RSV1 = 4, RSV2 = 2, RSV3 = 1).
    public var rsv: UInt8
    public var opcode: Opcode
    /// The masking key; present exactly on client-to-server frames (§5.1).
    public var maskingKey: MaskingKey?
    /// Payload length in bytes (at most 2^63 - 1).
    public var payloadLength: UInt64

    public init(fin: Bool = true, rsv: UInt8 = 0, opcode: Opcode, maskingKey: MaskingKey? = nil,
                payloadLength: UInt64) {
        self.fin = fin
        self.rsv = rsv
        self.opcode = opcode
        self.maskingKey = maskingKey
        self.payloadLength = payloadLength
    }

    /// The largest header: 2 fixed bytes, 8 extended-length bytes, 4 masking-key bytes.
    public static let maximumSize = 14

    /// Size in bytes of this header on the wire, using the minimal length encoding (§5.2).
    @inlinable public var encodedSize: Int {
        FrameHeader.encodedSize(payloadLength: payloadLength, masked: maskingKey != nil)
    }

    @inlinable
    public static func encodedSize(payloadLength: UInt64, masked: Bool) -> Int {
        let lengthBytes = payloadLength < 126 ? 0 : payloadLength <= 0xFFFF ? 2 : 8
        return 2 + lengthBytes + (masked ? 4 : 0)
    }

    /// Writes the header at `destination`, which must have room for `encodedSize` bytes
    /// (at most 14), with the minimal payload length encoding. Returns the bytes written.
    @inlinable @discardableResult
    public func encode(into destination: UnsafeMutableRawPointer) -> Int {
        let first = (fin ? 0x80 : 0) | (rsv & 7) << 4 | opcode.rawValue
        let maskBit: UInt8 = maskingKey != nil ? 0x80 : 0
        destination.storeBytes(of: first, as: UInt8.self)
        var size: Int
        if payloadLength < 126 {
            destination.storeBytes(of: maskBit | UInt8(payloadLength), toByteOffset: 1, as: UInt8.self)
            size = 2
        } else if payloadLength <= 0xFFFF {
            destination.storeBytes(of: maskBit | 126, toByteOffset: 1, as: UInt8.self)
            destination.storeBytes(of: UInt16(payloadLength).bigEndian, toByteOffset: 2, as: UInt16.self)
            size = 4
        } else {
            destination.storeBytes(of: maskBit | 127, toByteOffset: 1, as: UInt8.self)
            destination.storeBytes(of: payloadLength.bigEndian, toByteOffset: 2, as: UInt64.self)
            size = 10
        }
        if let key = maskingKey {
            destination.storeBytes(of: key.bytes.0, toByteOffset: size, as: UInt8.self)
            destination.storeBytes(of: key.bytes.1, toByteOffset: size + 1, as: UInt8.self)
            destination.storeBytes(of: key.bytes.2, toByteOffset: size + 2, as: UInt8.self)
            destination.storeBytes(of: key.bytes.3, toByteOffset: size + 3, as: UInt8.self)
            size += 4
        }
        return size
    }

    /// Writes the header of a final, unmasked frame without extension bits (a server's whole
    /// message) at `destination`, which must have room for 10 bytes; returns the bytes
    /// written. The same bytes as `encode(into:)`, in a form that inlines into a caller
    /// framing one message after another.
    @inlinable @inline(__always) @discardableResult
    public static func encodeFinal(_ opcode: Opcode, payloadLength: Int, into destination: UnsafeMutableRawPointer) -> Int {
        destination.storeBytes(of: 0x80 | opcode.rawValue, as: UInt8.self)
        if payloadLength < 126 {
            destination.storeBytes(of: UInt8(truncatingIfNeeded: payloadLength), toByteOffset: 1, as: UInt8.self)
            return 2
        }
        if payloadLength <= 0xFFFF {
            destination.storeBytes(of: 126, toByteOffset: 1, as: UInt8.self)
            destination.storeBytes(of: UInt16(truncatingIfNeeded: payloadLength).bigEndian, toByteOffset: 2, as: UInt16.self)
            return 4
        }
        destination.storeBytes(of: 127, toByteOffset: 1, as: UInt8.self)
        destination.storeBytes(of: UInt64(payloadLength).bigEndian, toByteOffset: 2, as: UInt64.self)
        return 10
    }

    /// The header's bytes as an array.
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: encodedSize)
        out.withUnsafeMutableBytes { _ = encode(into: $0.baseAddress!) }
        return out
    }
}

/// Builds whole frames as byte arrays: convenient for control frames, tests and small
/// messages. The bridge's bulk path writes headers with `FrameHeader.encode(into:)` and
/// masks payloads in place instead.
public enum FrameEncoder {
    /// A complete frame: header, then the payload masked with `maskingKey` if one is given
    /// (clients must give one, §5.3). Throws nothing; any opcode/length combination is
    /// encoded as asked, so callers enforce §5.5's control-frame rules.
    public static func frame(opcode: Opcode, payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0,
                             maskingKey: MaskingKey?) -> [UInt8] {
        let header = FrameHeader(fin: fin, rsv: rsv, opcode: opcode, maskingKey: maskingKey,
                                 payloadLength: UInt64(payload.count))
        var out = [UInt8](repeating: 0, count: header.encodedSize + payload.count)
        out.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            let size = header.encode(into: base)
            payload.withUnsafeBytes { src in
                guard let source = src.baseAddress, !src.isEmpty else { return }
                if let key = maskingKey {
                    key.copyMasked(from: source, to: base + size, count: src.count)
                } else {
                    (base + size).copyMemory(from: source, byteCount: src.count)
                }
            }
        }
        return out
    }
}
