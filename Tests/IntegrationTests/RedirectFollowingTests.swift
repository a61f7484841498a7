import Foundation
import XCTest
import TestSupport

/// Redirects of the opening handshake: off by default, followed with -L, never from wss
/// to ws, credentials only to the URL's own host and port.
final class RedirectFollowingTests: IntegrationTestCase {
    private func redirector(_ status: Int, to location: String, tls: TLSMaterial? = nil) throws -> Peer {
        let reason = [301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect",
                      308: "Permanent Redirect"][status] ?? "Redirect"
        let name = UUID().uuidString
        let record = path("raw-\(name).json")
        let script = path("script-\(name).bin")
        try Data("HTTP/1.1 \(status) \(reason)\r\nLocation: \(location)\r\nContent-Length: 0\r\n\r\n".utf8)
            .write(to: URL(fileURLWithPath: script))
        var arguments = ["--scenario", "script", "--record", record, "--script", script, "--then", "close"]
        if let tls { arguments += ["--tls", tls.serverCert, tls.serverKey] }
        return try startPython("raw.py", arguments, recordFile: record)
    }

    func testOffByDefaultWithAHint() throws {
        let recorder = try startRecorder()
        let redirect = try redirector(301, to: "ws://localhost:\(recorder.port)/moved")
        let result = try runWspipe([url(redirect, "/old")])
        assertExit(result, 5)
        assertStderr(result, contains: "wspipe: the server answered 301 Moved Permanently instead of 101 Switching Protocols; "
                     + "it redirects to \"ws://localhost:\(recorder.port)/moved\" (-L/--location follows redirects)")
    }

    func testEveryRedirectStatusIsFollowed() throws {
        let recorder = try startRecorder()
        for status in [301, 302, 303, 307, 308] {
            let redirect = try redirector(status, to: "ws://127.0.0.1:\(recorder.port)/to-\(status)")
            let result = try runWspipe(["-v", "-L", url(redirect, "/from")], stdin: .bytes(Array("hi \(status)\n".utf8)))
            assertExit(result, 0)
            assertStderr(result, contains: "wspipe: * redirect \(status) to ws://127.0.0.1:\(recorder.port)/to-\(status)")
        }
        XCTAssertEqual(try recorder.record(5).path, "/to-308")
        XCTAssertEqual(try recorder.record(5).texts, ["hi 308"])
    }

    func testCredentialsGoOnlyToTheURLsHostAndPort() throws {
        let recorder = try startRecorder()
        let redirect = try redirector(307, to: "ws://127.0.0.1:\(recorder.port)/next")
        let token = "t0ken-S3cret"
        let result = try runWspipe(["-v", "-L", "--bearer", token, "-H", "Cookie: session=abc", "-H", "X-Trace: 7",
                                    "-H", "Host: virtual.example", "ws://alice:pw-S3cret@127.0.0.1:\(redirect.port)/start"])
        assertExit(result, 0)
        assertNoSecrets(result, [token, "pw-S3cret", "session=abc"])
        // The first server (the URL's host) got everything.
        let first = try redirect.record(1)
        XCTAssertEqual(first.values("Authorization"), ["Bearer \(token)"])
        XCTAssertEqual(first.values("Cookie"), ["session=abc"])
        XCTAssertEqual(first.values("Host"), ["virtual.example"])
        // Another port is another server: no credentials, no custom Host, other headers kept.
        let second = try recorder.record(1)
        XCTAssertEqual(second.path, "/next")
        XCTAssertEqual(second.values("Authorization"), [])
        XCTAssertEqual(second.values("Cookie"), [])
        XCTAssertEqual(second.values("Host"), ["127.0.0.1:\(recorder.port)"])
        XCTAssertEqual(second.values("X-Trace"), ["7"])
        assertStderr(result, contains: "(another host: credentials, -H Host, --connect-to and --sni are not used there)")
    }

    func testHTTPSLocationBecomesWSSAndProxyRulesApplyPerHop() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let redirect = try redirector(302, to: "https://localhost:\(echo.port)/secure")
        let proxy = try startProxy()
        // The first hop (127.0.0.1) is in no_proxy, the second (localhost) goes through the proxy.
        let result = try runWspipe(["-v", "-L", "--cacert", tls.caCert, url(redirect)], stdin: .bytes(Array("upgraded\n".utf8)),
                                   environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)",
                                                 "https_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "127.0.0.1"])
        assertExit(result, 0)
        assertStdout(result, "upgraded\n")
        assertStderr(result, contains: "route: direct to 127.0.0.1:\(redirect.port) (no_proxy matches 127.0.0.1)")
        assertStderr(result, contains: "redirect 302 to wss://localhost:\(echo.port)/secure")
        XCTAssertEqual(try proxy.record(1, as: ProxyRecord.self).target, "localhost:\(echo.port)")
    }

    func testNeverFromWSSToWS() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho()
        let redirect = try redirector(301, to: "ws://127.0.0.1:\(echo.port)/plain", tls: tls)
        let result = try runWspipe(["-L", "--cacert", tls.caCert, url(redirect, scheme: "wss", host: "localhost")])
        assertExit(result, 5)
        assertStderr(result, contains: "wspipe: refusing to follow the redirect from wss:// to ws://127.0.0.1:\(echo.port)/plain: "
                     + "it would drop TLS")
    }

    func testRedirectMessagesHideSecretsInTheLocation() throws {
        let recorder = try startRecorder()
        let redirect = try redirector(302, to: "ws://bob:L0c-pass@127.0.0.1:\(recorder.port)/n?access_token=L0c-T0ken&room=5")
        let shown = try runWspipe([url(redirect)])
        assertExit(shown, 5)
        assertStderr(shown, contains: "access_token=[redacted]&room=5")
        assertNoSecrets(shown, ["L0c-pass", "L0c-T0ken"])
        let followed = try runWspipe(["-v", "-L", url(redirect)])
        assertExit(followed, 0)
        assertStderr(followed, contains: "redirect 302 to ws://127.0.0.1:\(recorder.port)/n?access_token=[redacted]&room=5")
        assertStderr(followed, contains: "wspipe: < Location: ws://[redacted]@127.0.0.1:\(recorder.port)/n?access_token=[redacted]&room=5")
        assertNoSecrets(followed, ["L0c-pass", "L0c-T0ken"])
    }

    func testMaxRedirects() throws {
        let loop = try redirector(308, to: "/again")
        let result = try runWspipe(["-v", "-L", "--max-redirs", "3", url(loop)])
        assertExit(result, 5)
        assertStderr(result, contains: "wspipe: too many redirects: more than 3 (--max-redirs)")
        XCTAssertEqual(result.stderr.components(separatedBy: "* redirect 308").count - 1, 3)
        let none = try runWspipe(["-L", "--max-redirs", "0", url(loop)])
        assertExit(none, 5)
    }
}
