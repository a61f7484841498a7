// Feeding input in pieces must not change what the parsers report: the same headers, the
// same payload bytes (as adjacent ranges), the same frame ends and messages.
import XCTest
@testable import WebSocketCore

final class IncrementalParsingTests: XCTestCase {
    /// Server-side (unmasked) vectors, readable by MessageReader too.
    static let serverVectors: [(String, [UInt8])] = [
        ("unmasked Hello", RFCExampleFrameTests.unmaskedHello),
        ("fragmented Hello", RFCExampleFrameTests.fragmentHel + RFCExampleFrameTests.fragmentLo),
        ("unmasked Ping", RFCExampleFrameTests.unmaskedPing),
        ("256-byte binary", RFCExampleFrameTests.binary256Header + patternBytes(256)),
        ("64 KiB binary", RFCExampleFrameTests.binary64KHeader + patternBytes(65536)),
        ("empty text", [0x81, 0x00]),
        ("several frames", severalFrames),
    ]

    /// Client-side (masked) vectors: FrameParser only.
    static let maskedVectors: [(String, [UInt8])] = [
        ("masked Hello", RFCExampleFrameTests.maskedHello),
        ("masked Ping", RFCExampleFrameTests.maskedPing),
        ("masked Pong", RFCExampleFrameTests.maskedPong),
        ("masked 126-byte", FrameEncoder.frame(opcode: .binary, payload: patternBytes(126), maskingKey: rfcKey)),
        ("masked empty Close", FrameEncoder.frame(opcode: .close, payload: [], maskingKey: rfcKey)),
    ]

    /// A text message in three fragments with a ping and an empty pong between them, an
    /// empty binary message, a 300-byte binary message and a Close.
    static let severalFrames: [UInt8] =
        serverFrame(.text, utf8("caf"), fin: false)
        + serverFrame(.ping, utf8("p1"))
        + serverFrame(.continuation, [0xC3], fin: false)     // é split across fragments
        + serverFrame(.pong, [])
        + serverFrame(.continuation, [0xA9] + utf8(" ok"))
        + serverFrame(.binary, [])
        + serverFrame(.binary, patternBytes(300))
        + serverFrame(.close, [0x03, 0xE8] + utf8("done"))

    static var allVectors: [(String, [UInt8])] { serverVectors + maskedVectors }

    // MARK: FrameParser

    func testSeveralFramesInOneBufferParse() {
        let run = runParser(Self.severalFrames)
        XCTAssertNil(run.error)
        let headers = run.rawEvents.compactMap { event -> Opcode? in
            if case .header(let header) = event { return header.opcode }
            return nil
        }
        XCTAssertEqual(headers, [.text, .ping, .continuation, .pong, .continuation, .binary, .binary, .close])
        XCTAssertEqual(run.rawEvents.count, 16, "one header and one payload event per frame")
        XCTAssertTrue(run.parser.isAtFrameBoundary)
    }

    func testByteByByteFeedingGivesTheSameFrameEvents() {
        for (name, vector) in Self.allVectors where vector.count < 4096 {
            let whole = runParser(vector)
            XCTAssertNil(whole.error, name)
            let pieces = runParser(vector, splits: byteByByte(vector.count))
            XCTAssertNil(pieces.error, name)
            XCTAssertEqual(pieces.events, whole.events, name)
            XCTAssertTrue(pieces.parser.isAtFrameBoundary, name)
        }
    }

    func testByteByByteFeedingOf64KiBFrameGivesTheSameFrameEvents() {
        let vector = RFCExampleFrameTests.binary64KHeader + patternBytes(65536)
        let whole = runParser(vector)
        let pieces = runParser(vector, splits: byteByByte(vector.count))
        XCTAssertNil(pieces.error)
        XCTAssertEqual(pieces.events, whole.events)
        XCTAssertEqual(pieces.rawEvents.count, 1 + 65536, "a header, then one event per payload byte")
    }

    func testEveryTwoWaySplitGivesTheSameFrameEvents() {
        for (name, vector) in Self.allVectors {
            let whole = runParser(vector).events
            for split in twoWaySplits(vector.count) {
                let run = runParser(vector, splits: split)
                XCTAssertNil(run.error, "\(name) split at \(split)")
                XCTAssertEqual(run.events, whole, "\(name) split at \(split)")
                XCTAssertTrue(run.parser.isAtFrameBoundary, "\(name) split at \(split)")
            }
        }
    }

    func testOnlyTheLastPayloadPieceEndsTheFrameAndNoPieceIsEmpty() {
        for (name, vector) in Self.allVectors where vector.count < 4096 {
            for splits in twoWaySplits(vector.count) + [byteByByte(vector.count)] {
                let run = runParser(vector, splits: splits)
                var zeroLengthFrame = false
                for event in run.rawEvents {
                    switch event {
                    case .header(let header): zeroLengthFrame = header.payloadLength == 0
                    case .payload(let range, let end):
                        if range.isEmpty {
                            XCTAssertTrue(end && zeroLengthFrame, "\(name) \(splits): empty piece \(event)")
                        }
                    }
                }
            }
        }
    }

    func testRandomMultiWaySplitsGiveTheSameFrameEvents() {
        var random = SplitMix64(seed: 0x5EED_0001)
        for (name, vector) in Self.allVectors {
            let whole = runParser(vector).events
            for _ in 0..<50 {
                let count = Int.random(in: 2...8, using: &random)
                let splits = (0..<count).map { _ in Int.random(in: 0...vector.count, using: &random) }.sorted()
                let run = runParser(vector, splits: splits)
                XCTAssertEqual(run.events, whole, "\(name) split at \(splits)")
            }
        }
    }

    func testParserIsNotAtFrameBoundaryInsideAHeader() {
        let frame = RFCExampleFrameTests.binary64KHeader
        for cut in 1..<frame.count {
            let run = runParser(Array(frame[0..<cut]))
            XCTAssertEqual(run.rawEvents, [], "cut at \(cut)")
            XCTAssertFalse(run.parser.isAtFrameBoundary, "cut at \(cut)")
        }
    }

    func testEmptyInputGivesNoEvent() {
        let run = runParser([])
        XCTAssertEqual(run.rawEvents, [])
        XCTAssertTrue(run.parser.isAtFrameBoundary)
    }

    func testReservedOpcodeIsFoundInASplitHeader() {
        let bytes: [UInt8] = [0x83, 0x7E, 0x00, 0x80]
        for split in twoWaySplits(bytes.count) + [byteByByte(bytes.count)] {
            assertProtocolError(runParser(bytes, splits: split).error)
        }
    }

    // MARK: MessageReader

    func testByteByByteFeedingGivesTheSameMessages() {
        for (name, vector) in Self.serverVectors {
            let whole = runReader(vector)
            XCTAssertNil(whole.error, name)
            let pieces = runReader(vector, splits: byteByByte(vector.count))
            XCTAssertNil(pieces.error, name)
            XCTAssertEqual(pieces.events, whole.events, name)
        }
    }

    func testEveryTwoWaySplitGivesTheSameMessages() {
        for (name, vector) in Self.serverVectors where vector.count < 4096 {
            let whole = runReader(vector).events
            for split in twoWaySplits(vector.count) {
                let run = runReader(vector, splits: split)
                XCTAssertNil(run.error, "\(name) split at \(split)")
                XCTAssertEqual(run.events, whole, "\(name) split at \(split)")
            }
        }
    }

    func testChosenTwoWaySplitsOf64KiBFrameGiveTheSameMessage() {
        let payload = patternBytes(65536)
        let vector = RFCExampleFrameTests.binary64KHeader + payload
        let splits = Array(0...20) + Array(stride(from: 21, to: vector.count - 20, by: 1021)) + Array((vector.count - 20)...vector.count)
        for split in splits {
            let run = runReader(vector, splits: [split])
            XCTAssertNil(run.error, "split at \(split)")
            XCTAssertEqual(run.events, [.start(.binary), .data(payload), .end], "split at \(split)")
        }
    }

    func testSeveralFramesReadAsMessagesControlFramesAndClose() {
        let run = runReader(Self.severalFrames)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [
            .start(.text), .data(utf8("caf")), .ping(utf8("p1")), .data([0xC3]), .pong([]), .data([0xA9] + utf8(" ok")), .end,
            .start(.binary), .end,
            .start(.binary), .data(patternBytes(300)), .end,
            .close(ClosePayload(code: .normalClosure, reason: utf8("done"))),
        ])
    }
}
