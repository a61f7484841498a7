// The server role of the core (RFC 6455 §5.1, §5.3): masked client frames are unmasked in
// place at any split, unmasked ones refused, UTF-8 checked on the unmasked bytes, our own
// frames never masked; and a client and a server connection talking to each other.
import XCTest
@testable import WebSocketCore

/// A masked frame, as a client sends it.
func clientFrame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0,
                 key: MaskingKey = rfcKey) -> [UInt8] {
    FrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv: rsv, maskingKey: key)
}

/// Every way to cut `count` bytes in two or three pieces.
func threeWaySplits(_ count: Int) -> [[Int]] {
    (0...count).flatMap { first in (first...count).map { [first, $0] } }
}

final class ServerRoleTests: XCTestCase {
    let otherKey = MaskingKey(0x01, 0x80, 0xfe, 0x7f)

    /// Runs a server-role reader over `input` cut at each of `splitSets` and checks that every
    /// run gives `expected` and no error.
    func assertServerReads(_ input: [UInt8], _ expected: [Inbound], splitSets: [[Int]],
                           file: StaticString = #filePath, line: UInt = #line) {
        for splits in splitSets {
            let run = runReader(input, splits: splits, role: .server, file: file, line: line)
            XCTAssertNil(run.error, "splits \(splits)", file: file, line: line)
            XCTAssertEqual(run.events, expected, "splits \(splits)", file: file, line: line)
        }
    }

    // MARK: Unmasking at every split

    func testRFCMaskedHelloAtEverySplitPoint() {
        let input = RFCExampleFrameTests.maskedHello
        XCTAssertEqual(input, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
        assertServerReads(input, [.start(.text), .data(helloBytes), .end],
                          splitSets: threeWaySplits(input.count) + [byteByByte(input.count)])
    }

    func testPayloadIsUnmaskedInTheCallersBuffer() {
        var input = RFCExampleFrameTests.maskedHello
        var reader = MessageReader(role: .server)
        var events: [InboundEvent] = []
        input.withUnsafeMutableBytes { buffer in
            var index = 0
            while let event = try? reader.next(buffer, &index) { events.append(event) }
        }
        XCTAssertEqual(events, [.messageStart(.text), .messageData(6..<11), .messageEnd])
        XCTAssertEqual(Array(input[6...]), helloBytes)
        XCTAssertEqual(Array(input[..<6]), [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d], "the header is left as it was")
    }

    func testFragmentedMaskedMessageWithAKeyPerFrame() {
        let input = clientFrame(.text, utf8("Hel"), fin: false) + clientFrame(.continuation, utf8("lo"), key: otherKey)
        assertServerReads(input, [.start(.text), .data(helloBytes), .end],
                          splitSets: threeWaySplits(input.count) + [byteByByte(input.count)])
    }

    func testMaskedPingBetweenFragments() {
        let input = clientFrame(.binary, [1, 2, 3], fin: false) + clientFrame(.ping, helloBytes, key: otherKey)
            + clientFrame(.continuation, [4, 5, 6, 7, 8])
        assertServerReads(input, [.start(.binary), .data([1, 2, 3]), .ping(helloBytes), .data([4, 5, 6, 7, 8]), .end],
                          splitSets: twoWaySplits(input.count) + [byteByByte(input.count)])
    }

    func testMasked126LengthFrameAtEverySplitPoint() {
        let payload = patternBytes(300)
        let input = clientFrame(.binary, payload, key: otherKey)
        XCTAssertEqual(Array(input[..<4]), [0x82, 0xFE, 0x01, 0x2C])
        assertServerReads(input, [.start(.binary), .data(payload), .end],
                          splitSets: twoWaySplits(input.count) + [byteByByte(input.count)])
    }

    func testMasked127LengthFrameInPieces() {
        let payload = patternBytes(65536 + 7, seed: 3)
        let input = clientFrame(.binary, payload)
        XCTAssertEqual(Array(input[..<2]), [0x82, 0xFF])
        var random = SplitMix64(seed: 6455)
        var splitSets: [[Int]] = (1...20).map { [$0] } + [[input.count - 1], [input.count - 3]]
        for _ in 0..<8 {
            splitSets.append((0..<40).map { _ in Int.random(in: 0...input.count, using: &random) }.sorted())
        }
        splitSets.append(Array(stride(from: 1, to: input.count, by: 3)))
        assertServerReads(input, [.start(.binary), .data(payload), .end], splitSets: splitSets)
    }

    func testMaskedControlFramesAtEverySplitPoint() {
        let close = ClosePayload(code: .goingAway, reason: utf8("bye"))
        let input = RFCExampleFrameTests.maskedPing + clientFrame(.pong, utf8("pong"), key: otherKey)
            + clientFrame(.close, close.bytes)
        assertServerReads(input, [.ping(helloBytes), .pong(utf8("pong")), .close(close)],
                          splitSets: twoWaySplits(input.count) + [byteByByte(input.count)])
    }

    func testEmptyMaskedFrames() {
        let input = clientFrame(.text, []) + clientFrame(.ping, []) + clientFrame(.close, [])
        assertServerReads(input, [.start(.text), .end, .ping([]), .close(ClosePayload(code: nil))], splitSets: twoWaySplits(input.count))
    }

    // MARK: Refusals

    func testUnmaskedClientFrameIsProtocolError() {
        for frame in [serverFrame(.text, utf8("hi")), serverFrame(.ping, []), serverFrame(.close, [0x03, 0xE8]),
                      clientFrame(.text, utf8("a"), fin: false) + serverFrame(.continuation, utf8("b"))] {
            let run = runReader(frame, role: .server)
            assertProtocolError(run.error)
            XCTAssertEqual(run.error?.description, "the client sent an unmasked frame (RFC 6455 §5.1: clients always mask)")
        }
    }

    func testMaskedServerFrameIsStillProtocolErrorForAClient() {
        let run = runReader(RFCExampleFrameTests.maskedHello, role: .client)
        assertProtocolError(run.error)
        XCTAssertEqual(run.error?.description, "the server sent a masked frame (RFC 6455 §5.1: servers never mask)")
    }

    func testServerConnectionFailsWithUnmaskedClose1002() {
        var connection = WebSocketConnection(role: .server)
        let run = receive(&connection, serverFrame(.text, utf8("hi")))
        assertProtocolError(run.error)
        XCTAssertEqual(connection.takeOutboundControl(), [0x88, 0x02, 0x03, 0xEA])
    }

    // MARK: UTF-8 after unmasking

    func testInvalidUTF8InsideAMaskedFrameIs1007() {
        // The masked bytes are not valid UTF-8 either: the check must see the unmasked ones.
        let input = clientFrame(.text, [0x6F, 0x6B, 0xC3, 0x28])
        for splits in twoWaySplits(input.count) {
            let run = runReader(input, splits: splits, role: .server)
            assertInvalidUTF8(run.error)
            XCTAssertEqual(run.error?.description, "text message is not valid UTF-8 (byte 0x28 at offset 3)")
        }
    }

    func testValidMultiByteTextSplitAcrossReadsAndFrames() {
        let text = utf8("h\u{e9}llo \u{20ac} \u{1d11e}")
        // Masked bytes of this text are not valid UTF-8: unmasking must come first.
        XCTAssertNil(String(validating: rfcKey.masking(text), as: UTF8.self))
        let whole = clientFrame(.text, text)
        assertServerReads(whole, [.start(.text), .data(text), .end],
                          splitSets: twoWaySplits(whole.count) + [byteByByte(whole.count)])
        // Fragment boundaries inside the four-byte code point.
        let cut = text.count - 2
        let fragmented = clientFrame(.text, Array(text[..<cut]), fin: false)
            + clientFrame(.continuation, Array(text[cut...]), key: otherKey)
        assertServerReads(fragmented, [.start(.text), .data(text), .end], splitSets: twoWaySplits(fragmented.count))
    }

    func testTruncatedUTF8AtTheEndOfAMaskedMessageIs1007() {
        assertInvalidUTF8(runReader(clientFrame(.text, [0x61, 0xF0, 0x9F, 0x98]), role: .server).error)
    }

    // MARK: Outgoing frames by role

    func testServerHeadersAndFramesAreUnmasked() {
        var server = WebSocketConnection(role: .server, keys: .fixed(rfcKey))
        XCTAssertEqual(server.role, .server)
        let header = server.makeHeader(opcode: .text, payloadLength: 5)
        XCTAssertNil(header.maskingKey)
        XCTAssertEqual(header.bytes, [0x81, 0x05])
        XCTAssertEqual(server.frame(.text, helloBytes), RFCExampleFrameTests.unmaskedHello)
        XCTAssertEqual(server.frame(.text, utf8("Hel"), fin: false), RFCExampleFrameTests.fragmentHel)
    }

    func testClientHeadersAndFramesAreMasked() {
        var client = WebSocketConnection(keys: .fixed(rfcKey))
        XCTAssertEqual(client.role, .client)
        XCTAssertEqual(client.makeHeader(opcode: .text, payloadLength: 5).maskingKey, rfcKey)
        XCTAssertEqual(client.frame(.text, helloBytes), RFCExampleFrameTests.maskedHello)
    }

    func testServerControlFramesAreUnmasked() {
        var server = WebSocketConnection(role: .server, keys: .fixed(rfcKey))
        _ = receive(&server, RFCExampleFrameTests.maskedPing)
        XCTAssertTrue(server.ping(utf8("p")))
        // The pong answering the client's masked ping is the RFC's unmasked pong.
        XCTAssertEqual(server.takeOutboundControl(), [0x8A, 0x05] + helloBytes + [0x89, 0x01, 0x70])
        server.close(ClosePayload(code: .normalClosure))
        XCTAssertEqual(server.takeOutboundControl(), [0x88, 0x02, 0x03, 0xE8])
    }

    func testServerEchoesTheClientsCloseUnmasked() {
        var server = WebSocketConnection(role: .server)
        let run = receive(&server, clientFrame(.close, ClosePayload(code: .goingAway, reason: utf8("tab closed")).bytes))
        XCTAssertNil(run.error)
        XCTAssertEqual(server.state, .closed)
        XCTAssertEqual(server.takeOutboundControl(), [0x88, 0x02, 0x03, 0xE9])
    }

    // MARK: A client and a server through the core

    /// Feeds `bytes` (one side's output) to `connection` in two pieces and returns the events.
    func deliver(_ bytes: [UInt8], to connection: inout WebSocketConnection, file: StaticString = #filePath,
                 line: UInt = #line) -> [Inbound] {
        let run = receive(&connection, bytes, splits: [bytes.count / 2], file: file, line: line)
        XCTAssertNil(run.error, file: file, line: line)
        return run.events
    }

    func testClientAndServerExchangeMessagesPingsAndClose() {
        var client = WebSocketConnection(role: .client)
        var server = WebSocketConnection(role: .server)
        let text = utf8("h\u{e9}llo \u{1d11e}")
        let blob = patternBytes(70_000)

        // Client to server: text, binary (64-bit length), a fragmented text with a ping inside.
        var wire = client.frame(.text, text) + client.frame(.binary, blob)
        wire += client.frame(.text, utf8("frag"), fin: false)
        XCTAssertTrue(client.ping(utf8("are you there")))
        wire += client.takeOutboundControl()
        wire += client.frame(.continuation, utf8("mented"))
        XCTAssertEqual(deliver(wire, to: &server),
                       [.start(.text), .data(text), .end, .start(.binary), .data(blob), .end,
                        .start(.text), .data(utf8("frag")), .ping(utf8("are you there")), .data(utf8("mented")), .end])

        // Server to client: its pong, text, a fragmented binary.
        var back = server.takeOutboundControl()
        back += server.frame(.text, utf8("welcome")) + server.frame(.binary, [1, 2], fin: false) + server.frame(.continuation, [3])
        XCTAssertEqual(deliver(back, to: &client),
                       [.pong(utf8("are you there")), .start(.text), .data(utf8("welcome")), .end,
                        .start(.binary), .data([1, 2, 3]), .end])

        // The server pings, the client answers.
        XCTAssertTrue(server.ping([9]))
        XCTAssertEqual(deliver(server.takeOutboundControl(), to: &client), [.ping([9])])
        XCTAssertEqual(deliver(client.takeOutboundControl(), to: &server), [.pong([9])])

        // The client closes; the server echoes; both end closed.
        client.close(ClosePayload(code: .normalClosure, reason: utf8("done")))
        XCTAssertEqual(client.state, .closeSent)
        XCTAssertEqual(deliver(client.takeOutboundControl(), to: &server),
                       [.close(ClosePayload(code: .normalClosure, reason: utf8("done")))])
        XCTAssertEqual(server.state, .closed)
        XCTAssertEqual(deliver(server.takeOutboundControl(), to: &client), [.close(ClosePayload(code: .normalClosure))])
        XCTAssertEqual(client.state, .closed)
        XCTAssertEqual(client.closeReceived, ClosePayload(code: .normalClosure))
    }

    func testServerClosesAndClientEchoes() {
        var client = WebSocketConnection()
        var server = WebSocketConnection(role: .server)
        server.close(ClosePayload(code: .goingAway))
        XCTAssertEqual(deliver(server.takeOutboundControl(), to: &client), [.close(ClosePayload(code: .goingAway))])
        XCTAssertEqual(deliver(client.takeOutboundControl(), to: &server), [.close(ClosePayload(code: .goingAway))])
        XCTAssertEqual(server.state, .closed)
        XCTAssertEqual(client.state, .closed)
    }
}
