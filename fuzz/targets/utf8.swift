// libFuzzer target `utf8`: UTF8Validator against Swift's own UTF-8 decoding.
//
// Compiled into the WebSocketCore module itself (see fuzz/run).
//
// Input: byte 0 and 1 choose two cut points (0...n), the rest is the text.
//
// Checks:
//   - the verdict for the whole input equals String(validating:as:)'s
//   - the first invalid index is the one Unicode.UTF8.ForwardParser implies: the start of
//     its first error when that byte cannot start a sequence, else the byte after the
//     maximal valid subpart (or n when that subpart runs to the end: a truncated sequence)
//   - the same index and verdict when the input is validated in one, two or three pieces
//     (each an exact-size allocation, so the 8-byte ASCII fast path cannot read past it)
//   - isValid on a non-contiguous collection and firstInvalidIndex agree

/// Validates `bytes` cut at `cuts`, each piece in its own exact-size buffer; returns the
/// first invalid index (count for a truncated sequence) or nil.
func validateInPieces(_ bytes: [UInt8], cuts: [Int]) -> Int? {
    var validator = UTF8Validator()
    let bounds = [0] + cuts + [bytes.count]
    for p in 0..<(bounds.count - 1) {
        let piece = exactCopy(bytes[bounds[p]..<bounds[p + 1]], nilWhenEmpty: p % 2 == 1)
        defer { release(piece) }
        if let bad = validator.validate(piece) {
            check(bad >= 0 && bad < piece.count, "index outside the piece")
            return bounds[p] + bad
        }
    }
    return validator.isComplete ? nil : bytes.count
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUTF8(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 2 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let text = Array(input[2...])
    let n = text.count
    let c1 = Int(input[0]) % (n + 1), c2 = Int(input[1]) % (n + 1)

    let swiftValid = String(validating: text, as: UTF8.self) != nil
    let expected = referenceFirstInvalid(text)
    check(swiftValid == (expected == nil), "the reference disagrees with String(validating:)")

    let wholeCopy = exactCopy(text)
    defer { release(wholeCopy) }
    let whole = UTF8Validator.firstInvalidIndex(wholeCopy)
    check(whole == expected, "firstInvalidIndex \(String(describing: whole)), Swift's decoder \(String(describing: expected))")
    check(UTF8Validator.isValid(text) == swiftValid, "isValid([UInt8]) disagrees with Swift")
    check(UTF8Validator.isValid(text.lazy.map { $0 }) == swiftValid, "isValid(non-contiguous) disagrees with Swift")
    check(validateInPieces(text, cuts: []) == expected)
    check(validateInPieces(text, cuts: [c1]) == expected, "split at \(c1) changes the verdict")
    check(validateInPieces(text, cuts: [min(c1, c2), max(c1, c2)]) == expected, "split at \(c1), \(c2) changes the verdict")

    // String(decoding:) round trip: valid text comes back unchanged, invalid text does not.
    let roundTrip = Array(String(decoding: text, as: UTF8.self).utf8)
    check((roundTrip == text) == swiftValid, "String(decoding:) round trip disagrees")
    return 0
}
