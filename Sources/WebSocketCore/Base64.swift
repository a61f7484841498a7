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
    public static func decode(bytes input: UnsafeRawBufferPointer) -> [UInt8]? {
        guard input.count % 4 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(input.count / 4 * 3)
        var i = 0
        while i < input.count {
            var n: UInt32 = 0
            var pad = 0
            for j in 0..<4 {
                let c = input[i + j]
                let v: UInt32
                switch c {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
                case UInt8(ascii: "+"): v = 62
                case UInt8(ascii: "/"): v = 63
                case UInt8(ascii: "="):
                    // Padding only in the last group's last one or two places.
                    guard i + 4 == input.count, j >= 2 else { return nil }
                    pad += 1
                    v = 0
                default: return nil
                }
                if pad > 0 && c != UInt8(ascii: "=") { return nil }
                n = n << 6 | v
            }
            out.append(UInt8(n >> 16))
            if pad < 2 { out.append(UInt8(n >> 8 & 0xFF)) } else if n >> 8 & 0xFF != 0 { return nil }
            if pad < 1 { out.append(UInt8(n & 0xFF)) } else if n & 0xFF != 0 { return nil }
            i += 4
        }
        return out
    }
}
