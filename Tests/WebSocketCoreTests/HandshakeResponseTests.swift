// Parsing the server's response head and checking it (RFC 6455 §4.1, RFC 9112).
import XCTest
@testable import WebSocketCore

final class HandshakeResponseTests: XCTestCase {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="
    static let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    static let goodHead = "HTTP/1.1 101 Switching Protocols\r\n"
        + "Upgrade: websocket\r\n"
        + "Connection: Upgrade\r\n"
        + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
        + "\r\n"

    /// A 101 head with the given header lines (CRLF-terminated, then the blank line).
    func head(_ lines: [String], status: String = "101 Switching Protocols") -> String {
        "HTTP/1.1 \(status)\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n"
    }

    func handshake(subprotocols: [String] = []) -> ClientHandshake {
        ClientHandshake(url: try! WebSocketURL(parsing: "ws://server.example.com/chat"), subprotocols: subprotocols, key: Self.key)
    }

    func parseResult(_ bytes: [UInt8]) -> Result<(HTTPResponseHead, Int)?, HandshakeError> {
        do throws(HandshakeError) {
            return .success(try parseHead(bytes))
        } catch {
            return .failure(error)
        }
    }

    /// Parses `text` as a complete head and validates it.
    func check(_ text: String, subprotocols: [String] = []) -> Result<ClientHandshake.Negotiated, HandshakeError> {
        do throws(HandshakeError) {
            guard let (response, length) = try parseHead(text) else {
                return .failure(.malformed("test: head incomplete"))
            }
            XCTAssertEqual(length, text.utf8.count)
            return .success(try handshake(subprotocols: subprotocols).validate(response))
        } catch {
            return .failure(error)
        }
    }

    func assertRefused(_ text: String, subprotocols: [String] = [], file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(.invalid) = check(text, subprotocols: subprotocols) else {
            return XCTFail("expected .invalid, got \(check(text, subprotocols: subprotocols))", file: file, line: line)
        }
    }

    func assertMalformed(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(.malformed) = parseResult(bytes) else {
            return XCTFail("expected .malformed for \(printable(bytes)), got \(parseResult(bytes))", file: file, line: line)
        }
    }

    // MARK: Parsing

    func testGoodHeadParses() throws {
        guard let (response, length) = try parseHead(Self.goodHead) else { return XCTFail("incomplete") }
        XCTAssertEqual(length, Self.goodHead.utf8.count)
        XCTAssertEqual(response.version, "HTTP/1.1")
        XCTAssertEqual(response.statusCode, 101)
        XCTAssertEqual(response.reason, "Switching Protocols")
        XCTAssertEqual(response.headers, [HTTPHeader(name: "Upgrade", value: "websocket"),
                                          HTTPHeader(name: "Connection", value: "Upgrade"),
                                          HTTPHeader(name: "Sec-WebSocket-Accept", value: Self.accept)])
    }

    func testGoodHeadValidates() {
        XCTAssertEqual(try check(Self.goodHead).get(), ClientHandshake.Negotiated(subprotocol: nil))
    }

    func testEveryProperPrefixIsIncomplete() {
        let bytes = utf8(Self.goodHead)
        for count in 0..<bytes.count {
            switch parseResult(Array(bytes[0..<count])) {
            case .success(.none): break
            case let other: XCTFail("prefix of \(count) bytes: \(other)")
            }
        }
    }

    func testLengthExcludesFollowingFrameBytes() throws {
        let bytes = utf8(Self.goodHead) + [0x81, 0x02, 0x68, 0x69] + [0x0D, 0x0A, 0x0D, 0x0A]
        guard let (_, length) = try parseHead(bytes) else { return XCTFail("incomplete") }
        XCTAssertEqual(length, Self.goodHead.utf8.count)
    }

    func testLengthExcludesFollowingFrameBytesWithBareLF() throws {
        let text = "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
            + "Sec-WebSocket-Accept: \(Self.accept)\n\n"
        guard let (_, length) = try parseHead(utf8(text) + [0x0A, 0x0A, 0x81, 0x00]) else { return XCTFail("incomplete") }
        XCTAssertEqual(length, text.utf8.count)
    }

    func testExtraHeadersMixedCaseAndListsValidate() {
        let text = head([
            "Server: test/1.0",
            "upgrade: WebSocket",
            "CONNECTION: keep-alive, Upgrade",
            "Date: Sun, 06 Nov 1994 08:49:37 GMT",
            "sec-websocket-accept:    \(Self.accept)   ",
            "Sec-WebSocket-Extensions: ",
        ])
        XCTAssertEqual(try check(text).get(), ClientHandshake.Negotiated(subprotocol: nil))
    }

    func testConnectionTokenMayBeInASecondHeader() {
        let text = head(["Upgrade: websocket", "Connection: keep-alive", "Connection: upgrade", "Sec-WebSocket-Accept: \(Self.accept)"])
        XCTAssertNoThrow(try check(text).get())
    }

    func testBareLFHeadValidates() {
        let text = "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
            + "Sec-WebSocket-Accept: \(Self.accept)\n\n"
        XCTAssertNoThrow(try check(text).get())
    }

    func testMixedLineEndsValidate() {
        let text = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(Self.accept)\n\r\n"
        XCTAssertNoThrow(try check(text).get())
    }

    func testObsoleteLineFoldingIsJoined() throws {
        let text = head(["Upgrade: websocket", "Connection: keep-alive,", " \tUpgrade", "X-Long: first", "  second", "Sec-WebSocket-Accept: \(Self.accept)"])
        guard let (response, _) = try parseHead(text) else { return XCTFail("incomplete") }
        XCTAssertEqual(response.values("Connection"), ["keep-alive, Upgrade"])
        XCTAssertEqual(response.values("X-Long"), ["first second"])
        XCTAssertNoThrow(try check(text).get())
    }

    func testFoldingBeforeAnyHeaderIsMalformed() {
        assertMalformed(utf8("HTTP/1.1 101 OK\r\n folded\r\n\r\n"))
    }

    func testValuesAreCaseInsensitiveAndTrimmed() throws {
        guard let (response, _) = try parseHead(head(["X-A:  1 ", "x-a:\t2", "X-B: 3"])) else { return XCTFail("incomplete") }
        XCTAssertEqual(response.values("X-A"), ["1", "2"])
        XCTAssertEqual(response.values("x-b"), ["3"])
        XCTAssertEqual(response.values("X-C"), [])
    }

    func testStatusLineWithoutReasonParses() throws {
        guard let (response, _) = try parseHead("HTTP/1.1 101\r\n\r\n") else { return XCTFail("incomplete") }
        XCTAssertEqual(response.statusCode, 101)
        XCTAssertEqual(response.reason, "")
    }

    func testHTTP10StatusLineParses() throws {
        XCTAssertEqual(try parseHead("HTTP/1.0 200 OK\r\n\r\n")?.0.version, "HTTP/1.0")
    }

    func testBadStatusLinesAreMalformed() {
        for line in ["HTTP/1.1 abc OK", "HTTP/1.1 1010 OK", "HTTP/1.1 10 OK", "HTTP/2 101 OK", "HTTP/1.1", "HTTP/1.12 101 OK"] {
            assertMalformed(utf8(line + "\r\n\r\n"))
        }
    }

    func testBadHeaderLinesAreMalformed() {
        for line in ["no colon here", ": empty name", "Bad Name: x", "Upgrade : websocket"] {
            assertMalformed(utf8("HTTP/1.1 101 OK\r\n\(line)\r\n\r\n"))
        }
    }

    func testPrintableEscapesControlAndNonASCIIBytes() {
        XCTAssertEqual(printable([0x41, 0x0A, 0x0D, 0x09, 0x22, 0x5C, 0x00, 0xFF, 0x7F, 0x20]),
                       "\"A\\n\\r\\t\\\"\\\\\\x00\\xFF\\x7F \"")
        XCTAssertEqual(printable([]), "\"\"")
    }

    func testNotHTTPErrorShowsTheFirstBytes() {
        XCTAssertEqual(parseResult(utf8("SSH-2.0\r\n")).failure,
                       .malformed("the server's answer is not HTTP (it starts with \"SSH-2.0\\r\\n\")"))
    }

    func testATLSRecordIsRecognisedAsTLS() {
        // A TLS alert (0x15) or handshake record (0x16), version 3.x: a TLS server given plain text.
        for first: UInt8 in [0x15, 0x16] {
            XCTAssertEqual(parseResult([first, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]).failure,
                           .malformed("the server answered with TLS, not HTTP (it expects a TLS client: wss://, or https:// for a proxy)"))
        }
        XCTAssertEqual(parseResult([0x15, 0x04]).failure,
                       .malformed("the server's answer is not HTTP (it starts with \"\\x15\\x04\")"))
    }

    // MARK: Refusals

    func testWrongAcceptIsRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: dGhlIHNhbXBsZSBub25jZQ=="]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: S3PPLMBITXAQ9KYGZZHZRBK+XOO="]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)x"]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: "]))
    }

    func testMissingAcceptIsRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade"]))
    }

    func testTwoAcceptHeadersAreRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade",
                            "Sec-WebSocket-Accept: \(Self.accept)", "Sec-WebSocket-Accept: \(Self.accept)"]))
    }

    func testMissingUpgradeIsRefused() {
        assertRefused(head(["Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)"]))
    }

    func testWrongUpgradeIsRefused() {
        assertRefused(head(["Upgrade: h2c", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)"]))
        assertRefused(head(["Upgrade: websocket, h2c", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)"]))
        assertRefused(head(["Upgrade: websocket", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)"]))
    }

    func testMissingConnectionIsRefused() {
        assertRefused(head(["Upgrade: websocket", "Sec-WebSocket-Accept: \(Self.accept)"]))
    }

    func testConnectionWithoutUpgradeTokenIsRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: keep-alive", "Sec-WebSocket-Accept: \(Self.accept)"]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgraded", "Sec-WebSocket-Accept: \(Self.accept)"]))
    }

    func testOfferedSubprotocolIsNegotiated() {
        let text = head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                         "Sec-WebSocket-Protocol: superchat"])
        XCTAssertEqual(try check(text, subprotocols: ["chat", "superchat"]).get(), ClientHandshake.Negotiated(subprotocol: "superchat"))
    }

    func testUnofferedSubprotocolIsRefused() {
        let text = head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                         "Sec-WebSocket-Protocol: mqtt"])
        assertRefused(text, subprotocols: ["chat"])
        assertRefused(text)
    }

    func testTwoSubprotocolsAreRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                            "Sec-WebSocket-Protocol: chat, superchat"]), subprotocols: ["chat", "superchat"])
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                            "Sec-WebSocket-Protocol: chat", "Sec-WebSocket-Protocol: superchat"]), subprotocols: ["chat", "superchat"])
    }

    func testAnyExtensionIsRefused() {
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                            "Sec-WebSocket-Extensions: permessage-deflate"]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=15"]))
        assertRefused(head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)",
                            "Sec-WebSocket-Extensions: , x-custom"]))
    }

    func testNon101IsUnexpectedStatusWithTheHead() throws {
        let text = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"
        let bytes = utf8(text + "nope!")
        guard let (response, length) = try parseHead(bytes) else { return XCTFail("incomplete") }
        XCTAssertEqual(length, text.utf8.count, "the body is not part of the head")
        XCTAssertThrowsError(try handshake().validate(response)) { error in
            guard case .unexpectedStatus(let carried)? = error as? HandshakeError else {
                return XCTFail("expected .unexpectedStatus, got \(error)")
            }
            XCTAssertEqual(carried.statusCode, 403)
            XCTAssertEqual(carried.reason, "Forbidden")
            XCTAssertEqual(carried.values("Content-Type"), ["text/plain"])
            XCTAssertEqual(carried.values("Content-Length"), ["5"])
            XCTAssertEqual((error as? HandshakeError)?.description, "the server answered 403 Forbidden instead of 101 Switching Protocols")
        }
    }

    func test200WithWebSocketHeadersIsStillRefused() throws {
        let text = head(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: \(Self.accept)"], status: "200 OK")
        guard case .failure(.unexpectedStatus(let response)) = check(text) else { return XCTFail("accepted a 200") }
        XCTAssertEqual(response.statusCode, 200)
    }

    // MARK: Not HTTP, too large

    func testGarbageIsRefusedAsSoonAsTheFirstByteDiffers() {
        assertMalformed(utf8("S"))
        assertMalformed(utf8("SSH-2.0-OpenSSH_9.2\r\n"))
        assertMalformed(utf8("<html>"))
        assertMalformed([0x16, 0x03, 0x01])  // a TLS record: wss:// server on a ws:// URL
        assertMalformed([0x81, 0x05])
    }

    func testGarbageIsRefusedWhenALaterPrefixByteDiffers() {
        assertMalformed(utf8("HTTX"))
        assertMalformed(utf8("http/1.1 101 Switching Protocols\r\n\r\n"))
        assertMalformed(utf8("HTTP 101"))
    }

    func testPrefixOfHTTPIsIncomplete() {
        for prefix in ["", "H", "HT", "HTT", "HTTP", "HTTP/", "HTTP/1.1 101"] {
            switch parseResult(utf8(prefix)) {
            case .success(.none): break
            case let other: XCTFail("'\(prefix)': \(other)")
            }
        }
    }

    func testHeadOver64KiBIsTooLarge() {
        let text = head(["X-Big: " + String(repeating: "a", count: 70_000)])
        XCTAssertEqual(parseResult(utf8(text)).failure, .headTooLarge(65536))
    }

    func testHeadWithoutBlankLineIsTooLargeAt64KiB() {
        let start = utf8("HTTP/1.1 101 Switching Protocols\r\nX-Big: ")
        let endless = start + [UInt8](repeating: 0x61, count: 65536 - start.count)
        XCTAssertEqual(endless.count, 65536)
        XCTAssertEqual(parseResult(endless).failure, .headTooLarge(65536))
        XCTAssertEqual(parseResult(endless + [UInt8](repeating: 0x61, count: 100)).failure, .headTooLarge(65536))
    }

    func testHeadWithoutBlankLineJustUnder64KiBIsIncomplete() {
        let start = utf8("HTTP/1.1 101 Switching Protocols\r\nX-Big: ")
        let bytes = start + [UInt8](repeating: 0x61, count: 65535 - start.count)
        switch parseResult(bytes) {
        case .success(.none): break
        case let other: XCTFail("65535 bytes without a blank line: \(other)")
        }
    }

    func testManyHeaderLinesWithoutBlankLineAreTooLarge() {
        var bytes = utf8("HTTP/1.1 101 Switching Protocols\r\n")
        while bytes.count < 70_000 { bytes += utf8("X-Filler: 0123456789\r\n") }
        XCTAssertEqual(parseResult(bytes).failure, .headTooLarge(65536))
    }

    func testHeadOfExactly64KiBIsAccepted() throws {
        let start = "HTTP/1.1 101 Switching Protocols\r\nX-Big: "
        let filler = String(repeating: "a", count: 65536 - start.utf8.count - 4)
        let text = start + filler + "\r\n\r\n"
        XCTAssertEqual(text.utf8.count, 65536)
        XCTAssertEqual(try parseHead(text)?.1, 65536)
    }

    func testHeadOfOneByteOver64KiBIsTooLarge() {
        let start = "HTTP/1.1 101 Switching Protocols\r\nX-Big: "
        let filler = String(repeating: "a", count: 65537 - start.utf8.count - 4)
        let text = start + filler + "\r\n\r\n"
        XCTAssertEqual(text.utf8.count, 65537)
        XCTAssertEqual(parseResult(utf8(text)).failure, .headTooLarge(65536))
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
