// HTTP CONNECT and SOCKS5 / RFC 1929 messages, without I/O.
@testable import WebSocketCore
import XCTest
@testable import WebSocketTransport

final class HTTPConnectTests: XCTestCase {
    private let target = HostPort(host: "ws.example.com", port: 443)

    func testRequestWithoutCredentials() throws {
        let proxy = try ProxyURL(parsing: "http://proxy:3128")
        let text = String(decoding: HTTPConnect.requestBytes(target: target, proxy: proxy, userAgent: "wspipe/1"), as: UTF8.self)
        XCTAssertEqual(text, "CONNECT ws.example.com:443 HTTP/1.1\r\nHost: ws.example.com:443\r\nUser-Agent: wspipe/1\r\n\r\n")
    }

    func testRequestWithBasicCredentialsAndIPv6Target() throws {
        let proxy = try ProxyURL(parsing: "http://al%3Aice:p%40ss@proxy:3128")
        let bytes = HTTPConnect.requestBytes(target: HostPort(host: "2001:db8::1", port: 8443), proxy: proxy, userAgent: nil)
        let credentials = Base64.encode(Array("al:ice:p@ss".utf8))
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self),
                       "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n"
                       + "Proxy-Authorization: Basic \(credentials)\r\n\r\n")
    }

    private func head(_ status: Int, _ reason: String, _ headers: [HTTPHeader] = []) -> HTTPResponseHead {
        HTTPResponseHead(version: "HTTP/1.1", statusCode: status, reason: reason, headers: headers)
    }

    private func message(_ response: HTTPResponseHead, proxy text: String = "http://proxy:3128") throws -> String? {
        let proxy = try ProxyURL(parsing: text)
        do throws(TransportError) {
            try HTTPConnect.check(response, proxy: proxy, target: target)
            return nil
        } catch {
            guard case .proxy(let failure) = error else { XCTFail("not a proxy error: \(error)"); return nil }
            return failure.description
        }
    }

    func testAny2xxOpensTheTunnel() throws {
        XCTAssertNil(try message(head(200, "Connection established")))
        XCTAssertNil(try message(head(200, "")))
        XCTAssertNil(try message(head(204, "No Content")))
    }

    /// (status, reason, headers, proxy URL, expected message)
    private var refusals: [(Int, String, [HTTPHeader], String, String)] {
        [
            (407, "Proxy Authentication Required", [HTTPHeader(name: "Proxy-Authenticate", value: "Basic realm=\"x\"")],
             "http://proxy:3128",
             "the HTTP proxy proxy:3128 requires authentication [407 Proxy Authentication Required]; put the user name "
             + "and password in the proxy URL: http://USER:PASSWORD@proxy:3128"),
            (407, "Proxy Authentication Required", [], "http://alice:hunter2@proxy:3128",
             "the HTTP proxy proxy:3128 refused the user name and password [407 Proxy Authentication Required]"),
            (407, "Proxy Authentication Required", [HTTPHeader(name: "Proxy-Authenticate", value: "Negotiate"),
                                                    HTTPHeader(name: "Proxy-Authenticate", value: "NTLM")],
             "http://proxy:3128",
             "the HTTP proxy proxy:3128 asks for Negotiate/NTLM authentication, which wspipe does not support (only Basic) "
             + "[407 Proxy Authentication Required]"),
            (403, "Forbidden", [], "http://proxy:3128",
             "the HTTP proxy proxy:3128 does not allow connecting to ws.example.com:443 [403 Forbidden]"),
            (502, "Bad Gateway", [], "https://proxy",
             "the HTTPS proxy proxy:443 could not reach ws.example.com:443 [502 Bad Gateway]"),
            (504, "Gateway Timeout", [], "http://proxy:3128",
             "the HTTP proxy proxy:3128 could not reach ws.example.com:443 [504 Gateway Timeout]"),
            (400, "", [], "http://proxy:3128", "the HTTP proxy proxy:3128 refused CONNECT ws.example.com:443 [400]"),
            (101, "Switching Protocols", [], "http://proxy:3128",
             "the HTTP proxy proxy:3128 refused CONNECT ws.example.com:443 [101 Switching Protocols]"),
        ]
    }

    func testRefusalsAreProxyErrorsThatNameTheProxyAndStatus() throws {
        for (status, reason, headers, proxy, expected) in refusals {
            let text = try message(head(status, reason, headers), proxy: proxy)
            XCTAssertEqual(text, expected)
            XCTAssertFalse(text?.contains("hunter2") ?? false)
        }
    }
}

final class SOCKS5Tests: XCTestCase {
    func testGreeting() {
        XCTAssertEqual(SOCKS5.greeting(offerPassword: false), [5, 1, 0])
        XCTAssertEqual(SOCKS5.greeting(offerPassword: true), [5, 2, 0, 2])
    }

    func testMethodSelection() throws {
        XCTAssertEqual(try SOCKS5.parseMethodSelection([5, 0], offeredPassword: false), .noAuthentication)
        XCTAssertEqual(try SOCKS5.parseMethodSelection([5, 0], offeredPassword: true), .noAuthentication)
        XCTAssertEqual(try SOCKS5.parseMethodSelection([5, 2], offeredPassword: true), .usernamePassword)
        let cases: [([UInt8], Bool, SOCKS5Error)] = [
            ([5, 0xFF], false, .noAcceptableMethod(offeredPassword: false)),
            ([5, 0xFF], true, .noAcceptableMethod(offeredPassword: true)),
            ([5, 2], false, .malformed("the proxy chose method 2, which was not offered")),
            ([4, 0], false, .notSOCKS5(version: 4)),
            ([0x48, 0x54], false, .notSOCKS5(version: 0x48)),  // "HT": an HTTP proxy
            ([5], false, .malformed("method selection of 1 bytes")),
        ]
        for (reply, offered, expected) in cases {
            XCTAssertThrowsError(try SOCKS5.parseMethodSelection(reply, offeredPassword: offered)) { error in
                XCTAssertEqual(error as? SOCKS5Error, expected, "\(reply)")
            }
        }
    }

    func testRFC1929Request() throws {
        XCTAssertEqual(try SOCKS5.authenticationRequest(user: "bob", password: "pw"),
                       [1, 3, 0x62, 0x6F, 0x62, 2, 0x70, 0x77])
        XCTAssertEqual(try SOCKS5.authenticationRequest(user: String(repeating: "u", count: 255), password: "p").count,
                       2 + 255 + 1 + 1)
        for (user, password) in [("", "p"), ("u", ""), (String(repeating: "u", count: 256), "p"),
                                 ("u", String(repeating: "p", count: 256))] {
            XCTAssertThrowsError(try SOCKS5.authenticationRequest(user: user, password: password)) { error in
                XCTAssertEqual(error as? SOCKS5Error, .credentialsTooLong)
            }
        }
    }

    func testRFC1929Reply() {
        XCTAssertNoThrow(try SOCKS5.parseAuthenticationReply([1, 0]))
        XCTAssertThrowsError(try SOCKS5.parseAuthenticationReply([1, 1])) { error in
            XCTAssertEqual(error as? SOCKS5Error, .authenticationFailed(status: 1))
        }
        XCTAssertThrowsError(try SOCKS5.parseAuthenticationReply([5, 0])) { error in
            XCTAssertEqual(error as? SOCKS5Error, .malformed("authentication reply version 5"))
        }
    }

    func testConnectRequests() throws {
        XCTAssertEqual(try SOCKS5.connectRequest(.address(IPAddress("127.0.0.1")!), port: 443),
                       [5, 1, 0, 1, 127, 0, 0, 1, 0x01, 0xBB])
        XCTAssertEqual(try SOCKS5.connectRequest(.address(IPAddress("::1")!), port: 80),
                       [5, 1, 0, 4] + [UInt8](repeating: 0, count: 15) + [1, 0, 80])
        XCTAssertEqual(try SOCKS5.connectRequest(.domain("ws.example"), port: 9001),
                       [5, 1, 0, 3, 10] + Array("ws.example".utf8) + [0x23, 0x29])
        XCTAssertThrowsError(try SOCKS5.connectRequest(.domain(String(repeating: "a", count: 256)), port: 1)) { error in
            XCTAssertEqual(error as? SOCKS5Error, .nameTooLong)
        }
    }

    func testReplies() throws {
        XCTAssertEqual(try SOCKS5.replyLength(prefix: [5, 0, 0, 1, 10]), 10)
        XCTAssertEqual(try SOCKS5.replyLength(prefix: [5, 0, 0, 4, 0]), 22)
        XCTAssertEqual(try SOCKS5.replyLength(prefix: [5, 0, 0, 3, 7]), 14)
        XCTAssertThrowsError(try SOCKS5.replyLength(prefix: [5, 0, 0, 9, 0]))
        XCTAssertThrowsError(try SOCKS5.replyLength(prefix: [1, 0, 0, 1, 0])) { error in
            XCTAssertEqual(error as? SOCKS5Error, .notSOCKS5(version: 1))
        }
        XCTAssertEqual(try SOCKS5.parseReply([5, 0, 0, 1, 10, 0, 0, 2, 0x04, 0x38]), "10.0.0.2:1080")
        XCTAssertEqual(try SOCKS5.parseReply([5, 0, 0, 3, 1, 0x68, 0, 80]), "h:80")
        XCTAssertEqual(try SOCKS5.parseReply([5, 0, 0, 4] + [UInt8](repeating: 0, count: 15) + [1, 0, 1]), "[::1]:1")
        for code: UInt8 in 1...8 {
            XCTAssertThrowsError(try SOCKS5.parseReply([5, code, 0, 1, 0, 0, 0, 0, 0, 0])) { error in
                XCTAssertEqual(error as? SOCKS5Error, .connectFailed(code: code))
            }
        }
        XCTAssertEqual(SOCKS5.replyText(5), "connection refused")
        XCTAssertEqual(SOCKS5.replyText(2), "connection not allowed by ruleset")
    }

    func testMessagesNameTheProxyNotItsCredentials() throws {
        let proxy = try ProxyURL(parsing: "socks5h://bob:hunter2@socks.corp:1080")
        let all: [SOCKS5Error] = [.notSOCKS5(version: 0x48), .noAcceptableMethod(offeredPassword: false),
                                  .noAcceptableMethod(offeredPassword: true), .authenticationFailed(status: 1),
                                  .connectFailed(code: 5), .credentialsTooLong, .nameTooLong, .malformed("x")]
        for error in all {
            let text = error.message(proxy: proxy, target: "ws.example:443")
            if error != .nameTooLong { XCTAssertTrue(text.contains("SOCKS5 proxy socks.corp:1080"), text) }
            XCTAssertFalse(text.contains("hunter2"), text)
            XCTAssertFalse(text.contains("bob"), text)
        }
        XCTAssertEqual(SOCKS5Error.connectFailed(code: 5).message(proxy: proxy, target: "ws.example:443"),
                       "the SOCKS5 proxy socks.corp:1080 could not connect to ws.example:443: connection refused (reply 5)")
    }
}
