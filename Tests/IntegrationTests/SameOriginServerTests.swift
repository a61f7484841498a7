// wspipe -l --sameorigin: a browser's Origin must name the server as its Host header does.
import Foundation
import Glibc
import TestSupport
import XCTest

final class SameOriginServerTests: IntegrationTestCase {
    private func status(_ port: Int, origin: String?, host: String? = nil) throws -> Int? {
        try upgradeStatus(port, Array("/".utf8), host: host ?? "127.0.0.1:\(port)", headers: origin.map { "Origin: \($0)\r\n" } ?? "")
    }

    func testTheServersOwnOriginAndNoOriginAreAcceptedOthers403() throws {
        let (server, port) = try startListening(["--echo", "--sameorigin"])
        XCTAssertEqual(try status(port, origin: nil), 101, "a client without Origin")
        XCTAssertEqual(try status(port, origin: "http://127.0.0.1:\(port)"), 101)
        XCTAssertEqual(try status(port, origin: "http://LOCALHOST:\(port)", host: "localhost:\(port)"), 101)
        XCTAssertEqual(try status(port, origin: "http://evil.example"), 403)
        XCTAssertEqual(try status(port, origin: "http://127.0.0.1:\(port + 1)"), 403, "another port")
        XCTAssertEqual(try status(port, origin: "https://127.0.0.1:\(port)"), 403, "https, but we serve ws://")
        XCTAssertEqual(try status(port, origin: "null"), 403)
        XCTAssertEqual(try status(port, origin: "http://127.0.0.1", host: "127.0.0.1"), 101, "port 80 on both sides")
        // Our own client sends no Origin unless told to.
        let ours = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("hi\n".utf8)))
        assertStdout(ours, "hi\n")
        let refused = try runWspipe(["--origin", "http://evil.example", "ws://127.0.0.1:\(port)/"], stdin: .null)
        assertExit(refused, 5)
        XCTAssertTrue(refused.stderr.contains("403"), refused.stderr)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testWithAllowOriginEitherRuleAdmits() throws {
        let (server, port) = try startListening(["--echo", "--sameorigin", "--allow-origin", "https://app.example"])
        XCTAssertEqual(try status(port, origin: "https://app.example"), 101)
        XCTAssertEqual(try status(port, origin: "http://127.0.0.1:\(port)"), 101)
        XCTAssertEqual(try status(port, origin: nil), 101)
        XCTAssertEqual(try status(port, origin: "https://other.example"), 403)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        // --allow-origin alone still refuses a request without Origin.
        let (alone, alonePort) = try startListening(["--echo", "--allow-origin", "https://app.example"])
        XCTAssertEqual(try status(alonePort, origin: nil), 403)
        alone.signal(SIGTERM)
        assertDiedOf(finish(alone), SIGTERM)
    }

    func testOverTLSTheOriginsSchemeIsHttps() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startListening(["--cert", tls.serverCert, "--key", tls.serverKey, "--echo", "--sameorigin"],
                                                scheme: "wss")
        let url = "wss://localhost:\(port)/"
        let same = try runWspipe(["--cacert", tls.caCert, "--origin", "https://localhost:\(port)", url], stdin: .bytes(Array("tls\n".utf8)))
        assertExit(same, 0)
        assertStdout(same, "tls\n")
        let plain = try runWspipe(["--cacert", tls.caCert, "--origin", "http://localhost:\(port)", url], stdin: .null)
        assertExit(plain, 5)
        XCTAssertTrue(plain.stderr.contains("403"), plain.stderr)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }
}
