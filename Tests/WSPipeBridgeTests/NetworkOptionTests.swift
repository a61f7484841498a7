// Parsing of the network options (proxies, dial overrides, client certificates, redirects)
// and the headers a redirect to another host may carry.
import WebSocketCore
import WebSocketTransport
import XCTest
@testable import WSPipeBridge
@testable import WSPipeCLI

final class NetworkOptionTests: XCTestCase {
    private func config(_ arguments: [String], environment: [String: String] = [:],
                        files: [String: String] = [:]) throws -> BridgeConfiguration {
        let command = try CommandLineParser.parse(arguments, environment: { environment[$0] },
                                                  readFile: { files[$0].map { Array($0.utf8) } })
        guard case .run(let config) = command else { throw UsageError("not a run") }
        return config
    }

    private func usageError(_ arguments: [String], environment: [String: String] = [:],
                            files: [String: String] = [:]) -> String? {
        do {
            _ = try config(arguments, environment: environment, files: files)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// A file that exists and is readable, for the options that check.
    private let readable = #filePath

    /// --send-file is framed when the options are read: a line that is not a message, or a
    /// close object, is a usage error before any connection; ping objects are fine.
    func testSendFileIsCheckedBeforeConnecting() throws {
        let files = ["/s.jsonl": "{\"type\":\"text\",\"data\":\"sub\"}\n{\"type\":\"ping\",\"data\":\"p\"}\n",
                     "/bad.jsonl": "{\"type\":\"text\",\"data\":\"sub\"}\nnot json\n",
                     "/close.jsonl": "{\"type\":\"text\",\"data\":\"sub\"}\n{\"type\":\"close\",\"code\":1000}\n"]
        XCTAssertNotNil(try config(["--jsonl", "--send-file", "/s.jsonl", "ws://h/"], files: files).client.sendFile)
        XCTAssertEqual(usageError(["--jsonl", "--send-file", "/bad.jsonl", "ws://h/"], files: files)?
            .hasPrefix("--send-file '/bad.jsonl': line 2 is not a --jsonl message: "), true)
        XCTAssertEqual(usageError(["--jsonl", "--send-file", "/close.jsonl", "ws://h/"], files: files),
                       "--send-file '/close.jsonl' has a close object: it would end every connection as it starts (remove it)")
        XCTAssertNil(usageError(["--send-file", "/close.jsonl", "ws://h/"], files: files), "without --jsonl those are text lines")
        let bytes: [UInt8] = Array("sub\n".utf8) + [0xFF, 0x0A]
        let command = { try CommandLineParser.parse(["--send-file", "/latin1.txt", "ws://h/"], environment: { _ in nil },
                                                    readFile: { $0 == "/latin1.txt" ? bytes : nil }) }
        XCTAssertThrowsError(try command()) { error in
            XCTAssertEqual("\(error)", "--send-file '/latin1.txt': line 2 is not valid UTF-8 (byte 0xFF at column 1); its lines are sent as text messages")
        }
    }

    func testDefaults() throws {
        let c = try config(["ws://h/"])
        XCTAssertEqual(c.client.network.proxy, .environment)
        XCTAssertNil(c.client.network.noProxy)
        XCTAssertNil(c.client.network.connectTo)
        XCTAssertNil(c.client.network.serverName)
        XCTAssertEqual(c.client.network.connect, ConnectOptions())
        XCTAssertNil(c.client.network.clientCertificate)
        XCTAssertEqual(c.client.network.minimumTLSVersion, .tls12)
        XCTAssertFalse(c.client.followRedirects)
        XCTAssertEqual(c.client.maxRedirects, 5)
        XCTAssertNil(c.client.url.unixSocketPath)
    }

    func testProxyOptions() throws {
        XCTAssertEqual(try config(["--proxy", "http://u:p@proxy:3128", "ws://h/"]).client.network.proxy,
                       .url(try ProxyURL(parsing: "http://u:p@proxy:3128")))
        XCTAssertEqual(try config(["--proxy=", "ws://h/"]).client.network.proxy, ProxySetting.none)
        XCTAssertEqual(try config(["--socks5", "127.0.0.1:1080", "ws://h/"]).client.network.proxy,
                       .url(ProxyURL(kind: .socks5, host: "127.0.0.1", port: 1080)))
        XCTAssertEqual(try config(["--socks5", "socks5h://h:9050", "ws://h/"]).client.network.proxy,
                       .url(ProxyURL(kind: .socks5h, host: "h", port: 9050)))
        // the last one given counts
        XCTAssertEqual(try config(["--socks5", "a:1", "--proxy", "b:2", "ws://h/"]).client.network.proxy,
                       .url(ProxyURL(kind: .http, host: "b", port: 2)))
        XCTAssertEqual(try config(["--noproxy", "*.corp,10.0.0.0/8", "ws://h/"]).client.network.noProxy, "*.corp,10.0.0.0/8")
        XCTAssertEqual(try config(["--noproxy", "", "ws://h/"]).client.network.noProxy, "")
    }

    func testProxyVariablesAreCapturedAndNothingElse() throws {
        let environment = ["https_proxy": "http://p:1", "NO_PROXY": "x", "HOME": "/root", "WSPIPE_BEARER": "t"]
        let c = try config(["wss://h/"], environment: environment)
        XCTAssertEqual(c.client.network.environment, ["https_proxy": "http://p:1", "NO_PROXY": "x"])
    }

    func testProxyErrorsNeverShowThePassword() {
        for (arguments, expected) in [
            (["--proxy", "ftp://alice:hunter2@p:21", "ws://h/"], "--proxy: unsupported proxy scheme 'ftp'"),
            (["--proxy", "http://alice:hunter2@p:99999", "ws://h/"], "--proxy: bad proxy port '99999'"),
            (["--socks5", "http://alice:hunter2@p:1", "ws://h/"], "--socks5 takes HOST:PORT or a socks5:// or socks5h:// URL"),
        ] {
            let text = usageError(arguments) ?? ""
            XCTAssertTrue(text.hasPrefix(expected), text)
            XCTAssertFalse(text.contains("hunter2"), text)
        }
    }

    func testDialOverrides() throws {
        let c = try config(["--connect-to", "[::1]:8443", "--sni", "edge.example", "--resolve", "a.test:443:127.0.0.1",
                            "--resolve", "b.test:80:::1,10.0.0.1", "-6", "wss://h.example/"])
        XCTAssertEqual(c.client.network.connectTo, HostPort(host: "::1", port: 8443))
        XCTAssertEqual(c.client.network.serverName, "edge.example")
        XCTAssertEqual(c.client.network.connect.family, .ipv6)
        XCTAssertEqual(c.client.network.connect.overrides.map(\.host), ["a.test", "b.test"])
        XCTAssertEqual(try config(["-4", "ws://h/"]).client.network.connect.family, .ipv4)
        XCTAssertEqual(try config(["-46", "ws://h/"]).client.network.connect.family, .ipv6)
        XCTAssertEqual(try config(["--ipv4", "ws://h/"]).client.network.connect.family, .ipv4)
        // --connect-to HOST keeps the URL's port
        XCTAssertEqual(try config(["--connect-to", "10.0.0.7", "wss://h.example:9443/"]).client.network.connectTo,
                       HostPort(host: "10.0.0.7", port: 9443))
        XCTAssertEqual(try config(["--connect-to", "10.0.0.7", "wss://h.example/"]).client.network.connectTo,
                       HostPort(host: "10.0.0.7", port: 443))
    }

    func testDialOverrideErrors() {
        XCTAssertEqual(usageError(["--connect-to", "::1:80", "ws://h/"]),
                       "--connect-to '::1:80' is not HOST:PORT (an IPv6 address in brackets: [::1]:8443)")
        XCTAssertEqual(usageError(["--connect-to", "h:0", "ws://h/"]),
                       "--connect-to 'h:0' is not HOST:PORT (an IPv6 address in brackets: [::1]:8443)")
        XCTAssertEqual(usageError(["--sni", "a b", "ws://h/"]), "--sni 'a b' is not a host name")
        XCTAssertEqual(usageError(["--sni", "", "ws://h/"]), "--sni '' is not a host name")
        XCTAssertEqual(usageError(["--resolve", "h:80", "ws://h/"]),
                       "--resolve 'h:80' is not HOST:PORT:ADDRESS[,ADDRESS...] (IP addresses)")
        XCTAssertEqual(usageError(["--max-redirs", "-1", "ws://h/"]), "--max-redirs '-1' is not a number from 0 to 1000")
        XCTAssertEqual(usageError(["--tls-min", "1.1", "ws://h/"]), "--tls-min '1.1' is not a TLS version (1.2 or 1.3)")
    }

    func testUnixSocket() throws {
        let c = try config(["--unix-socket", "/run/app.sock", "ws://app/feed"])
        XCTAssertEqual(c.client.url.unixSocketPath, "/run/app.sock")
        XCTAssertEqual(c.client.url.hostHeader, "app")
        XCTAssertEqual(try config(["ws+unix:///run/app.sock:/x"]).client.url.unixSocketPath, "/run/app.sock")
        XCTAssertEqual(usageError(["--unix-socket", "/a.sock", "ws+unix:///b.sock"]),
                       "--unix-socket cannot be combined with a ws+unix:// URL, which names its socket already")
        XCTAssertEqual(usageError(["--connect-to", "h:1", "ws+unix:///b.sock"]),
                       "--connect-to cannot be combined with a Unix socket")
        XCTAssertEqual(usageError(["--unix-socket", "/" + String(repeating: "x", count: 107), "ws://h/"]),
                       "--unix-socket needs a socket path of 1 to 107 bytes")
    }

    func testTLSOptions() throws {
        let c = try config(["--cert", readable, "--key-pass-env", "KP", "--tls-min", "TLSv1.3", "wss://h/"],
                           environment: ["KP": "s3cret pass"])
        XCTAssertEqual(c.client.network.clientCertificate?.certificateFile, readable)
        XCTAssertEqual(c.client.network.clientCertificate?.keyFile, readable, "the key defaults to the certificate file")
        XCTAssertEqual(c.client.network.clientCertificate?.keyPassword, Array("s3cret pass".utf8))
        XCTAssertEqual(c.client.network.minimumTLSVersion, .tls13)
        XCTAssertFalse("\(c.client.network.clientCertificate!)".contains("s3cret"))
        XCTAssertEqual(try config(["--tls-min", "1.2", "wss://h/"]).client.network.minimumTLSVersion, .tls12)
    }

    /// With -l, --cert/--key are the server's own (wss://), with the same passphrase options.
    func testServerTLSOptions() throws {
        let c = try config(["-l", "0", "--echo", "--cert", readable, "--key-pass-env", "KP", "--tls-min", "1.3",
                            "--client-ca", readable], environment: ["KP": "s3cret pass"])
        let tls = try XCTUnwrap(c.serve?.tls)
        XCTAssertEqual(tls, TLSServerOptions(certificateFile: readable, keyFile: readable, keyPassword: Array("s3cret pass".utf8),
                                             minimumVersion: .tls13, clientCAFile: readable))
        XCTAssertNil(c.client.network.clientCertificate, "not a client certificate")
        XCTAssertFalse("\(tls)".contains("s3cret"))
        XCTAssertNil(try config(["-l", "0", "--echo"]).serve?.tls)
        for option in [["--client-ca", readable], ["--key", readable], ["--tls-min", "1.3"], ["--key-pass-env", "KP"]] {
            XCTAssertEqual(usageError(["-l", "0", "--echo"] + option, environment: ["KP": "x"]),
                           "\(option[0]) with -l needs --cert (the server's certificate) to serve wss://")
        }
        XCTAssertEqual(usageError(["--client-ca", readable, "wss://h/"]), "--client-ca is a server option: it needs -l/--listen")
        XCTAssertEqual(usageError(["-l", "0", "--echo", "--cert", readable, "--cacert", readable]),
                       "--cacert is a client option; it cannot be used with -l/--listen (the CAs of client certificates: --client-ca)")
        XCTAssertEqual(usageError(["-l", "0", "--echo", "--cert", readable, "--key-pass-env", "NOPE"]),
                       "--key-pass-env: the environment variable NOPE is not set or empty")
    }

    func testKeyPassFileDropsOneLineEnd() throws {
        for (content, expected) in [("pw\n", "pw"), ("pw\r\n", "pw"), ("pw", "pw"), (" pw \n\n", " pw \n")] {
            let c = try config(["--cert", readable, "--key-pass-file", readable, "wss://h/"], files: [readable: content])
            XCTAssertEqual(c.client.network.clientCertificate?.keyPassword, Array(expected.utf8), String(reflecting: content))
        }
    }

    func testTLSOptionErrors() {
        XCTAssertEqual(usageError(["--key", readable, "wss://h/"]), "--key, --key-pass-env and --key-pass-file need --cert")
        XCTAssertEqual(usageError(["--cert", readable, "--key-pass-env", "NOPE", "wss://h/"]),
                       "--key-pass-env: the environment variable NOPE is not set or empty")
        XCTAssertEqual(usageError(["--cert", readable, "--key-pass-env", "A", "--key-pass-file", readable, "wss://h/"],
                                  environment: ["A": "x"]),
                       "give the key's passphrase with --key-pass-env or --key-pass-file, not both")
        XCTAssertEqual(usageError(["--cert", readable, "--key-pass-file", readable, "wss://h/"], files: [readable: "\n"]),
                       "--key-pass-file '\(readable)' is empty")
        XCTAssertTrue(usageError(["--cert", "/nonexistent/cert.pem", "wss://h/"])?
            .hasPrefix("cannot read --cert file '/nonexistent/cert.pem'") ?? false)
    }

    func testRedirectOptions() throws {
        let c = try config(["-L", "--max-redirs", "2", "ws://h/"])
        XCTAssertTrue(c.client.followRedirects)
        XCTAssertEqual(c.client.maxRedirects, 2)
        XCTAssertTrue(try config(["--location", "ws://h/"]).client.followRedirects)
    }

    func testRedirectElsewhereDropsSecretsAndHost() throws {
        let c = try config(["-H", "Host: custom", "-H", "Cookie: c=1", "-H", "X-Api-Key: k", "-H", "X-Plain: yes",
                            "-H", "Authorization: Basic abc", "--bearer", "tok", "ws://h/"])
        let home = c.client.requestHeaders(credentials: true, userHost: true).map(\.name)
        XCTAssertEqual(home, ["Host", "Cookie", "X-Api-Key", "X-Plain", "Authorization", "User-Agent"])
        let away = c.client.requestHeaders(credentials: false, userHost: false).map(\.name)
        XCTAssertEqual(away, ["X-Plain", "User-Agent"])
        let bearer = try config(["--bearer", "tok", "ws://h/"])
        XCTAssertEqual(bearer.client.requestHeaders(credentials: true, userHost: true).map(\.value).last, "Bearer tok")
        XCTAssertFalse(bearer.client.requestHeaders(credentials: false, userHost: false).contains { $0.value.contains("tok") })
    }
}
