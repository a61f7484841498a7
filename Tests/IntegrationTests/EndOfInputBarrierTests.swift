import Foundation
import TestSupport
import XCTest

/// The end-of-input barrier (issue 26): the Ping behind the last messages waits while the
/// server works (its replies count as progress, up to 10 close timeouts), and giving up on
/// it is said without -v, in --stats and by exit status 12.
final class EndOfInputBarrierTests: IntegrationTestCase {
    let abandoned = "closing anyway: replies may be missing"

    /// The --stats line of a run, decoded.
    func stats(_ result: RunResult) throws -> [String: Any] {
        let line = try XCTUnwrap(result.stderr.split(separator: "\n").last { $0.hasPrefix("{") }, "\(result)")
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    func testASlowEchoServerGetsToAnswerEveryLineWithAShortCloseTimeout() throws {
        // Python websockets whose handler sleeps 50 ms every 500 messages: it takes ~2 s to
        // echo the tail after our input ends, twice the close timeout, while echoing steadily.
        // The barrier gave up at 1 s before (15,625 of 20,000 lines, exit 0).
        let server = try startEcho(["--pause-every", "500", "--pause", "0.05"])
        let lines = (1...20_000).map { "line \($0)" }
        let input = Array(lines.map { $0 + "\n" }.joined().utf8)
        for run in 1...3 {
            let result = try runWspipe(["--stats", "--close-timeout", "1", url(server)], stdin: .bytes(input), timeout: 30)
            assertExit(result, 0)
            XCTAssertEqual(result.stdoutText.split(separator: "\n").count, lines.count, "run \(run)")
            XCTAssertEqual(result.stdoutText, String(decoding: input, as: UTF8.self), "run \(run)")
            XCTAssertFalse(result.stderr.contains(abandoned), "run \(run): \(result.stderr)")
            XCTAssertEqual(try stats(result)["delivery_confirmed"] as? Bool, true, "run \(run)")
        }
    }

    func testTheReconnectingClientWaitsForTheSlowServerToo() throws {
        let server = try startEcho(["--pause-every", "500", "--pause", "0.05"])
        let input = Array((1...20_000).map { "r\($0)\n" }.joined().utf8)
        let result = try runWspipe(["--reconnect", "--close-timeout", "1", url(server)], stdin: .bytes(input), timeout: 30)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, String(decoding: input, as: UTF8.self))
        XCTAssertEqual(result.stderr, "")
    }

    func testAServerThatStreamsForeverAndNeverAnswersThePingStillEnds() throws {
        // Its ticks count as progress for 10 close timeouts after the Ping (5 s here); then
        // the Close goes, the server answers it, and the status says the barrier was given up.
        let server = try startRaw("stream-no-pong")
        let result = try runWspipe(["--stats", "--close-timeout", "0.5", url(server)], stdin: .bytes(Array("x\n".utf8)),
                                   timeout: 20)
        assertExit(result, 12)
        assertStderr(result, contains: "wspipe: the server did not confirm reading all 1 message within 5 s; \(abandoned)")
        XCTAssertGreaterThan(result.elapsed, 4.5, "the ticks did not count as progress: \(result)")
        XCTAssertLessThan(result.elapsed, 7.5, "not within 10 close timeouts (plus the Close's answer): \(result)")
        XCTAssertEqual(try stats(result)["delivery_confirmed"] as? Bool, false)
        XCTAssertEqual(try stats(result)["exit"] as? Int, 12)
        XCTAssertEqual(try server.record().close?.code, 1000)
    }

    func testAServerThatAnswersThePingThenStreamsWithoutClosingIsToldAsSuch() throws {
        // The Pong came (delivery confirmed), then our Close, which it never answers while
        // its ticks go on: they count as progress up to 10 close timeouts after the Ping,
        // and that bound ends the wait. The line said "nothing came for 0.5 s".
        let server = try startRaw("stream-no-close")
        let result = try runWspipe(["--stats", "--close-timeout", "0.5", url(server)], stdin: .bytes(Array("x\n".utf8)),
                                   timeout: 20)
        assertExit(result, 7)
        assertStderr(result, contains: "wspipe: connection lost: no Close from the server: it kept sending for 5 s after the "
                     + "end-of-input ping (at most 10 times --close-timeout); gave up 5 s after the closing began\n")
        XCTAssertFalse(result.stderr.contains("nothing came"), result.stderr)
        XCTAssertFalse(result.stderr.contains(abandoned), result.stderr)
        XCTAssertEqual(try stats(result)["delivery_confirmed"] as? Bool, true)
        XCTAssertLessThan(result.elapsed, 7.5, "\(result)")
    }

    func testAServerThatStopsReadingGetsTheAbandonedBarrierLine() throws {
        // Neither reads nor sends after its 101: one close timeout, the line, the Close's
        // short wait, exit 7 (no Close came back).
        let server = try startRaw("no-read")
        let result = try runWspipe(["-q", "--close-timeout", "0.5", url(server)], stdin: .bytes(Array("a\nb\n".utf8)), timeout: 20)
        assertExit(result, 7)
        assertStderr(result, contains: "wspipe: the server did not confirm reading all 2 messages within 0.5 s; \(abandoned)\n")
        assertStderr(result, contains: "--close-timeout")
        XCTAssertLessThan(result.elapsed, 3, "\(result)")
        assertStderrLinesPrefixed(result)
    }

    func testAShortCloseTimeoutIsNotSaidAsZeroSeconds() throws {
        // --close-timeout 0.03: the lines said "within 0 s" and "gave up 0 s after".
        let server = try startRaw("no-read")
        let result = try runWspipe(["-q", "--close-timeout", "0.03", url(server)], stdin: .bytes(Array("a\n".utf8)), timeout: 20)
        assertExit(result, 7)
        assertStderr(result, contains: "wspipe: the server did not confirm reading all 1 message within 0.0")
        XCTAssertFalse(result.stderr.contains(" 0 s"), result.stderr)
    }

    func testAServersCloseRightAfterThePongIsTheServersNotANormalEnd() throws {
        // Pong and Close 1011 in one write: our Close, released by the Pong, had not gone
        // yet, so the 1011 was echoed, and the ending counted as ours ("the server echoed
        // our code"): exit 0, nothing said. It is the server's close: exit 8 with its reason.
        let server = try startRaw("pong-then-close")
        for run in 1...5 {
            let result = try runWspipe(["--stats", url(server)], stdin: .bytes(Array("x\n".utf8)), timeout: 20)
            assertExit(result, 8)
            assertStderr(result, contains: #"wspipe: the server closed the connection with 1011 (internal error) "after pong""#)
            XCTAssertEqual(try stats(result)["delivery_confirmed"] as? Bool, true, "run \(run)")
        }
    }

    func testAConfirmedEndingSaysSoInStatsAndExitsZero() throws {
        let result = try runWspipe(["--stats", url(try startEcho())], stdin: .bytes(Array("a\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "a\n")
        XCTAssertEqual(try stats(result)["delivery_confirmed"] as? Bool, true)
        let noClose = try runWspipe(["--stats", "--send", "x", "-n", "1", url(try startEcho())])
        assertExit(noClose, 0)
        XCTAssertTrue(try stats(noClose)["delivery_confirmed"] is NSNull, "no end-of-input ping with -n")
    }
}
