// WebSocketConnection: automatic pongs, Close echo, failing with the right close code,
// and the client's outgoing frames (always masked, §5.3).
import XCTest
@testable import WebSocketCore

final class WebSocketConnectionTests: XCTestCase {
    func fixedConnection(maximumMessageSize: UInt64 = 64 << 20) -> WebSocketConnection {
        WebSocketConnection(maximumMessageSize: maximumMessageSize, keys: .fixed(rfcKey))
    }

    /// The Close payloads (unmasked) of the frames in `bytes`, failing on any other opcode.
    func closeFrames(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> [[UInt8]] {
        decodeClientFrames(bytes, file: file, line: line).map { header, payload in
            XCTAssertEqual(header.opcode, .close, file: file, line: line)
            XCTAssertTrue(header.fin, file: file, line: line)
            XCTAssertNotNil(header.maskingKey, "client frames must be masked", file: file, line: line)
            return payload
        }
    }

    // MARK: Ping / Pong

    func testPingIsAnsweredWithTheRFCMaskedPong() {
        var connection = fixedConnection()
        let run = receive(&connection, RFCExampleFrameTests.unmaskedPing)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.ping(helloBytes)])
        XCTAssertTrue(connection.hasOutboundControl)
        XCTAssertEqual(connection.takeOutboundControl(), RFCExampleFrameTests.maskedPong)
    }

    func testPingIsAnsweredWithMaskedPongCarryingTheSamePayload() {
        var connection = WebSocketConnection()  // system keys
        let payload = patternBytes(125)
        _ = receive(&connection, serverFrame(.ping, payload))
        let frames = decodeClientFrames(connection.takeOutboundControl())
        XCTAssertEqual(frames.count, 1)
        guard let (header, unmasked) = frames.first else { return }
        XCTAssertEqual(header.opcode, .pong)
        XCTAssertTrue(header.fin)
        XCTAssertEqual(header.rsv, 0)
        XCTAssertNotNil(header.maskingKey)
        XCTAssertEqual(header.payloadLength, 125)
        XCTAssertEqual(unmasked, payload)
    }

    /// The Close facts live in a box made at the first of them: a copy of a connection
    /// still closes, receives a Close and fails on its own (value semantics).
    func testACopiedConnectionClosesAlone() {
        var first = WebSocketConnection()
        first.close(ClosePayload(code: .normalClosure))
        var second = first
        XCTAssertEqual(second.closeSent?.code, .normalClosure)
        second.fail(.protocolError("test"))
        _ = receive(&second, serverFrame(.close, [0x03, 0xE9]))
        XCTAssertEqual(second.failure, .protocolError("test"))
        XCTAssertNil(first.failure)
        XCTAssertNil(first.closeReceived)
        var third = WebSocketConnection()
        let fourth = third
        third.close(ClosePayload(code: .goingAway))
        XCTAssertEqual(third.closeSent?.code, .goingAway)
        XCTAssertNil(fourth.closeSent)
        XCTAssertEqual(fourth.state, .open)
    }

    func testEmptyPingIsAnsweredWithEmptyMaskedPong() {
        var connection = fixedConnection()
        _ = receive(&connection, [0x89, 0x00])
        XCTAssertEqual(connection.takeOutboundControl(), [0x8A, 0x80, 0x37, 0xfa, 0x21, 0x3d])
    }

    func testEachPingGetsItsOwnPongInOrder() {
        var connection = WebSocketConnection()
        _ = receive(&connection, serverFrame(.ping, utf8("one")) + serverFrame(.ping, utf8("two")))
        let frames = decodeClientFrames(connection.takeOutboundControl())
        XCTAssertEqual(frames.map { $0.0.opcode }, [.pong, .pong])
        XCTAssertEqual(frames.map { $0.1 }, [utf8("one"), utf8("two")])
    }

    func testPingBurstIsAnsweredInFull() {
        // 1000 maximum-size pings in one read (conformance case 2.13): every one answered.
        var connection = WebSocketConnection()
        let pings = (0..<1000).flatMap { serverFrame(.ping, Array(String(format4: $0).utf8) + patternBytes(121)) }
        _ = receive(&connection, pings)
        let frames = decodeClientFrames(connection.takeOutboundControl())
        XCTAssertEqual(frames.count, 1000)
        XCTAssertEqual(frames.last?.1, Array(String(format4: 999).utf8) + patternBytes(121))
    }

    func testPingFloodKeepsOnlyTheMostRecentPongs() {
        // A server that floods pings without reading our answers must not grow our memory:
        // only the most recent answers are kept (RFC 6455 §5.5.3 allows answering only the
        // most recent ping).
        var connection = WebSocketConnection()
        let count = 5000
        let pings = (0..<count).flatMap { serverFrame(.ping, Array(String(format4: $0).utf8) + patternBytes(121)) }
        _ = receive(&connection, pings)
        let frames = decodeClientFrames(connection.takeOutboundControl())
        let kept = WebSocketConnection.maximumPendingPongBytes / 126
        XCTAssertEqual(frames.count, kept)
        XCTAssertEqual(frames.map { Array($0.1.prefix(4)) }, (count - kept..<count).map { Array(String(format4: $0).utf8) })
        XCTAssertTrue(frames.allSatisfy { $0.0.opcode == .pong })
    }

    func testPendingPongsGoBeforeOurClose() {
        var connection = WebSocketConnection()
        _ = receive(&connection, serverFrame(.ping, utf8("before")))
        connection.close(ClosePayload(code: .normalClosure))
        let frames = decodeClientFrames(connection.takeOutboundControl())
        XCTAssertEqual(frames.map { $0.0.opcode }, [.pong, .close])
        XCTAssertTrue(connection.hasOutboundCloseOrPing == false && !connection.hasOutboundControl)
    }

    func testPingSplitAcrossInputsIsAnsweredOnce() {
        var connection = fixedConnection()
        let frame = RFCExampleFrameTests.unmaskedPing
        _ = receive(&connection, frame, splits: byteByByte(frame.count))
        XCTAssertEqual(connection.takeOutboundControl(), RFCExampleFrameTests.maskedPong)
    }

    func testPongIsNotAnswered() {
        var connection = fixedConnection()
        let run = receive(&connection, serverFrame(.pong, utf8("x")))
        XCTAssertEqual(run.events, [.pong(utf8("x"))])
        XCTAssertFalse(connection.hasOutboundControl)
    }

    func testTakeOutboundControlEmptiesTheQueue() {
        var connection = fixedConnection()
        _ = receive(&connection, RFCExampleFrameTests.unmaskedPing)
        XCTAssertFalse(connection.takeOutboundControl().isEmpty)
        XCTAssertFalse(connection.hasOutboundControl)
        XCTAssertEqual(connection.takeOutboundControl(), [])
    }

    func testPingsAreNotAnsweredAfterCloseWasSent() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        _ = connection.takeOutboundControl()
        let run = receive(&connection, RFCExampleFrameTests.unmaskedPing)
        XCTAssertEqual(run.events, [.ping(helloBytes)], "the ping is still reported")
        XCTAssertFalse(connection.hasOutboundControl)
    }

    func testDataStillArrivesAfterCloseWasSent() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        let run = receive(&connection, serverFrame(.text, utf8("late")))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(utf8("late")), .end])
        XCTAssertEqual(connection.state, .closeSent)
    }

    // MARK: Server Close

    func testServerCloseIsEchoedWithTheSameCodeAndNoReason() {
        var connection = fixedConnection()
        let run = receive(&connection, serverFrame(.close, [0x0F, 0xA0] + utf8("server says bye")))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.close(ClosePayload(code: CloseCode(4000), reason: utf8("server says bye")))])
        XCTAssertEqual(connection.state, .closed)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x0F, 0xA0]])
        XCTAssertEqual(connection.closeReceived, ClosePayload(code: CloseCode(4000), reason: utf8("server says bye")))
        XCTAssertEqual(connection.closeSent, ClosePayload(code: CloseCode(4000)))
    }

    func testServerCloseEchoBytesWithFixedKey() {
        var connection = fixedConnection()
        _ = receive(&connection, [0x88, 0x02, 0x03, 0xE8])
        // 03 E8 masked with 37 FA: 34 12.
        XCTAssertEqual(connection.takeOutboundControl(), [0x88, 0x82, 0x37, 0xfa, 0x21, 0x3d, 0x34, 0x12])
    }

    func testEmptyServerCloseIsEchoedEmpty() {
        var connection = fixedConnection()
        _ = receive(&connection, [0x88, 0x00])
        XCTAssertEqual(connection.state, .closed)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[]])
        XCTAssertEqual(connection.closeReceived, ClosePayload(code: nil))
    }

    func testServerCloseAfterOurCloseIsNotEchoed() {
        var connection = fixedConnection()
        connection.close(try! ClosePayload(code: .goingAway, reason: "bye"))
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xE9] + utf8("bye")])
        XCTAssertEqual(connection.state, .closeSent)
        _ = receive(&connection, [0x88, 0x02, 0x03, 0xE9])
        XCTAssertEqual(connection.state, .closed)
        XCTAssertFalse(connection.hasOutboundControl, "a second Close was queued")
        XCTAssertEqual(connection.closeReceived, ClosePayload(code: .goingAway))
    }

    /// With `echoesClose` off the owner answers: data may still go out first, then its
    /// own Close (with a reason) completes the handshake.
    func testPeerCloseWaitsForTheOwnersAnswerWhenNotEchoed() {
        var connection = fixedConnection()
        connection.echoesClose = false
        _ = receive(&connection, serverFrame(.close, [0x03, 0xE8]))
        XCTAssertEqual(connection.state, .closeReceived)
        XCTAssertFalse(connection.hasOutboundControl, "no echo was queued")
        XCTAssertTrue(connection.canSendData, "the owner may still send")
        XCTAssertFalse(connection.ping([]), "but no ping: no pong will come")
        connection.close(ClosePayload(code: .internalError, reason: utf8("exit status 3")))
        XCTAssertEqual(connection.state, .closed)
        XCTAssertFalse(connection.canSendData)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xF3] + utf8("exit status 3")])
    }

    func testCanSendDataIsFalseAfterServerClose() {
        var connection = fixedConnection()
        _ = receive(&connection, [0x88, 0x00])
        XCTAssertFalse(connection.canSendData)
        XCTAssertFalse(connection.ping([]))
    }

    // MARK: Failing the connection

    func testProtocolErrorQueuesClose1002AndRethrows() {
        var connection = fixedConnection()
        let run = receive(&connection, [0x83, 0x00])
        assertProtocolError(run.error)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xEA]])
        XCTAssertEqual(connection.state, .closed)
        XCTAssertEqual(connection.failure, run.error)
        XCTAssertFalse(connection.canSendData)
    }

    func testMaskedServerFrameQueuesClose1002() {
        var connection = fixedConnection()
        assertProtocolError(receive(&connection, RFCExampleFrameTests.maskedHello).error)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xEA]])
    }

    func testInvalidUTF8QueuesClose1007() {
        var connection = fixedConnection()
        let run = receive(&connection, [0x81, 0x01, 0xFF])
        assertInvalidUTF8(run.error)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xEF]])
        XCTAssertEqual(connection.state, .closed)
    }

    func testInvalidCloseReasonQueuesClose1007() {
        var connection = fixedConnection()
        assertInvalidUTF8(receive(&connection, [0x88, 0x03, 0x03, 0xE8, 0xFF]).error)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xEF]])
    }

    func testTooBigMessageQueuesClose1009() {
        var connection = fixedConnection(maximumMessageSize: 10)
        let run = receive(&connection, [0x82, 0x0B])
        assertMessageTooBig(run.error)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xF1]])
        XCTAssertEqual(connection.state, .closed)
    }

    func testErrorAfterOurCloseQueuesNoSecondClose() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        _ = connection.takeOutboundControl()
        assertProtocolError(receive(&connection, [0x83, 0x00]).error)
        XCTAssertFalse(connection.hasOutboundControl)
        XCTAssertEqual(connection.state, .closed)
        XCTAssertEqual(connection.closeSent, ClosePayload(code: .normalClosure))
    }

    func testPendingPongIsWrittenBeforeTheFailingClose() {
        var connection = fixedConnection()
        _ = receive(&connection, serverFrame(.ping, utf8("p")) + [0x83, 0x00])
        let frames = decodeClientFrames(connection.takeOutboundControl())
        XCTAssertEqual(frames.map { $0.0.opcode }, [.pong, .close])
        XCTAssertEqual(frames.last?.1, [0x03, 0xEA])
    }

    func testNothingIsReceivedAfterFailing() {
        var connection = fixedConnection()
        _ = receive(&connection, [0x83, 0x00])
        let run = receive(&connection, RFCExampleFrameTests.unmaskedPing)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [])
    }

    /// The owner fails the connection after a final frame's data (an inflater that found
    /// bad bytes in it): the message's end is not reported, since its end was never checked
    /// (WSKit makes text it is given the end of without checking it again).
    func testAMessageCutByAFailureDoesNotEnd() {
        var connection = fixedConnection()
        var input = serverFrame(.text, Array("hé".utf8))
        let first = input.withUnsafeMutableBytes { buffer -> [InboundEvent] in
            var index = 0, events: [InboundEvent] = []
            while events.count < 2, let event = try? connection.receive(buffer, &index) { events.append(event) }
            return events
        }
        XCTAssertEqual(first, [.messageStart(.text), .messageData(2..<5)])
        connection.fail(.invalidUTF8("found by the owner"))
        var rest: [UInt8] = []
        let after = rest.withUnsafeMutableBytes { buffer in
            var index = 0
            return try? connection.receive(buffer, &index)
        }
        XCTAssertNil(after, "no messageEnd after the failure")
    }

    func testFailQueuesCloseWithTheErrorsCode() {
        var connection = fixedConnection()
        connection.fail(.messageTooBig(size: 2, limit: 1))
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xF1]])
        XCTAssertEqual(connection.state, .closed)
    }

    func testAbandonClosesWithoutAFrame() {
        var connection = fixedConnection()
        connection.abandon()
        XCTAssertEqual(connection.state, .closed)
        XCTAssertFalse(connection.hasOutboundControl)
        XCTAssertFalse(connection.canSendData)
    }

    // MARK: Our Close

    func testCloseQueuesOneMaskedCloseFrame() {
        var connection = fixedConnection()
        XCTAssertTrue(connection.canSendData)
        connection.close(try! ClosePayload(code: .normalClosure, reason: "done"))
        XCTAssertEqual(connection.state, .closeSent)
        XCTAssertFalse(connection.canSendData)
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xE8] + utf8("done")])
    }

    func testCloseTwiceQueuesOneClose() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        connection.close(ClosePayload(code: .goingAway))
        XCTAssertEqual(closeFrames(connection.takeOutboundControl()), [[0x03, 0xE8]])
        XCTAssertEqual(connection.closeSent, ClosePayload(code: .normalClosure))
    }

    func testCloseAfterTakingTheFirstQueuesNothing() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        _ = connection.takeOutboundControl()
        connection.close(ClosePayload(code: .normalClosure))
        XCTAssertFalse(connection.hasOutboundControl)
    }

    func testCloseWithoutCodeSendsEmptyPayload() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: nil))
        XCTAssertEqual(connection.takeOutboundControl(), [0x88, 0x80, 0x37, 0xfa, 0x21, 0x3d])
    }

    // MARK: Outgoing frames

    func testPingQueuesMaskedPing() {
        var connection = fixedConnection()
        XCTAssertTrue(connection.ping(helloBytes))
        XCTAssertEqual(connection.takeOutboundControl(), RFCExampleFrameTests.maskedPing)
    }

    func testPingRefusesPayloadsOver125Bytes() {
        var connection = fixedConnection()
        XCTAssertTrue(connection.ping(patternBytes(125)))
        _ = connection.takeOutboundControl()
        XCTAssertFalse(connection.ping(patternBytes(126)))
        XCTAssertFalse(connection.hasOutboundControl)
    }

    func testPingIsRefusedAfterClose() {
        var connection = fixedConnection()
        connection.close(ClosePayload(code: .normalClosure))
        _ = connection.takeOutboundControl()
        XCTAssertFalse(connection.ping([]))
        XCTAssertFalse(connection.hasOutboundControl)
    }

    func testMakeHeaderIsMaskedWithAFreshKey() {
        var connection = WebSocketConnection()
        let first = connection.makeHeader(opcode: .text, payloadLength: 300)
        let second = connection.makeHeader(opcode: .continuation, fin: false, payloadLength: 0)
        XCTAssertEqual(first.opcode, .text)
        XCTAssertTrue(first.fin)
        XCTAssertEqual(first.payloadLength, 300)
        XCTAssertNotNil(first.maskingKey)
        XCTAssertFalse(second.fin)
        XCTAssertNotNil(second.maskingKey)
        let keys = (0..<64).map { _ in connection.nextMaskingKey() }
        XCTAssertGreaterThan(Set(keys).count, 1, "keys do not vary")
    }

    func testFrameIsMaskedDataFrame() {
        var connection = fixedConnection()
        XCTAssertEqual(connection.frame(.text, helloBytes), RFCExampleFrameTests.maskedHello)
        let frames = decodeClientFrames(connection.frame(.binary, patternBytes(1000), fin: false))
        XCTAssertEqual(frames.first?.0.opcode, .binary)
        XCTAssertEqual(frames.first?.0.fin, false)
        XCTAssertEqual(frames.first?.1, patternBytes(1000))
    }

    func testIsReceivingMessageBetweenFragments() {
        var connection = fixedConnection()
        _ = receive(&connection, serverFrame(.binary, [1], fin: false))
        XCTAssertTrue(connection.isReceivingMessage)
        _ = receive(&connection, serverFrame(.continuation, [2]))
        XCTAssertFalse(connection.isReceivingMessage)
    }
}

private extension String {
    /// The number as four decimal digits (a ping's identity in the flood tests).
    init(format4 number: Int) {
        let digits = String(number)
        self = String(repeating: "0", count: Swift.max(0, 4 - digits.count)) + digits
    }
}
