// Proxy selection from options and environment variables: precedence, case, CGI, no_proxy.
import WebSocketCore
import XCTest
@testable import WebSocketTransport

final class ProxySelectionTests: XCTestCase {
    private func url(_ text: String) -> WebSocketURL {
        do { return try WebSocketURL(parsing: text) } catch { fatalError("bad test URL \(text): \(error)") }
    }

    /// A face's names for the settings a reason may name: the CLI's, as its man page gives them.
    private static func names(proxy: String = "--proxy", proxyOff: String = "--proxy ''", noProxy: String = "--noproxy") -> SettingNames {
        SettingNames(proxySource: { _ in nil }, ipv4Only: nil, ipv6Only: nil, connectTimeout: "", caFile: "", insecure: nil,
                     keyPassphrase: "", keyFile: nil, clientCertificate: nil, certificate: nil, minimumVersion: nil,
                     proxy: proxy, proxyOff: proxyOff, noProxy: noProxy, connectTo: "", verificationOff: "")
    }

    private func choose(_ urlText: String, _ environment: [String: String], setting: ProxySetting = .environment,
                        noProxy: String? = nil, names: SettingNames = names()) throws -> ProxyChoice {
        try ProxySelection.choose(for: url(urlText), setting: setting, noProxy: noProxy, environment: { environment[$0] },
                                  names: names)
    }

    /// (URL, environment, expected proxy "host:port" or nil, expected reason)
    private let precedence: [(String, [String: String], String?, String)] = [
        ("wss://h/", [:], nil, "no proxy variable set"),
        ("ws://h/", [:], nil, "no proxy variable set"),
        // wss: wss_proxy > WSS_PROXY > https_proxy > HTTPS_PROXY > all_proxy > ALL_PROXY
        ("wss://h/", ["wss_proxy": "a:1", "WSS_PROXY": "b:2", "https_proxy": "c:3", "HTTPS_PROXY": "d:4",
                      "all_proxy": "e:5", "ALL_PROXY": "f:6"], "a:1", "wss_proxy"),
        ("wss://h/", ["WSS_PROXY": "b:2", "https_proxy": "c:3", "HTTPS_PROXY": "d:4", "all_proxy": "e:5"], "b:2", "WSS_PROXY"),
        ("wss://h/", ["https_proxy": "c:3", "HTTPS_PROXY": "d:4", "all_proxy": "e:5"], "c:3", "https_proxy"),
        ("wss://h/", ["HTTPS_PROXY": "d:4", "all_proxy": "e:5", "ALL_PROXY": "f:6"], "d:4", "HTTPS_PROXY"),
        ("wss://h/", ["all_proxy": "e:5", "ALL_PROXY": "f:6"], "e:5", "all_proxy"),
        ("wss://h/", ["ALL_PROXY": "f:6"], "f:6", "ALL_PROXY"),
        // wss never reads the ws/http variables
        ("wss://h/", ["ws_proxy": "a:1", "http_proxy": "b:2", "HTTP_PROXY": "c:3"], nil, "no proxy variable set"),
        // ws: ws_proxy > WS_PROXY > http_proxy > HTTP_PROXY > all_proxy > ALL_PROXY
        ("ws://h/", ["ws_proxy": "a:1", "WS_PROXY": "b:2", "http_proxy": "c:3", "HTTP_PROXY": "d:4"], "a:1", "ws_proxy"),
        ("ws://h/", ["WS_PROXY": "b:2", "http_proxy": "c:3"], "b:2", "WS_PROXY"),
        ("ws://h/", ["http_proxy": "c:3", "HTTP_PROXY": "d:4", "all_proxy": "e:5"], "c:3", "http_proxy"),
        ("ws://h/", ["HTTP_PROXY": "d:4", "all_proxy": "e:5"], "d:4", "HTTP_PROXY"),
        ("ws://h/", ["all_proxy": "e:5"], "e:5", "all_proxy"),
        // ws never reads the wss/https variables
        ("ws://h/", ["wss_proxy": "a:1", "https_proxy": "b:2"], nil, "no proxy variable set"),
        // empty and blank values count as unset
        ("wss://h/", ["wss_proxy": "", "https_proxy": "  ", "HTTPS_PROXY": "d:4"], "d:4", "HTTPS_PROXY"),
        // httpoxy: HTTP_PROXY is ignored under CGI, http_proxy is not
        ("ws://h/", ["HTTP_PROXY": "d:4", "REQUEST_METHOD": "GET"], nil, "no proxy variable set"),
        ("ws://h/", ["HTTP_PROXY": "d:4", "REQUEST_METHOD": "GET", "ALL_PROXY": "f:6"], "f:6", "ALL_PROXY"),
        ("ws://h/", ["http_proxy": "c:3", "REQUEST_METHOD": "GET"], "c:3", "http_proxy"),
        ("wss://h/", ["HTTPS_PROXY": "d:4", "REQUEST_METHOD": "GET"], "d:4", "HTTPS_PROXY"),
    ]

    func testEnvironmentPrecedence() throws {
        for (urlText, environment, expected, reason) in precedence {
            let choice = try choose(urlText, environment)
            XCTAssertEqual(choice.proxy?.hostPort, expected, "\(urlText) with \(environment)")
            XCTAssertEqual(choice.reason, reason, "\(urlText) with \(environment)")
        }
    }

    func testExplicitProxyReplacesTheEnvironment() throws {
        let given = try ProxyURL(parsing: "socks5h://p:1080")
        let choice = try choose("wss://h/", ["https_proxy": "c:3"], setting: .url(given))
        XCTAssertEqual(choice.proxy, given)
        XCTAssertEqual(choice.reason, "--proxy")
        let none = try choose("wss://h/", ["https_proxy": "c:3"], setting: .none)
        XCTAssertNil(none.proxy)
    }

    /// (URL, environment, --noproxy, proxied?)
    private let bypass: [(String, [String: String], String?, Bool)] = [
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "example.com"], nil, false),
        ("wss://api.example.com/", ["https_proxy": "p:1", "NO_PROXY": "example.com"], nil, false),
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "other.com"], nil, true),
        // no_proxy wins over NO_PROXY (lower case first), even when it does not match
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "other.com", "NO_PROXY": "example.com"], nil, true),
        // an empty no_proxy is unset: NO_PROXY is read
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "", "NO_PROXY": "example.com"], nil, false),
        // --noproxy replaces both
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "example.com"], "", true),
        ("wss://api.example.com/", ["https_proxy": "p:1", "no_proxy": "other.com"], "*", false),
        ("wss://api.example.com/", ["https_proxy": "p:1"], "api.example.com", false),
        // no_proxy applies to the port of the URL
        ("ws://10.1.2.3:8080/", ["http_proxy": "p:1", "no_proxy": "10.0.0.0/8:80"], nil, true),
        ("ws://10.1.2.3:8080/", ["http_proxy": "p:1", "no_proxy": "10.0.0.0/8"], nil, false),
        ("ws://10.1.2.3:8080/", ["http_proxy": "p:1", "no_proxy": "10.1.2.3:8080"], nil, false),
    ]

    func testNoProxyVariablesAndOption() throws {
        for (urlText, environment, noProxy, proxied) in bypass {
            let choice = try choose(urlText, environment, noProxy: noProxy)
            XCTAssertEqual(choice.proxy != nil, proxied, "\(urlText) with \(environment), --noproxy \(noProxy ?? "(none)")")
        }
    }

    func testNoProxyAppliesToAnExplicitProxyToo() throws {
        let given = try ProxyURL(parsing: "http://p:3128")
        let choice = try choose("ws://internal.corp/", ["no_proxy": ".corp"], setting: .url(given))
        XCTAssertNil(choice.proxy)
        XCTAssertEqual(choice.reason, "no_proxy matches internal.corp")
    }

    func testTheReasonsNameTheSettingsAsTheFaceNamesThem() throws {
        let names = Self.names(proxy: "options.proxy", proxyOff: "options.proxy = .none", noProxy: "options.noProxy")
        let given = try ProxyURL(parsing: "http://p:3128")
        XCTAssertEqual(try choose("ws://h/", [:], setting: .url(given), names: names).reason, "options.proxy")
        XCTAssertEqual(try choose("ws://h/", ["http_proxy": "p:1"], setting: .none, names: names).reason, "options.proxy = .none")
        XCTAssertEqual(try choose("ws://h/", ["http_proxy": "p:1"], noProxy: "h", names: names).reason, "options.noProxy matches h")
        XCTAssertEqual(try choose("ws://h/", ["http_proxy": "p:1"], names: names).reason, "http_proxy", "a variable keeps its name")
        XCTAssertEqual(try choose("ws://h/", ["http_proxy": "p:1", "no_proxy": "h"], names: names).reason, "no_proxy matches h")
        XCTAssertEqual(try choose("ws://h/", [:], setting: .none).reason, "--proxy ''")
        XCTAssertEqual(try choose("ws://h/", ["http_proxy": "p:1"], noProxy: "h").reason, "--noproxy matches h")
    }

    func testABadVariableNamesItselfAndHidesThePassword() {
        XCTAssertThrowsError(try choose("wss://h/", ["https_proxy": "ftp://user:hunter2@p:21"])) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("https_proxy: unsupported proxy scheme 'ftp'"), text)
            XCTAssertFalse(text.contains("hunter2"), text)
        }
        XCTAssertThrowsError(try choose("ws://h/", ["http_proxy": "http://user:hunter2@p:3128/x"])) { error in
            XCTAssertFalse("\(error)".contains("hunter2"), "\(error)")
        }
        XCTAssertThrowsError(try choose("ws://h/", ["http_proxy": "p:99999"])) { error in
            XCTAssertEqual("\(error)", "http_proxy: bad proxy port '99999' (expected 1-65535)")
        }
    }
}

final class NoProxyListTests: XCTestCase {
    /// (list, host, port, matches)
    private let table: [(String, String, UInt16, Bool)] = [
        ("", "example.com", 443, false),
        ("*", "anything.at.all", 443, true),
        ("*", "10.0.0.1", 80, true),
        // names: the host and its subdomains, any case, leading "." or "*." optional
        ("example.com", "example.com", 443, true),
        ("example.com", "ws.example.com", 443, true),
        ("example.com", "a.b.example.com", 443, true),
        ("example.com", "badexample.com", 443, false),
        ("example.com", "example.com.evil.net", 443, false),
        (".example.com", "example.com", 443, true),
        (".example.com", "ws.example.com", 443, true),
        ("*.example.com", "ws.example.com", 443, true),
        ("*.example.com", "example.com", 443, true),
        ("EXAMPLE.com", "Ws.Example.COM", 443, true),
        ("example.com.", "example.com", 443, true),
        ("example.com", "example.com.", 443, true),
        ("localhost", "localhost", 80, true),
        ("localhost", "127.0.0.1", 80, false),
        // separators: commas, spaces, both; empty entries ignored
        ("a.com, b.com", "x.b.com", 443, true),
        ("a.com b.com", "b.com", 443, true),
        (",,a.com,,", "a.com", 443, true),
        // IP addresses: exact, never a name match, never resolved
        ("127.0.0.1", "127.0.0.1", 80, true),
        ("127.0.0.1", "127.0.0.2", 80, false),
        ("127.0.0.1", "localhost", 80, false),
        ("::1", "::1", 80, true),
        ("[::1]", "::1", 80, true),
        ("::1", "0:0:0:0:0:0:0:1", 80, true),
        ("2001:db8::1", "2001:DB8:0::1", 80, true),
        ("1.2.3.4", "11.2.3.4", 80, false),
        // CIDR
        ("10.0.0.0/8", "10.200.3.4", 80, true),
        ("10.0.0.0/8", "11.0.0.1", 80, false),
        ("192.168.1.0/24", "192.168.1.77", 80, true),
        ("192.168.1.0/24", "192.168.2.1", 80, false),
        ("192.168.1.128/25", "192.168.1.127", 80, false),
        ("192.168.1.128/25", "192.168.1.200", 80, true),
        ("0.0.0.0/0", "8.8.8.8", 80, true),
        ("10.0.0.0/8", "::ffff:10.0.0.1", 80, false),
        ("fd00::/8", "fd12:3456::1", 80, true),
        ("fd00::/8", "fe80::1", 80, false),
        ("2001:db8::/32", "2001:db8:ffff::1", 80, true),
        ("2001:db8::/32", "2001:db9::1", 80, false),
        ("::1/128", "::1", 80, true),
        ("10.0.0.0/8", "ten.example", 80, false),  // names are not resolved
        ("10.0.0.0/33", "10.0.0.1", 80, false),    // a bad prefix matches nothing
        // ports
        ("example.com:8443", "example.com", 8443, true),
        ("example.com:8443", "example.com", 443, false),
        ("example.com:8443", "ws.example.com", 8443, true),
        ("127.0.0.1:9000", "127.0.0.1", 9000, true),
        ("127.0.0.1:9000", "127.0.0.1", 9001, false),
        ("[::1]:9000", "::1", 9000, true),
        ("[::1]:9000", "::1", 9001, false),
        // a mix
        ("localhost,127.0.0.1,::1,.internal,10.0.0.0/8", "db.internal", 443, true),
        ("localhost,127.0.0.1,::1,.internal,10.0.0.0/8", "10.9.9.9", 443, true),
        ("localhost,127.0.0.1,::1,.internal,10.0.0.0/8", "example.org", 443, false),
    ]

    func testMatching() {
        for (list, host, port, expected) in table {
            XCTAssertEqual(NoProxyList(list).matches(host: host, port: port), expected,
                           "no_proxy '\(list)' against \(host):\(port)")
        }
    }
}
