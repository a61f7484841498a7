/// Sizes for messages: "100 MiB", "1.5 KiB", "512 B" (binary multiples up to GiB, at most
/// one decimal). Exact counts belong where a rounded one would mislead (see `pair`).
public enum ByteCount {
    /// `bytes` in the largest unit (B, KiB, MiB, GiB) that keeps the number at least 1.
    public static func text(_ bytes: UInt64) -> String {
        guard bytes >= 1024 else { return "\(bytes) B" }
        var value = Double(bytes) / 1024
        var unit = 0
        let units = ["KiB", "MiB", "GiB"]
        // Rounded to one decimal; 1023.96 KiB is shown as 1 MiB, not 1024 KiB.
        while unit < units.count - 1 && (value * 10).rounded() / 10 >= 1024 {
            value /= 1024
            unit += 1
        }
        let tenths = (value * 10).rounded() / 10
        let number = tenths == tenths.rounded() && tenths < 1e15 ? String(Int64(tenths)) : String(tenths)
        return "\(number) \(units[unit])"
    }

    /// Two sizes to compare in one sentence; when they round to the same text, both also
    /// say their exact byte counts ("64 KiB (65537 bytes)" and "64 KiB (65536 bytes)").
    public static func pair(_ a: UInt64, _ b: UInt64) -> (String, String) {
        let (x, y) = (text(a), text(b))
        guard x == y else { return (x, y) }
        return ("\(x) (\(a) bytes)", "\(y) (\(b) bytes)")
    }
}
