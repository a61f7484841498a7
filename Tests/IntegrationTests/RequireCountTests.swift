// --require-count (issue 19, item 5): with -n N or -1, a session that ends cleanly before
// N messages came exits 11 with one line saying how many came; without it, unchanged.
import Foundation
import TestSupport
import XCTest

final class RequireCountTests: IntegrationTestCase {
    /// frames.py: the scripted messages, then (with --close-code) the server's Close.
    private func startFrames(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("frames-\(UUID().uuidString).json")
        return try startPython("frames.py", ["--record", record] + arguments, recordFile: record, file: file, line: line)
    }

    func testServerClosingBeforeTheCountExits11AndSaysHowManyCame() throws {
        let server = try startFrames(["--send-text", "a", "--send-text", "b", "--close-code", "1000"])
        let short = try runWspipe(["-n", "3", "--require-count", url(server)], stdin: .null)
        assertExit(short, 11)
        assertStdout(short, "a\nb\n")
        XCTAssertEqual(short.stderr, "wspipe: the connection ended after 2 of 3 messages (--require-count)\n")

        let unchanged = try runWspipe(["-n", "3", url(server)], stdin: .null)
        assertExit(unchanged, 0)  // the default: the status says how the session ended
        assertStdout(unchanged, "a\nb\n")

        let enough = try runWspipe(["-n", "2", "--require-count", url(server)], stdin: .null)
        assertExit(enough, 0)
        assertStdout(enough, "a\nb\n")
    }

    /// --idle-timeout's clean close before the count is a shortfall too; --timeout keeps 124.
    func testIdleTimeoutBeforeTheCountExits11AndTimeoutStays124() throws {
        let server = try startFrames(["--send-text", "a"])  // then silent, no Close
        let idle = try runWspipe(["-n", "2", "--require-count", "--idle-timeout", "0.3", url(server)], stdin: .null)
        assertExit(idle, 11)
        assertStdout(idle, "a\n")
        assertStderr(idle, contains: "after 1 of 2 messages")
        let timed = try runWspipe(["-n", "2", "--require-count", "--timeout", "0.3", url(server)], stdin: .null)
        assertExit(timed, 124)
        assertStdout(timed, "a\n")
    }

    /// The cron one-shot: an empty reply is told from a good one.
    func testOneMessageWithoutAReplyExits11() throws {
        let server = try startFrames(["--wait-messages", "1", "--close-code", "1000"])
        let result = try runWspipe(["--send", "x", "-1", "--require-count", url(server)], stdin: .null)
        assertExit(result, 11)
        assertStdout(result, "")
        assertStderr(result, contains: "the connection ended after 0 of 1 message (--require-count)")
    }

    /// With --reconnect the count runs across connections, as -n's does.
    func testReconnectCountsAcrossConnections() throws {
        // 1001 is retried; it comes 0.3 s after the message, so the third one's count closes first.
        let server = try startFrames(["--send-text", "a", "--interval", "0.3", "--close-code", "1001"])
        let result = try runWspipe(["--reconnect", "--retry-delay", "0.05", "-n", "3", "--require-count", url(server)],
                                   stdin: .null, timeout: 30)
        assertExit(result, 0)
        assertStdout(result, "a\na\na\n")

        let ending = try startFrames(["--send-text", "a", "--close-code", "1000"])  // 1000 is not retried
        let short = try runWspipe(["--reconnect", "-n", "3", "--require-count", url(ending)], stdin: .null, timeout: 30)
        assertExit(short, 11)
        assertStderr(short, contains: "after 1 of 3 messages (--require-count)")
    }

    /// Serving, the one client of --oneshot gives the status; -n counts what it sent.
    func testOneshotServerExits11WhenItsClientSentTooFew() throws {
        let (server, port) = try startListening(["--oneshot", "-n", "2", "--require-count", "--receive-only"])
        let client = try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array("one\n".utf8)))
        assertExit(client, 0)
        let result = finish(server, timeout: 20)
        assertExit(result, 11)
        assertStdout(result, "one\n")
        assertStderr(result, contains: "the connection ended after 1 of 2 messages (--require-count)")
    }

    func testWithoutACountOrOutsideOneshotItIsAUsageError() throws {
        let cases: [([String], String)] = [
            (["--require-count", "ws://127.0.0.1:1/"], "--require-count needs -n N, -1 or --until"),
            (["-l", "0", "-n", "1", "--require-count"], "--require-count with -l needs --oneshot"),
            (["-l", "0", "--echo", "--oneshot", "-n", "1", "--require-count"], "--require-count has no meaning with -l/--listen --echo"),
            (["-l", "0", "--sh", "cat", "--oneshot", "--require-count"], "--require-count has no meaning with -l/--listen --exec/--sh"),
        ]
        for (arguments, message) in cases {
            let result = try runWspipe(arguments)
            assertExit(result, 2)
            assertStderr(result, contains: message)
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "\(arguments): one line: \(result.stderr)")
        }
    }
}
