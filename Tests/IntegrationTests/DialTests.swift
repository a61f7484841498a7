import XCTest
import TestSupport

/// Where the connection goes: Unix sockets, --connect-to and --sni (the dial address apart
/// from Host, SNI and certificate name), --resolve, happy eyeballs and -4/-6.
final class DialTests: IntegrationTestCase {
    // MARK: Unix sockets

    func testUnixSocketURL() throws {
        let (_, socket) = try startUnixEcho()
        let result = try runWspipe(["-v", "ws+unix://\(socket):/chat?room=1"], stdin: .bytes(Array("over unix\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "over unix\n")
        assertStderr(result, contains: "wspipe: * route: Unix socket \(socket)")
        assertStderr(result, contains: "wspipe: > GET /chat?room=1 HTTP/1.1")
        assertStderr(result, contains: "wspipe: > Host: localhost")
        assertStderr(result, contains: "wspipe: * connected: ws+unix://\(socket):/chat?room=1")
    }

    func testUnixSocketOptionKeepsTheURLsHostAndIgnoresProxies() throws {
        let (_, socket) = try startUnixEcho()
        let result = try runWspipe(["-v", "--unix-socket", socket, "ws://app.internal:8080/feed"],
                                   stdin: .bytes(Array("x\n".utf8)), environment: ["http_proxy": "http://127.0.0.1:1"])
        assertExit(result, 0)
        assertStdout(result, "x\n")
        assertStderr(result, contains: "wspipe: > Host: app.internal:8080")
        assertStderr(result, contains: "route: Unix socket \(socket)")
    }

    func testTLSOverAUnixSocket() throws {
        let tls = try TLSMaterial.shared()
        let (_, socket) = try startUnixEcho(["--tls", tls.serverCert, tls.serverKey])
        let result = try runWspipe(["--cacert", tls.caCert, "wss+unix://\(socket)"], stdin: .bytes(Array("tls unix\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "tls unix\n")
        // The server name is the URL's host: with --unix-socket, one the certificate lacks fails.
        let wrongName = try runWspipe(["--cacert", tls.caCert, "--unix-socket", socket, "wss://other.example/"])
        assertExit(wrongName, 4)
        assertStderr(wrongName, contains: "not valid for 'other.example'")
    }

    func testMissingOrWrongUnixSocketExit3() throws {
        let missing = try runWspipe(["ws+unix:///nonexistent/wspipe.sock:/"])
        assertExit(missing, 3)
        assertStderr(missing, contains: "wspipe: cannot connect to Unix socket /nonexistent/wspipe.sock: No such file or directory")
        let notASocket = try runWspipe(["--unix-socket", Locations.peers + "/echo.py", "ws://localhost/"])
        assertExit(notASocket, 3)
        assertStderr(notASocket, contains: "(the file is not a socket)")
        let badURL = try runWspipe(["ws+unix:///run/app.sock:path"])
        assertExit(badURL, 2)
    }

    // MARK: --connect-to and --sni

    func testConnectToKeepsHostSNIAndCertificateName() throws {
        let tls = try TLSMaterial.shared()
        let recorder = try startRecorder(["--tls", tls.otherCert, tls.otherKey])  // certificate for other.example only
        let result = try runWspipe(["-v", "--cacert", tls.caCert, "--connect-to", "127.0.0.1:\(recorder.port)",
                                    "wss://other.example/path"], stdin: .bytes(Array("edge\n".utf8)))
        assertExit(result, 0)
        assertStderr(result, contains: "--connect-to: dialing 127.0.0.1:\(recorder.port) instead of other.example:443; Host, SNI "
                     + "and certificate name stay other.example")
        let record = try recorder.record(1)
        XCTAssertEqual(record.values("Host"), ["other.example"])
        XCTAssertEqual(record.texts, ["edge"])
    }

    func testConnectToThroughAProxyTunnelsToTheDialAddress() throws {
        let echo = try startEcho()
        let proxy = try startProxy()
        let result = try runWspipe(["--proxy", "127.0.0.1:\(proxy.port)", "--connect-to", "127.0.0.1:\(echo.port)",
                                    "ws://service.invalid/"], stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 0)
        XCTAssertEqual(try proxy.record(1, as: ProxyRecord.self).target, "127.0.0.1:\(echo.port)")
    }

    /// --connect-to with a name that does not resolve: status 3 as for the URL's host (a
    /// HOST alone is a valid value: the URL's port), the line naming --connect-to (it named
    /// the host only, read as the URL's). A value that is no HOST[:PORT] is a usage error.
    func testConnectToANameThatDoesNotResolve() throws {
        let result = try runWspipe(["--connect-to", "nope.invalid", "ws://127.0.0.1:1/"])
        assertExit(result, 3)
        XCTAssertTrue(result.stderr.hasPrefix("wspipe: cannot resolve host 'nope.invalid' (--connect-to): "), result.stderr)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
        let bad = try runWspipe(["--connect-to", "nope:99999", "ws://127.0.0.1:1/"])
        assertExit(bad, 2)
        assertStderr(bad, contains: "--connect-to 'nope:99999' is not HOST:PORT")
    }

    func testSNIOptionForAnAddressURL() throws {
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.otherCert, tls.otherKey])
        let without = try runWspipe(["--cacert", tls.caCert, url(echo, scheme: "wss")])
        assertExit(without, 4)
        let with = try runWspipe(["-v", "--cacert", tls.caCert, "--sni", "other.example", url(echo, scheme: "wss")],
                                 stdin: .bytes(Array("sni\n".utf8)))
        assertExit(with, 0)
        assertStdout(with, "sni\n")
        assertStderr(with, contains: "TLS server name (SNI and certificate check): other.example")
        assertStderr(with, contains: "wspipe: > Host: 127.0.0.1:\(echo.port)")
    }

    func testHostHeaderReplacesOnlyTheHostHeader() throws {
        let tls = try TLSMaterial.shared()
        let recorder = try startRecorder(["--tls", tls.serverCert, tls.serverKey])
        let result = try runWspipe(["--cacert", tls.caCert, "-H", "Host: virtual.example", url(recorder, scheme: "wss", host: "localhost")])
        assertExit(result, 0)
        XCTAssertEqual(try recorder.record(1).values("Host"), ["virtual.example"])
    }

    // MARK: --resolve, happy eyeballs, -4/-6

    func testIPv6RefusedFallsBackToIPv4() throws {
        try requireIPv6Loopback()
        let echo = try startEcho()  // 127.0.0.1 only: [::1] on the same port refuses
        let result = try runWspipe(["-v", "--resolve", "dual.test:\(echo.port):::1,127.0.0.1", "ws://dual.test:\(echo.port)/"],
                                   stdin: .bytes(Array("fallback\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "fallback\n")
        assertStderr(result, contains: "trying in this order: [::1]:\(echo.port), 127.0.0.1:\(echo.port)")
        assertStderr(result, contains: "happy eyeballs: 127.0.0.1:\(echo.port) (IPv4) won")
        assertStderr(result, contains: "wspipe: > Host: dual.test:\(echo.port)")
    }

    func testIPv6BlackholeCostsOnlyTheAttemptDelay() throws {
        try requireIPv6Loopback()
        let echo = try startEcho()
        let blackhole = try IPv6Blackhole(port: echo.port)
        _ = blackhole
        let result = try runWspipe(["-v", "--connect-timeout", "10", "--resolve", "dual.test:\(echo.port):::1,127.0.0.1",
                                    "ws://dual.test:\(echo.port)/"], stdin: .bytes(Array("raced\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "raced\n")
        assertStderr(result, contains: "happy eyeballs: 127.0.0.1:\(echo.port) (IPv4) won, attempt 2 of 2; abandoning [::1]:\(echo.port)")
        XCTAssertLessThan(result.elapsed, 5, "the IPv6 attempt must not hold the connection up")
        // -6 has only the blackholed address: the connect timeout applies.
        let onlySix = try runWspipe(["--connect-timeout", "1", "-6", "--resolve", "dual.test:\(echo.port):::1,127.0.0.1",
                                     "ws://dual.test:\(echo.port)/"])
        assertExit(onlySix, 3)
        assertStderr(onlySix, contains: "timed out after 1 s connecting to [::1]:\(echo.port)")
    }

    func testFamilyOptions() throws {
        let echo = try startEcho()
        let four = try runWspipe(["-v", "-4", "--resolve", "dual.test:\(echo.port):::1,127.0.0.1", "ws://dual.test:\(echo.port)/"],
                                 stdin: .bytes(Array("4\n".utf8)))
        assertExit(four, 0)
        XCTAssertFalse(four.stderr.contains("[::1]"), four.stderr)
        let noSix = try runWspipe(["-6", "ws://127.0.0.1:\(echo.port)/"])
        assertExit(noSix, 3)
        assertStderr(noSix, contains: "no IPv6 (-6) address")
    }
}

/// A [::1] port where connections hang: a listening socket with a full backlog (the
/// kernel drops further SYNs, as a black-holed route would).
final class IPv6Blackhole {
    private let listener: Int32
    private let filler: Int32

    init(port: Int) throws {
        let listener = socket(AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        address.sin6_port = UInt16(port).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 0) == 0 else {
            close(listener)
            throw HarnessError("cannot listen on [::1]:\(port): \(String(cString: strerror(errno)))")
        }
        // One connection fills a backlog of 0.
        let filler = socket(AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) }
        }
        usleep(100_000)
        self.listener = listener
        self.filler = filler
    }

    deinit {
        close(filler)
        close(listener)
    }
}
