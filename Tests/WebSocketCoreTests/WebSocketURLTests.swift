// WebSocketURL parsing (RFC 6455 §3).
import XCTest
@testable import WebSocketCore

final class WebSocketURLTests: XCTestCase {
    func url(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> WebSocketURL? {
        do throws(WebSocketCore.URLError) {
            return try WebSocketURL(parsing: text)
        } catch {
            XCTFail("'\(text)' refused: \(error)", file: file, line: line)
            return nil
        }
    }

    func error(_ text: String) -> WebSocketCore.URLError? {
        do throws(WebSocketCore.URLError) {
            _ = try WebSocketURL(parsing: text)
            return nil
        } catch {
            return error
        }
    }

    func assertBadHost(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        guard case .badHost? = error(text) else {
            return XCTFail("'\(text)': expected .badHost, got \(String(describing: error(text)))", file: file, line: line)
        }
    }

    // MARK: Scheme, host, port

    func testWSDefaultsToPort80() {
        let parsed = url("ws://example.com/chat")
        XCTAssertEqual(parsed?.isSecure, false)
        XCTAssertEqual(parsed?.host, "example.com")
        XCTAssertEqual(parsed?.port, 80)
        XCTAssertEqual(parsed?.hasExplicitPort, false)
        XCTAssertEqual(parsed?.hostHeader, "example.com")
        XCTAssertEqual(parsed?.requestTarget, "/chat")
        XCTAssertEqual(parsed?.description, "ws://example.com/chat")
    }

    func testWSSDefaultsToPort443() {
        let parsed = url("wss://example.com/")
        XCTAssertEqual(parsed?.isSecure, true)
        XCTAssertEqual(parsed?.port, 443)
        XCTAssertEqual(parsed?.hasExplicitPort, false)
        XCTAssertEqual(parsed?.hostHeader, "example.com")
    }

    func testSchemeIsCaseInsensitive() {
        XCTAssertEqual(url("WS://example.com/")?.isSecure, false)
        XCTAssertEqual(url("Wss://example.com/")?.isSecure, true)
    }

    func testExplicitPort() {
        let parsed = url("ws://example.com:8080/x")
        XCTAssertEqual(parsed?.port, 8080)
        XCTAssertEqual(parsed?.hasExplicitPort, true)
        XCTAssertEqual(parsed?.hostHeader, "example.com:8080")
        XCTAssertEqual(parsed?.description, "ws://example.com:8080/x")
    }

    func testExplicitDefaultPortIsLeftOutOfTheHostHeader() {
        XCTAssertEqual(url("ws://example.com:80/")?.hostHeader, "example.com")
        XCTAssertEqual(url("wss://example.com:443/")?.hostHeader, "example.com")
        XCTAssertEqual(url("ws://example.com:80/")?.hasExplicitPort, true)
    }

    func testOtherSchemesDefaultPortIsKeptInTheHostHeader() {
        XCTAssertEqual(url("ws://example.com:443/")?.hostHeader, "example.com:443")
        XCTAssertEqual(url("wss://example.com:80/")?.hostHeader, "example.com:80")
    }

    func testPortBounds() {
        XCTAssertEqual(url("ws://h:1/")?.port, 1)
        XCTAssertEqual(url("ws://h:65535/")?.port, 65535)
    }

    func testIPv6LiteralWithPort() {
        let parsed = url("ws://[::1]:9000/feed")
        XCTAssertEqual(parsed?.host, "::1")
        XCTAssertEqual(parsed?.port, 9000)
        XCTAssertEqual(parsed?.hostHeader, "[::1]:9000")
        XCTAssertEqual(parsed?.isIPv6Literal, true)
        XCTAssertEqual(parsed?.isIPLiteral, true)
        XCTAssertEqual(parsed?.description, "ws://[::1]:9000/feed")
    }

    func testIPv6LiteralWithoutPort() {
        let parsed = url("wss://[2001:db8::a]")
        XCTAssertEqual(parsed?.host, "2001:db8::a")
        XCTAssertEqual(parsed?.port, 443)
        XCTAssertEqual(parsed?.hostHeader, "[2001:db8::a]")
        XCTAssertEqual(parsed?.requestTarget, "/")
    }

    func testIsIPLiteral() {
        XCTAssertEqual(url("ws://127.0.0.1/")?.isIPLiteral, true)
        XCTAssertEqual(url("ws://255.255.255.255/")?.isIPLiteral, true)
        XCTAssertEqual(url("ws://example.com/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://256.0.0.1/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://1.2.3/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://1.2.3.4.5/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://1.2.3.4a/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://localhost/")?.isIPLiteral, false)
        XCTAssertEqual(url("ws://[fe80::1]/")?.isIPLiteral, true)
        XCTAssertEqual(url("ws://127.0.0.1/")?.isIPv6Literal, false)
    }

    // MARK: Request target

    func testPathAndQueryAreKeptByteForByte() {
        XCTAssertEqual(url("ws://example.com/feed/v2?symbol=ABC&depth=10&x=%2Fa")?.requestTarget,
                       "/feed/v2?symbol=ABC&depth=10&x=%2Fa")
    }

    func testEmptyPathIsSlash() {
        XCTAssertEqual(url("ws://example.com")?.requestTarget, "/")
        XCTAssertEqual(url("ws://example.com:8080")?.requestTarget, "/")
    }

    func testQueryWithoutPathGetsASlash() {
        XCTAssertEqual(url("ws://example.com?q")?.requestTarget, "/?q")
        XCTAssertEqual(url("ws://example.com:81?a=1&b=2")?.requestTarget, "/?a=1&b=2")
        XCTAssertEqual(url("ws://example.com:81?a=1")?.port, 81)
    }

    func testBytesThatCannotAppearInARequestLineArePercentEncoded() {
        XCTAssertEqual(url("ws://h/a b")?.requestTarget, "/a%20b")
        XCTAssertEqual(url("ws://h/é")?.requestTarget, "/%C3%A9")
        XCTAssertEqual(url("ws://h/?q=\u{7F}")?.requestTarget, "/?q=%7F")
    }

    func testCRLFInPathCannotInjectHeaders() throws {
        let parsed = url("ws://h/a\r\nX-Evil: 1")
        XCTAssertEqual(parsed?.requestTarget, "/a%0D%0AX-Evil:%201")
        let request = String(decoding: ClientHandshake(url: try XCTUnwrap(parsed), key: "k").requestBytes, as: UTF8.self)
        XCTAssertTrue(request.hasPrefix("GET /a%0D%0AX-Evil:%201 HTTP/1.1\r\nHost: h\r\n"))
    }

    // MARK: User information

    func testUserAndPasswordArePercentDecoded() {
        let parsed = url("ws://al%20ice:p%40ss%3Aw%C3%B6rd@example.com/")
        XCTAssertEqual(parsed?.user, "al ice")
        XCTAssertEqual(parsed?.password, "p@ss:wörd")
        XCTAssertEqual(parsed?.host, "example.com")
    }

    func testUserWithoutPassword() {
        let parsed = url("ws://bob@example.com/")
        XCTAssertEqual(parsed?.user, "bob")
        XCTAssertNil(parsed?.password)
    }

    func testPasswordMayContainColons() {
        let parsed = url("ws://u:a:b@h/")
        XCTAssertEqual(parsed?.user, "u")
        XCTAssertEqual(parsed?.password, "a:b")
    }

    func testNoUserInfo() {
        XCTAssertNil(url("ws://example.com/")?.user)
        XCTAssertNil(url("ws://example.com/a@b")?.user, "an @ in the path is not user info")
        XCTAssertEqual(url("ws://example.com/a@b")?.host, "example.com")
    }

    func testUserInfoBeforeIPv6Literal() {
        let parsed = url("ws://u:p@[::1]:9000/")
        XCTAssertEqual(parsed?.user, "u")
        XCTAssertEqual(parsed?.host, "::1")
        XCTAssertEqual(parsed?.port, 9000)
    }

    func testDescriptionLeavesOutUserInfo() {
        let parsed = url("wss://alice:s3cret@example.com:8443/p?q=1")
        XCTAssertEqual(parsed?.description, "wss://example.com:8443/p?q=1")
        XCTAssertFalse(parsed?.description.contains("alice") ?? true)
        XCTAssertFalse(parsed?.description.contains("s3cret") ?? true)
    }

    func testBadPercentEncodingInUserInfoIsRefused() {
        XCTAssertEqual(error("ws://a%2:b@h/"), .badUserInfo)
        XCTAssertEqual(error("ws://a%zz@h/"), .badUserInfo)
        XCTAssertEqual(error("ws://u:%FF@h/"), .badUserInfo, "not UTF-8")
    }

    // MARK: Errors

    func testHTTPSchemesAreRefusedWithAHint() {
        XCTAssertEqual(error("http://example.com/"), .unsupportedScheme("http", hint: "use ws://"))
        XCTAssertEqual(error("https://example.com/"), .unsupportedScheme("https", hint: "use wss://"))
    }

    func testOtherSchemesAreRefused() {
        XCTAssertEqual(error("ftp://example.com/"), .unsupportedScheme("ftp", hint: "use ws:// or wss://"))
    }

    func testTextWithoutSchemeIsRefused() {
        XCTAssertEqual(error("example.com/chat"), .notAWebSocketURL("example.com/chat"))
        XCTAssertEqual(error("example.com:80/chat"), .notAWebSocketURL("example.com:80/chat"))
        XCTAssertEqual(error("ws:/example.com"), .notAWebSocketURL("ws:/example.com"))
        XCTAssertEqual(error(""), .notAWebSocketURL(""))
    }

    func testFragmentIsRefused() {
        XCTAssertEqual(error("ws://example.com/#frag"), .fragment)
        XCTAssertEqual(error("ws://example.com/p?q=1#"), .fragment)
        XCTAssertEqual(error("ws://example.com#x"), .fragment)
    }

    func testBadPortsAreRefused() {
        XCTAssertEqual(error("ws://h:0/"), .badPort("0"))
        XCTAssertEqual(error("ws://h:65536/"), .badPort("65536"))
        XCTAssertEqual(error("ws://h:http/"), .badPort("http"))
        XCTAssertEqual(error("ws://h:80a/"), .badPort("80a"))
        XCTAssertEqual(error("ws://h:/"), .badPort(""))
        XCTAssertEqual(error("ws://h:-1/"), .badPort("-1"))
        XCTAssertEqual(error("ws://h:999999/"), .badPort("999999"))
        XCTAssertEqual(error("ws://[::1]:0/"), .badPort("0"))
        XCTAssertEqual(error("ws://[::1]:/"), .badPort(""))
    }

    func testEmptyHostIsRefused() {
        assertBadHost("ws:///path")
        assertBadHost("ws://")
        assertBadHost("ws://:80/")
        assertBadHost("ws://user@/")
    }

    func testUnclosedBracketIsRefused() {
        assertBadHost("ws://[::1/")
        assertBadHost("ws://[::1:9000")
    }

    func testBadIPv6LiteralsAreRefused() {
        assertBadHost("ws://[example.com]/")
        assertBadHost("ws://[]/")
        assertBadHost("ws://[::1]x/")
    }

    func testHostWithForbiddenCharactersIsRefused() {
        assertBadHost("ws://exa mple.com/")
        assertBadHost("ws://a<b/")
        assertBadHost("ws://ex]ample/")
    }

    func testErrorDescriptionsDoNotContainUserInfo() {
        for text in ["http://alice:s3cret@h/", "ws://alice:s3cret@h:0/", "ws://alice:s3cret@h/#f", "ws://alice:s3cret@/"] {
            let description = error(text)?.description ?? ""
            XCTAssertFalse(description.isEmpty, text)
            XCTAssertFalse(description.contains("s3cret"), "\(text): \(description)")
        }
    }
}
