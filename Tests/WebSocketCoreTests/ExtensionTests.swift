// The extension seam (RFC 6455 §5.2, §9): the Sec-WebSocket-Extensions grammar, both sides
// of the negotiation through a trivial test extension, and RSV bits in MessageReader and
// WebSocketConnection.
import XCTest
@testable import WebSocketCore

/// A test extension: RSV1, one optional parameter `level` with a one-digit value.
struct TestExtension: WebSocketExtension {
    var name = "x-test"
    var rsv: RSVBits = .rsv1

    func offer() -> ExtensionOffer { ExtensionOffer(name: name, parameters: [.init("level", "1")]) }

    func accept(_ response: ExtensionOffer) throws(ExtensionNegotiationError) {
        for parameter in response.parameters {
            guard parameter.name == "level" else { throw .unsupportedParameter(extension: name, parameter: parameter.name) }
            guard let value = parameter.value, value.count == 1, value.allSatisfy(\.isNumber) else {
                throw .invalidParameterValue(extension: name, parameter: "level", value: parameter.value)
            }
        }
    }

    /// The first offer with no parameter other than `level`, echoed.
    func respond(to offers: [ExtensionOffer]) -> ExtensionOffer? {
        offers.first { $0.parameters.allSatisfy { $0.name == "level" } }
    }
}

final class ExtensionTests: XCTestCase {
    func parse(_ value: String) -> Result<[ExtensionOffer], ExtensionHeaderError> {
        Result { () throws(ExtensionHeaderError) in try ExtensionOffer.parse(value) }
    }

    // MARK: Grammar (§9.1)

    func testExtensionListIsParsedInOrder() throws {
        let value = "permessage-deflate; client_max_window_bits, permessage-deflate ; server_max_window_bits=10 ;"
            + " client_max_window_bits=\"15\", x-webkit-deflate-frame"
        XCTAssertEqual(try parse(value).get(), [
            ExtensionOffer(name: "permessage-deflate", parameters: [.init("client_max_window_bits")]),
            ExtensionOffer(name: "permessage-deflate", parameters: [.init("server_max_window_bits", "10"),
                                                                    .init("client_max_window_bits", "15")]),
            ExtensionOffer(name: "x-webkit-deflate-frame"),
        ])
    }

    func testRepeatedHeadersAreOneList() throws {
        XCTAssertEqual(try ExtensionOffer.parse(["a; x=1", " , b,", "c"]).map(\.name), ["a", "b", "c"])
        XCTAssertEqual(try parse("").get(), [])
        XCTAssertEqual(try parse(" , ,").get(), [])
    }

    func testQuotedValuesAreUnescaped() throws {
        let quoted = try parse("a; p=\"1\\0\"").get()
        XCTAssertTrue(quoted.first?.parameter("P") == .some("10"))
        let bare = try parse("a; p").get()
        XCTAssertTrue(bare.first?.parameter("p") == .some(nil))
        XCTAssertTrue(bare.first?.parameter("q") == nil)
    }

    func testMalformedListsAreRefusedWithTheirFacts() {
        XCTAssertEqual(parse("a;"), .failure(.expectedToken(value: "a;", offset: 2)))
        XCTAssertEqual(parse("a b"), .failure(.expectedToken(value: "a b", offset: 2)))
        XCTAssertEqual(parse("a; =1"), .failure(.expectedToken(value: "a; =1", offset: 3)))
        XCTAssertEqual(parse("a; p="), .failure(.expectedToken(value: "a; p=", offset: 5)))
        XCTAssertEqual(parse("a; p=\"1"), .failure(.unterminatedQuote(value: "a; p=\"1")))
        XCTAssertEqual(parse("a; p=\"x y\""), .failure(.quotedValueNotToken(parameter: "p", value: "x y")))
        XCTAssertEqual(parse("a; p=\"\""), .failure(.quotedValueNotToken(parameter: "p", value: "")))
        XCTAssertEqual(parse("\"a\""), .failure(.expectedToken(value: "\"a\"", offset: 0)))
        for value in ["a;", "a; p=\"1", "a; p=\"x y\""] {
            guard case .failure(let error) = parse(value) else { continue }
            XCTAssertTrue(error.description.contains("extension") || error.description.contains("Extensions"), error.description)
        }
    }

    func testHeaderValueRoundTripsAndRefusesNonTokens() throws {
        let offers = [ExtensionOffer(name: "a", parameters: [.init("x"), .init("y", "2")]), ExtensionOffer(name: "b")]
        let text = try ExtensionOffer.headerValue(offers)
        XCTAssertEqual(text, "a; x; y=2, b")
        XCTAssertEqual(try parse(text).get(), offers)
        XCTAssertThrowsError(try ExtensionOffer(name: "a,b").headerValue())
        XCTAssertThrowsError(try ExtensionOffer(name: "a", parameters: [.init("p", "1\r\nX-Injected: 1")]).headerValue()) { error in
            XCTAssertEqual(error as? ExtensionHeaderError, .invalidToken("1\r\nX-Injected: 1"))
        }
    }

    // MARK: Client side

    /// The RFC's 101 with one more header line.
    func goodHead(plus line: String) -> String {
        String(HandshakeResponseTests.goodHead.dropLast()) + line + "\r\n\r\n"  // "\r\n" is one Character
    }

    func accept(_ values: [String], offered: [any WebSocketExtension] = [TestExtension()])
        -> Result<[String], ExtensionNegotiationError> {
        Result { () throws(ExtensionNegotiationError) in
            try ExtensionNegotiation.accept(values, offered: offered).map { "\($0.0.name)=\($0.1)" }
        }
    }

    func testClientOfferAndAcceptance() throws {
        XCTAssertEqual(try ExtensionNegotiation.offer([TestExtension()]), "x-test; level=1")
        XCTAssertNil(try ExtensionNegotiation.offer([]))
        XCTAssertEqual(accept(["x-test; level=3"]), .success(["x-test=x-test; level=3"]))
        XCTAssertEqual(accept([]), .success([]))
    }

    func testClientRefusalsNameTheParameter() {
        XCTAssertEqual(accept(["x-test; window=9"]), .failure(.unsupportedParameter(extension: "x-test", parameter: "window")))
        XCTAssertEqual(accept(["x-test; level"]), .failure(.invalidParameterValue(extension: "x-test", parameter: "level", value: nil)))
        XCTAssertEqual(accept(["x-test; level=12"]),
                       .failure(.invalidParameterValue(extension: "x-test", parameter: "level", value: "12")))
        XCTAssertEqual(accept(["other"]), .failure(.notOffered("other")))
        XCTAssertEqual(accept(["x-test", "x-test"]), .failure(.repeated("x-test")))
        XCTAssertEqual(accept(["x-test; level=\"1"]), .failure(.malformed(.unterminatedQuote(value: "x-test; level=\"1"))))
        let both: [any WebSocketExtension] = [TestExtension(), TestExtension(name: "x-two")]
        XCTAssertEqual(accept(["x-test, x-two"], offered: both), .failure(.rsvConflict("x-test", "x-two", .rsv1)))
        guard case .failure(let error) = accept(["x-test; window=9"]) else { return XCTFail() }
        XCTAssertEqual(error.description, "the server answered extension 'x-test' with parameter 'window', which it does not support")
    }

    func testClientHandshakeOffersAndValidatesExtensions() throws {
        let handshake = ClientHandshake(url: try WebSocketURL(parsing: "ws://example.com/"), key: HandshakeResponseTests.key,
                                        extensions: [TestExtension()])
        XCTAssertTrue(String(decoding: handshake.requestBytes, as: UTF8.self).contains("\r\nSec-WebSocket-Extensions: x-test; level=1\r\n"))
        guard let (good, _) = try parseHead(goodHead(plus: "Sec-WebSocket-Extensions: x-test; level=2")),
              let (bad, _) = try parseHead(goodHead(plus: "Sec-WebSocket-Extensions: x-test; bogus")) else {
            return XCTFail("incomplete")
        }
        XCTAssertEqual(try handshake.validate(good).extensions, [ExtensionOffer(name: "x-test", parameters: [.init("level", "2")])])
        XCTAssertThrowsError(try handshake.validate(bad)) { error in
            XCTAssertEqual(error as? HandshakeError,
                           .invalid("the server answered extension 'x-test' with parameter 'bogus', which it does not support"))
        }
    }

    func testWithoutOffersAnySelectedExtensionIsRefusedAsBefore() throws {
        let handshake = ClientHandshake(url: try WebSocketURL(parsing: "ws://example.com/"), key: HandshakeResponseTests.key)
        XCTAssertFalse(String(decoding: handshake.requestBytes, as: UTF8.self).contains("Extensions"))
        guard let (head, _) = try parseHead(goodHead(plus: "Sec-WebSocket-Extensions: x-test"))
        else { return XCTFail("incomplete") }
        XCTAssertThrowsError(try handshake.validate(head)) { error in
            XCTAssertEqual(error as? HandshakeError, .invalid("the server selected extension 'x-test', which wspipe did not offer"))
        }
    }

    // MARK: Server side

    func testServerRespondsInTheClientsOrder() throws {
        let offers = try ExtensionOffer.parse("x-test; other=1, x-two; level=4, x-test; level=2, x-test")
        let chosen = ExtensionNegotiation.respond(to: offers, supported: [TestExtension(), TestExtension(name: "x-two", rsv: .rsv2)])
        // x-test is considered first (its first offer came first); its first acceptable offer wins.
        XCTAssertEqual(chosen.map(\.1), [ExtensionOffer(name: "x-test", parameters: [.init("level", "2")]),
                                         ExtensionOffer(name: "x-two", parameters: [.init("level", "4")])])
    }

    func testServerSkipsUnsupportedDeclinedAndConflictingExtensions() throws {
        let offers = try ExtensionOffer.parse("unknown, x-two, x-test; bad=1, x-test")
        let chosen = ExtensionNegotiation.respond(to: offers, supported: [TestExtension(), TestExtension(name: "x-two")])
        XCTAssertEqual(chosen.map(\.0.name), ["x-two"], "x-test uses RSV1 like x-two, chosen first")
        XCTAssertEqual(ExtensionNegotiation.respond(to: offers, supported: []).count, 0)
    }

    // MARK: RSV bits on the data path

    func testNegotiatedRSVIsAcceptedOnAFirstFrameAndReported() {
        var reader = MessageReader(extensionRSV: .rsv1)
        // The payload is in the extension's encoding: not UTF-8 checked by the reader.
        let input = serverFrame(.text, [0xFF, 0xFE], fin: false, rsv: 4) + serverFrame(.continuation, [0xC3])
            + serverFrame(.text, utf8("plain"))
        var events: [InboundEvent] = []
        var rsvAtStart: [RSVBits] = []
        withMutableBytes(input) { buffer in
            var index = 0
            while let event = try? reader.next(buffer, &index) {
                events.append(event)
                if case .messageStart = event { rsvAtStart.append(reader.messageRSV) }
            }
        }
        XCTAssertFalse(reader.isFinished)
        XCTAssertEqual(events, [.messageStart(.text), .messageData(2..<4), .messageData(6..<7), .messageEnd,
                                .messageStart(.text), .messageData(9..<14), .messageEnd])
        XCTAssertEqual(rsvAtStart, [.rsv1, []])
    }

    /// --max-message-size is the decoded size's limit: a compressed message may be a little
    /// larger on the wire (incompressible data grows), and the decoder checks the decoded
    /// size. A 1000-byte random message compressed to 1,006 bytes failed a 1000-byte limit.
    func testACompressedMessageMayBeSlightlyLargerOnTheWireThanTheLimit() {
        let limit: UInt64 = 1000
        XCTAssertNil(runReader(serverFrame(.binary, Array(repeating: 7, count: 1006), rsv: 4), maximumMessageSize: limit,
                               extensionRSV: .rsv1).error)
        let plain = runReader(serverFrame(.binary, Array(repeating: 7, count: 1001)), maximumMessageSize: limit, extensionRSV: .rsv1)
        guard case .messageTooBig(_, 1000)? = plain.error else { return XCTFail("\(String(describing: plain.error))") }
        let huge = runReader(serverFrame(.binary, Array(repeating: 7, count: 1100), rsv: 4), maximumMessageSize: limit,
                             extensionRSV: .rsv1)
        guard case .messageTooBig(_, 1000)? = huge.error else { return XCTFail("\(String(describing: huge.error))") }
        XCTAssertEqual(MessageReader.encodedLimit(.max), .max)
    }

    func testTextWithoutTheExtensionsBitsIsStillUTF8Checked() {
        assertInvalidUTF8(runReader(serverFrame(.text, [0xFF]), extensionRSV: .rsv1).error)
    }

    func testRSVOnControlOrContinuationFramesStaysAProtocolError() {
        let onPing = runReader(serverFrame(.ping, [], rsv: 4), extensionRSV: .rsv1)
        assertProtocolError(onPing.error)
        XCTAssertEqual(onPing.error?.description, "ping frame with RSV bits RSV1 set (extensions set them only on a message's first frame)")
        let onContinuation = runReader(serverFrame(.binary, [1], fin: false) + serverFrame(.continuation, [2], rsv: 4), extensionRSV: .rsv1)
        assertProtocolError(onContinuation.error)
        XCTAssertEqual(onContinuation.events, [.start(.binary), .data([1])])
    }

    func testBitsOfNoNegotiatedExtensionAreAProtocolError() {
        let run = runReader(serverFrame(.binary, [1], rsv: 2), extensionRSV: .rsv1)
        assertProtocolError(run.error)
        XCTAssertEqual(run.error?.description, "binary frame with RSV bits RSV2 set, but the negotiated extensions use only RSV1")
    }

    func testWithoutExtensionsRSVIsRefusedWithTheSameText() {
        XCTAssertEqual(runReader(serverFrame(.text, utf8("a"), rsv: 5)).error,
                       .protocolError("text frame with RSV bits RSV1+RSV3 set, but no extension was negotiated"))
    }

    func testConnectionWithAnExtensionSetsAndReportsItsBits() {
        var server = WebSocketConnection(role: .server, extensions: [TestExtension()])
        XCTAssertEqual(server.extensions.map(\.name), ["x-test"])
        XCTAssertEqual(server.makeHeader(opcode: .binary, rsv: .rsv1, payloadLength: 1).bytes, [0xC2, 0x01])
        XCTAssertEqual(server.frame(.text, [0x61], fin: false, rsv: .rsv1), [0x41, 0x01, 0x61])
        let run = receive(&server, clientFrame(.binary, [7], rsv: 4))
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.binary), .data([7]), .end])
        XCTAssertEqual(server.receivingMessageRSV, .rsv1)
    }

    func testRSVBitsDescription() {
        XCTAssertEqual(RSVBits().description, "none")
        XCTAssertEqual(RSVBits(rawValue: 7).description, "RSV1+RSV2+RSV3")
        XCTAssertEqual(RSVBits(rawValue: 0xFF).rawValue, 7)
    }
}
