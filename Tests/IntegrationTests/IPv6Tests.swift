import XCTest
import TestSupport

final class IPv6Tests: IntegrationTestCase {
    func testEchoOverIPv6Loopback() throws {
        try requireIPv6Loopback()
        let echo = try startEcho(["--host", "::1"])
        let result = try runWspipe(["-v", "ws://[::1]:\(echo.port)/v6"], stdin: .bytes(Array("six\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "six\n")
        assertStderr(result, contains: "wspipe: > Host: [::1]:\(echo.port)")
    }

    func testTLSOverIPv6VerifiesTheIPAddress() throws {
        try requireIPv6Loopback()
        let tls = try TLSMaterial.shared()
        let good = try startEcho(["--host", "::1", "--tls", tls.serverCert, tls.serverKey]) // SAN IP:::1
        let result = try runWspipe(["--cacert", tls.caCert, "wss://[::1]:\(good.port)/"], stdin: .bytes(Array("v6\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "v6\n")

        let wrong = try startEcho(["--host", "::1", "--tls", tls.otherCert, tls.otherKey])
        let refused = try runWspipe(["--cacert", tls.caCert, "wss://[::1]:\(wrong.port)/"])
        assertExit(refused, 4)
        assertStderr(refused, contains: "not valid for '::1'")
    }
}
