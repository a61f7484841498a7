/// Incremental, fail-fast UTF-8 validation (RFC 3629; RFC 6455 §8.1).
///
/// Bytes may arrive in any number of pieces: a code point split across frames or reads
/// carries its state over. Validation fails at the first byte that no valid UTF-8 text
/// can continue with (an overlong form, a surrogate, a code point above U+10FFFF, a stray
/// continuation byte), not at the end of the message; only a sequence cut short by the end
/// of the message is found at the end (`isComplete` is false then).
public struct UTF8Validator: Sendable, Equatable {
    // States: what the next byte must be.
    @usableFromInline static let accept: UInt8 = 0   // a lead byte (or ASCII)
    @usableFromInline static let tail1: UInt8 = 1    // one more 80..BF
    @usableFromInline static let tail2: UInt8 = 2    // two more 80..BF
    @usableFromInline static let tail3: UInt8 = 3    // three more 80..BF
    @usableFromInline static let afterE0: UInt8 = 4  // A0..BF, then one more
    @usableFromInline static let afterED: UInt8 = 5  // 80..9F (no surrogates), then one more
    @usableFromInline static let afterF0: UInt8 = 6  // 90..BF (no overlong), then two more
    @usableFromInline static let afterF4: UInt8 = 7  // 80..8F (≤ U+10FFFF), then two more

    @usableFromInline var state: UInt8 = 0

    public init() {}

    /// True when the bytes seen so far end on a code point boundary.
    @inlinable public var isComplete: Bool { state == UTF8Validator.accept }

    /// Validates the next piece. Returns nil while the text can still be valid, or the
    /// index (in `bytes`) of the first byte that makes it invalid; the validator is then
    /// left in an unspecified state.
    @inlinable
    public mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        return validate(base, count: bytes.count)
    }

    @inlinable
    public mutating func validate(_ base: UnsafeRawPointer, count: Int) -> Int? {
        var i = 0
        var s = state
        while i < count {
            if s == UTF8Validator.accept {
                // ASCII fast path: 32 bytes a step while they are ASCII (one test for four
                // loads; JSON lines of a few hundred bytes), then eight at a time.
                while i + 32 <= count {
                    let p = base + i
                    let any = p.loadUnaligned(as: UInt64.self) | (p + 8).loadUnaligned(as: UInt64.self)
                        | (p + 16).loadUnaligned(as: UInt64.self) | (p + 24).loadUnaligned(as: UInt64.self)
                    if any & 0x8080_8080_8080_8080 != 0 { break }
                    i += 32
                }
                while i + 8 <= count, (base + i).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    i += 8
                }
                // Fewer than eight bytes left: one load of the last eight (overlapping bytes
                // already checked) settles an ASCII tail.
                if i < count && i + 8 > count && count >= 8
                    && (base + count - 8).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    i = count
                }
                if i >= count { break }
            }
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            if s == UTF8Validator.accept && b < 0x80 {
                // ASCII tail of a short message: skip the state switch.
                i += 1
                continue
            }
            switch s {
            case UTF8Validator.accept:
                switch b {
                case 0x00...0x7F: break
                case 0xC2...0xDF: s = UTF8Validator.tail1
                case 0xE0: s = UTF8Validator.afterE0
                case 0xED: s = UTF8Validator.afterED
                case 0xE1...0xEF: s = UTF8Validator.tail2
                case 0xF0: s = UTF8Validator.afterF0
                case 0xF1...0xF3: s = UTF8Validator.tail3
                case 0xF4: s = UTF8Validator.afterF4
                default: state = s; return i
                }
            case UTF8Validator.tail1, UTF8Validator.tail2, UTF8Validator.tail3:
                guard b & 0xC0 == 0x80 else { state = s; return i }
                s -= 1
            case UTF8Validator.afterE0:
                guard b >= 0xA0 && b <= 0xBF else { state = s; return i }
                s = UTF8Validator.tail1
            case UTF8Validator.afterED:
                guard b >= 0x80 && b <= 0x9F else { state = s; return i }
                s = UTF8Validator.tail1
            case UTF8Validator.afterF0:
                guard b >= 0x90 && b <= 0xBF else { state = s; return i }
                s = UTF8Validator.tail2
            default: // afterF4
                guard b >= 0x80 && b <= 0x8F else { state = s; return i }
                s = UTF8Validator.tail2
            }
            i += 1
        }
        state = s
        return nil
    }

    /// Forgets any partial code point: ready for a new message.
    @inlinable public mutating func reset() { state = UTF8Validator.accept }

    /// Whether `bytes` as a whole is valid UTF-8.
    public static func isValid<C: Collection>(_ bytes: C) -> Bool where C.Element == UInt8 {
        var validator = UTF8Validator()
        let result: Int?? = bytes.withContiguousStorageIfAvailable { validator.validate(UnsafeRawBufferPointer($0)) }
        if let result {
            return result == nil && validator.isComplete
        }
        let array = Array(bytes)
        let failed = array.withUnsafeBytes { validator.validate($0) }
        return failed == nil && validator.isComplete
    }

    /// The index of the first byte that makes `bytes` invalid UTF-8 (`bytes.count` when the
    /// text ends inside a code point), or nil when it is valid.
    public static func firstInvalidIndex(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var validator = UTF8Validator()
        if let bad = validator.validate(bytes) { return bad }
        return validator.isComplete ? nil : bytes.count
    }
}
