// Payload length encoding at its boundaries (RFC 6455 §5.2: 7-bit, 16-bit, 64-bit, minimal),
// the 64-bit length's top bit, and MessageReader's size limit.
import XCTest
@testable import WebSocketCore

final class FrameLengthTests: XCTestCase {
    /// (payload length, expected unmasked binary header bytes)
    static let vectors: [(UInt64, [UInt8])] = [
        (0, [0x82, 0x00]),
        (1, [0x82, 0x01]),
        (125, [0x82, 0x7D]),
        (126, [0x82, 0x7E, 0x00, 0x7E]),
        (127, [0x82, 0x7E, 0x00, 0x7F]),
        (65535, [0x82, 0x7E, 0xFF, 0xFF]),
        (65536, [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]),
        (1 << 32, [0x82, 0x7F, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]),
        (UInt64(Int64.max), [0x82, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
    ]

    func testEncodedSizeUsesMinimalLengthEncoding() {
        for (length, expected) in Self.vectors {
            XCTAssertEqual(FrameHeader(opcode: .binary, payloadLength: length).encodedSize, expected.count, "length \(length)")
            XCTAssertEqual(FrameHeader.encodedSize(payloadLength: length, masked: false), expected.count, "length \(length)")
            XCTAssertEqual(FrameHeader.encodedSize(payloadLength: length, masked: true), expected.count + 4, "length \(length)")
        }
    }

    func testUnmaskedHeaderBytesAtBoundaryLengths() {
        for (length, expected) in Self.vectors {
            XCTAssertEqual(FrameHeader(opcode: .binary, payloadLength: length).bytes, expected, "length \(length)")
        }
    }

    func testMaskedHeaderBytesAtBoundaryLengths() {
        for (length, unmasked) in Self.vectors {
            var expected = unmasked
            expected[1] |= 0x80
            expected += [0x37, 0xfa, 0x21, 0x3d]
            let header = FrameHeader(opcode: .binary, maskingKey: rfcKey, payloadLength: length)
            XCTAssertEqual(header.bytes, expected, "length \(length)")
            XCTAssertEqual(header.encodedSize, expected.count, "length \(length)")
        }
    }

    func testEncodeIntoReturnsSizeAndWritesNothingBeyondIt() {
        for (length, expected) in Self.vectors {
            for key in [nil, rfcKey] {
                let header = FrameHeader(fin: false, rsv: 0, opcode: .continuation, maskingKey: key, payloadLength: length)
                var buffer = [UInt8](repeating: 0xEE, count: FrameHeader.maximumSize + 4)
                let written = buffer.withUnsafeMutableBytes { header.encode(into: $0.baseAddress!) }
                XCTAssertEqual(written, header.encodedSize, "length \(length)")
                XCTAssertEqual(written, expected.count + (key == nil ? 0 : 4))
                XCTAssertEqual(buffer[0], 0x00, "FIN clear, continuation")
                XCTAssertEqual(Array(buffer[1..<expected.count]),
                               [expected[1] | (key == nil ? 0 : 0x80)] + Array(expected[2...]), "length \(length)")
                XCTAssertTrue(buffer[written...].allSatisfy { $0 == 0xEE }, "bytes written past the header")
            }
        }
    }

    /// The broadcast batch's header writer gives `encode(into:)`'s bytes for a final
    /// unmasked frame, and writes nothing past them.
    func testEncodeFinalWritesTheBytesOfAFinalUnmaskedHeader() {
        for (length, expected) in Self.vectors {
            for opcode in [Opcode.text, .binary] {
                var buffer = [UInt8](repeating: 0xEE, count: FrameHeader.maximumSize)
                let written = buffer.withUnsafeMutableBytes {
                    FrameHeader.encodeFinal(opcode, payloadLength: Int(length), into: $0.baseAddress!)
                }
                XCTAssertEqual(Array(buffer[..<written]), FrameHeader(opcode: opcode, payloadLength: length).bytes, "length \(length)")
                XCTAssertEqual(written, expected.count, "length \(length)")
                XCTAssertTrue(buffer[written...].allSatisfy { $0 == 0xEE }, "bytes written past the header")
            }
        }
    }

    func testFirstByteCarriesFinRsvAndOpcode() {
        XCTAssertEqual(FrameHeader(fin: true, rsv: 0b100, opcode: .text, payloadLength: 0).bytes, [0xC1, 0x00])
        XCTAssertEqual(FrameHeader(fin: true, rsv: 0b010, opcode: .text, payloadLength: 0).bytes, [0xA1, 0x00])
        XCTAssertEqual(FrameHeader(fin: true, rsv: 0b001, opcode: .text, payloadLength: 0).bytes, [0x91, 0x00])
        XCTAssertEqual(FrameHeader(fin: false, rsv: 0, opcode: .binary, payloadLength: 0).bytes, [0x02, 0x00])
        XCTAssertEqual(FrameHeader(opcode: .close, payloadLength: 0).bytes, [0x88, 0x00])
        XCTAssertEqual(FrameHeader(opcode: .pong, payloadLength: 0).bytes, [0x8A, 0x00])
    }

    func testHeaderParsesBackAtBoundaryLengths() {
        for (length, _) in Self.vectors {
            for key in [nil, rfcKey] {
                let header = FrameHeader(opcode: .binary, maskingKey: key, payloadLength: length)
                let run = runParser(header.bytes)
                XCTAssertNil(run.error, "length \(length)")
                if length == 0 {
                    XCTAssertEqual(run.rawEvents, [.header(header), .payload(header.encodedSize..<header.encodedSize, frameEnd: true)])
                    XCTAssertTrue(run.parser.isAtFrameBoundary)
                } else {
                    XCTAssertEqual(run.rawEvents, [.header(header)], "length \(length)")
                    XCTAssertFalse(run.parser.isAtFrameBoundary, "payload pending")
                }
            }
        }
    }

    func testHeaderParsesBackWhenFedByteByByte() {
        for (length, _) in Self.vectors {
            let header = FrameHeader(opcode: .binary, maskingKey: rfcKey, payloadLength: length)
            let bytes = header.bytes
            let run = runParser(bytes, splits: byteByByte(bytes.count))
            XCTAssertNil(run.error)
            XCTAssertEqual(run.rawEvents.first, .header(header), "length \(length)")
        }
    }

    func testSmallBoundaryFramesRoundTripWithPayload() {
        for length in [0, 1, 125, 126, 127, 65535, 65536] {
            let payload = patternBytes(length)
            let frame = serverFrame(.binary, payload)
            let run = runReader(frame)
            XCTAssertNil(run.error, "length \(length)")
            XCTAssertEqual(run.events, length == 0 ? [.start(.binary), .end] : [.start(.binary), .data(payload), .end],
                           "length \(length)")
        }
    }

    func testLengthWithTopBitSetIsProtocolError() {
        let run = runParser([0x82, 0x7F, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
        assertProtocolError(run.error)
        XCTAssertEqual(run.rawEvents, [])
    }

    func testAllOnesLengthIsProtocolError() {
        assertProtocolError(runParser([0x82, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]).error)
    }

    func testLengthWithTopBitSetIsProtocolErrorWhenFedByteByByte() {
        let bytes: [UInt8] = [0x81, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x01, 0x02, 0x03, 0x04]
        let run = runParser(bytes, splits: byteByByte(bytes.count))
        assertProtocolError(run.error)
    }

    func testLengthWithTopBitSetIsProtocolErrorForMessageReader() {
        assertProtocolError(runReader([0x82, 0x7F, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]).error)
    }

    // MARK: Size limit

    func testMessageAtTheLimitIsAccepted() {
        let payload = patternBytes(100)
        let run = runReader(serverFrame(.binary, payload), maximumMessageSize: 100)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data(payload), .end])
    }

    func testHeaderAnnouncingMoreThanTheLimitFailsBeforeAnyPayload() {
        // Only the header is fed: the reader must not wait for the payload.
        let run = runReader([0x82, 0x65], maximumMessageSize: 100)
        assertMessageTooBig(run.error)
        XCTAssertEqual(run.events, [])
    }

    func testTextHeaderAnnouncingMoreThanTheLimitFails() {
        let run = runReader([0x81, 0x7E, 0x01, 0x00], maximumMessageSize: 255)
        assertMessageTooBig(run.error)
    }

    func testHugeLengthFailsWithDefaultLimit() {
        // 2^62 bytes: a valid length (top bit clear) far beyond the default 64 MiB limit.
        let run = runReader([0x82, 0x7F, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
        assertMessageTooBig(run.error)
        XCTAssertEqual(run.events, [])
    }

    func testMaximumLengthFailsWithDefaultLimit() {
        let run = runReader(FrameHeader(opcode: .binary, payloadLength: UInt64(Int64.max)).bytes)
        assertMessageTooBig(run.error)
    }

    func testDefaultLimitIs64MiB() {
        XCTAssertEqual(MessageReader().maximumMessageSize, 64 << 20)
        XCTAssertNil(runReader(FrameHeader(opcode: .binary, payloadLength: 64 << 20).bytes).error)
        assertMessageTooBig(runReader(FrameHeader(opcode: .binary, payloadLength: (64 << 20) + 1).bytes).error)
    }

    func testFragmentsAddingUpPastTheLimitFailAtTheFragmentHeader() {
        let first = serverFrame(.binary, patternBytes(6), fin: false)
        let secondHeader = FrameHeader(fin: true, opcode: .continuation, payloadLength: 5).bytes
        let run = runReader(first + secondHeader, maximumMessageSize: 10)
        assertMessageTooBig(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data(patternBytes(6))])
    }

    func testFragmentsAddingUpToTheLimitAreAccepted() {
        let input = serverFrame(.text, utf8("abcd"), fin: false) + serverFrame(.continuation, utf8("efg"), fin: false)
            + serverFrame(.continuation, utf8("hij"))
        let run = runReader(input, maximumMessageSize: 10)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("abcdefghij")), .end])
    }

    func testLimitAppliesPerMessage() {
        let input = serverFrame(.binary, patternBytes(8)) + serverFrame(.binary, patternBytes(8))
        let run = runReader(input, maximumMessageSize: 10)
        XCTAssertNil(run.error, "two 8-byte messages under a 10-byte limit")
        XCTAssertEqual(run.events, [.start(.binary), .data(patternBytes(8)), .end, .start(.binary), .data(patternBytes(8)), .end])
    }

    func testControlFramesDoNotCountTowardsTheMessageLimit() {
        let input = serverFrame(.binary, patternBytes(8), fin: false) + serverFrame(.ping, patternBytes(100))
            + serverFrame(.continuation, patternBytes(2))
        let run = runReader(input, maximumMessageSize: 10)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data(patternBytes(8)), .ping(patternBytes(100)), .data(patternBytes(2)), .end])
    }
}
