import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// --reconnect across server restarts on the same port, graceful (the server closes with
/// 1001) and by SIGKILL, against wspipe's server and Python `websockets` (issue 19, item 2:
/// after a 1001 stdin was never read again). Bounded: short retry delays, every wait timed.
final class ReconnectRestartTests: IntegrationTestCase {
    let fast = ["--reconnect", "--retry-delay", "0.05", "--retry-max-delay", "0.2"]

    /// An echo server on `port` (0: any free one) and the port it took.
    typealias Start = (_ port: Int) throws -> (ChildProcess, Int)

    func wspipeEcho(_ port: Int) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["-l", "127.0.0.1:\(port)", "--echo"], stdin: .null)
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let bound = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            throw HarnessError("wspipe --echo did not start on port \(port): \(child.stderr.text)")
        }
        return (child, bound)
    }

    func pythonEcho(_ port: Int) throws -> (ChildProcess, Int) {
        let peer = try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/echo.py", "--port", String(port)])
        return (peer.process, peer.port)
    }

    /// 20 rounds: a line once the server is up (echoed once), then a restart, graceful and
    /// SIGKILL in turn. Every line is written after a reconnection (or while the client is
    /// disconnected, into its queue) and must come back exactly once, in order.
    func restartTwentyTimes(_ start: Start, file: StaticString = #filePath, line: UInt = #line) throws {
        var (server, port) = try start(0)
        let client = try spawnWspipe(fast + ["ws://127.0.0.1:\(port)/"], stdin: .pipe)
        let rounds = 20
        for round in 0..<rounds {
            client.writeStdin("<\(round)>\n")
            guard waitForStdout(client, contains: "<\(round)>\n", timeout: 10, file: file, line: line) else { break }
            if round % 2 == 0 {
                server.signal(SIGTERM)  // wspipe and echo.py close with 1001, then exit
            } else {
                server.kill()
            }
            XCTAssertNotEqual(server.wait(timeout: 10).termination, .timedOut, "round \(round)", file: file, line: line)
            (server, _) = try start(port)
        }
        client.closeStdin()
        let result = finish(client, timeout: 20, file: file, line: line)
        assertExit(result, 0, file: file, line: line)
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, (0..<rounds).map { "<\($0)>" }, "each line once, in order; stderr:\n\(result.stderr)",
                       file: file, line: line)
    }

    func testRestartsOfWspipesServerGracefulAndKilled() throws {
        try restartTwentyTimes(wspipeEcho)
    }

    func testRestartsOfPythonWebsocketsGracefulAndKilled() throws {
        try restartTwentyTimes(pythonEcho)
    }

    /// stdin ended and its Close waited for the barrier's Pong, but the server's Close came
    /// first (here 1011 in the Pong's write): with --reconnect-on-close the client retried,
    /// and its next connection, with nothing to send and nothing to end it, was held until
    /// killed. Now the run ends with that connection's ending (8: the server's 1011).
    func testAServerClosingFirstAfterTheEndOfInputEndsTheRun() throws {
        let server = try startRaw("pong-then-close")
        let result = try runWspipe(fast + ["--reconnect-on-close", "ws://127.0.0.1:\(server.port)/"],
                                   stdin: .bytes(Array("x\n".utf8)), timeout: 10)
        assertExit(result, 8)
        assertStderr(result, contains: #"wspipe: the server closed the connection with 1011 (internal error) "after pong""#)
        XCTAssertLessThan(result.elapsed, 5, "\(result)")
    }
}
