import Foundation
import XCTest
import TestSupport

/// Against a real websocat 1.13 (.venv/bin/websocat). Note: `websocat -s PORT` is a
/// stdio server (its stdin to the client, client messages to its stdout), not an echo;
/// websocat's echo server is `ws-l:ADDR mirror:`.
final class WebsocatTests: IntegrationTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        guard FileManager.default.isExecutableFile(atPath: Locations.websocat) else {
            XCTFail("\(Locations.websocat) is missing: run scripts/setup")
            throw HarnessError("no websocat")
        }
    }

    /// A port that was free a moment ago (websocat cannot report one it picked itself).
    private func freePort() throws -> Int {
        try LoopbackSocket(listening: false).port
    }

    func testLinesRoundTripThroughWebsocatMirror() throws {
        let port = try freePort()
        let websocat = try ChildProcess(executable: Locations.websocat,
                                        arguments: ["-t", "ws-l:127.0.0.1:\(port)", "mirror:"],
                                        environment: Locations.baseEnvironment)
        addTeardownBlock { websocat.kill() }
        XCTAssertTrue(waitForLoopbackListener(port: port), "websocat did not listen: \(websocat.stderr.text)")
        let input = "hello websocat\nsecond line ✓\n{\"json\": [1, 2, 3]}\n"
        let result = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array(input.utf8)))
        assertExit(result, 0)
        assertStdout(result, input)
        XCTAssertEqual(result.stderr, "")
    }

    func testExchangeWithWebsocatStdioServer() throws {
        let port = try freePort()
        let websocat = try startPeer(executable: Locations.websocat,
                                     arguments: ["-s", "\(port)"], stdin: .pipe,
                                     portLine: "Listening on ws://127.0.0.1:", portFromStderr: true)
        XCTAssertEqual(websocat.port, port)
        let fromWebsocat = "from websocat 1\nfrom websocat 2 ✓\n"
        let fromWspipe = "from wspipe 1\nfrom wspipe 2 ✓\n"
        websocat.process.writeStdin(fromWebsocat)
        // websocat sends each stdin line as one text message *with* its newline; wspipe
        // writes each message followed by a newline. (websocat prints each message it
        // receives followed by a newline, so its stdout is exactly what wspipe read.)
        let expected = "from websocat 1\n\nfrom websocat 2 ✓\n\n"

        let child = try spawnWspipe(["ws://127.0.0.1:\(port)/"], stdin: .pipe)
        child.writeStdin(fromWspipe)
        _ = waitForStdout(child, contains: expected)
        XCTAssertTrue(websocat.process.stdout.wait(timeout: 15) { $0 == Array(fromWspipe.utf8) },
                      "websocat received \(String(reflecting: websocat.process.stdout.text))")
        child.closeStdin()
        let result = finish(child, timeout: 10)
        XCTAssertEqual(result.stdout, Array(expected.utf8), "wspipe printed exactly what websocat sent: \(result)")
        // websocat 1.13 in this mode never answers a client's Close: it closes TCP (checked
        // with a Python `websockets` client too), so wspipe rightly reports exit 7.
        XCTAssertTrue([.exited(0), .exited(7)].contains(result.termination), "\(result)")
    }
}
