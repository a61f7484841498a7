// UTF8Validator: RFC 3629 validity, fail-fast error positions, state carried across pieces,
// and agreement with Swift's own UTF-8 validation on random input.
import XCTest
@testable import WebSocketCore

final class UTF8ValidatorTests: XCTestCase {
    /// Validates `bytes` in one call: (index of the first bad byte, isComplete afterwards).
    func validate(_ bytes: [UInt8]) -> (Int?, Bool) {
        var validator = UTF8Validator()
        let bad = bytes.withUnsafeBytes { validator.validate($0) }
        return (bad, validator.isComplete)
    }

    static let validSequences: [(String, [UInt8])] = [
        ("NUL", [0x00]),
        ("DEL", [0x7F]),
        ("U+0080", [0xC2, 0x80]),
        ("é U+00E9", [0xC3, 0xA9]),
        ("U+07FF", [0xDF, 0xBF]),
        ("U+0800", [0xE0, 0xA0, 0x80]),
        ("€ U+20AC", [0xE2, 0x82, 0xAC]),
        ("U+D7FF", [0xED, 0x9F, 0xBF]),
        ("U+E000", [0xEE, 0x80, 0x80]),
        ("U+FFFD", [0xEF, 0xBF, 0xBD]),
        ("U+FFFF", [0xEF, 0xBF, 0xBF]),
        ("U+10000", [0xF0, 0x90, 0x80, 0x80]),
        ("😀 U+1F600", [0xF0, 0x9F, 0x98, 0x80]),
        ("U+40000", [0xF1, 0x80, 0x80, 0x80]),
        ("U+FFFFF", [0xF3, 0xBF, 0xBF, 0xBF]),
        ("U+100000", [0xF4, 0x80, 0x80, 0x80]),
        ("U+10FFFF", [0xF4, 0x8F, 0xBF, 0xBF]),
    ]

    /// (name, bytes, index of the first byte no valid text can continue with)
    static let invalidSequences: [(String, [UInt8], Int)] = [
        ("overlong NUL C0 80", [0xC0, 0x80], 0),
        ("overlong C1 BF", [0xC1, 0xBF], 0),
        ("overlong 3-byte E0 80 80", [0xE0, 0x80, 0x80], 1),
        ("overlong 3-byte E0 9F BF", [0xE0, 0x9F, 0xBF], 1),
        ("overlong 4-byte F0 80 80 80", [0xF0, 0x80, 0x80, 0x80], 1),
        ("overlong 4-byte F0 8F BF BF", [0xF0, 0x8F, 0xBF, 0xBF], 1),
        ("surrogate U+D800", [0xED, 0xA0, 0x80], 1),
        ("surrogate U+DFFF", [0xED, 0xBF, 0xBF], 1),
        ("above U+10FFFF F4 90 80 80", [0xF4, 0x90, 0x80, 0x80], 1),
        ("above U+10FFFF F4 BF BF BF", [0xF4, 0xBF, 0xBF, 0xBF], 1),
        ("stray continuation 80", [0x80], 0),
        ("stray continuation BF after ASCII", [0x61, 0xBF], 1),
        ("continuation after a complete code point", [0xC3, 0xA9, 0xA9], 2),
        ("lead then ASCII", [0xC3, 0x41], 1),
        ("3-byte lead, one continuation, then ASCII", [0xE2, 0x82, 0x41], 2),
        ("4-byte lead, two continuations, then lead", [0xF0, 0x9F, 0x98, 0xC3], 3),
        ("ab E0 80", [0x61, 0x62, 0xE0, 0x80], 3),
        ("after the 8-byte ASCII fast path", utf8("abcdefghij") + [0x80], 10),
        ("bad lead right after 8 ASCII bytes", utf8("abcdefgh") + [0xC0, 0x80], 8),
        ("bad byte inside an ASCII block", utf8("abc") + [0xFF] + utf8("defghijkl"), 3),
        ("valid 4-byte then surrogate", [0xF0, 0x9F, 0x98, 0x80, 0xED, 0xA0, 0x80], 5),
    ]

    // MARK: Valid text

    func testASCIIIsValid() {
        XCTAssertTrue(UTF8Validator.isValid(utf8("Hello, world! 0123456789 ~")))
        XCTAssertTrue(UTF8Validator.isValid([UInt8](0...0x7F)))
        XCTAssertEqual(validate(utf8(String(repeating: "abcdefgh", count: 100))).0, nil)
    }

    func testEmptyTextIsValid() {
        XCTAssertTrue(UTF8Validator.isValid([UInt8]()))
        XCTAssertNil(UTF8Validator.firstInvalidIndex(UnsafeRawBufferPointer(start: nil, count: 0)))
        var validator = UTF8Validator()
        XCTAssertTrue(validator.isComplete)
        XCTAssertNil(validator.validate(UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    func testMultiByteSequencesAreValid() {
        for (name, bytes) in Self.validSequences {
            let (bad, complete) = validate(bytes)
            XCTAssertNil(bad, name)
            XCTAssertTrue(complete, name)
            XCTAssertTrue(UTF8Validator.isValid(bytes), name)
        }
    }

    func testMixedTextIsValid() {
        let text = "ASCII then é, €, 😀, \u{10FFFF}, \u{FFFD} and more ASCII after them"
        XCTAssertTrue(UTF8Validator.isValid(utf8(text)))
        XCTAssertTrue(UTF8Validator.isValid(utf8(String(repeating: "日本語テキスト", count: 50))))
    }

    func testMultiByteSequencesAfterLongASCIIAreValid() {
        for (name, bytes) in Self.validSequences {
            for prefix in 0...17 {
                let text = patternBytes(prefix).map { $0 & 0x7F } + bytes + utf8("tail")
                XCTAssertNil(validate(text).0, "\(name) after \(prefix) ASCII bytes")
            }
        }
    }

    // MARK: Invalid text

    func testInvalidSequencesFailAtTheFirstBadByte() {
        for (name, bytes, index) in Self.invalidSequences {
            XCTAssertEqual(validate(bytes).0, index, name)
            XCTAssertFalse(UTF8Validator.isValid(bytes), name)
            XCTAssertEqual(bytes.withUnsafeBytes { UTF8Validator.firstInvalidIndex($0) }, index, name)
        }
    }

    func testBytesThatNeverAppearInUTF8FailAtOnce() {
        for byte in [0xC0, 0xC1] + Array(0xF5...0xFF) as [Int] {
            XCTAssertEqual(validate([UInt8(byte)]).0, 0, String(byte, radix: 16))
            XCTAssertEqual(validate(utf8("ok") + [UInt8(byte)] + utf8("ok")).0, 2, String(byte, radix: 16))
        }
    }

    func testEveryContinuationByteAloneFails() {
        for byte in UInt8(0x80)...0xBF {
            XCTAssertEqual(validate([byte]).0, 0, String(byte, radix: 16))
        }
    }

    func testInvalidInputDoesNotReportPastTheBadByte() {
        // "ab\xE0\x80": E0 could still start U+0800..U+0FFF; 80 cannot follow it.
        XCTAssertEqual(validate([0x61, 0x62, 0xE0, 0x80]).0, 3)
        // "\xED\xA0\x80": ED is fine; A0 would make a surrogate.
        XCTAssertEqual(validate([0xED, 0xA0, 0x80]).0, 1)
    }

    func testTruncatedSequencesAreIncompleteNotInvalid() {
        for (name, bytes) in Self.validSequences where bytes.count > 1 {
            for cut in 1..<bytes.count {
                let prefix = Array(bytes[0..<cut])
                let (bad, complete) = validate(utf8("x") + prefix)
                XCTAssertNil(bad, "\(name) cut at \(cut)")
                XCTAssertFalse(complete, "\(name) cut at \(cut)")
                XCTAssertFalse(UTF8Validator.isValid(prefix), "\(name) cut at \(cut)")
                XCTAssertEqual(prefix.withUnsafeBytes { UTF8Validator.firstInvalidIndex($0) }, cut, "\(name) cut at \(cut)")
            }
        }
    }

    func testIsValidAcceptsNonContiguousCollections() {
        XCTAssertTrue(UTF8Validator.isValid(utf8("héllo").lazy.map { $0 }))
        XCTAssertFalse(UTF8Validator.isValid([UInt8(0xED), 0xA0, 0x80].lazy.map { $0 }))
        XCTAssertFalse(UTF8Validator.isValid(Set([UInt8(0xFF)])))
        XCTAssertTrue(UTF8Validator.isValid(utf8("€")[...]))
    }

    // MARK: Pieces

    func testEveryValidSequenceSplitAtEveryPointValidates() {
        for (name, bytes) in Self.validSequences {
            let text = utf8("a") + bytes + utf8("z")
            for split in 0...text.count {
                var validator = UTF8Validator()
                XCTAssertNil(text[0..<split].withUnsafeBytes { validator.validate($0) }, "\(name) split at \(split)")
                let insideSequence = split > 1 && split < 1 + bytes.count
                XCTAssertEqual(validator.isComplete, !insideSequence, "\(name) split at \(split)")
                XCTAssertNil(text[split...].withUnsafeBytes { validator.validate($0) }, "\(name) split at \(split)")
                XCTAssertTrue(validator.isComplete, "\(name) split at \(split)")
            }
        }
    }

    func testValidSequencesFedByteByByteValidate() {
        for (name, bytes) in Self.validSequences {
            var validator = UTF8Validator()
            for (i, byte) in bytes.enumerated() {
                XCTAssertNil([byte].withUnsafeBytes { validator.validate($0) }, "\(name) byte \(i)")
                XCTAssertEqual(validator.isComplete, i == bytes.count - 1, "\(name) byte \(i)")
            }
        }
    }

    func testInvalidSequenceSplitAtEveryPointFailsAtTheSameByte() {
        for (name, bytes, index) in Self.invalidSequences {
            for split in 0...bytes.count {
                var validator = UTF8Validator()
                let first = bytes[0..<split].withUnsafeBytes { validator.validate($0) }
                if index < split {
                    XCTAssertEqual(first, index, "\(name) split at \(split)")
                } else {
                    XCTAssertNil(first, "\(name) split at \(split)")
                    XCTAssertEqual(bytes[split...].withUnsafeBytes { validator.validate($0) }, index - split,
                                   "\(name) split at \(split)")
                }
            }
        }
    }

    func testResetForgetsAPartialCodePoint() {
        var validator = UTF8Validator()
        XCTAssertNil([UInt8(0xE2)].withUnsafeBytes { validator.validate($0) })
        XCTAssertFalse(validator.isComplete)
        validator.reset()
        XCTAssertTrue(validator.isComplete)
        XCTAssertNil(utf8("a").withUnsafeBytes { validator.validate($0) })
        XCTAssertTrue(validator.isComplete)
    }

    // MARK: Against Swift's validation

    /// Reference for the fail-fast index: the first i such that bytes[0...i] is not the start
    /// of any valid UTF-8 text, found with Swift's own validation by trying completions.
    func referenceFirstBadIndex(_ bytes: [UInt8]) -> Int? {
        func canContinue(_ prefix: [UInt8]) -> Bool {
            if String(validating: prefix, as: UTF8.self) != nil { return true }
            // Any valid text can be completed by at most 3 continuation bytes; the first one
            // is restricted after E0, ED, F0, F4, and these three cover every allowed range.
            for first: UInt8 in [0x80, 0x90, 0xA0] {
                for extra in 0...2 {
                    let candidate = prefix + [first] + [UInt8](repeating: 0x80, count: extra)
                    if String(validating: candidate, as: UTF8.self) != nil { return true }
                }
            }
            return false
        }
        for i in bytes.indices where !canContinue(Array(bytes[0...i])) { return i }
        return nil
    }

    func randomBytes(_ random: inout SplitMix64) -> [UInt8] {
        // Biased towards the bytes that matter: ASCII, continuations, lead bytes and the
        // special leads E0 ED F0 F4.
        let interesting: [UInt8] = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                    0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF]
        let length = Int.random(in: 0...12, using: &random)
        return (0..<length).map { _ in
            Bool.random(using: &random) ? interesting.randomElement(using: &random)!
                : (Bool.random(using: &random) ? UInt8.random(in: 0x80...0xBF, using: &random)
                    : UInt8.random(in: 0...255, using: &random))
        }
    }

    func testAgreesWithSwiftOnRandomByteStrings() {
        var random = SplitMix64(seed: 0x00C0_FFEE)
        var validCount = 0
        for _ in 0..<4000 {
            let bytes = randomBytes(&random)
            let swiftSays = String(validating: bytes, as: UTF8.self) != nil
            if swiftSays { validCount += 1 }
            XCTAssertEqual(UTF8Validator.isValid(bytes), swiftSays, "\(printable(bytes))")
        }
        XCTAssertGreaterThan(validCount, 200, "the generator should produce valid text too")
    }

    func testFailsFastAtTheSameIndexAsReferenceOnRandomByteStrings() {
        var random = SplitMix64(seed: 0xBAD_B17E)
        for _ in 0..<3000 {
            let bytes = randomBytes(&random)
            let (bad, complete) = validate(bytes)
            let expected = referenceFirstBadIndex(bytes)
            XCTAssertEqual(bad, expected, "\(printable(bytes))")
            if expected == nil {
                XCTAssertEqual(complete, String(validating: bytes, as: UTF8.self) != nil, "\(printable(bytes))")
            }
        }
    }

    func testRandomSplitsGiveTheSameResultAsOneCall() {
        var random = SplitMix64(seed: 7)
        for _ in 0..<3000 {
            let bytes = randomBytes(&random)
            let split = Int.random(in: 0...bytes.count, using: &random)
            let (whole, wholeComplete) = validate(bytes)
            var validator = UTF8Validator()
            var result: Int?
            if let bad = bytes[0..<split].withUnsafeBytes({ validator.validate($0) }) {
                result = bad
            } else if let bad = bytes[split...].withUnsafeBytes({ validator.validate($0) }) {
                result = split + bad
            }
            XCTAssertEqual(result, whole, "\(printable(bytes)) split at \(split)")
            if whole == nil { XCTAssertEqual(validator.isComplete, wholeComplete) }
        }
    }

    func testLongRandomValidTextValidates() {
        var random = SplitMix64(seed: 99)
        var scalars = String.UnicodeScalarView()
        while scalars.count < 5000 {
            let value = UInt32.random(in: 0...0x10FFFF, using: &random)
            if let scalar = Unicode.Scalar(value) { scalars.append(scalar) }
        }
        let text = utf8(String(scalars))
        XCTAssertTrue(UTF8Validator.isValid(text))
        // A byte changed to 0xFF fails exactly there, whether it was a lead or a
        // continuation byte (the text before it is then a valid start, cut short).
        for position in stride(from: 0, to: text.count, by: 97) {
            var broken = text
            broken[position] = 0xFF
            XCTAssertEqual(validate(broken).0, position, "position \(position)")
        }
    }
}
