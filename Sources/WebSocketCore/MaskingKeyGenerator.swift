import CWSPipeShims

/// Where masking keys come from. RFC 6455 §5.3 asks for a fresh key per frame, "derived
/// from a strong source of entropy" and unpredictable to the application.
///
/// `.system` reads the kernel CSPRNG (getrandom(2)) 4 KiB at a time and hands out four
/// bytes per frame, so a burst of two million small frames costs about two thousand
/// syscalls instead of two million. Tests use `.fixed` to reproduce RFC examples.
public struct MaskingKeyGenerator: Sendable {
    private enum Source: Sendable {
        case system
        case fixed(MaskingKey)
    }

    private let source: Source
    private var pool: [UInt32] = []
    private var used = 0

    private init(source: Source) { self.source = source }

    /// Keys from the kernel's CSPRNG.
    public static var system: MaskingKeyGenerator { MaskingKeyGenerator(source: .system) }

    /// The same key every time: for tests and reproducible examples only.
    public static func fixed(_ key: MaskingKey) -> MaskingKeyGenerator { MaskingKeyGenerator(source: .fixed(key)) }

    public mutating func next() -> MaskingKey {
        switch source {
        case .fixed(let key):
            return key
        case .system:
            if used == pool.count { refill() }
            let word = pool[used]
            used += 1
            return MaskingKey(UInt8(truncatingIfNeeded: word), UInt8(truncatingIfNeeded: word >> 8),
                              UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 24))
        }
    }

    private mutating func refill() {
        pool = [UInt32](repeating: 0, count: 1024)
        used = 0
        pool.withUnsafeMutableBytes { SystemRandom.fill($0) }
    }
}

/// Random bytes from the kernel CSPRNG.
public enum SystemRandom {
    /// Fills `buffer` from getrandom(2). The kernel call cannot fail once the pool is
    /// initialised on any kernel this tool supports (3.17+); if it does, continuing with
    /// predictable keys would be worse than stopping.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        if wsp_getrandom(base, buffer.count) != 0 {
            fatalError("getrandom(2) failed: no source of randomness for masking keys")
        }
    }

    /// `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}
