// Masking (RFC 6455 §5.3) against a naive byte-by-byte XOR, at every payload offset, every
// small length and every pointer alignment, without touching bytes around the range.
import XCTest
@testable import WebSocketCore

final class MaskingTests: XCTestCase {
    static let keys = [rfcKey, MaskingKey(0x00, 0x00, 0x00, 0x00), MaskingKey(0xFF, 0x01, 0x80, 0x7F)]

    /// out[i] = in[i] ^ key[(offset + i) % 4]
    func reference(_ bytes: [UInt8], key: MaskingKey, offset: Int) -> [UInt8] {
        let k = key.array
        return bytes.enumerated().map { i, b in b ^ k[(offset + i) % 4] }
    }

    func testApplyMatchesReferenceForEveryOffsetLengthAndAlignment() {
        for key in Self.keys {
            for offset in 0...7 {
                for length in 0...140 {  // two turns of the 64-byte loop, then every tail
                    for alignment in 0...7 {
                        let payload = patternBytes(length, seed: UInt8(offset))
                        // Guard bytes around the payload must stay untouched.
                        var buffer = [UInt8](repeating: 0xA5, count: alignment) + payload + [UInt8](repeating: 0x5A, count: 16)
                        buffer.withUnsafeMutableBytes { raw in
                            key.apply(to: raw.baseAddress! + alignment, count: length, payloadOffset: offset)
                        }
                        let context = "key \(key) offset \(offset) length \(length) alignment \(alignment)"
                        XCTAssertEqual(Array(buffer[alignment..<(alignment + length)]), reference(payload, key: key, offset: offset), context)
                        XCTAssertTrue(buffer[..<alignment].allSatisfy { $0 == 0xA5 }, "wrote before the payload: \(context)")
                        XCTAssertTrue(buffer[(alignment + length)...].allSatisfy { $0 == 0x5A }, "wrote after the payload: \(context)")
                    }
                }
            }
        }
    }

    func testCopyMaskedMatchesReferenceForEveryOffsetLengthAndAlignment() {
        for key in Self.keys {
            for offset in 0...7 {
                for length in 0...140 {  // two turns of the 64-byte loop, then every tail
                    for alignment in 0...7 {
                        let payload = patternBytes(length, seed: UInt8(length & 0xFF))
                        let source = [UInt8](repeating: 0x11, count: alignment) + payload + [UInt8](repeating: 0x22, count: 16)
                        let sourceCopy = source
                        var destination = [UInt8](repeating: 0xA5, count: 7 - alignment + length + 16)
                        let destinationStart = 7 - alignment
                        source.withUnsafeBytes { src in
                            destination.withUnsafeMutableBytes { dst in
                                key.copyMasked(from: src.baseAddress! + alignment, to: dst.baseAddress! + destinationStart,
                                               count: length, payloadOffset: offset)
                            }
                        }
                        let context = "key \(key) offset \(offset) length \(length) alignment \(alignment)"
                        XCTAssertEqual(Array(destination[destinationStart..<(destinationStart + length)]),
                                       reference(payload, key: key, offset: offset), context)
                        XCTAssertTrue(destination[..<destinationStart].allSatisfy { $0 == 0xA5 }, "wrote before: \(context)")
                        XCTAssertTrue(destination[(destinationStart + length)...].allSatisfy { $0 == 0xA5 }, "wrote after: \(context)")
                        XCTAssertEqual(source, sourceCopy, "source modified: \(context)")
                    }
                }
            }
        }
    }

    func testMaskingArrayMatchesReference() {
        for offset in 0...7 {
            for length in [0, 1, 3, 4, 5, 8, 31, 32, 33, 64, 65, 1000] {
                let payload = patternBytes(length)
                XCTAssertEqual(rfcKey.masking(payload, payloadOffset: offset), reference(payload, key: rfcKey, offset: offset),
                               "offset \(offset) length \(length)")
            }
        }
    }

    func testMaskingTwiceIsIdentity() {
        for offset in 0...7 {
            for length in 0...70 {
                let payload = patternBytes(length, seed: 3)
                let twice = rfcKey.masking(rfcKey.masking(payload, payloadOffset: offset), payloadOffset: offset)
                XCTAssertEqual(twice, payload, "offset \(offset) length \(length)")
            }
        }
    }

    func testApplyTwiceInPlaceIsIdentity() {
        var payload = patternBytes(1027)
        let original = payload
        payload.withUnsafeMutableBytes { raw in
            rfcKey.apply(to: raw.baseAddress!, count: raw.count)
            rfcKey.apply(to: raw.baseAddress!, count: raw.count)
        }
        XCTAssertEqual(payload, original)
    }

    func testMaskingInTwoPiecesAtEverySplitEqualsMaskingWhole() {
        let payload = patternBytes(70, seed: 5)
        let whole = rfcKey.masking(payload)
        for split in 0...payload.count {
            var pieces = payload
            pieces.withUnsafeMutableBytes { raw in
                rfcKey.apply(to: raw.baseAddress!, count: split, payloadOffset: 0)
                rfcKey.apply(to: raw.baseAddress! + split, count: payload.count - split, payloadOffset: split)
            }
            XCTAssertEqual(pieces, whole, "split at \(split)")
        }
    }

    func testCopyMaskedInThreePiecesAtEverySplitEqualsMaskingWhole() {
        let payload = patternBytes(40, seed: 6)
        let whole = rfcKey.masking(payload)
        for first in 0...payload.count {
            for second in first...payload.count {
                var out = [UInt8](repeating: 0, count: payload.count)
                payload.withUnsafeBytes { src in
                    out.withUnsafeMutableBytes { dst in
                        for (from, to) in [(0, first), (first, second), (second, payload.count)] {
                            rfcKey.copyMasked(from: src.baseAddress! + from, to: dst.baseAddress! + from,
                                              count: to - from, payloadOffset: from)
                        }
                    }
                }
                XCTAssertEqual(out, whole, "splits at \(first), \(second)")
            }
        }
    }

    func testMaskingAtRandomSplitPointsEqualsMaskingWhole() {
        var random = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let length = Int.random(in: 0...300, using: &random)
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let key = MaskingKey(UInt8.random(in: 0...255, using: &random), UInt8.random(in: 0...255, using: &random),
                                 UInt8.random(in: 0...255, using: &random), UInt8.random(in: 0...255, using: &random))
            let splits = ((0..<Int.random(in: 0...6, using: &random)).map { _ in Int.random(in: 0...length, using: &random) } + [0, length]).sorted()
            var pieces = payload
            pieces.withUnsafeMutableBytes { raw in
                for (from, to) in zip(splits, splits.dropFirst()) {
                    key.apply(to: raw.baseAddress! + from, count: to - from, payloadOffset: from)
                }
            }
            XCTAssertEqual(pieces, reference(payload, key: key, offset: 0), "length \(length) splits \(splits)")
        }
    }

    func testOffsetOnlyMattersModuloFour() {
        let payload = patternBytes(37)
        for offset in 0...3 {
            XCTAssertEqual(rfcKey.masking(payload, payloadOffset: offset), rfcKey.masking(payload, payloadOffset: offset + 4096))
        }
    }

    func testZeroCountDoesNothing() {
        var byte: UInt8 = 0x42
        withUnsafeMutableBytes(of: &byte) { raw in rfcKey.apply(to: raw.baseAddress!, count: 0) }
        XCTAssertEqual(byte, 0x42)
    }

    // MARK: MaskingKey and generator

    func testKeyFromArrayNeedsExactlyFourBytes() {
        XCTAssertEqual(MaskingKey([0x37, 0xfa, 0x21, 0x3d]), rfcKey)
        XCTAssertNil(MaskingKey([0x37, 0xfa, 0x21]))
        XCTAssertNil(MaskingKey([0x37, 0xfa, 0x21, 0x3d, 0x00]))
        XCTAssertNil(MaskingKey([]))
    }

    func testKeyArrayAndDescriptionAreInWireOrder() {
        XCTAssertEqual(rfcKey.array, [0x37, 0xfa, 0x21, 0x3d])
        XCTAssertEqual(rfcKey.description, "37fa213d")
    }

    func testKeyEqualityAndHashFollowTheBytes() {
        XCTAssertEqual(MaskingKey(1, 2, 3, 4), MaskingKey(1, 2, 3, 4))
        XCTAssertNotEqual(MaskingKey(1, 2, 3, 4), MaskingKey(4, 3, 2, 1))
        XCTAssertEqual(Set([MaskingKey(1, 2, 3, 4), MaskingKey(1, 2, 3, 4), MaskingKey(1, 2, 3, 5)]).count, 2)
    }

    func testFixedGeneratorRepeatsItsKey() {
        var keys = MaskingKeyGenerator.fixed(rfcKey)
        XCTAssertEqual(keys.next(), rfcKey)
        XCTAssertEqual(keys.next(), rfcKey)
    }

    func testSystemGeneratorGivesVaryingKeysAcrossRefills() {
        var keys = MaskingKeyGenerator.system
        // 1100 keys cross the 1024-key pool refill; 32-bit keys from a CSPRNG do not all repeat.
        let drawn = (0..<1100).map { _ in keys.next() }
        XCTAssertGreaterThan(Set(drawn).count, 1000)
        XCTAssertNotEqual(Array(drawn[0..<76]), Array(drawn[1024..<1100]), "the refilled pool repeats the first one")
    }

    func testSystemRandomBytesHaveTheRequestedCount() {
        XCTAssertEqual(SystemRandom.bytes(0).count, 0)
        XCTAssertEqual(SystemRandom.bytes(16).count, 16)
        XCTAssertNotEqual(SystemRandom.bytes(32), SystemRandom.bytes(32))
    }
}
