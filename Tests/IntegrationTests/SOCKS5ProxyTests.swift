import XCTest
import TestSupport

/// SOCKS5 (peers/socks5.py): no authentication and RFC 1929 username/password, local
/// (socks5://) and remote (socks5h://) name resolution, failure replies.
final class SOCKS5ProxyTests: IntegrationTestCase {
    private let password = "s0cks-S3cret"

    func testNoAuthenticationWithLocalResolution() throws {
        let echo = try startEcho()
        let socks = try startSocks()
        let result = try runWspipe(["-v", "--socks5", "127.0.0.1:\(socks.port)", url(echo, host: "localhost")],
                                   stdin: .bytes(Array("socks\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "socks\n")
        assertStderr(result, contains: "route: via SOCKS5 proxy 127.0.0.1:\(socks.port) (from --proxy) to localhost:\(echo.port)")
        let record = try socks.record(1, as: SocksRecord.self)
        XCTAssertEqual(record.methods, [0])
        XCTAssertEqual(record.atyp, "ipv4", "socks5:// resolves the name here and sends an address")
        XCTAssertEqual(record.host, "127.0.0.1")
        XCTAssertEqual(record.port, echo.port)
    }

    func testRemoteResolutionWithSocks5h() throws {
        let echo = try startEcho()
        let socks = try startSocks()
        let result = try runWspipe(["-v", "--proxy", "socks5h://127.0.0.1:\(socks.port)", url(echo, host: "localhost")],
                                   stdin: .bytes(Array("remote dns\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "remote dns\n")
        assertStderr(result, contains: "(the proxy resolves the name)")
        let record = try socks.record(1, as: SocksRecord.self)
        XCTAssertEqual(record.atyp, "domain")
        XCTAssertEqual(record.host, "localhost")
    }

    func testUsernamePasswordAuthentication() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let socks = try startSocks(["--auth", "bob:\(password)"])
        let result = try runWspipe(["-v", "--cacert", tls.caCert, "--proxy", "socks5h://bob:\(password)@127.0.0.1:\(socks.port)",
                                    url(echo, scheme: "wss", host: "localhost")], stdin: .bytes(Array("secure socks\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "secure socks\n")
        assertNoSecrets(result, [password])
        let record = try socks.record(1, as: SocksRecord.self)
        XCTAssertEqual(record.methods, [0, 2])
        XCTAssertEqual(record.method, 2)
        XCTAssertEqual(record.user, "bob")
        XCTAssertEqual(record.password, password)
    }

    func testWrongPasswordExit9() throws {
        let socks = try startSocks(["--auth", "bob:\(password)"])
        for verbose in [[], ["-v"]] {
            let result = try runWspipe(verbose + ["--proxy", "socks5://bob:Wr0ng-pw@127.0.0.1:\(socks.port)", "ws://127.0.0.1:9/"])
            assertExit(result, 9)
            assertStderr(result, contains: "wspipe: the SOCKS5 proxy 127.0.0.1:\(socks.port) refused the user name and password")
            assertNoSecrets(result, ["Wr0ng-pw", password])
        }
    }

    func testAuthenticationRequiredExit9() throws {
        let socks = try startSocks(["--auth", "bob:\(password)"])
        let result = try runWspipe(["--socks5", "127.0.0.1:\(socks.port)", "ws://127.0.0.1:9/"])
        assertExit(result, 9)
        assertStderr(result, contains: "the SOCKS5 proxy 127.0.0.1:\(socks.port) requires authentication")
    }

    func testFailureReplyExit9() throws {
        let socks = try startSocks(["--fail-reply", "2"])
        let result = try runWspipe(["--socks5", "127.0.0.1:\(socks.port)", "ws://127.0.0.1:9/"])
        assertExit(result, 9)
        assertStderr(result, contains: "wspipe: the SOCKS5 proxy 127.0.0.1:\(socks.port) could not connect to 127.0.0.1:9: "
                     + "connection not allowed by ruleset (reply 2)")
        // A real refusal: the target port is closed.
        let closed = try LoopbackSocket(listening: false)
        let open = try startSocks()
        let refused = try runWspipe(["--socks5", "127.0.0.1:\(open.port)", "ws://127.0.0.1:\(closed.port)/"])
        assertExit(refused, 9)
        assertStderr(refused, contains: "connection refused (reply 5)")
    }

    func testAllProxyVariableWithSocks() throws {
        let echo = try startEcho()
        let socks = try startSocks(["--auth", "bob:\(password)"])
        let result = try runWspipe(["-v", url(echo)], stdin: .bytes(Array("env\n".utf8)),
                                   environment: ["ALL_PROXY": "socks5h://bob:\(password)@127.0.0.1:\(socks.port)"])
        assertExit(result, 0)
        assertStdout(result, "env\n")
        assertStderr(result, contains: "(from ALL_PROXY)")
        assertNoSecrets(result, [password])
    }
}
