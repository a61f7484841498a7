import Foundation
import XCTest
import TestSupport

/// HTTP CONNECT proxies (peers/proxy.py): with and without authentication, refusals and
/// their exit statuses, proxy selection from the environment as a corporate shell sets
/// it, an https:// proxy (TLS inside TLS), and credentials never printed.
final class ProxyTests: IntegrationTestCase {
    private let user = "alice"
    private let password = "pr0xy-S3cret"
    private var basic: String { Data("\(user):\(password)".utf8).base64EncodedString() }

    private func proxyURL(_ proxy: Peer, credentials: Bool = true, scheme: String = "http", host: String = "127.0.0.1") -> String {
        "\(scheme)://\(credentials ? "\(user):\(password)@" : "")\(host):\(proxy.port)"
    }

    func testConnectWithoutAuthentication() throws {
        let echo = try startEcho()
        let proxy = try startProxy()
        let result = try runWspipe(["-v", "--proxy", "127.0.0.1:\(proxy.port)", url(echo)], stdin: .bytes(Array("via proxy\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "via proxy\n")
        assertStderr(result, contains: "wspipe: * route: via HTTP proxy 127.0.0.1:\(proxy.port) (from --proxy) to 127.0.0.1:\(echo.port)")
        let record = try proxy.record(1, as: ProxyRecord.self)
        XCTAssertEqual(record.request_line, "CONNECT 127.0.0.1:\(echo.port) HTTP/1.1")
        XCTAssertEqual(record.values("Host"), ["127.0.0.1:\(echo.port)"])
        XCTAssertNil(record.auth)
        XCTAssertEqual(record.status, 200)
    }

    func testConnectWithBasicAuthenticationNeverPrintsTheCredentials() throws {
        let echo = try startEcho()
        let proxy = try startProxy(["--auth", "\(user):\(password)"])
        let result = try runWspipe(["-v", "--proxy", proxyURL(proxy), url(echo, host: "localhost")],
                                   stdin: .bytes(Array("authenticated\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "authenticated\n")
        assertStderr(result, contains: "Proxy-Authorization: Basic [redacted]")
        assertNoSecrets(result, [password, basic])
        let record = try proxy.record(1, as: ProxyRecord.self)
        XCTAssertEqual(record.auth, "\(user):\(password)")
        XCTAssertEqual(record.target, "localhost:\(echo.port)", "the proxy resolves the name")
    }

    func testWrongCredentialsExit9() throws {
        let echo = try startEcho()
        let proxy = try startProxy(["--auth", "\(user):\(password)"])
        for verbose in [[], ["-v"]] {
            let result = try runWspipe(verbose + ["--proxy", "http://\(user):wr0ng-Pass@127.0.0.1:\(proxy.port)", url(echo)])
            assertExit(result, 9)
            assertStderr(result, contains: "wspipe: the HTTP proxy 127.0.0.1:\(proxy.port) refused the user name and password "
                         + "[407 Proxy Authentication Required]")
            assertNoSecrets(result, ["wr0ng-Pass", Data("\(user):wr0ng-Pass".utf8).base64EncodedString()])
            assertStderrLinesPrefixed(result)
        }
    }

    func testMissingCredentialsExit9WithAHint() throws {
        let echo = try startEcho()
        let proxy = try startProxy(["--auth", "\(user):\(password)"])
        let result = try runWspipe(["--proxy", "http://127.0.0.1:\(proxy.port)", url(echo)])
        assertExit(result, 9)
        assertStderr(result, contains: "the HTTP proxy 127.0.0.1:\(proxy.port) requires authentication [407 Proxy Authentication "
                     + "Required]; put the user name and password in the proxy URL: http://USER:PASSWORD@127.0.0.1:\(proxy.port)")
    }

    func testUnsupportedAuthenticationSchemeIsNamed() throws {
        let echo = try startEcho()
        let proxy = try startProxy(["--refuse", "407", "--scheme", "Negotiate"])
        let result = try runWspipe(["--proxy", proxyURL(proxy), url(echo)])
        assertExit(result, 9)
        assertStderr(result, contains: "asks for Negotiate authentication, which wspipe does not support (only Basic)")
        assertNoSecrets(result, [password, basic])
    }

    func testForbiddenAndBadGatewayExit9() throws {
        let echo = try startEcho()
        let forbidding = try startProxy(["--refuse", "403"])
        let forbidden = try runWspipe(["--proxy", proxyURL(forbidding), url(echo)])
        assertExit(forbidden, 9)
        assertStderr(forbidden, contains: "wspipe: the HTTP proxy 127.0.0.1:\(forbidding.port) does not allow connecting to "
                     + "127.0.0.1:\(echo.port) [403 Forbidden]")
        assertNoSecrets(forbidden, [password, basic])

        // A real 502: the proxy cannot reach the target (a closed port).
        let closed = try LoopbackSocket(listening: false)
        let proxy = try startProxy()
        let unreachable = try runWspipe(["--proxy", proxyURL(proxy, credentials: false), "ws://127.0.0.1:\(closed.port)/"])
        assertExit(unreachable, 9)
        assertStderr(unreachable, contains: "could not reach 127.0.0.1:\(closed.port) [502 Bad Gateway]")
    }

    func testUnreachableProxyExit3() throws {
        let closed = try LoopbackSocket(listening: false)
        let result = try runWspipe(["--proxy", "http://\(user):\(password)@127.0.0.1:\(closed.port)", "ws://example.invalid/"])
        assertExit(result, 3)
        assertStderr(result, contains: "wspipe: cannot connect to the HTTP proxy 127.0.0.1:\(closed.port) (from --proxy): "
                     + "Connection refused")
        assertNoSecrets(result, [password, basic])
    }

    func testSilentProxyHonoursConnectTimeout() throws {
        let silent = try LoopbackSocket(listening: true)  // accepts TCP, never answers CONNECT
        let result = try runWspipe(["--connect-timeout", "1", "--proxy", "127.0.0.1:\(silent.port)", "ws://example.invalid/"])
        assertExit(result, 3)
        assertStderr(result, contains: "timed out after 1 s waiting for the HTTP proxy 127.0.0.1:\(silent.port) to answer CONNECT")
        XCTAssertLessThan(result.elapsed, 5)
    }

    func testProxyThatIsNotHTTPExit9() throws {
        let echo = try startEcho()
        let socks = try startSocks()  // reads a SOCKS greeting, gets "CONNECT ..." and hangs up
        let result = try runWspipe(["--connect-timeout", "5", "--proxy", "http://127.0.0.1:\(socks.port)", url(echo)])
        assertExit(result, 9)
        assertStderr(result, contains: "the HTTP proxy 127.0.0.1:\(socks.port) closed the connection without answering CONNECT")
    }

    func testSecureWebSocketThroughHTTPProxy() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let proxy = try startProxy(["--auth", "\(user):\(password)"])
        let result = try runWspipe(["--cacert", tls.caCert, "--proxy", proxyURL(proxy), url(echo, scheme: "wss", host: "localhost")],
                                   stdin: .bytes(Array("tunnelled TLS\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "tunnelled TLS\n")
        XCTAssertEqual(try proxy.record(1, as: ProxyRecord.self).target, "localhost:\(echo.port)")
    }

    func testHTTPSProxyCarriesTLSInsideTLS() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let proxy = try startProxy(["--tls", tls.serverCert, tls.serverKey, "--auth", "\(user):\(password)"])
        let payload = String(repeating: "x", count: 100_000)
        let result = try runWspipe(["-v", "--cacert", tls.caCert, "--proxy", proxyURL(proxy, scheme: "https", host: "localhost"),
                                    url(echo, scheme: "wss", host: "localhost")],
                                   stdin: .bytes(Array("inner\n\(payload)\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "inner\n\(payload)\n")
        assertStderr(result, contains: "route: via HTTPS proxy localhost:\(proxy.port) (from --proxy)")
        assertStderr(result, contains: "HTTPS proxy localhost:\(proxy.port): TLS established")
        assertNoSecrets(result, [password, basic])
        // ws:// through the https proxy as well.
        let plain = try startEcho()
        let ws = try runWspipe(["--cacert", tls.caCert, "--proxy", proxyURL(proxy, scheme: "https", host: "localhost"), url(plain)],
                               stdin: .bytes(Array("plain inside\n".utf8)))
        assertExit(ws, 0)
        assertStdout(ws, "plain inside\n")
    }

    func testHTTPSProxyWithUntrustedCertificateExit4() throws {
        let tls = try TLSMaterial.shared()
        let proxy = try startProxy(["--tls", tls.otherCert, tls.otherKey])
        let result = try runWspipe(["--cacert", tls.caCert, "--proxy", "https://localhost:\(proxy.port)", "ws://example.invalid/"])
        assertExit(result, 4)
        assertStderr(result, contains: "with the HTTPS proxy localhost:\(proxy.port): certificate verification failed")
    }

    func testPlainProxyWrittenAsHTTPSGetsAHint() throws {
        let proxy = try startProxy()  // plain HTTP: never answers a TLS ClientHello
        let result = try runWspipe(["--connect-timeout", "1", "ws://127.0.0.1:9/"],
                                   environment: ["http_proxy": "https://127.0.0.1:\(proxy.port)"])
        assertExit(result, 3)
        assertStderr(result, contains: "in the TLS handshake with the HTTPS proxy 127.0.0.1:\(proxy.port) (if it is a plain "
                     + "HTTP proxy, write http:// in its URL)")
    }

    // MARK: - The environment, as a corporate shell sets it

    func testEnvironmentVariablesChooseTheProxyByScheme() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho()
        let secureEcho = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let httpProxy = try startProxy()
        let httpsProxy = try startProxy(["--auth", "\(user):\(password)"])
        let environment = ["http_proxy": "http://127.0.0.1:\(httpProxy.port)/",
                           "https_proxy": proxyURL(httpsProxy) + "/",
                           "HTTPS_PROXY": "http://127.0.0.1:1/", "NO_PROXY": "intranet.example"]
        let ws = try runWspipe(["-v", url(echo)], stdin: .bytes(Array("ws\n".utf8)), environment: environment)
        assertExit(ws, 0)
        assertStderr(ws, contains: "route: via HTTP proxy 127.0.0.1:\(httpProxy.port) (from http_proxy)")
        let wss = try runWspipe(["-v", "--cacert", tls.caCert, url(secureEcho, scheme: "wss", host: "localhost")],
                                stdin: .bytes(Array("wss\n".utf8)), environment: environment)
        assertExit(wss, 0)
        assertStdout(wss, "wss\n")
        assertStderr(wss, contains: "route: via HTTP proxy 127.0.0.1:\(httpsProxy.port) (from https_proxy)")
        assertNoSecrets(wss, [password, basic])
        XCTAssertEqual(try httpProxy.record(1, as: ProxyRecord.self).target, "127.0.0.1:\(echo.port)")
        XCTAssertEqual(try httpsProxy.record(1, as: ProxyRecord.self).target, "localhost:\(secureEcho.port)")
    }

    func testWebSocketVariablesWinOverHTTPOnes() throws {
        let echo = try startEcho()
        let preferred = try startProxy()
        let environment = ["ws_proxy": "127.0.0.1:\(preferred.port)", "http_proxy": "http://127.0.0.1:1",
                           "all_proxy": "socks5://127.0.0.1:1"]
        let result = try runWspipe(["-v", url(echo)], stdin: .bytes(Array("x\n".utf8)), environment: environment)
        assertExit(result, 0)
        assertStderr(result, contains: "(from ws_proxy)")
    }

    func testNoProxyAndNoproxyOption() throws {
        let echo = try startEcho()
        let proxy = try startProxy()
        let environment = ["http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "localhost,.internal,10.0.0.0/8"]
        let bypassed = try runWspipe(["-v", url(echo, host: "localhost")], stdin: .bytes(Array("direct\n".utf8)),
                                     environment: environment)
        assertExit(bypassed, 0)
        assertStderr(bypassed, contains: "route: direct to localhost:\(echo.port) (no_proxy matches localhost)")
        let cidr = try runWspipe(["-v", url(echo)], stdin: .bytes(Array("x\n".utf8)),
                                 environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)", "NO_PROXY": "127.0.0.0/8"])
        assertExit(cidr, 0)
        assertStderr(cidr, contains: "route: direct to 127.0.0.1:\(echo.port) (NO_PROXY matches 127.0.0.1)")
        // --noproxy '' replaces no_proxy: the proxy is used even for localhost.
        let forced = try runWspipe(["-v", "--noproxy", "", url(echo, host: "localhost")], stdin: .bytes(Array("x\n".utf8)),
                                   environment: environment)
        assertExit(forced, 0)
        assertStderr(forced, contains: "route: via HTTP proxy")
        // --proxy '' turns the variables off.
        let off = try runWspipe(["-v", "--proxy", "", url(echo)], stdin: .bytes(Array("x\n".utf8)), environment: environment)
        assertExit(off, 0)
        assertStderr(off, contains: "route: direct to 127.0.0.1:\(echo.port) (--proxy '')")
        XCTAssertEqual(proxy.recordCount, 1, "only the forced run went through the proxy")
    }

    /// -v names the option that sent a host around the proxy (the transport words the
    /// route with the CLI's setting names).
    func testVerboseRouteNamesNoproxy() throws {
        let echo = try startEcho()
        let environment = ["http_proxy": "http://127.0.0.1:1", "no_proxy": "other.example"]
        let result = try runWspipe(["-v", "--noproxy", "localhost", url(echo, host: "localhost")], stdin: .bytes(Array("x\n".utf8)),
                                   environment: environment)
        assertExit(result, 0)
        assertStderr(result, contains: "wspipe: * route: direct to localhost:\(echo.port) (--noproxy matches localhost)\n")
    }

    func testBadProxyVariableIsAUsageErrorWithoutThePassword() throws {
        let result = try runWspipe(["ws://127.0.0.1:9/"], environment: ["http_proxy": "ftp://\(user):\(password)@proxy:21"])
        assertExit(result, 2)
        assertStderr(result, contains: "wspipe: http_proxy: unsupported proxy scheme 'ftp'")
        assertNoSecrets(result, [password])
    }

    func testUppercaseHTTPProxyIsIgnoredUnderCGI() throws {
        let echo = try startEcho()
        let result = try runWspipe(["-v", url(echo)], stdin: .bytes(Array("x\n".utf8)),
                                   environment: ["HTTP_PROXY": "http://127.0.0.1:1", "REQUEST_METHOD": "GET"])
        assertExit(result, 0)
        assertStderr(result, contains: "route: direct to 127.0.0.1:\(echo.port) (no proxy variable set)")
    }
}
