/// Base64 with the standard alphabet and padding (RFC 4648 §4), as used by
/// `Sec-WebSocket-Key`, `Sec-WebSocket-Accept` and Basic authentication.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The padded base64 text of `bytes`.
    public static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        let input = Array(bytes)
        var out = [UInt8]()
        out.reserveCapacity((input.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= input.count {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = input.count - i
        if rest == 1 {
            let n = UInt32(input[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of padded base64 `text`, or nil if it is not canonical base64 (wrong
    /// length, a character outside the alphabet, misplaced padding, non-zero pad bits).
    public static func decode(_ text: String) -> [UInt8]? {
        Array(text.utf8).withUnsafeBytes { decode(bytes: $0) }
    }

    /// `decode(_:)` over raw bytes (a stdin line, without copying it into a String first).
    /// A table lookup per character, written into the result in place: the `--jsonl` relay
    /// of Autobahn's 12.x binary messages spent 10 % of the client's CPU in the per-byte
    /// appends of the first version.
    public static func decode(bytes input: UnsafeRawBufferPointer) -> [UInt8]? {
        guard input.count % 4 == 0 else { return nil }
        guard input.count > 0 else { return [] }
        let equals = UInt8(ascii: "=")
        let pad = input[input.count - 1] != equals ? 0 : input[input.count - 2] != equals ? 1 : 2
        let groups = input.count / 4
        let outCount = groups * 3 - pad
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: outCount) { buffer, initialized in
            values.withUnsafeBufferPointer { table in
                var i = 0
                var o = 0
                // Groups without padding; '=' is outside the table, so a misplaced one fails here.
                for _ in 0..<(pad == 0 ? groups : groups - 1) {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])], c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else { valid = false; return }
                    let n = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    buffer[o] = UInt8(truncatingIfNeeded: n >> 16)
                    buffer[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
                    buffer[o + 2] = UInt8(truncatingIfNeeded: n)
                    i += 4
                    o += 3
                }
                guard pad > 0 else { return }
                // The last group: two or three characters, then the padding; the pad bits zero.
                let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                let c = pad == 1 ? table[Int(input[i + 2])] : 0
                guard (a | b | c) & 0xC0 == 0 else { valid = false; return }
                let n = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                buffer[o] = UInt8(truncatingIfNeeded: n >> 16)
                if pad == 1 {
                    buffer[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
                    if n & 0xFF != 0 { valid = false }
                } else if n >> 8 & 0xFF != 0 {
                    valid = false
                }
            }
            initialized = valid ? outCount : 0
        }
        return valid ? out : nil
    }

    /// Each byte's 6-bit value in `alphabet`, 0xFF for bytes outside it (`=` included).
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()
}
