/// A 4-byte masking key (RFC 6455 §5.3), stored in wire order.
///
/// Every frame a client sends carries a fresh key from a strong source of entropy; the
/// payload is XORed with the key repeated over its length.
public struct MaskingKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's four bytes, in the order they appear on the wire.
    public let bytes: (UInt8, UInt8, UInt8, UInt8)

    public init(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        bytes = (b0, b1, b2, b3)
    }

    /// The key from four bytes in wire order; nil unless `array` has exactly four.
    public init?(_ array: [UInt8]) {
        guard array.count == 4 else { return nil }
        self.init(array[0], array[1], array[2], array[3])
    }

    public static func == (a: MaskingKey, b: MaskingKey) -> Bool {
        a.bytes.0 == b.bytes.0 && a.bytes.1 == b.bytes.1 && a.bytes.2 == b.bytes.2 && a.bytes.3 == b.bytes.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(wordInMemoryOrder)
    }

    public var array: [UInt8] { [bytes.0, bytes.1, bytes.2, bytes.3] }

    public var description: String {
        array.map { b in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
        }.joined()
    }

    /// The key as a UInt32 whose in-memory bytes are the wire bytes, so that XORing it
    /// with a 4-byte load from the payload masks those four bytes on any byte order.
    @inlinable var wordInMemoryOrder: UInt32 {
        UInt32(bytes.0) | UInt32(bytes.1) << 8 | UInt32(bytes.2) << 16 | UInt32(bytes.3) << 24
    }

    /// XORs `count` bytes at `start` with the key, in place. `offset` is the position of
    /// `start[0]` within the frame's payload (0 for the first byte), so a payload can be
    /// masked in several pieces. Masking twice with the same key and offset is the identity.
    @inlinable
    public func apply(to start: UnsafeMutableRawPointer, count: Int, payloadOffset offset: Int = 0) {
        if count <= 0 { return }
        // Rotate the key so that byte 0 of `start` lines up with key byte (offset % 4).
        // Little-endian: memory byte i of a word is bits 8i..8i+7.
        let shift = UInt32((offset & 3) * 8)
        let k32 = wordInMemoryOrder
        let rotated = shift == 0 ? k32 : (k32 >> shift) | (k32 << (32 - shift))
        let k64 = UInt64(rotated) | UInt64(rotated) << 32
        var i = 0
        // 64 bytes per iteration: eight independent 8-byte words, four 16-byte vectors once
        // vectorised, and one loop test for them (`&-`, `&+`: i never passes count, so
        // nothing can overflow; the checked `i + 32 <= count` was half the loop's
        // instructions).
        while count &- i >= 64 {
            let p = start + i
            p.storeBytes(of: p.loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 8).storeBytes(of: (p + 8).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 16).storeBytes(of: (p + 16).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 24).storeBytes(of: (p + 24).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 32).storeBytes(of: (p + 32).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 40).storeBytes(of: (p + 40).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 48).storeBytes(of: (p + 48).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            (p + 56).storeBytes(of: (p + 56).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            i &+= 64
        }
        while count &- i >= 8 {
            let p = start + i
            p.storeBytes(of: p.loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            i &+= 8
        }
        // The key repeats every 4 bytes, so after a 4-byte step the next byte's is k64's first.
        if count &- i >= 4 {
            let p = start + i
            p.storeBytes(of: p.loadUnaligned(as: UInt32.self) ^ rotated, as: UInt32.self)
            i &+= 4
        }
        var rest = k64
        while i < count {
            let p = start + i
            p.storeBytes(of: p.load(as: UInt8.self) ^ UInt8(truncatingIfNeeded: rest), as: UInt8.self)
            rest >>= 8
            i &+= 1
        }
    }

    /// Copies `count` bytes from `source` to `destination`, masking them on the way
    /// (one pass instead of copy-then-mask). The ranges must not overlap.
    @inlinable
    public func copyMasked(from source: UnsafeRawPointer, to destination: UnsafeMutableRawPointer,
                           count: Int, payloadOffset offset: Int = 0) {
        if count <= 0 { return }
        let shift = UInt32((offset & 3) * 8)
        let k32 = wordInMemoryOrder
        let rotated = shift == 0 ? k32 : (k32 >> shift) | (k32 << (32 - shift))
        let k64 = UInt64(rotated) | UInt64(rotated) << 32
        var i = 0
        while count &- i >= 8 {
            (destination + i).storeBytes(of: (source + i).loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            i &+= 8
        }
        // A line's tail: one 4-byte step before single bytes (the key repeats every 4).
        if count &- i >= 4 {
            (destination + i).storeBytes(of: (source + i).loadUnaligned(as: UInt32.self) ^ rotated, as: UInt32.self)
            i &+= 4
        }
        var rest = k64
        while i < count {
            (destination + i).storeBytes(of: (source + i).load(as: UInt8.self) ^ UInt8(truncatingIfNeeded: rest),
                                         as: UInt8.self)
            rest >>= 8
            i &+= 1
        }
    }

    /// The masked (or unmasked) copy of `payload`.
    public func masking(_ payload: [UInt8], payloadOffset offset: Int = 0) -> [UInt8] {
        var copy = payload
        copy.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { apply(to: base, count: raw.count, payloadOffset: offset) }
        }
        return copy
    }
}

#if _endian(big)
#error("MaskingKey.apply assumes a little-endian machine")
#endif
