/// SHA-1 (FIPS 180-4), used only for the opening handshake's `Sec-WebSocket-Accept`
/// (RFC 6455 §4.2.2, §1.3). Kept here so that ws:// sessions never load OpenSSL: linking
/// and initialising libcrypto for one 60-byte hash costs several megabytes of RSS.
/// SHA-1's weaknesses do not matter for this use (it is a handshake echo, not security).
public struct SHA1: Sendable {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    private var block = [UInt8]()
    private var length: UInt64 = 0

    public init() { block.reserveCapacity(64) }

    /// The 20-byte digest of `bytes`.
    public static func hash<C: Collection>(_ bytes: C) -> [UInt8] where C.Element == UInt8 {
        var sha = SHA1()
        sha.update(bytes)
        return sha.finalize()
    }

    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        for byte in bytes {
            block.append(byte)
            if block.count == 64 {
                compress()
                block.removeAll(keepingCapacity: true)
            }
        }
        length &+= UInt64(bytes.count)
    }

    /// Pads, processes the last block and returns the digest. The value is consumed.
    public consuming func finalize() -> [UInt8] {
        let bitLength = length &* 8
        block.append(0x80)
        if block.count > 56 {
            while block.count < 64 { block.append(0) }
            compress()
            block.removeAll(keepingCapacity: true)
        }
        while block.count < 56 { block.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { block.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        compress()
        var out = [UInt8]()
        out.reserveCapacity(20)
        for word in [h.0, h.1, h.2, h.3, h.4] {
            out += [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8),
                    UInt8(truncatingIfNeeded: word)]
        }
        return out
    }

    private mutating func compress() {
        var w = [UInt32](repeating: 0, count: 80)
        for t in 0..<16 {
            w[t] = UInt32(block[4 * t]) << 24 | UInt32(block[4 * t + 1]) << 16 | UInt32(block[4 * t + 2]) << 8
                | UInt32(block[4 * t + 3])
        }
        for t in 16..<80 {
            let x = w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]
            w[t] = x << 1 | x >> 31
        }
        var (a, b, c, d, e) = h
        for t in 0..<80 {
            let f: UInt32
            let k: UInt32
            switch t {
            case 0..<20: f = (b & c) | (~b & d); k = 0x5A82_7999
            case 20..<40: f = b ^ c ^ d; k = 0x6ED9_EBA1
            case 40..<60: f = (b & c) | (b & d) | (c & d); k = 0x8F1B_BCDC
            default: f = b ^ c ^ d; k = 0xCA62_C1D6
            }
            let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[t]
            e = d
            d = c
            c = b << 30 | b >> 2
            b = a
            a = temp
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
    }
}
