// Proxy URLs, host:port arguments, --resolve entries, IP addresses.
import XCTest
@testable import WebSocketTransport

final class ProxyURLTests: XCTestCase {
    /// (text, kind, host, port, user, password)
    private let good: [(String, ProxyURL.Kind, String, UInt16, String?, String?)] = [
        ("http://proxy.corp:3128", .http, "proxy.corp", 3128, nil, nil),
        ("http://proxy.corp:3128/", .http, "proxy.corp", 3128, nil, nil),
        ("HTTP://Proxy.Corp:3128", .http, "Proxy.Corp", 3128, nil, nil),
        ("http://proxy.corp", .http, "proxy.corp", 80, nil, nil),
        ("proxy.corp:8080", .http, "proxy.corp", 8080, nil, nil),
        ("proxy.corp", .http, "proxy.corp", 80, nil, nil),
        ("https://proxy.corp", .https, "proxy.corp", 443, nil, nil),
        ("socks5://127.0.0.1", .socks5, "127.0.0.1", 1080, nil, nil),
        ("socks5h://[::1]:9050", .socks5h, "::1", 9050, nil, nil),
        ("http://[2001:db8::1]:3128", .http, "2001:db8::1", 3128, nil, nil),
        ("http://alice:s3cret@proxy:3128", .http, "proxy", 3128, "alice", "s3cret"),
        ("http://alice@proxy:3128", .http, "proxy", 3128, "alice", nil),
        ("http://al%40ice:p%3Ass%2Fw%25@proxy:3128", .http, "proxy", 3128, "al@ice", "p:ss/w%"),
        ("user:pw@proxy:3128", .http, "proxy", 3128, "user", "pw"),
        // an unencoded '/' or '@' in the password still works: the host follows the last '@'
        ("http://u:p/w@proxy:3128", .http, "proxy", 3128, "u", "p/w"),
        ("http://u:p@w@proxy:3128", .http, "proxy", 3128, "u", "p@w"),
        ("socks5://bob:pw@10.0.0.1:1080", .socks5, "10.0.0.1", 1080, "bob", "pw"),
    ]

    func testParsing() throws {
        for (text, kind, host, port, user, password) in good {
            let proxy = try ProxyURL(parsing: text)
            XCTAssertEqual(proxy.kind, kind, text)
            XCTAssertEqual(proxy.host, host, text)
            XCTAssertEqual(proxy.port, port, text)
            XCTAssertEqual(proxy.user, user, text)
            XCTAssertEqual(proxy.password, password, text)
        }
    }

    func testDefaultKindForSocks5Option() throws {
        let proxy = try ProxyURL(parsing: "127.0.0.1:1080", defaultKind: .socks5)
        XCTAssertEqual(proxy.kind, .socks5)
        XCTAssertEqual(try ProxyURL(parsing: "socks5h://h:1", defaultKind: .socks5).kind, .socks5h)
    }

    func testDescriptionsNeverShowCredentials() throws {
        let proxy = try ProxyURL(parsing: "http://alice:s3cret@proxy.corp:3128")
        XCTAssertEqual(proxy.description, "http://proxy.corp:3128")
        XCTAssertEqual(proxy.name, "HTTP proxy proxy.corp:3128")
        XCTAssertEqual(try ProxyURL(parsing: "socks5h://[::1]:9050").name, "SOCKS5 proxy [::1]:9050")
        XCTAssertFalse("\(proxy)".contains("s3cret"))
    }

    /// (text, error)
    private let bad: [(String, ProxyURLError)] = [
        ("ftp://proxy:21", .unsupportedScheme("ftp", hint: "use http://, https://, socks5:// or socks5h://")),
        ("socks4://proxy:1080", .unsupportedScheme("socks4", hint: "SOCKS4 is not supported; use socks5:// or socks5h://")),
        ("http://proxy:0", .badPort("0")),
        ("http://proxy:65536", .badPort("65536")),
        ("http://proxy:abc", .badPort("abc")),
        ("http://", .badHost("no host")),
        ("http://proxy:3128/path", .badHost("a proxy URL has no path")),
        ("http://::1:3128", .badHost("put an IPv6 address in brackets: [::1]:3128")),
        ("http://u:p@proxy:3128/x", .badHost("a proxy URL has no path")),
        ("http://u:%zz@proxy:3128", .badUserInfo),
        ("http://u:%+f@proxy:3128", .badUserInfo),  // a sign is not a hex digit
        ("http://u:%-0@proxy:3128", .badUserInfo),
    ]

    func testErrors() {
        for (text, expected) in bad {
            XCTAssertThrowsError(try ProxyURL(parsing: text), text) { error in
                XCTAssertEqual(error as? ProxyURLError, expected, text)
            }
        }
    }

    func testErrorsNeverQuoteTheUserInformation() {
        for text in ["http://alice:hunter2@proxy:99999", "http://alice:hunter2@proxy:3128/x", "http://alice:hunter2%@p:1",
                     "gopher://alice:hunter2@p:1", "http://alice:hunter2@"] {
            XCTAssertThrowsError(try ProxyURL(parsing: text), text) { error in
                XCTAssertFalse("\(error)".contains("hunter2"), "\(text): \(error)")
                XCTAssertFalse("\(error)".contains("hun"), "\(text): \(error)")
            }
        }
    }
}

final class HostPortTests: XCTestCase {
    func testParsing() {
        XCTAssertEqual(HostPort(parsing: "example.com:443"), HostPort(host: "example.com", port: 443))
        XCTAssertEqual(HostPort(parsing: "127.0.0.1:8443"), HostPort(host: "127.0.0.1", port: 8443))
        XCTAssertEqual(HostPort(parsing: "[::1]:8443"), HostPort(host: "::1", port: 8443))
        XCTAssertEqual(HostPort(parsing: "[::1]:8443")?.description, "[::1]:8443")
        XCTAssertNil(HostPort(parsing: "example.com"))
        XCTAssertEqual(HostPort(parsing: "example.com", defaultPort: 80), HostPort(host: "example.com", port: 80))
        XCTAssertEqual(HostPort(parsing: "[::1]", defaultPort: 80), HostPort(host: "::1", port: 80))
        for bad in ["::1:80", ":80", "host:", "host:0", "host:65536", "[::1", "[nothex]:80", "a b:80", "a/b:80", "[::1]x"] {
            XCTAssertNil(HostPort(parsing: bad, defaultPort: 1), bad)
        }
    }

    /// The split both HostPort and a proxy's hop (PeerAddress) make: inside the brackets, and
    /// after "]:" (unchecked); nothing else may follow "]".
    func testBracketedHost() {
        let cases: [(String, host: String?, port: String?)] = [
            ("[::1]:8443", "::1", "8443"), ("[::1]", "::1", nil), ("[::1]:", "::1", ""), ("[]", "", nil),
            ("[x]:_hidden", "x", "_hidden"), ("[::1]:80:90", "::1", "80:90"),
            ("[::1]x", nil, nil), ("[::1]]:80", nil, nil), ("[::1", nil, nil), ("::1", nil, nil), ("x[::1]:80", nil, nil), ("", nil, nil),
        ]
        for (text, host, port) in cases {
            let split = BracketedHost(Substring(text))
            XCTAssertEqual(split.map { String($0.host) }, host, text)
            XCTAssertEqual(split?.port.map(String.init), port, text)
        }
    }

    func testResolveOverride() {
        let entry = ResolveOverride(parsing: "Dual.Test:9000:::1,127.0.0.1")
        XCTAssertEqual(entry?.host, "dual.test")
        XCTAssertEqual(entry?.port, 9000)
        XCTAssertEqual(entry?.addresses.map(\.description), ["::1", "127.0.0.1"])
        XCTAssertEqual(ResolveOverride(parsing: "h:1:[2001:db8::1]")?.addresses.map(\.description), ["2001:db8::1"])
        XCTAssertEqual(entry?.matches(host: "dual.TEST", port: 9000), true)
        XCTAssertEqual(entry?.matches(host: "dual.test", port: 9001), false)
        for bad in ["h:1", "h:1:", "h:x:1.2.3.4", "h:1:not-an-ip", ":1:1.2.3.4", "h:0:1.2.3.4", "h:1:1.2.3.4,bad"] {
            XCTAssertNil(ResolveOverride(parsing: bad), bad)
        }
    }

    func testIPAddress() {
        XCTAssertEqual(IPAddress("192.0.2.1")?.bytes, [192, 0, 2, 1])
        XCTAssertEqual(IPAddress("::1")?.bytes, [UInt8](repeating: 0, count: 15) + [1])
        XCTAssertEqual(IPAddress("[::1]")?.description, "::1")
        XCTAssertEqual(IPAddress("fe80::1%eth0")?.description, "fe80::1")
        XCTAssertEqual(IPAddress("2001:db8::1")?.uriForm, "[2001:db8::1]")
        for bad in ["127.1", "256.0.0.1", "example.com", "", "1.2.3.4.5", ":::"] { XCTAssertNil(IPAddress(bad), bad) }
        let net = IPAddress("172.16.0.0")!
        XCTAssertTrue(IPAddress("172.31.255.255")!.isIn(network: net, prefix: 12))
        XCTAssertFalse(IPAddress("172.32.0.0")!.isIn(network: net, prefix: 12))
        XCTAssertTrue(IPAddress("1.2.3.4")!.isIn(network: net, prefix: 0))
    }
}
