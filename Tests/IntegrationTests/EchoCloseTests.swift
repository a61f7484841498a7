// wspipe -l --echo when the client's Close follows a burst in the same TCP write: every
// message received before the Close is echoed whole, then the Close (RFC 6455 §5.5.1: the
// answer may wait for the current message; an echo server's answers to what came before
// the Close are its output, as a program's are in --exec).
import Glibc
import TestSupport
import XCTest

final class EchoCloseTests: IntegrationTestCase {
    /// Runs burst_close.py: `rounds` connections per shape, each a ~200 KB burst and the
    /// Close in one write (over the 192 KiB queue limit, so echoes wait unframed when the
    /// Close is read); every round must get back every message, then Close 1000.
    private func assertEveryEchoBeforeTheClose(_ url: String, _ extra: [String] = [], rounds: Int = 25,
                                               file: StaticString = #filePath, line: UInt = #line) throws {
        for shape in ["many", "fragmented", "mixed"] {
            let client = try ChildProcess(executable: Locations.python,
                                          arguments: ["\(Locations.peers)/burst_close.py", url, shape, String(rounds),
                                                      "--seconds", "40"] + extra,
                                          environment: Locations.baseEnvironment, stdin: .null)
            let result = finish(client, timeout: 60)
            XCTAssertTrue(result.stdoutText.hasSuffix(" short 0\n") && result.stdoutText.hasPrefix("rounds "),
                          "\(shape): \(result)", file: file, line: line)
        }
    }

    /// The regression (fixed): the core's echo of the Close went out at once, ahead of the
    /// echoes still waiting unframed over the queue limit, which were dropped: 163 of 200
    /// rounds of twelve 16 KiB messages and one of 3,392 bytes got 196,608 bytes back and a
    /// Close in the middle of the last echo (whose final frame was lost).
    func testEchoesOfABurstSentWithTheCloseAllGoBeforeTheClose() throws {
        let (server, port) = try startListening(["--echo", "--no-deflate"])
        try assertEveryEchoBeforeTheClose("ws://127.0.0.1:\(port)/", ["--deflate"])
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// The same with permessage-deflate agreed: echoes wait uncompressed and are deflated
    /// when framed.
    func testWithDeflateTheEchoesOfABurstAllGoBeforeTheClose() throws {
        let (server, port) = try startListening(["--echo"])
        try assertEveryEchoBeforeTheClose("ws://127.0.0.1:\(port)/", ["--deflate"])
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// A client that half-closes TCP after its Close still gets every echo, then the Close
    /// (before: the end of stream ended the connection with the echoes unframed; 94 of 100).
    func testAClientThatHalfClosesAfterItsCloseStillGetsEveryEcho() throws {
        let (server, port) = try startListening(["--echo"])
        try assertEveryEchoBeforeTheClose("ws://127.0.0.1:\(port)/", ["--half-close"])
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testOverTLSTheEchoesOfABurstAllGoBeforeTheClose() throws {
        let tls = try TLSMaterial.shared()
        let (server, port) = try startListening(["--echo", "--cert", tls.serverCert, "--key", tls.serverKey], scheme: "wss")
        try assertEveryEchoBeforeTheClose("wss://127.0.0.1:\(port)/", ["--cacert", tls.caCert])
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }
}
