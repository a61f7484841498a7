import Foundation
import TestSupport
import XCTest

/// Conversations (issue 37): --send, --send-file and --expect in command-line order, each
/// step checked by what an exchange-like server (peers/exchange.py) received and when;
/// --until and --print-match-only; the preamble again after a reconnect; misses (exit 13);
/// the usage errors. Each run is bounded by --expect-timeout, --until or a count.
final class ConversationTests: IntegrationTestCase {
    let auth = #"{"op":"auth"}"#
    let subscribe = #"{"op":"subscribe"}"#

    func startExchange(_ log: String, _ arguments: [String] = []) throws -> Peer {
        try startPython("exchange.py", ["--log", log] + arguments)
    }

    /// The server's log: one JSON object a line.
    func entries(_ log: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func objects(_ result: RunResult) -> [[String: Any]] {
        result.stdoutText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// When connection `conn` received `text` (server's clock), the first time.
    func received(_ log: [[String: Any]], _ text: String, conn: Int) -> Double? {
        log.first { $0["got"] as? String == text && $0["conn"] as? Int == conn }?["t"] as? Double
    }

    /// The preamble's steps on connection `conn`: auth, then subscribe no earlier than the
    /// server's answer (300 ms later), none dropped; stdin's lines only after subscribe.
    func assertPreamble(_ log: [[String: Any]], conn: Int, stdinLines: [String], file: StaticString = #filePath, line: UInt = #line) {
        guard let authAt = received(log, auth, conn: conn), let subscribeAt = received(log, subscribe, conn: conn),
              let answeredAt = log.first(where: { $0["event"] as? String == "authenticated" && $0["conn"] as? Int == conn })?["t"] as? Double
        else { return XCTFail("connection \(conn) lacks a step: \(log)", file: file, line: line) }
        XCTAssertGreaterThanOrEqual(subscribeAt, answeredAt, "subscribe before the answer", file: file, line: line)
        XCTAssertGreaterThanOrEqual(subscribeAt - authAt, 0.3, file: file, line: line)
        XCTAssertFalse(log.contains { $0["event"] as? String == "dropped" }, "a subscribe was dropped: \(log)", file: file, line: line)
        for text in stdinLines {
            guard let at = received(log, text, conn: conn) else { continue }
            XCTAssertGreaterThan(at, subscribeAt, "\(text) went before the preamble ended", file: file, line: line)
        }
    }

    func testEachStepWaitsForItsAnswerAndStdinFollowsThePreamble() throws {
        let log = path("exchange.log")
        let server = try startExchange(log)
        let child = try spawnWspipe(["--jsonl", "--send", auth, "--expect", "authenticated", "--send", subscribe,
                                     "--expect", "subscribed", "--until-json", "n=3", url(server)], stdin: .pipe)
        for text in ["l1", "l2", "l3"] { child.writeStdin(#"{"type":"text","data":"\#(text)"}"# + "\n") }
        let result = finish(child, timeout: 15)
        child.closeStdin()
        assertExit(result, 0)
        let entries = entries(log)
        assertPreamble(entries, conn: 1, stdinLines: ["l1", "l2", "l3"])
        let got = entries.compactMap { $0["got"] as? String }
        XCTAssertEqual(got, [auth, subscribe, "l1", "l2", "l3"], "in order, each once")
        let texts = objects(result).filter { $0["type"] as? String == "text" }.compactMap { $0["data"] as? String }
        XCTAssertEqual(texts.last, #"{"event": "tick", "n": 3}"#, "--until's message is the last one written")
        XCTAssertEqual(texts.count, 5, "authenticated, subscribed, three ticks: \(texts)")
        XCTAssertEqual(objects(result).filter { $0["type"] as? String == "resubscribed" }.count, 1)
    }

    func testSendFileGoesWhereItIsGiven() throws {
        let log = path("exchange.log")
        let server = try startExchange(log)
        let file = path("preamble.txt")
        try "f1\nf2\n".write(toFile: file, atomically: true, encoding: .utf8)
        let result = try runWspipe(["--send", "s1", "--send-file", file, "--send", "s2", url(server)])
        assertExit(result, 0)
        XCTAssertEqual(entries(log).compactMap { $0["got"] as? String }, ["s1", "f1", "f2", "s2"])
    }

    /// The server drops the first connection after its first tick (1001) and wants auth
    /// again: the whole preamble runs again before the queued and later stdin lines.
    func testThePreambleRunsAgainAfterEveryReconnectBeforeStdin() throws {
        let log = path("exchange.log")
        let server = try startExchange(log, ["--drop-after-first-tick"])
        let child = try spawnWspipe(["--jsonl", "--reconnect", "--retry-delay", "0.05", "--send", auth, "--expect", "authenticated",
                                     "--send", subscribe, "--expect", "subscribed", "--until-json", "n=3", url(server)], stdin: .pipe)
        for text in ["l1", "l2"] { child.writeStdin(#"{"type":"text","data":"\#(text)"}"# + "\n") }
        XCTAssertTrue(waitForStdout(child, contains: #""type":"disconnected""#))
        for text in ["l3", "l4"] { child.writeStdin(#"{"type":"text","data":"\#(text)"}"# + "\n") }
        let result = finish(child, timeout: 15)
        child.closeStdin()
        assertExit(result, 0)
        let entries = entries(log)
        assertPreamble(entries, conn: 1, stdinLines: ["l1", "l2"])
        assertPreamble(entries, conn: 2, stdinLines: ["l1", "l2", "l3", "l4"])
        let lines = entries.compactMap { $0["got"] as? String }.filter { $0.hasPrefix("l") }
        XCTAssertEqual(lines, ["l1", "l2", "l3", "l4"], "in order, across the restart")
        let events = objects(result).compactMap { $0["type"] as? String }
        XCTAssertEqual(events.filter { $0 == "resubscribed" }.count, 2, "\(events)")
    }

    func testPrintMatchOnlyPrintsExactlyTheReplyWithOurId() throws {
        let log = path("exchange.log")
        let server = try startExchange(log)
        let request = #"{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}"#
        let result = try runWspipe(["--receive-only", "--send", request, "--until-json", "id=9007199254740993",
                                    "--print-match-only", url(server)])
        assertExit(result, 0)
        // The reply with id 9007199254740992 (the same double) came first: it is not ours.
        assertStdout(result, #"{"jsonrpc":"2.0","id":9007199254740993,"result":"ours"}"# + "\n")
    }

    /// A cron job's stdin is often empty (`</dev/null`): its end must not close before the
    /// reply --until waits for (it closed right after the preamble, exit 0, nothing written),
    /// and --jsonl's events stay off a --print-match-only stdout.
    func testUntilOutlastsTheEndOfStdinAndPrintMatchOnlyWritesNoEvents() throws {
        let log = path("exchange.log")
        let server = try startExchange(log)
        let result = try runWspipe(["--jsonl", "--send", auth, "--until-json", "event=authenticated",
                                    "--print-match-only", url(server)])
        assertExit(result, 0)
        let lines = result.stdoutText.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, result.stdoutText)
        XCTAssertEqual(objects(result).first?["type"] as? String, "text", result.stdoutText)
        XCTAssertEqual(objects(result).first?["data"] as? String, #"{"event": "authenticated"}"#, result.stdoutText)
    }

    func testANeverMatchingPatternEndsWith13WithinTheTimeoutNamingTheStep() throws {
        let log = path("exchange.log")
        let server = try startExchange(log, ["--greeting", "hello, ready"])
        let result = try runWspipe(["--expect-timeout", "1", "--expect", "ready", "--send", "x", "--expect", "never",
                                    "--close-code", "4000", url(server)])
        assertExit(result, 13)
        XCTAssertLessThan(result.elapsed, 2.0, "within --expect-timeout + 1 s")
        XCTAssertEqual(result.stderr, "wspipe: --expect #2 'never': no match within 1 s (--expect-timeout); no text message came\n")
        assertStdout(result, "hello, ready\n")
        XCTAssertEqual(entries(log).compactMap { $0["got"] as? String }, ["x"], "stdin is not read after a miss")
    }

    func testTheLastMessageSeenIsShownSafely() throws {
        let server = try startExchange(path("exchange.log"), ["--greeting", "tick \u{1B}[2J" + String(repeating: "z", count: 300)])
        let result = try runWspipe(["--expect-timeout", "0.5", "--expect", "never", url(server)])
        assertExit(result, 13)
        XCTAssertTrue(result.stderr.hasPrefix(#"wspipe: --expect #1 'never': no match within 0.5 s (--expect-timeout); the last message was 'tick \x1B[2Jzzz"#),
                      result.stderr)
        XCTAssertEqual(result.stderr.filter { $0 == "z" }.count, 200 - 9, "200 bytes of it")
    }

    func testTheServerClosingDuringAWaitIs13WithItsCode() throws {
        let server = try startExchange(path("exchange.log"), ["--drop-after-first-tick"])
        let result = try runWspipe(["--jsonl", "--send", auth, "--expect", "authenticated", "--send", subscribe,
                                    "--expect-json", "event=never", url(server)])
        assertExit(result, 13)
        assertStderr(result, contains: "--expect-json #2 'event=never': the server closed the connection with 1001 before a match")
        let failed = objects(result).first { $0["type"] as? String == "expect_failed" }
        XCTAssertEqual(failed?["code"] as? Int, 1001, result.stdoutText)
        XCTAssertEqual(failed?["step"] as? String, "--expect-json #2")
    }

    func testAPreambleMissUnderReconnectIsAFailedAttemptThen13() throws {
        let server = try startExchange(path("exchange.log"))
        let result = try runWspipe(["--jsonl", "--reconnect", "--retry-delay", "0.05", "--max-retries", "2", "--expect-timeout", "0.3",
                                    "--expect", "never", url(server)], timeout: 15)
        assertExit(result, 13)
        let events = objects(result).compactMap { $0["type"] as? String }
        XCTAssertEqual(events.filter { $0 == "expect_failed" }.count, 3, "\(events)")
        XCTAssertEqual(objects(result).last { $0["type"] as? String == "giving_up" }?["exit"] as? Int, 13)
        // wspipe closed each connection, the server only answered: not "the server closed".
        let causes = objects(result).filter { $0["type"] as? String == "disconnected" }.compactMap { $0["cause"] as? String }
        XCTAssertEqual(Set(causes), ["expect_failed"], "\(causes)")
        assertStderr(result, contains: "a step of the preamble missed (--expect), so wspipe closed the connection")
        XCTAssertFalse(result.stderr.contains("the server closed the connection"), result.stderr)
    }

    /// A wait cut short by a lost connection under --reconnect is said as the other retries
    /// are ("; reconnecting (--reconnect)", a notice: -q hides it), not as a final error; the
    /// miss on which wspipe gives up keeps the one-shot client's line and status 13.
    func testAWaitCutShortUnderReconnectIsSaidAsARetryUntilTheLast() throws {
        let server = try startScripted(Wire.switching, then: "close")
        let arguments = ["--reconnect", "--retry-delay", "0.05", "--max-retries", "1", "--expect", "ready", url(server)]
        let result = try runWspipe(arguments, timeout: 15)
        assertExit(result, 13)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        let miss = "wspipe: --expect #1 'ready': the connection ended before a match"
        XCTAssertEqual(lines.first, miss + "; reconnecting (--reconnect)", result.stderr)
        XCTAssertEqual(lines.last, miss, result.stderr)
        XCTAssertEqual(lines.filter { $0.hasPrefix(miss) }.count, 2, result.stderr)

        let quiet = try runWspipe(["-q"] + arguments, timeout: 15)
        assertExit(quiet, 13)
        XCTAssertEqual(quiet.stderr, miss + "\n", "-q keeps only the final line")
    }

    func testAServerCloseDuringAWaitIsRetriedByItsCodeAsAnyClose() throws {
        // A server that closes with 4003 "unauthorized" when it reads the auth: the same
        // Close without --expect ends the run at once (codes 3000-4999 are not retried), so
        // --expect must not turn it into a retry loop against the server.
        let denying = try startExchange(path("denying.log"), ["--deny", "4003"])
        let denied = try runWspipe(["--jsonl", "--reconnect", "--retry-delay", "0.05", "--timeout", "5",
                                    "--send", auth, "--expect", "authenticated", url(denying)], timeout: 15)
        assertExit(denied, 13)
        XCTAssertEqual(entries(path("denying.log")).filter { $0["event"] as? String == "connected" }.count, 1,
                       "one connection, no retry: \(denied.stdoutText)")
        assertStderr(denied, contains: "--expect #1 'authenticated': the server closed the connection with 4003 before a match")
        let ended = objects(denied).first { $0["type"] as? String == "disconnected" }
        XCTAssertEqual(ended?["cause"] as? String, "closed", "the server closed it, not wspipe: \(denied.stdoutText)")
        XCTAssertEqual(ended?["code"] as? Int, 4003)
        XCTAssertFalse(objects(denied).contains { $0["type"] as? String == "retry" }, denied.stdoutText)

        // 1001 (going away) during the wait is retried, as it is at any other time.
        let restarting = try startExchange(path("restarting.log"), ["--deny", "1001"])
        let retried = try runWspipe(["--jsonl", "--reconnect", "--retry-delay", "0.05", "--max-retries", "2",
                                     "--send", auth, "--expect", "authenticated", url(restarting)], timeout: 15)
        assertExit(retried, 13)
        XCTAssertEqual(entries(path("restarting.log")).filter { $0["event"] as? String == "connected" }.count, 3, retried.stdoutText)
        XCTAssertFalse(retried.stderr.contains("so wspipe closed the connection"), retried.stderr)
        assertStderr(retried, contains: "the server closed the connection with 1001 (going away) \"unauthorized\"; reconnecting")
    }

    func testRequireCountWithUntilIs11WhenTheConnectionEndsBeforeAMatch() throws {
        // The end of stdin does not close under --until (it decides the end): a Close asked
        // on stdin does, and the connection ends before a match.
        let echo = try startEcho()
        let clean = try runWspipe(["--jsonl", "--until", "never", "--require-count", url(echo)],
                                  stdin: .bytes(Array((#"{"type":"text","data":"a"}"# + "\n" + #"{"type":"close"}"# + "\n").utf8)))
        assertExit(clean, 11)
        assertStderr(clean, contains: "before a message matched --until 'never' (--require-count)")
        let matched = try runWspipe(["--until", "^b$", "--require-count", "--no-close", url(echo)], stdin: .bytes(Array("a\nb\nc\n".utf8)))
        assertExit(matched, 0)
        assertStdout(matched, "a\nb\n")
    }

    /// A 64 MiB message examined by a pattern that backtracks badly: only the first MiB is
    /// looked at, so the Ping the server sends after it gets its Pong within 1 s.
    func testAHugeMessageAgainstACatastrophicPatternLeavesPingsAnswered() throws {
        let log = path("exchange.log")
        let server = try startExchange(log)
        let child = try spawnWspipe(["--no-deflate", "--max-message-size", "128M", "--expect-timeout", "20", "--send", "big",
                                     "--expect", "(a|aa)*(a|aa)*(a|aa)*b", url(server)], stdoutFile: "/dev/null")
        let deadline = Date().addingTimeInterval(20)
        var pong: Double?
        while pong == nil && Date() < deadline {
            pong = entries(log).first { $0["event"] as? String == "pong" }?["ms"] as? Double
            if pong == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        child.kill()
        let ms = try XCTUnwrap(pong, "no pong logged")
        XCTAssertLessThan(ms, 1000, "the Pong took \(ms) ms")
    }

    func testUsageErrorsNameTheFault() throws {
        let cases: [([String], String)] = [
            (["--expect", #"(a)\1"#, "ws://127.0.0.1:1/"], #"--expect '(a)\1': "#),
            (["--expect", "(", "ws://127.0.0.1:1/"], "--expect '(': "),
            (["--expect-json", "a..b=1", "ws://127.0.0.1:1/"], "--expect-json 'a..b=1': "),
            (["--until-json", "nothing", "ws://127.0.0.1:1/"], "--until-json 'nothing': "),
            (["--expect", "x", "-l", "0"], "--expect is a client option; it cannot be used with -l/--listen (a conversation is the client's"),
            (["--until", "x", "--forward-listen", "0", "ws://127.0.0.1:1/"], "--until has no meaning with --forward-listen"),
            (["--print-match-only", "ws://127.0.0.1:1/"], "--print-match-only needs --until or --until-json"),
            (["--until", "a", "--until-json", "b=1", "ws://127.0.0.1:1/"], "give one --until or --until-json"),
            (["--expect-timeout", "0", "--expect", "x", "ws://127.0.0.1:1/"], "--expect-timeout '0' is not a positive number of seconds"),
        ]
        for (arguments, text) in cases {
            let result = try runWspipe(arguments)
            XCTAssertEqual(result.exitCode, 2, "\(arguments): \(result)")
            XCTAssertTrue(result.stderr.contains(text), "\(arguments): \(result.stderr)")
        }
        // One line naming the option given, once: not "--until-json 'x': --expect-json 'x': ...".
        let named: [([String], String)] = [
            (["--until-json", "x", "ws://127.0.0.1:1/"], "wspipe: --until-json 'x': no '=' between PATH and VALUE"),
            (["--until", "(", "ws://127.0.0.1:1/"], "wspipe: --until '(': bad regular expression"),
            (["--expect", "(", "ws://127.0.0.1:1/"], "wspipe: --expect '(': bad regular expression"),
            (["--until", #"(a)\1"#, "ws://127.0.0.1:1/"], #"wspipe: --until '(a)\1': back-references (\1) are not supported"#),
        ]
        for (arguments, start) in named {
            let result = try runWspipe(arguments)
            XCTAssertEqual(result.exitCode, 2, "\(arguments): \(result)")
            XCTAssertTrue(result.stderr.hasPrefix(start), "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stderr.components(separatedBy: "'\(arguments[1])'").count, 2,
                           "the pattern is named once: \(result.stderr)")
            if arguments[0].hasPrefix("--until") {
                XCTAssertFalse(result.stderr.contains("--expect"), "names only the option given: \(result.stderr)")
            }
        }
    }
}
