// The opening handshake request (RFC 6455 §4.1) and user header validation.
import XCTest
@testable import WebSocketCore

final class HandshakeRequestTests: XCTestCase {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    func handshake(_ text: String, subprotocols: [String] = [], headers: [HTTPHeader] = []) throws -> ClientHandshake {
        ClientHandshake(url: try WebSocketURL(parsing: text), subprotocols: subprotocols, headers: headers, key: Self.key)
    }

    func requestText(_ handshake: ClientHandshake) -> String {
        String(decoding: handshake.requestBytes, as: UTF8.self)
    }

    func headerError(_ body: () throws(HeaderError) -> Void) -> HeaderError? {
        do throws(HeaderError) {
            try body()
            return nil
        } catch {
            return error
        }
    }

    // MARK: Request bytes

    func testSimpleRequestIsExact() throws {
        let expected = "GET /chat HTTP/1.1\r\n"
            + "Host: server.example.com\r\n"
            + "Upgrade: websocket\r\n"
            + "Connection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Sec-WebSocket-Version: 13\r\n"
            + "\r\n"
        XCTAssertEqual(try handshake("ws://server.example.com/chat").requestBytes, utf8(expected))
    }

    func testRequestLineKeepsPathAndQuery() throws {
        XCTAssertTrue(requestText(try handshake("ws://h/feed/v2?symbol=ABC&x=%2Fa")).hasPrefix("GET /feed/v2?symbol=ABC&x=%2Fa HTTP/1.1\r\n"))
        XCTAssertTrue(requestText(try handshake("ws://h")).hasPrefix("GET / HTTP/1.1\r\n"))
    }

    func testHostHeaderCarriesNonDefaultPort() throws {
        XCTAssertTrue(requestText(try handshake("ws://h:8080/")).contains("\r\nHost: h:8080\r\n"))
        XCTAssertTrue(requestText(try handshake("wss://[::1]:9443/")).contains("\r\nHost: [::1]:9443\r\n"))
        XCTAssertTrue(requestText(try handshake("wss://h:443/")).contains("\r\nHost: h\r\n"))
    }

    func testUserHostHeaderReplacesTheDefault() throws {
        let request = try handshake("ws://10.0.0.5:8080/x", headers: [HTTPHeader(name: "Host", value: "api.example.com")])
        let text = requestText(request)
        XCTAssertTrue(text.contains("\r\nHost: api.example.com\r\n"))
        XCTAssertFalse(text.contains("10.0.0.5"))
        XCTAssertEqual(text.components(separatedBy: "Host:").count - 1, 1, "exactly one Host header")
        XCTAssertEqual(request.requestHeaders.first?.value, "api.example.com", "Host stays first")
    }

    func testUserHostHeaderIsMatchedCaseInsensitively() throws {
        let text = requestText(try handshake("ws://h/", headers: [HTTPHeader(name: "host", value: "other")]))
        XCTAssertTrue(text.contains("\r\nhost: other\r\n"))
        XCTAssertFalse(text.contains("Host: h"))
    }

    func testBasicAuthorizationFromURLUserInfo() throws {
        let text = requestText(try handshake("ws://alice:secret@h/"))
        XCTAssertTrue(text.contains("\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\n"))
        XCTAssertFalse(text.contains("alice"))
    }

    func testBasicAuthorizationForUserWithoutPassword() throws {
        XCTAssertTrue(requestText(try handshake("ws://bob@h/")).contains("\r\nAuthorization: Basic Ym9iOg==\r\n"))
    }

    func testBasicAuthorizationUsesDecodedUserInfo() throws {
        // "a b:p@ss" in base64.
        XCTAssertTrue(requestText(try handshake("ws://a%20b:p%40ss@h/")).contains("\r\nAuthorization: Basic \(Base64.encode(utf8("a b:p@ss")))\r\n"))
    }

    func testUserAuthorizationHeaderWinsOverURLUserInfo() throws {
        let text = requestText(try handshake("ws://alice:secret@h/", headers: [HTTPHeader(name: "Authorization", value: "Bearer t0k")]))
        XCTAssertTrue(text.contains("\r\nAuthorization: Bearer t0k\r\n"))
        XCTAssertFalse(text.contains("Basic"))
    }

    func testSubprotocolsAreJoined() throws {
        let text = requestText(try handshake("ws://h/", subprotocols: ["chat", "superchat", "v2.json"]))
        XCTAssertTrue(text.contains("\r\nSec-WebSocket-Protocol: chat, superchat, v2.json\r\n"))
    }

    func testNoSubprotocolHeaderWithoutSubprotocols() throws {
        XCTAssertFalse(requestText(try handshake("ws://h/")).contains("Sec-WebSocket-Protocol"))
    }

    func testHeaderOrder() throws {
        let request = try handshake("ws://u:p@h/", subprotocols: ["chat"],
                                    headers: [HTTPHeader(name: "Origin", value: "https://h"), HTTPHeader(name: "X-Trace", value: "1")])
        XCTAssertEqual(request.requestHeaders.map(\.name),
                       ["Host", "Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version",
                        "Sec-WebSocket-Protocol", "Authorization", "Origin", "X-Trace"])
    }

    func testUserHeadersAreSentAsGiven() throws {
        let text = requestText(try handshake("ws://h/", headers: [HTTPHeader(name: "X-Api-Key", value: "k 1"),
                                                                  HTTPHeader(name: "Cookie", value: "a=b; c=d")]))
        XCTAssertTrue(text.hasSuffix("\r\nX-Api-Key: k 1\r\nCookie: a=b; c=d\r\n\r\n"))
    }

    func testDefaultKeyIsSixteenRandomBytesInBase64() throws {
        let url = try WebSocketURL(parsing: "ws://h/")
        let first = ClientHandshake(url: url).key
        let second = ClientHandshake(url: url).key
        XCTAssertEqual(first.utf8.count, 24)
        XCTAssertEqual(Base64.decode(first)?.count, 16)
        XCTAssertNotEqual(first, second)
    }

    // MARK: User header validation

    func testHandshakeHeadersAreRefused() {
        for name in ["Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Accept",
                     "Sec-WebSocket-Extensions", "Content-Length", "Transfer-Encoding", "upgrade", "CONNECTION",
                     "sec-websocket-key"] {
            let header = HTTPHeader(name: name, value: "x")
            XCTAssertEqual(headerError { () throws(HeaderError) in try ClientHandshake.validateUserHeaders([header]) },
                           .reserved(name), name)
        }
    }

    func testOrdinaryHeadersAreAllowed() {
        let headers = ["Host", "Origin", "User-Agent", "Authorization", "Sec-WebSocket-Protocol", "Cookie", "X-Custom"]
            .map { HTTPHeader(name: $0, value: "v") }
        XCTAssertNil(headerError { () throws(HeaderError) in try ClientHandshake.validateUserHeaders(headers) })
    }

    func testReservedHeaderAmongOthersIsFound() {
        let headers = [HTTPHeader(name: "X-A", value: "1"), HTTPHeader(name: "Sec-WebSocket-Version", value: "8")]
        XCTAssertEqual(headerError { () throws(HeaderError) in try ClientHandshake.validateUserHeaders(headers) },
                       .reserved("Sec-WebSocket-Version"))
    }

    // MARK: HTTPHeader(parsing:)

    func parsedHeader(_ line: String) -> Result<HTTPHeader, HeaderError> {
        do throws(HeaderError) {
            return .success(try HTTPHeader(parsing: line))
        } catch {
            return .failure(error)
        }
    }

    func testHeaderLineParses() {
        XCTAssertEqual(try parsedHeader("X-Token: abc").get(), HTTPHeader(name: "X-Token", value: "abc"))
        XCTAssertEqual(try parsedHeader("X-Token:abc").get(), HTTPHeader(name: "X-Token", value: "abc"))
        XCTAssertEqual(try parsedHeader("X:  \tspaced out \t ").get(), HTTPHeader(name: "X", value: "spaced out"))
        XCTAssertEqual(try parsedHeader("X: a:b").get(), HTTPHeader(name: "X", value: "a:b"))
        XCTAssertEqual(try parsedHeader("X:").get(), HTTPHeader(name: "X", value: ""))
        XCTAssertEqual(try parsedHeader("X: tab\tinside é").get(), HTTPHeader(name: "X", value: "tab\tinside é"))
        XCTAssertEqual(try parsedHeader("!#$%&'*+-.^_`|~09azAZ: v").get().name, "!#$%&'*+-.^_`|~09azAZ")
    }

    func testHeaderValueWithCRLFIsRefused() {
        XCTAssertEqual(parsedHeader("X-A: b\r\nEvil: 1"), .failure(.badValue("X-A")))
        XCTAssertEqual(parsedHeader("X-A: b\nEvil: 1"), .failure(.badValue("X-A")))
        XCTAssertEqual(parsedHeader("X-A: b\rc"), .failure(.badValue("X-A")))
    }

    func testHeaderValueWithControlBytesIsRefused() {
        XCTAssertEqual(parsedHeader("X-A: a\u{0}b"), .failure(.badValue("X-A")))
        XCTAssertEqual(parsedHeader("X-A: a\u{1B}b"), .failure(.badValue("X-A")))
        XCTAssertEqual(parsedHeader("X-A: a\u{7F}b"), .failure(.badValue("X-A")))
    }

    func testNonTokenHeaderNamesAreRefused() {
        XCTAssertEqual(parsedHeader("Bad Name: v"), .failure(.badName("Bad Name")))
        XCTAssertEqual(parsedHeader("X-A : v"), .failure(.badName("X-A ")))
        XCTAssertEqual(parsedHeader("(x): v"), .failure(.badName("(x)")))
        XCTAssertEqual(parsedHeader("a/b: v"), .failure(.badName("a/b")))
        XCTAssertEqual(parsedHeader("é: v"), .failure(.badName("é")))
        XCTAssertEqual(parsedHeader(": v"), .failure(.badName("")))
        XCTAssertEqual(parsedHeader("X\r\nY: v"), .failure(.badName("X\r\nY")))
    }

    func testHeaderWithoutColonIsRefused() {
        XCTAssertEqual(parsedHeader("NoColon"), .failure(.missingColon("NoColon")))
    }

    func testValidatingInitializerChecksNameAndValue() {
        XCTAssertNil(headerError { () throws(HeaderError) in _ = try HTTPHeader(validating: "X", "ok") })
        XCTAssertEqual(headerError { () throws(HeaderError) in _ = try HTTPHeader(validating: "X", "a\nb") }, .badValue("X"))
        XCTAssertEqual(headerError { () throws(HeaderError) in _ = try HTTPHeader(validating: "X Y", "ok") }, .badName("X Y"))
    }

    func testSensitiveHeaders() {
        for name in ["Authorization", "proxy-authorization", "Cookie", "SET-COOKIE"] {
            XCTAssertTrue(HTTPHeader(name: name, value: "x").isSensitive, name)
        }
        XCTAssertFalse(HTTPHeader(name: "Origin", value: "x").isSensitive)
    }

    func testHasNameIgnoresCase() {
        XCTAssertTrue(HTTPHeader(name: "Sec-WebSocket-Protocol", value: "").hasName("sec-websocket-protocol"))
        XCTAssertFalse(HTTPHeader(name: "Host", value: "").hasName("Hosts"))
    }
}
