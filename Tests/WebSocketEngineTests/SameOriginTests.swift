// --sameorigin's rule (SameOrigin, pure) and how HandshakePolicy combines it with --allow-origin.
import XCTest
import WebSocketCore
@testable import WebSocketEngine

final class SameOriginTests: XCTestCase {
    func testAnOriginMatchesTheHostWithTheListenersSchemeAndDefaultPorts() {
        XCTAssertTrue(SameOrigin.admits(origin: "http://example.com:8080", host: "example.com:8080", secure: false))
        XCTAssertTrue(SameOrigin.admits(origin: "HTTP://Example.COM:8080", host: "example.com:8080", secure: false))
        XCTAssertTrue(SameOrigin.admits(origin: "http://example.com", host: "example.com:80", secure: false))
        XCTAssertTrue(SameOrigin.admits(origin: "http://example.com:80", host: "example.com", secure: false))
        XCTAssertTrue(SameOrigin.admits(origin: "https://example.com", host: "example.com:443", secure: true))
        XCTAssertTrue(SameOrigin.admits(origin: "https://[::1]:8443", host: "[::1]:8443", secure: true))
        XCTAssertTrue(SameOrigin.admits(origin: "http://[::1]", host: "[::1]", secure: false))
    }

    /// IPv6 literals split by the shared `BracketedHost` rule: the brackets stay in the host
    /// compared, a port only after "]:", and bad brackets are no authority.
    func testIPv6LiteralForms() {
        XCTAssertEqual(SameOrigin.authority("[::1]:80", secure: false), .init(host: "[::1]", port: 80))
        XCTAssertEqual(SameOrigin.authority("[::1]", secure: true), .init(host: "[::1]", port: 443))
        XCTAssertEqual(SameOrigin.authority("[FE80::1]:8080", secure: false), .init(host: "[fe80::1]", port: 8080))
        for bad in ["[::1", "[::1]80", "[::1]:", "[::1]:x", "[::1]:65536"] {
            XCTAssertNil(SameOrigin.authority(bad, secure: false), bad)
        }
    }

    func testEverythingElseIsAnotherOrigin() {
        XCTAssertFalse(SameOrigin.admits(origin: "https://example.com:8080", host: "example.com:8080", secure: false), "scheme")
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com:8080", host: "example.com:8080", secure: true), "scheme")
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com:8081", host: "example.com:8080", secure: false), "port")
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com", host: "example.com:8080", secure: false), "default port")
        XCTAssertFalse(SameOrigin.admits(origin: "https://example.com", host: "example.com:8443", secure: true))
        XCTAssertFalse(SameOrigin.admits(origin: "http://evil.example", host: "example.com", secure: false), "host")
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com.evil", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.co", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "null", host: "example.com", secure: false), "opaque origin")
        XCTAssertFalse(SameOrigin.admits(origin: "", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://", host: "", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com/", host: "example.com", secure: false), "a path")
        XCTAssertFalse(SameOrigin.admits(origin: "http://user@example.com", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com:+80", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com:99999", host: "example.com:99999", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://example.com:", host: "example.com", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "http://[::1]:8080", host: "[::2]:8080", secure: false))
        XCTAssertFalse(SameOrigin.admits(origin: "ws://example.com", host: "example.com", secure: false), "a browser's Origin is http(s)")
    }

    func testNoOriginIsANonBrowserClient() {
        XCTAssertTrue(SameOrigin.admits(origin: nil, host: "example.com", secure: false))
    }

    private func decision(_ policy: HandshakePolicy, origin: String?, host: String = "example.com:8080") throws -> HandshakePolicy.Decision {
        var text = "GET / HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let origin { text += "Origin: \(origin)\r\n" }
        text += "\r\n"
        var handshake = ServerHandshake()
        var index = 0
        let request = try Array(text.utf8).withUnsafeBytes { try handshake.receive($0, &index) }
        return policy.decide(try XCTUnwrap(request))
    }

    func testThePolicyRefuses403AndEitherRuleAdmits() throws {
        var policy = HandshakePolicy()
        policy.requiresSameOrigin = true
        XCTAssertEqual(try decision(policy, origin: "http://example.com:8080"), .accept(subprotocol: nil))
        XCTAssertEqual(try decision(policy, origin: nil), .accept(subprotocol: nil))
        XCTAssertEqual(try decision(policy, origin: "http://app.example"),
                       .refuse(status: 403, headers: [], body: "origin 'http://app.example' is not this server's (Host 'example.com:8080')"))
        policy.servesTLS = true
        XCTAssertEqual(try decision(policy, origin: "https://example.com:8080"), .accept(subprotocol: nil))
        XCTAssertNotEqual(try decision(policy, origin: "http://example.com:8080"), .accept(subprotocol: nil))

        policy.allowedOrigins = ["http://app.example"]
        XCTAssertEqual(try decision(policy, origin: "http://app.example"), .accept(subprotocol: nil), "listed")
        XCTAssertEqual(try decision(policy, origin: "https://example.com:8080"), .accept(subprotocol: nil), "same origin")
        XCTAssertEqual(try decision(policy, origin: nil), .accept(subprotocol: nil), "no Origin: --sameorigin admits it")
        if case .refuse(403, _, _) = try decision(policy, origin: "http://other.example") {} else { XCTFail("neither rule admits") }

        policy.requiresSameOrigin = false
        XCTAssertEqual(try decision(policy, origin: nil),
                       .refuse(status: 403, headers: [], body: "the request has no Origin header"), "--allow-origin alone, as before")
    }
}
