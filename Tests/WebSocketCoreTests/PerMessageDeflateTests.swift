// permessage-deflate negotiation (RFC 7692 §5, §7.1), both roles: what is offered, which
// responses a client accepts (and the parameter named when it refuses), what a server answers.
import WebSocketCore
import XCTest

final class PerMessageDeflateTests: XCTestCase {
    private func element(_ text: String) throws -> ExtensionOffer {
        try XCTUnwrap(ExtensionOffer.parse(text).first)
    }

    private func goodHead(plus line: String) -> String {
        String(HandshakeResponseTests.goodHead.dropLast()) + line + "\r\n\r\n"
    }

    func testDefaultOfferLetsTheServerLimitOurWindow() throws {
        XCTAssertEqual(try PerMessageDeflate.client().offer().headerValue(), "permessage-deflate; client_max_window_bits")
        let tuned = PerMessageDeflate.client(DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                               serverMaxWindowBits: 10, clientMaxWindowBits: .bits(12)))
        XCTAssertEqual(try tuned.offer().headerValue(),
                       "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12")
    }

    /// (offer, response, nil if accepted or the error)
    func testClientAcceptanceTable() throws {
        let bare = DeflateParameters()
        let askBits = DeflateParameters(serverMaxWindowBits: 10, clientMaxWindowBits: .withoutValue)
        let name = "permessage-deflate"
        let table: [(DeflateParameters, String, ExtensionNegotiationError?)] = [
            (bare, "permessage-deflate", nil),
            (bare, "permessage-deflate; server_no_context_takeover", nil),
            (bare, "permessage-deflate; client_no_context_takeover", nil),
            (bare, "permessage-deflate; server_max_window_bits=8", nil),
            (bare, "permessage-deflate; server_max_window_bits=15", nil),
            (bare, "permessage-deflate; client_max_window_bits=10", .parameterNotOffered(extension: name, parameter: "client_max_window_bits")),
            (bare, "permessage-deflate; server_max_window_bits=16", .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: "16")),
            (bare, "permessage-deflate; server_max_window_bits=7", .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: "7")),
            (bare, "permessage-deflate; server_max_window_bits=010", .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: "010")),
            (bare, "permessage-deflate; server_max_window_bits", .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: nil)),
            (bare, "permessage-deflate; server_no_context_takeover=1", .invalidParameterValue(extension: name, parameter: "server_no_context_takeover", value: "1")),
            (bare, "permessage-deflate; server_no_context_takeover; server_no_context_takeover", .repeatedParameter(extension: name, parameter: "server_no_context_takeover")),
            (bare, "permessage-deflate; x_custom", .unsupportedParameter(extension: name, parameter: "x_custom")),
            (askBits, "permessage-deflate; server_max_window_bits=10; client_max_window_bits=9", nil),
            (askBits, "permessage-deflate; server_max_window_bits=11", .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: "11")),
            (askBits, "permessage-deflate; client_max_window_bits", .invalidParameterValue(extension: name, parameter: "client_max_window_bits", value: nil)),
            (DeflateParameters(clientMaxWindowBits: .bits(10)), "permessage-deflate; client_max_window_bits=11",
             .invalidParameterValue(extension: name, parameter: "client_max_window_bits", value: "11")),
        ]
        for (offer, response, expected) in table {
            let deflate = PerMessageDeflate.client(offer)
            let answer = try element(response)
            do throws(ExtensionNegotiationError) {
                try deflate.accept(answer)
                XCTAssertNil(expected, response)
            } catch {
                XCTAssertEqual(error, expected, response)
                XCTAssertTrue(error.description.contains(expected.map { parameterName($0) } ?? "?"), error.description)
            }
        }
    }

    private func parameterName(_ error: ExtensionNegotiationError) -> String {
        switch error {
        case .unsupportedParameter(_, let p), .invalidParameterValue(_, let p, _), .repeatedParameter(_, let p),
             .parameterNotOffered(_, let p): return p
        default: return ""
        }
    }

    func testHandshakeRefusalNamesTheParameter() throws {
        let handshake = ClientHandshake(url: try WebSocketURL(parsing: "ws://example.com/"), key: HandshakeResponseTests.key,
                                        extensions: [PerMessageDeflate.client()])
        let offerOnly = ClientHandshake(url: handshake.url, key: HandshakeResponseTests.key, extensions: [PerMessageDeflate.client(DeflateParameters())])
        XCTAssertTrue(String(decoding: handshake.requestBytes, as: UTF8.self).contains("\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"))
        guard let (bad, _) = try parseHead(goodHead(plus: "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=10")),
              let (good, _) = try parseHead(goodHead(plus: "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=9")) else {
            return XCTFail("incomplete")
        }
        XCTAssertEqual(try handshake.validate(good).extensions.first?.name, "permessage-deflate")
        XCTAssertNoThrow(try handshake.validate(bad), "offered without a value: the server may choose 10")
        XCTAssertThrowsError(try offerOnly.validate(bad)) { error in
            XCTAssertEqual(error as? HandshakeError,
                           .invalid("the server answered extension 'permessage-deflate' with parameter 'client_max_window_bits', which wspipe did not offer"))
        }
    }

    /// (offers, answer) with the server's memory-tuned defaults (12 bits each way).
    func testServerAnswerTable() throws {
        let server = PerMessageDeflate.server()
        let table: [(String, String?)] = [
            ("permessage-deflate", "permessage-deflate; server_max_window_bits=12"),
            ("permessage-deflate; client_max_window_bits", "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
            ("permessage-deflate; client_max_window_bits=10", "permessage-deflate; server_max_window_bits=12; client_max_window_bits=10"),
            ("permessage-deflate; server_max_window_bits=10", "permessage-deflate; server_max_window_bits=10"),
            ("permessage-deflate; server_max_window_bits=15", "permessage-deflate; server_max_window_bits=12"),
            ("permessage-deflate; server_no_context_takeover; client_no_context_takeover",
             "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12"),
            // 8 bits: accepted; zlib makes no raw 8-bit streams, so we send uncompressed (§6 allows it).
            ("permessage-deflate; server_max_window_bits=8, permessage-deflate", "permessage-deflate; server_max_window_bits=8"),
            ("permessage-deflate; server_max_window_bits=8", "permessage-deflate; server_max_window_bits=8"),
            ("permessage-deflate; unknown_parameter", nil),
            // Several offers: the first acceptable one; other extensions are not ours to answer.
            ("permessage-deflate; unknown_parameter, permessage-deflate; client_no_context_takeover",
             "permessage-deflate; client_no_context_takeover; server_max_window_bits=12"),
            ("x-webkit-deflate-frame, permessage-deflate", "permessage-deflate; server_max_window_bits=12"),
            ("x-webkit-deflate-frame", nil),
            ("permessage-deflate; client_max_window_bits=16, permessage-deflate; client_max_window_bits=9",
             "permessage-deflate; server_max_window_bits=12; client_max_window_bits=9"),
            ("permessage-deflate; client_max_window_bits; client_max_window_bits", nil),
            ("permessage-deflate; server_max_window_bits", nil),
            ("permessage-deflate; server_no_context_takeover=yes", nil),
            ("permessage-deflate; server_max_window_bits=99, permessage-deflate; client_max_window_bits",
             "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
        ]
        for (offers, expected) in table {
            let answer = server.respond(to: try ExtensionOffer.parse(offers))
            XCTAssertEqual(try answer?.headerValue(), expected, offers)
        }
        let full = PerMessageDeflate.server(windowBits: 15, clientWindowBits: 15)
        XCTAssertEqual(try full.respond(to: ExtensionOffer.parse("permessage-deflate"))?.headerValue(), "permessage-deflate")
        XCTAssertEqual(try full.respond(to: ExtensionOffer.parse("permessage-deflate; server_max_window_bits=15"))?.headerValue(),
                       "permessage-deflate; server_max_window_bits=15")
    }

    /// The server's --deflate-* settings: no-context-takeover answered unasked (§7.1.1),
    /// our windows as the ceiling of what is offered.
    func testServerSettingsTable() throws {
        let resets = PerMessageDeflate.server(serverNoContextTakeover: true, clientNoContextTakeover: true)
        let small = PerMessageDeflate.server(windowBits: 9, clientWindowBits: 10)
        let table: [(PerMessageDeflate, String, String?)] = [
            (resets, "permessage-deflate", "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12"),
            (resets, "permessage-deflate; server_no_context_takeover", "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=12"),
            (small, "permessage-deflate; client_max_window_bits", "permessage-deflate; server_max_window_bits=9; client_max_window_bits=10"),
            (small, "permessage-deflate; client_max_window_bits=9; server_max_window_bits=13", "permessage-deflate; server_max_window_bits=9; client_max_window_bits=9"),
            (small, "permessage-deflate", "permessage-deflate; server_max_window_bits=9"),
        ]
        for (server, offers, expected) in table {
            XCTAssertEqual(try server.respond(to: ExtensionOffer.parse(offers))?.headerValue(), expected, offers)
        }
        let negotiated = try XCTUnwrap(resets.negotiate(ExtensionOffer.parse("permessage-deflate; client_max_window_bits")))
        XCTAssertEqual(negotiated.agreed.configuration,
                       DeflateConfiguration(outgoingWindowBits: 12, outgoingNoContextTakeover: true,
                                            incomingWindowBits: 12, incomingNoContextTakeover: true))
    }

    func testServerAnswerIsAcceptedByTheClientThatOffered() throws {
        let offers = ["permessage-deflate", "permessage-deflate; client_max_window_bits",
                      "permessage-deflate; server_max_window_bits=9; client_no_context_takeover"]
        for text in offers {
            let offer = try DeflateParameters.parse(try element(text), isOffer: true)
            let answer = try XCTUnwrap(PerMessageDeflate.server().respond(to: [try element(text)]))
            XCTAssertNoThrow(try PerMessageDeflate.client(offer).accept(answer), text)
        }
    }

    func testConfigurationSeenFromEachRole() throws {
        let agreed = try DeflateParameters.parse(try element(
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12"), isOffer: false)
        XCTAssertEqual(DeflateConfiguration(agreed: agreed, role: .client),
                       DeflateConfiguration(outgoingWindowBits: 12, outgoingNoContextTakeover: false,
                                            incomingWindowBits: 10, incomingNoContextTakeover: true))
        XCTAssertEqual(DeflateConfiguration(agreed: agreed, role: .server),
                       DeflateConfiguration(outgoingWindowBits: 10, outgoingNoContextTakeover: true,
                                            incomingWindowBits: 12, incomingNoContextTakeover: false))
    }
}
