// MessageReader's receiving rules (RFC 6455 §5.1-§5.6, §8.1) and the error each broken rule
// maps to.
import XCTest
@testable import WebSocketCore

final class MessageReaderTests: XCTestCase {
    // MARK: RSV bits and opcodes

    func testRSV1IsProtocolError() {
        assertProtocolError(runReader([0xC1, 0x02, 0x68, 0x69]).error)
    }

    func testRSV2IsProtocolError() {
        assertProtocolError(runReader([0xA1, 0x02, 0x68, 0x69]).error)
    }

    func testRSV3IsProtocolError() {
        assertProtocolError(runReader([0x91, 0x02, 0x68, 0x69]).error)
    }

    func testRSVOnControlFrameIsProtocolError() {
        assertProtocolError(runReader([0xC9, 0x00]).error)
    }

    func testRSVOnContinuationIsProtocolError() {
        let run = runReader(serverFrame(.text, utf8("a"), fin: false) + [0x90, 0x01, 0x62])
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("a"))])
    }

    func testRSVIsRefusedBeforeThePayload() {
        let run = runReader([0xC2, 0x05])
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [])
    }

    func testReservedDataOpcodesAreProtocolErrors() {
        for opcode: UInt8 in 0x3...0x7 {
            let run = runReader([0x80 | opcode, 0x00])
            assertProtocolError(run.error)
            XCTAssertEqual(run.events, [], "opcode \(opcode)")
        }
    }

    func testReservedControlOpcodesAreProtocolErrors() {
        for opcode: UInt8 in 0xB...0xF {
            assertProtocolError(runReader([0x80 | opcode, 0x00]).error)
        }
    }

    func testReservedOpcodesAreProtocolErrorsForFrameParser() {
        for opcode: UInt8 in [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            assertProtocolError(runParser([0x80 | opcode, 0x00]).error)
            assertProtocolError(runParser([opcode, 0x85, 1, 2, 3, 4, 5, 6, 7, 8, 9]).error, file: #filePath, line: #line)
        }
    }

    func testDefinedOpcodesRoundTripThroughRawValue() {
        for raw: UInt8 in 0...15 {
            let defined: [UInt8] = [0x0, 0x1, 0x2, 0x8, 0x9, 0xA]
            XCTAssertEqual(Opcode(rawValue: raw) != nil, defined.contains(raw), "opcode \(raw)")
            XCTAssertEqual(Opcode(rawValue: raw)?.isControl, defined.contains(raw) ? raw >= 8 : nil)
        }
    }

    func testOpcodeAndMessageKindDescriptions() {
        XCTAssertEqual([Opcode.continuation, .text, .binary, .close, .ping, .pong].map(\.description),
                       ["continuation", "text", "binary", "close", "ping", "pong"])
        XCTAssertEqual(MessageKind.text.opcode, .text)
        XCTAssertEqual(MessageKind.binary.opcode, .binary)
        XCTAssertEqual(MessageKind.binary.description, "binary")
    }

    // MARK: Control frames

    func testFragmentedPingIsProtocolError() {
        assertProtocolError(runReader([0x09, 0x02, 0x68, 0x69]).error)
    }

    func testFragmentedCloseIsProtocolError() {
        assertProtocolError(runReader([0x08, 0x02, 0x03, 0xE8]).error)
    }

    func testFragmentedPongIsProtocolError() {
        assertProtocolError(runReader([0x0A, 0x00]).error)
    }

    func testControlFrameWith126BytePayloadIsProtocolErrorAtItsHeader() {
        // Only the header: the reader must refuse it without waiting for the payload.
        let run = runReader([0x89, 0x7E, 0x00, 0x7E])
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [])
    }

    func testControlFrameWith126BytePayloadIsProtocolErrorWithPayload() {
        assertProtocolError(runReader(serverFrame(.pong, patternBytes(126))).error)
        assertProtocolError(runReader(serverFrame(.close, [0x03, 0xE8] + patternBytes(124))).error)
    }

    func testPingWith125BytePayloadIsDelivered() {
        let payload = patternBytes(125)
        let run = runReader(serverFrame(.ping, payload))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.ping(payload)])
    }

    func testEmptyPingAndPongAreDelivered() {
        let run = runReader([0x89, 0x00, 0x8A, 0x00])
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.ping([]), .pong([])])
    }

    func testPongIsDeliveredWithItsPayload() {
        XCTAssertEqual(runReader(serverFrame(.pong, utf8("abc"))).events, [.pong(utf8("abc"))])
    }

    func testControlPayloadSplitAcrossInputsIsCollected() {
        let frame = serverFrame(.ping, patternBytes(100))
        for splits in twoWaySplits(frame.count) + [byteByByte(frame.count)] {
            XCTAssertEqual(runReader(frame, splits: splits).events, [.ping(patternBytes(100))], "\(splits)")
        }
    }

    func testConsecutivePingsCarryTheirOwnPayloads() {
        let run = runReader(serverFrame(.ping, utf8("first")) + serverFrame(.ping, utf8("2")))
        XCTAssertEqual(run.events, [.ping(utf8("first")), .ping(utf8("2"))])
    }

    // MARK: Fragmentation

    func testContinuationWithoutAMessageIsProtocolError() {
        assertProtocolError(runReader([0x80, 0x02, 0x68, 0x69]).error)
    }

    func testContinuationAfterACompleteMessageIsProtocolError() {
        let run = runReader(serverFrame(.text, utf8("a")) + serverFrame(.continuation, utf8("b")))
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("a")), .end])
    }

    func testNewTextFrameInsideAFragmentedMessageIsProtocolError() {
        let run = runReader(serverFrame(.text, utf8("a"), fin: false) + serverFrame(.text, utf8("b")))
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("a"))])
    }

    func testNewBinaryFrameInsideAFragmentedMessageIsProtocolError() {
        assertProtocolError(runReader(serverFrame(.binary, [1], fin: false) + serverFrame(.binary, [2])).error)
        assertProtocolError(runReader(serverFrame(.text, utf8("a"), fin: false) + serverFrame(.binary, [2])).error)
    }

    func testPingBetweenFragmentsIsDeliveredAndTheMessageReassembles() {
        let input = serverFrame(.text, utf8("Hel"), fin: false) + serverFrame(.ping, utf8("p")) + serverFrame(.continuation, utf8("lo"))
        let run = runReader(input)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("Hel")), .ping(utf8("p")), .data(utf8("lo")), .end])
    }

    func testCloseBetweenFragmentsEndsReading() {
        let input = serverFrame(.binary, [1, 2], fin: false) + serverFrame(.close, [0x03, 0xE8]) + serverFrame(.continuation, [3])
        let run = runReader(input)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data([1, 2]), .close(ClosePayload(code: .normalClosure))])
    }

    func testManyFragmentsIncludingEmptyOnesReassemble() {
        let input = serverFrame(.binary, [], fin: false) + serverFrame(.continuation, [1], fin: false)
            + serverFrame(.continuation, [], fin: false) + serverFrame(.continuation, [2, 3], fin: false)
            + serverFrame(.continuation, [])
        let run = runReader(input)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data([1, 2, 3]), .end])
    }

    func testIsInsideMessageBetweenFragments() {
        var reader = MessageReader()
        let first = serverFrame(.text, utf8("a"), fin: false)
        let second = serverFrame(.continuation, utf8("b"))
        XCTAssertFalse(reader.isInsideMessage)
        _ = collectInbound(first, splits: [], finished: { false }) { buffer, index in try reader.next(buffer, &index) }
        XCTAssertTrue(reader.isInsideMessage)
        _ = collectInbound(second, splits: [], finished: { false }) { buffer, index in try reader.next(buffer, &index) }
        XCTAssertFalse(reader.isInsideMessage)
    }

    // MARK: Text and UTF-8

    func testEmptyTextMessage() {
        let run = runReader([0x81, 0x00])
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .end])
    }

    func testEmptyBinaryMessage() {
        XCTAssertEqual(runReader([0x82, 0x00]).events, [.start(.binary), .end])
    }

    func testEmptyFragmentedTextMessage() {
        XCTAssertEqual(runReader([0x01, 0x00, 0x80, 0x00]).events, [.start(.text), .end])
    }

    func testCodePointSplitAcrossFragmentsIsFine() {
        // "€" = E2 82 AC, cut after each of its first two bytes.
        let input = serverFrame(.text, utf8("x") + [0xE2], fin: false) + serverFrame(.continuation, [0x82], fin: false)
            + serverFrame(.continuation, [0xAC] + utf8("y"))
        let run = runReader(input)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("x€y")), .end])
    }

    func testCodePointSplitAcrossFragmentsAndInputsIsFine() {
        let input = serverFrame(.text, [0xF0, 0x9F], fin: false) + serverFrame(.continuation, [0x98, 0x80])
        for splits in twoWaySplits(input.count) + [byteByByte(input.count)] {
            let run = runReader(input, splits: splits)
            XCTAssertNil(run.error, "\(splits)")
            XCTAssertEqual(run.events, [.start(.text), .data(utf8("😀")), .end], "\(splits)")
        }
    }

    func testInvalidUTF8InTextIsInvalidUTF8() {
        let run = runReader(serverFrame(.text, [0x61, 0xFF, 0x62]))
        assertInvalidUTF8(run.error)
        XCTAssertEqual(run.events, [.start(.text)], "no byte of a bad piece is delivered")
    }

    func testInvalidUTF8SplitAcrossFragmentsIsDetectedAtTheFirstBadByte() {
        // "ab" ED | A0 80 "cd": ED A0 would be a surrogate; A0 is the first bad byte.
        let input = serverFrame(.text, utf8("ab") + [0xED], fin: false) + serverFrame(.continuation, [0xA0, 0x80] + utf8("cd"))
        let badByteOffset = 5 + 2  // first frame (2 + 3 bytes), second frame's header (2 bytes)
        XCTAssertEqual(input[badByteOffset], 0xA0)
        let run = runReader(input, splits: byteByByte(input.count))
        assertInvalidUTF8(run.error)
        XCTAssertEqual(run.fedWhenFailed, badByteOffset + 1, "failed when the A0 arrived, not later")
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("ab") + [0xED])])
    }

    func testInvalidUTF8IsDetectedBeforeTheFrameEnds() {
        // The bad byte arrives long before the end of a 1000-byte frame.
        let payload = utf8("ok") + [0xC0] + [UInt8](repeating: 0x61, count: 997)
        let input = serverFrame(.text, payload)
        let run = runReader(input, splits: byteByByte(input.count))
        assertInvalidUTF8(run.error)
        XCTAssertEqual(run.fedWhenFailed, 4 + 2 + 1)
    }

    func testInvalidUTF8ErrorNamesTheByteAndItsMessageOffset() {
        let input = serverFrame(.text, utf8("ab") + [0xED], fin: false) + serverFrame(.continuation, [0xA0, 0x80])
        let run = runReader(input)
        XCTAssertEqual(run.error, .invalidUTF8("text message is not valid UTF-8 (byte 0xA0 at offset 3)"))
    }

    func testTextEndingInsideACodePointIsInvalidUTF8() {
        let run = runReader(serverFrame(.text, utf8("a") + [0xE2, 0x82]))
        assertInvalidUTF8(run.error)
        XCTAssertFalse(run.events.contains(.end))
    }

    func testTextEndingInsideACodePointAcrossFragmentsIsInvalidUTF8() {
        assertInvalidUTF8(runReader(serverFrame(.text, [0xE2], fin: false) + serverFrame(.continuation, [])).error)
    }

    func testBinaryIsNotCheckedForUTF8() {
        let run = runReader(serverFrame(.binary, [0xFF, 0xED, 0xA0, 0x80, 0xC0]))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data([0xFF, 0xED, 0xA0, 0x80, 0xC0]), .end])
    }

    func testTextStartingWithAContinuationByteIsInvalidEvenAfterBinaryEndingInALeadByte() {
        // Binary data is not validated, so its trailing E2 must not be taken as the start of
        // a code point that the text message's 82 AC would complete.
        let run = runReader(serverFrame(.binary, [0xE2]) + serverFrame(.text, [0x82, 0xAC]))
        assertInvalidUTF8(run.error)
    }

    func testPingPayloadIsNotCheckedForUTF8() {
        XCTAssertEqual(runReader(serverFrame(.ping, [0xFF])).events, [.ping([0xFF])])
    }

    // MARK: Close

    func testCloseIsDeliveredWithCodeAndReason() {
        let run = runReader(serverFrame(.close, [0x03, 0xE8] + utf8("bye")))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.close(ClosePayload(code: .normalClosure, reason: utf8("bye")))])
    }

    func testEmptyCloseIsDelivered() {
        XCTAssertEqual(runReader([0x88, 0x00]).events, [.close(ClosePayload(code: nil))])
    }

    func testCloseWithOneBytePayloadIsProtocolError() {
        assertProtocolError(runReader([0x88, 0x01, 0x03]).error)
    }

    func testCloseWithReservedCodeIsProtocolError() {
        assertProtocolError(runReader([0x88, 0x02, 0x03, 0xED]).error)  // 1005
    }

    func testCloseWithInvalidUTF8ReasonIsInvalidUTF8() {
        assertInvalidUTF8(runReader([0x88, 0x04, 0x03, 0xE8, 0xC3, 0x28]).error)
    }

    func testNothingIsReportedAfterAClose() throws {
        let input = serverFrame(.close, [0x03, 0xE8]) + serverFrame(.text, utf8("late")) + [0xFF, 0xFF, 0xFF]
        var reader = MessageReader()
        var events: [InboundEvent] = []
        try withMutableBytes(input) { buffer in
            var index = 0
            while let event = try? reader.next(buffer, &index) { events.append(event) }
            XCTAssertEqual(events, [.close(ClosePayload(code: .normalClosure))])
            XCTAssertTrue(reader.isFinished)
            // Later calls, with the rest of the buffer or new bytes, give nil and do not throw.
            // (XCTAssertNil records an error thrown by its expression as a failure.)
            XCTAssertNil(try reader.next(buffer, &index))
            XCTAssertNil(try reader.next(buffer, &index))
        }
        try withMutableBytes(serverFrame(.ping, [])) { buffer in
            var index = 0
            XCTAssertNil(try reader.next(buffer, &index))
        }
    }

    func testNothingIsReportedAfterAnError() throws {
        var reader = MessageReader()
        withMutableBytes([0x83, 0x00]) { buffer in
            var index = 0
            do throws(ReceiveError) {
                _ = try reader.next(buffer, &index)
                XCTFail("reserved opcode accepted")
            } catch {
                assertProtocolError(error)
            }
        }
        XCTAssertTrue(reader.isFinished)
        try withMutableBytes(serverFrame(.text, utf8("ok"))) { buffer in
            var index = 0
            XCTAssertNil(try reader.next(buffer, &index))
        }
    }

    func testDataFramesAfterTheErrorAreNotDelivered() {
        let run = runReader([0x83, 0x00] + serverFrame(.text, utf8("late")))
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [])
    }

    // MARK: Data ranges

    func testDataRangesPointIntoTheInputWithoutCopying() {
        let input = serverFrame(.binary, [10, 11, 12], fin: false) + serverFrame(.continuation, [13, 14])
        var reader = MessageReader()
        var events: [InboundEvent] = []
        withMutableBytes(input) { buffer in
            var index = 0
            while let event = try? reader.next(buffer, &index) { events.append(event) }
        }
        XCTAssertEqual(events, [.messageStart(.binary), .messageData(2..<5), .messageData(7..<9), .messageEnd])
    }
}
