// ws+unix:// URL grammar.
import XCTest
@testable import WebSocketCore

final class UnixSocketURLTests: XCTestCase {
    /// (text, socket, request target, secure, description)
    private let good: [(String, String, String, Bool, String)] = [
        ("ws+unix:///run/app.sock:/path?query=1", "/run/app.sock", "/path?query=1", false, "ws+unix:///run/app.sock:/path?query=1"),
        ("ws+unix:///run/app.sock", "/run/app.sock", "/", false, "ws+unix:///run/app.sock:/"),
        ("ws+unix:///run/app.sock:", "/run/app.sock", "/", false, "ws+unix:///run/app.sock:/"),
        ("ws+unix:///run/app.sock:?x=1", "/run/app.sock", "/?x=1", false, "ws+unix:///run/app.sock:/?x=1"),
        ("wss+unix:///run/app.sock:/secure", "/run/app.sock", "/secure", true, "wss+unix:///run/app.sock:/secure"),
        ("WS+UNIX:///tmp/x.sock:/", "/tmp/x.sock", "/", false, "ws+unix:///tmp/x.sock:/"),
        ("ws+unix://relative.sock:/a", "relative.sock", "/a", false, "ws+unix://relative.sock:/a"),
        ("ws+unix://@abstract-name:/a", "@abstract-name", "/a", false, "ws+unix://@abstract-name:/a"),
        ("ws+unix:///tmp/with%3Acolon.sock:/p:q", "/tmp/with:colon.sock", "/p:q", false, "ws+unix:///tmp/with%3Acolon.sock:/p:q"),
        ("ws+unix:///tmp/a%20b.sock:/x y", "/tmp/a b.sock", "/x%20y", false, "ws+unix:///tmp/a b.sock:/x%20y"),
    ]

    func testParsing() throws {
        for (text, socket, target, secure, description) in good {
            let url = try WebSocketURL(parsing: text)
            XCTAssertEqual(url.unixSocketPath, socket, text)
            XCTAssertEqual(url.requestTarget, target, text)
            XCTAssertEqual(url.isSecure, secure, text)
            XCTAssertEqual(url.host, "localhost", text)
            XCTAssertEqual(url.hostHeader, "localhost", text)
            XCTAssertEqual(url.port, secure ? 443 : 80, text)
            XCTAssertNil(url.user, text)
            XCTAssertEqual(url.description, description, text)
        }
    }

    func testErrors() {
        let long = "/" + String(repeating: "d", count: 107)
        let cases: [(String, WebSocketCore.URLError)] = [
            ("ws+unix://", .badUnixSocket("no socket path (expected ws+unix:///path/to.sock:/request/path)")),
            ("ws+unix://:/path", .badUnixSocket("no socket path (expected ws+unix:///path/to.sock:/request/path)")),
            ("ws+unix:///run/app.sock:path", .badUnixSocket("the request path after the socket's ':' must start with '/' or '?'")),
            ("ws+unix:///run/app.sock:/p#frag", .fragment),
            ("ws+unix:///run/a%zz.sock", .badUnixSocket("bad percent-encoding in the socket path")),
            ("ws+unix:///run/a%00.sock", .badUnixSocket("bad percent-encoding in the socket path")),
            ("ws+unix://\(long)", .badUnixSocket("the socket path is longer than 107 bytes")),
            ("http+unix:///run/app.sock", .unsupportedScheme("http+unix", hint: "use ws:// or wss://")),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try WebSocketURL(parsing: text), text) { error in
                XCTAssertEqual(error as? WebSocketCore.URLError, expected, text)
            }
        }
    }

    func testOrdinaryURLsHaveNoSocket() throws {
        XCTAssertNil(try WebSocketURL(parsing: "ws://localhost/").unixSocketPath)
        // --unix-socket sets the socket on an ordinary URL: it keeps its own description.
        var url = try WebSocketURL(parsing: "ws://app.internal/feed")
        url.unixSocketPath = "/run/app.sock"
        XCTAssertEqual(url.description, "ws://app.internal/feed")
        XCTAssertEqual(url.hostHeader, "app.internal")
    }
}

final class RedirectTests: XCTestCase {
    private func url(_ text: String) -> WebSocketURL {
        do { return try WebSocketURL(parsing: text) } catch { fatalError("\(text): \(error)") }
    }

    /// (current URL, Location, expected URL description)
    private let resolutions: [(String, String, String)] = [
        ("ws://a.example/chat", "ws://b.example/other", "ws://b.example/other"),
        ("ws://a.example/chat", "wss://b.example:8443/x?y", "wss://b.example:8443/x?y"),
        ("ws://a.example/chat", "http://b.example/p", "ws://b.example/p"),
        ("ws://a.example/chat", "https://b.example/p", "wss://b.example/p"),
        ("wss://a.example/chat", "https://b.example/p", "wss://b.example/p"),
        ("wss://a.example/chat", "wss://a.example/p", "wss://a.example/p"),
        ("ws://a.example:9000/chat", "/new", "ws://a.example:9000/new"),
        ("ws://a.example/dir/chat?x=1", "other", "ws://a.example/dir/other"),
        ("ws://a.example/dir/chat", "../up?q", "ws://a.example/up?q"),
        ("ws://a.example/dir/chat", "./same", "ws://a.example/dir/same"),
        ("ws://a.example/dir/chat", "/a/b/../c/./d", "ws://a.example/a/c/d"),
        ("ws://a.example/dir/chat?x=1", "?y=2", "ws://a.example/dir/chat?y=2"),
        ("ws://a.example/chat", "/p#fragment", "ws://a.example/p"),
        ("wss://a.example/chat", "//cdn.example/ws", "wss://cdn.example/ws"),
        ("ws://a.example/chat", "  /trimmed  ", "ws://a.example/trimmed"),
        ("ws://a.example/", "/p\u{e9}", "ws://a.example/p%C3%A9"),
        ("ws+unix:///run/app.sock:/a", "/b", "ws+unix:///run/app.sock:/b"),
        ("ws+unix:///run/app.sock:/a", "ws://localhost/c", "ws+unix:///run/app.sock:/c"),
        ("ws+unix:///run/app.sock:/a", "ws://elsewhere/c", "ws://elsewhere/c"),
        ("ws://[::1]:9000/a", "/b", "ws://[::1]:9000/b"),
    ]

    func testResolution() throws {
        for (current, location, expected) in resolutions {
            XCTAssertEqual(try url(current).redirected(to: location).description, expected, "\(current) + \(location)")
        }
    }

    func testNeverFromWSSToWS() {
        for location in ["ws://a.example/p", "http://a.example/p", "ws://other.example/"] {
            XCTAssertThrowsError(try url("wss://a.example/chat").redirected(to: location)) { error in
                guard case .downgrade = error as? RedirectError else { return XCTFail("\(location): \(error)") }
                XCTAssertTrue("\(error)".contains("it would drop TLS"))
            }
        }
        // a relative redirect keeps wss
        XCTAssertEqual(try url("wss://a.example/chat").redirected(to: "/x").isSecure, true)
    }

    func testRefusedLocations() {
        let cases: [(String, RedirectError)] = [
            ("", .badLocation("an empty Location header")),
            ("#only-a-fragment", .badLocation("an empty Location header")),
            ("ftp://files.example/", .unsupportedScheme("ftp")),
            ("ws+unix:///etc/evil.sock:/", .unsupportedScheme("ws+unix")),
            ("javascript://x", .unsupportedScheme("javascript")),
            ("/a b", .badLocation("a Location with spaces or control characters")),
            ("ws://bad host/", .badLocation("a Location with spaces or control characters")),
            ("ws://:80/", .badLocation("bad host in URL: the URL has no host")),
        ]
        for (location, expected) in cases {
            XCTAssertThrowsError(try url("ws://a.example/chat").redirected(to: location), location) { error in
                XCTAssertEqual(error as? RedirectError, expected, location)
            }
        }
    }

    func testCredentialsStayWithTheSameHostAndPort() throws {
        let original = url("ws://alice:pw@a.example/chat")
        let same = try original.redirected(to: "/elsewhere")
        XCTAssertEqual(same.user, "alice")
        XCTAssertEqual(same.password, "pw")
        let sameAbsolute = try original.redirected(to: "ws://A.EXAMPLE:80/x")
        XCTAssertEqual(sameAbsolute.user, "alice")
        XCTAssertTrue(sameAbsolute.hasSameAuthority(as: original))
        let otherHost = try original.redirected(to: "ws://b.example/x")
        XCTAssertNil(otherHost.user)
        XCTAssertFalse(otherHost.hasSameAuthority(as: original))
        let otherPort = try original.redirected(to: "ws://a.example:8080/x")
        XCTAssertNil(otherPort.user)
        XCTAssertFalse(otherPort.hasSameAuthority(as: original))
    }

    func testRedirectStatuses() {
        XCTAssertEqual(WebSocketURL.redirectStatuses, [301, 302, 303, 307, 308])
    }
}
