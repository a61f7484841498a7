// The server's opening handshake (RFC 6455 §4.2): the incremental request-head parser, the
// §4.2.1 checks and their refusals, the 101 and refusal responses, and a round trip with
// the client side.
import XCTest
@testable import WebSocketCore

final class ServerHandshakeTests: XCTestCase {
    /// The request of RFC 6455 §1.2 (the §1.3 key).
    static let rfcRequest = "GET /chat HTTP/1.1\r\n"
        + "Host: server.example.com\r\n"
        + "Upgrade: websocket\r\n"
        + "Connection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        + "Origin: http://example.com\r\n"
        + "Sec-WebSocket-Protocol: chat, superchat\r\n"
        + "Sec-WebSocket-Version: 13\r\n"
        + "\r\n"

    static let goodLines = ["Host: server.example.com", "Upgrade: websocket", "Connection: Upgrade",
                            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]

    /// A request with `lines` as its headers.
    func request(_ lines: [String] = goodLines, line: String = "GET /chat HTTP/1.1") -> String {
        line + "\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n"
    }

    /// The good headers with the one named like `name` replaced by `replacement` (nil: removed).
    func lines(replacing name: String, with replacement: String?) -> [String] {
        Self.goodLines.compactMap { $0.lowercased().hasPrefix(name.lowercased() + ":") ? replacement : $0 }
    }

    /// Feeds `bytes` cut at `splits` to a fresh `ServerHandshake`; returns the outcome and
    /// the offset just past the head (in the whole input).
    func handshake(_ bytes: [UInt8], splits: [Int] = [], maximumHeadSize: Int = HTTPRequestHead.defaultMaximumSize)
        -> (Result<HandshakeRequest?, HandshakeRefusal>, Int) {
        var server = ServerHandshake(maximumHeadSize: maximumHeadSize)
        let bounds = [0] + splits + [bytes.count]
        var consumed = 0
        return bytes.withUnsafeBytes { whole in
            for piece in 0..<(bounds.count - 1) {
                let buffer = UnsafeRawBufferPointer(rebasing: whole[bounds[piece]..<bounds[piece + 1]])
                var index = 0
                do throws(HandshakeRefusal) {
                    let request = try server.receive(buffer, &index)
                    consumed = bounds[piece] + index
                    if let request { return (.success(request), consumed) }
                    XCTAssertEqual(index, buffer.count, "an incomplete head leaves bytes unconsumed")
                } catch {
                    return (.failure(error), consumed)
                }
            }
            return (.success(nil), consumed)
        }
    }

    func validate(_ text: String) -> Result<HandshakeRequest?, HandshakeRefusal> { handshake(utf8(text)).0 }

    func assertRefused(_ text: String, _ refusal: HandshakeRefusal, status: Int,
                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(validate(text), .failure(refusal), file: file, line: line)
        XCTAssertEqual(refusal.status, status, file: file, line: line)
    }

    /// Parses response bytes with the client's parser.
    func responseHead(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> (HTTPResponseHead, [UInt8])? {
        do throws(HandshakeError) {
            guard let (head, length) = try parseHead(bytes) else {
                XCTFail("incomplete response", file: file, line: line)
                return nil
            }
            return (head, Array(bytes[length...]))
        } catch {
            XCTFail("response does not parse: \(error)", file: file, line: line)
            return nil
        }
    }

    // MARK: The RFC example

    /// The first byte of a TLS ClientHello (0x16) or any other byte that is no token
    /// character cannot start a request line: refused at once, not at a line end that may
    /// never come (a wss:// client on a plain listener waited for the handshake timeout).
    func testAFirstByteThatCannotStartARequestIsRefusedAtOnce() {
        func parse(_ bytes: [UInt8]) -> Result<HTTPRequestHead?, HTTPRequestError> {
            var parser = HTTPRequestHeadParser()
            var index = 0
            return bytes.withUnsafeBytes { raw in Result { () throws(HTTPRequestError) in try parser.parse(raw, &index) } }
        }
        let clientHello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]
        XCTAssertEqual(parse(clientHello), .failure(.notHTTP(firstByte: 0x16)))
        XCTAssertEqual(parse(utf8("\r\n") + [0x80]), .failure(.notHTTP(firstByte: 0x80)), "after skipped empty lines too")
        XCTAssertEqual(parse(utf8(" GET / HTTP/1.1")), .failure(.notHTTP(firstByte: 0x20)))
        XCTAssertEqual(parse(utf8("GET / HT")), .success(nil), "a token character waits for the line")
        XCTAssertEqual(HTTPRequestError.notHTTP(firstByte: 0x16).description, "the first byte 0x16 cannot start an HTTP request")
        XCTAssertEqual(HTTPRequestError.notHTTP(firstByte: 0x05).description, "the first byte 0x05 cannot start an HTTP request")
        XCTAssertEqual(handshake(clientHello).0, .failure(.malformedRequest("the first byte 0x16 cannot start an HTTP request")))
    }


    func testRFCRequestIsAcceptedWithTheRFCAccept() throws {
        guard case .success(let request?) = validate(Self.rfcRequest) else { return XCTFail("\(validate(Self.rfcRequest))") }
        XCTAssertEqual(request.path, "/chat")
        XCTAssertNil(request.query)
        XCTAssertEqual(request.host, "server.example.com")
        XCTAssertEqual(request.origin, "http://example.com")
        XCTAssertEqual(request.key, "dGhlIHNhbXBsZSBub25jZQ==")
        XCTAssertEqual(request.subprotocols, ["chat", "superchat"])
        XCTAssertEqual(request.extensions, [])
        XCTAssertEqual(request.head.method, "GET")
        XCTAssertEqual(request.head.version, "HTTP/1.1")
        XCTAssertEqual(request.headers.count, 7)
        let response = try ServerHandshake.accept(request, subprotocol: "chat")
        XCTAssertEqual(String(decoding: response, as: UTF8.self),
                       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\n\r\n")
    }

    func testAcceptWithExtensionsAndExtraHeaders() throws {
        let text = request(Self.goodLines + ["Sec-WebSocket-Extensions: x-test; level=1"])
        guard case .success(let request?) = validate(text) else { return XCTFail() }
        let response = try ServerHandshake.accept(request, extensions: [ExtensionOffer(name: "x-test", parameters: [.init("level", "1")])],
                                                  headers: [HTTPHeader(name: "Server", value: "test")])
        guard let (head, rest) = responseHead(response) else { return }
        XCTAssertEqual(rest, [])
        XCTAssertEqual(head.values("Sec-WebSocket-Extensions"), ["x-test; level=1"])
        XCTAssertEqual(head.values("Server"), ["test"])
        XCTAssertEqual(head.values("Sec-WebSocket-Protocol"), [])
    }

    func testAcceptRefusesWhatWasNotOfferedAndInjection() {
        guard case .success(let request?) = validate(Self.rfcRequest) else { return XCTFail() }
        func build(subprotocol: String? = nil, extensions: [ExtensionOffer] = [], headers: [HTTPHeader] = []) -> ResponseBuildError? {
            do throws(ResponseBuildError) {
                _ = try ServerHandshake.accept(request, subprotocol: subprotocol, extensions: extensions, headers: headers)
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(build(subprotocol: "other"), .subprotocolNotOffered("other"))
        XCTAssertEqual(build(extensions: [ExtensionOffer(name: "x-test")]), .extensionNotOffered("x-test"))
        XCTAssertEqual(build(headers: [HTTPHeader(name: "X-A", value: "1\r\nSet-Cookie: a=b")]), .header(.badValue("X-A")))
        XCTAssertEqual(build(headers: [HTTPHeader(name: "X A", value: "1")]), .header(.badName("X A")))
        XCTAssertEqual(build(headers: [HTTPHeader(name: "sec-websocket-accept", value: "x")]), .header(.reserved("sec-websocket-accept")))
        XCTAssertEqual(build(headers: [HTTPHeader(name: "Connection", value: "close")]), .header(.reserved("Connection")))
    }

    // MARK: Good requests

    func testUpgradeAndConnectionTokensInAnyCase() {
        let variants: [[String]] = [
            lines(replacing: "Upgrade", with: "Upgrade: WebSocket"),
            lines(replacing: "Upgrade", with: "UPGRADE: WEBSOCKET"),
            lines(replacing: "Upgrade", with: "upgrade: h2c, websocket"),
            lines(replacing: "Connection", with: "Connection: keep-alive, Upgrade"),
            lines(replacing: "Connection", with: "connection: KEEP-ALIVE,upgrade"),
            lines(replacing: "Connection", with: "Connection: keep-alive") + ["Connection: Upgrade"],
            lines(replacing: "Sec-WebSocket-Key", with: "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ=="),
        ]
        for headers in variants {
            guard case .success(let request?) = validate(request(headers)) else {
                XCTFail("refused: \(headers) \(validate(request(headers)))")
                continue
            }
            XCTAssertEqual(request.key, "dGhlIHNhbXBsZSBub25jZQ==")
        }
    }

    func testQueryAndAbsoluteFormTargets() {
        let cases: [(String, String, String?)] = [
            ("/chat?room=1&x", "/chat", "room=1&x"), ("/", "/", nil), ("/?", "/", ""),
            ("ws://server.example.com/chat?room=1", "/chat", "room=1"), ("http://server.example.com", "/", nil),
            ("https://h:8443?q", "/", "q"),
        ]
        for (target, path, query) in cases {
            guard case .success(let request?) = validate(request(line: "GET \(target) HTTP/1.1")) else {
                XCTFail("refused \(target)")
                continue
            }
            XCTAssertEqual(request.path, path, target)
            XCTAssertEqual(request.query, query, target)
            XCTAssertEqual(request.head.target, target)
        }
    }

    func testLaterHTTP1MinorVersionsAreAccepted() {
        guard case .success(.some) = validate(request(line: "GET /chat HTTP/1.2")) else { return XCTFail() }
    }

    func testOffersAreParsedInOrderAndRepeatedHeadersJoined() {
        let text = request(Self.goodLines + ["Sec-WebSocket-Protocol: b, a", "sec-websocket-protocol: c",
                                             "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
                                             "Sec-WebSocket-Extensions: x-test; level=\"2\", permessage-deflate"])
        guard case .success(let request?) = validate(text) else { return XCTFail("\(validate(text))") }
        XCTAssertEqual(request.subprotocols, ["b", "a", "c"])
        XCTAssertEqual(request.extensions, [
            ExtensionOffer(name: "permessage-deflate", parameters: [.init("client_max_window_bits")]),
            ExtensionOffer(name: "x-test", parameters: [.init("level", "2")]),
            ExtensionOffer(name: "permessage-deflate"),
        ])
        XCTAssertNil(request.origin)
        XCTAssertEqual(request.head.listValues("sec-websocket-protocol"), ["b", "a", "c"])
    }

    // MARK: Refusals

    func testWrongMethodIs405WithAllow() {
        assertRefused(request(line: "POST /chat HTTP/1.1"), .methodNotAllowed("POST"), status: 405)
        assertRefused(request(line: "get /chat HTTP/1.1"), .methodNotAllowed("get"), status: 405)
        let response = String(decoding: HandshakeRefusal.methodNotAllowed("POST").response, as: UTF8.self)
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\n"), response)
    }

    func testHTTP10Is400() {
        assertRefused(request(line: "GET /chat HTTP/1.0"), .unsupportedHTTPVersion("HTTP/1.0"), status: 400)
        assertRefused(request(line: "GET /chat HTTP/2.0"), .unsupportedHTTPVersion("HTTP/2.0"), status: 400)
    }

    func testBadTargetsAre400() {
        for target in ["*", "chat", "/chat#frag", "ws://", "server.example.com:80", "ws://?q", "a/b://h/chat", "ws://h/chat#frag"] {
            assertRefused(request(line: "GET \(target) HTTP/1.1"), .invalidTarget(target), status: 400)
        }
    }

    func testMissingOrRepeatedHostIs400() {
        assertRefused(request(lines(replacing: "Host", with: nil)), .missingHeader("Host"), status: 400)
        assertRefused(request(Self.goodLines + ["host: other"]), .repeatedHeader("Host"), status: 400)
        assertRefused(request(lines(replacing: "Host", with: "Host: ")), .invalidHeader(name: "Host", value: ""), status: 400)
    }

    func testPlainGetIs426() {
        let plain = request(["Host: server.example.com"])
        assertRefused(plain, .notWebSocketUpgrade([]), status: 426)
        assertRefused(request(lines(replacing: "Upgrade", with: "Upgrade: h2c")), .notWebSocketUpgrade(["h2c"]), status: 426)
        guard let (head, body) = responseHead(HandshakeRefusal.notWebSocketUpgrade([]).response) else { return }
        XCTAssertEqual(head.statusCode, 426)
        XCTAssertEqual(head.values("Upgrade"), ["websocket"])
        XCTAssertEqual(head.values("Sec-WebSocket-Version"), ["13"])
        XCTAssertEqual(body, utf8("not a WebSocket handshake: the request has no Upgrade header\n"))
    }

    func testConnectionWithoutUpgradeIs400() {
        assertRefused(request(lines(replacing: "Connection", with: "Connection: keep-alive")),
                      .invalidHeader(name: "Connection", value: "keep-alive"), status: 400)
        assertRefused(request(lines(replacing: "Connection", with: nil)), .missingHeader("Connection"), status: 400)
        XCTAssertEqual(HandshakeRefusal.invalidHeader(name: "Connection", value: "keep-alive").description,
                       "'Connection: keep-alive' has no 'Upgrade' token")
    }

    func testMissingOrInvalidKeyIs400() {
        assertRefused(request(lines(replacing: "Sec-WebSocket-Key", with: nil)), .missingHeader("Sec-WebSocket-Key"), status: 400)
        let fifteen = Base64.encode(patternBytes(15)), seventeen = Base64.encode(patternBytes(17))
        for key in ["not base64!", "dGhlIHNhbXBsZSBub25jZQ", fifteen, seventeen, "dGhlIHNhbXBsZSBub25jZQ=x"] {
            assertRefused(request(lines(replacing: "Sec-WebSocket-Key", with: "Sec-WebSocket-Key: \(key)")),
                          .invalidHeader(name: "Sec-WebSocket-Key", value: key), status: 400)
        }
        assertRefused(request(Self.goodLines + ["Sec-WebSocket-Key: \(Base64.encode(patternBytes(16)))"]),
                      .repeatedHeader("Sec-WebSocket-Key"), status: 400)
        XCTAssertEqual(HandshakeRefusal.invalidHeader(name: "Sec-WebSocket-Key", value: "abc").description,
                       "'Sec-WebSocket-Key: abc' is not the base64 of 16 bytes")
    }

    func testVersion8Is426WithVersion13() {
        assertRefused(request(lines(replacing: "Sec-WebSocket-Version", with: "Sec-WebSocket-Version: 8")),
                      .unsupportedWebSocketVersion(["8"]), status: 426)
        assertRefused(request(lines(replacing: "Sec-WebSocket-Version", with: "Sec-WebSocket-Version: 13, 8")),
                      .unsupportedWebSocketVersion(["13, 8"]), status: 426)
        assertRefused(request(lines(replacing: "Sec-WebSocket-Version", with: nil)), .missingHeader("Sec-WebSocket-Version"), status: 400)
        guard let (head, body) = responseHead(HandshakeRefusal.unsupportedWebSocketVersion(["8"]).response) else { return }
        XCTAssertEqual(head.statusCode, 426)
        XCTAssertEqual(head.reason, "Upgrade Required")
        XCTAssertEqual(head.values("Sec-WebSocket-Version"), ["13"])
        XCTAssertEqual(body, utf8("WebSocket version '8' is not supported (only 13)\n"))
    }

    func testBadOfferListsAre400() {
        assertRefused(request(Self.goodLines + ["Sec-WebSocket-Extensions: a; p=\"1"]),
                      .invalidHeader(name: "Sec-WebSocket-Extensions", value: "a; p=\"1"), status: 400)
        assertRefused(request(Self.goodLines + ["Sec-WebSocket-Protocol: chat, a/b"]),
                      .invalidHeader(name: "Sec-WebSocket-Protocol", value: "a/b"), status: 400)
        assertRefused(request(Self.goodLines + ["Origin: a", "Origin: b"]), .repeatedHeader("Origin"), status: 400)
    }

    func testMalformedHeadsAre400() {
        let heads = ["GET /chat\r\n\r\n", "GET  /chat HTTP/1.1\r\n\r\n", "GET /chat HTTP/1.1 \r\n\r\n", "GET /chat HTTP/11\r\n\r\n",
                     "GET /chat HTTP/1.1\r\nHost server\r\n\r\n", "GET /chat HTTP/1.1\r\n folded\r\n\r\n",
                     "GET /chat HTTP/1.1\r\nX: a\rb\r\n\r\n", "GET /chat HTTP/1.1\r\nX: a\u{0}\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n",
                     "\u{16}\u{03}\u{01}\r\n\r\n"]
        for head in heads {
            guard case .failure(.malformedRequest(let why)) = validate(head) else {
                XCTFail("\(printable(utf8(head))): \(validate(head))")
                continue
            }
            XCTAssertEqual(HandshakeRefusal.malformedRequest(why).status, 400)
        }
    }

    // MARK: Incremental parsing and the size cap

    func testHeadSplitAtEveryByteGivesTheSameRequest() {
        let bytes = utf8(Self.rfcRequest)
        let (whole, length) = handshake(bytes)
        XCTAssertEqual(length, bytes.count)
        guard case .success(let expected?) = whole else { return XCTFail() }
        for splits in twoWaySplits(bytes.count) + [byteByByte(bytes.count)] {
            let (result, consumed) = handshake(bytes, splits: splits)
            XCTAssertEqual(result, .success(expected), "splits \(splits)")
            XCTAssertEqual(consumed, bytes.count)
        }
    }

    func testPipelinedFramesAfterTheHeadAreLeftUntouched() {
        let head = utf8(Self.rfcRequest)
        let frames = RFCExampleFrameTests.maskedHello + RFCExampleFrameTests.maskedPing
        let input = head + frames
        for splits in twoWaySplits(input.count) {
            let (result, consumed) = handshake(input, splits: splits)
            guard case .success(.some) = result else { return XCTFail("splits \(splits): \(result)") }
            XCTAssertEqual(consumed, head.count, "splits \(splits)")
        }
        // The bytes after the head read as frames, from the reported offset.
        var server = ServerHandshake()
        var index = 0
        let run: ReaderRun? = input.withUnsafeBytes { raw in
            guard (try? server.receive(raw, &index)) != nil else { return nil }
            return runReader(Array(raw[index...]), role: .server)
        }
        XCTAssertEqual(run?.events, [.start(.text), .data(helloBytes), .end, .ping(helloBytes)])
        // Once the head was returned, nothing more is consumed.
        input.withUnsafeBytes { raw in
            var again = index
            XCTAssertEqual(try? server.receive(raw, &again), .some(nil))
            XCTAssertEqual(again, index)
        }
    }

    func testLeadingEmptyLinesAndBareLineFeedsAreAccepted() {
        let text = "\r\n" + request().replacingCRLF()
        guard case .success(.some) = validate(text) else { return XCTFail("\(validate(text))") }
    }

    func testHeadOverTheCapIs431() {
        let cap = 256
        let base = request()
        let padding = cap - base.utf8.count - "X-Pad: \r\n".utf8.count
        // Exactly at the cap: accepted.
        let atCap = request(Self.goodLines + ["X-Pad: " + String(repeating: "a", count: padding)])
        XCTAssertEqual(atCap.utf8.count, cap)
        guard case (.success(.some), cap) = handshake(utf8(atCap), maximumHeadSize: cap) else {
            return XCTFail("\(handshake(utf8(atCap), maximumHeadSize: cap))")
        }
        // One byte over: 431, byte by byte too.
        let over = utf8(request(Self.goodLines + ["X-Pad: " + String(repeating: "a", count: padding + 1)]))
        for splits in [[], byteByByte(over.count), [cap - 1], [cap]] {
            XCTAssertEqual(handshake(over, splits: splits, maximumHeadSize: cap).0, .failure(.headTooLarge(limit: cap)))
        }
        // Refused as soon as the cap is reached, without waiting for the blank line.
        let endless = utf8("GET / HTTP/1.1\r\nX: " + String(repeating: "b", count: cap))
        XCTAssertEqual(handshake(Array(endless[..<cap]), maximumHeadSize: cap).0, .failure(.headTooLarge(limit: cap)))
        XCTAssertEqual(handshake(Array(endless[..<(cap - 1)]), maximumHeadSize: cap).0, .success(nil))
        XCTAssertEqual(HandshakeRefusal.headTooLarge(limit: cap).status, 431)
        // The default cap is 16 KiB.
        let big = utf8(request(Self.goodLines + ["X-Pad: " + String(repeating: "c", count: 16 * 1024)]))
        XCTAssertEqual(handshake(big).0, .failure(.headTooLarge(limit: 16 * 1024)))
    }

    // MARK: Refusal responses

    func testRefusalResponsesForEachStatus() throws {
        let cases: [(Int, String, [HTTPHeader])] = [
            (400, "Bad Request", []), (401, "Unauthorized", [HTTPHeader(name: "WWW-Authenticate", value: "Basic realm=\"ws\"")]),
            (403, "Forbidden", []), (404, "Not Found", []), (426, "Upgrade Required", [HTTPHeader(name: "Sec-WebSocket-Version", value: "13")]),
            (431, "Request Header Fields Too Large", []), (503, "Service Unavailable", [HTTPHeader(name: "Retry-After", value: "5")]),
            // --forward's gateway answers: 502 said "Server Error".
            (502, "Bad Gateway", []), (504, "Gateway Timeout", []),
        ]
        for (status, reason, headers) in cases {
            let bytes = try HTTPResponse.refusal(status: status, headers: headers)
            guard let (head, body) = responseHead(bytes) else { continue }
            XCTAssertEqual(head.statusCode, status)
            XCTAssertEqual(head.reason, reason)
            XCTAssertEqual(Array(head.headers.prefix(headers.count)), headers)
            XCTAssertEqual(head.values("Content-Type"), ["text/plain; charset=utf-8"])
            XCTAssertEqual(head.values("Content-Length"), [String(body.count)])
            XCTAssertEqual(head.values("Connection"), ["close"])
            XCTAssertEqual(body, utf8("\(status) \(reason)\n"))
        }
        XCTAssertEqual(String(decoding: try HTTPResponse.refusal(status: 404, body: "no such room"), as: UTF8.self),
                       "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\n"
                       + "Connection: close\r\n\r\nno such room\n")
    }

    func testRefusalBuilderRefusesBadInput() {
        func refusal(_ status: Int, _ headers: [HTTPHeader] = [], body: String? = nil) -> ResponseBuildError? {
            do throws(ResponseBuildError) {
                _ = try HTTPResponse.refusal(status: status, headers: headers, body: body)
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(refusal(401), .missingHeader(status: 401, name: "WWW-Authenticate"))
        XCTAssertEqual(refusal(403, [HTTPHeader(name: "X-Why", value: "a\r\n\r\n<html>")]), .header(.badValue("X-Why")))
        XCTAssertEqual(refusal(403, [HTTPHeader(name: "X-Why", value: "a\nb")]), .header(.badValue("X-Why")))
        XCTAssertEqual(refusal(403, [HTTPHeader(name: "Bad:Name", value: "a")]), .header(.badName("Bad:Name")))
        XCTAssertEqual(refusal(403, [HTTPHeader(name: "Content-Length", value: "0")]), .header(.reserved("Content-Length")))
        XCTAssertEqual(refusal(403, body: "two\nlines"), .invalidBody)
        XCTAssertEqual(refusal(200), .notARefusal(200))
        XCTAssertEqual(refusal(101), .notARefusal(101))
        XCTAssertEqual(ResponseBuildError.missingHeader(status: 401, name: "WWW-Authenticate").description,
                       "a 401 response needs a WWW-Authenticate header")
    }

    func testEveryRefusalHasAResponseWithItsStatus() {
        let refusals: [HandshakeRefusal] = [
            .malformedRequest("bad request line \"x\""), .headTooLarge(limit: 16384), .methodNotAllowed("PUT"),
            .unsupportedHTTPVersion("HTTP/1.0"), .invalidTarget("*"), .notWebSocketUpgrade(["h2c"]), .missingHeader("Host"),
            .repeatedHeader("Host"), .invalidHeader(name: "Host", value: "\u{7}"), .unsupportedWebSocketVersion(["8"]),
        ]
        for refusal in refusals {
            guard let (head, body) = responseHead(refusal.response) else { continue }
            XCTAssertEqual(head.statusCode, refusal.status, "\(refusal)")
            XCTAssertEqual(body, utf8(refusal.description + "\n"))
            XCTAssertFalse(refusal.description.contains("--"), "no error names a command-line flag")
            XCTAssertFalse(refusal.description.utf8.contains { $0 < 0x20 }, "one printable line: \(refusal)")
        }
    }

    // MARK: Round trip with the client side

    func testClientRequestParsedByTheServerAndItsAnswerAcceptedByTheClient() throws {
        let url = try WebSocketURL(parsing: "ws://user:pw@server.example.com:8080/chat?room=1")
        let client = ClientHandshake(url: url, subprotocols: ["chat", "superchat"],
                                     headers: [HTTPHeader(name: "Origin", value: "http://example.com")],
                                     extensions: [TestExtension()])
        let (result, consumed) = handshake(client.requestBytes, splits: [17])
        XCTAssertEqual(consumed, client.requestBytes.count)
        guard case .success(let request?) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(request.key, client.key)
        XCTAssertEqual(request.path, "/chat")
        XCTAssertEqual(request.query, "room=1")
        XCTAssertEqual(request.host, "server.example.com:8080")
        XCTAssertEqual(request.origin, "http://example.com")
        XCTAssertEqual(request.subprotocols, ["chat", "superchat"])
        XCTAssertEqual(request.head.values("Authorization"), ["Basic " + Base64.encode(utf8("user:pw"))])

        let chosen = ExtensionNegotiation.respond(to: request.extensions, supported: [TestExtension()])
        let answer = try ServerHandshake.accept(request, subprotocol: "superchat", extensions: chosen.map(\.1))
        guard let (head, rest) = responseHead(answer) else { return }
        XCTAssertEqual(rest, [])
        XCTAssertEqual(try client.validate(head),
                       ClientHandshake.Negotiated(subprotocol: "superchat",
                                                  extensions: [ExtensionOffer(name: "x-test", parameters: [.init("level", "1")])]))
    }

    func testRoundTripWithARandomKeyAndNoOffers() throws {
        let client = ClientHandshake(url: try WebSocketURL(parsing: "ws://localhost/"))
        guard case .success(let request?) = handshake(client.requestBytes).0 else { return XCTFail() }
        guard let (head, _) = responseHead(try ServerHandshake.accept(request)) else { return }
        XCTAssertEqual(try client.validate(head), ClientHandshake.Negotiated(subprotocol: nil))
    }
}

extension String {
    /// The text with each CRLF replaced by a bare LF.
    func replacingCRLF() -> String {
        String(decoding: Array(utf8).split(separator: 0x0D, omittingEmptySubsequences: false).joined(), as: UTF8.self)
    }
}
