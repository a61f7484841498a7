import Foundation
import TestSupport
import XCTest

/// --reconnect against real sockets: a feed killed and restarted, refusals with and
/// without Retry-After, the offline queue under its policies. Bounded in time: short
/// retry delays, -n or --max-retries end every run.
final class ReconnectTests: IntegrationTestCase {
    let fast = ["--reconnect", "--retry-delay", "0.05", "--retry-max-delay", "0.2"]

    func startFeed(_ log: String, port: Int = 0, _ arguments: [String] = []) throws -> Peer {
        try startPeer(executable: Locations.python,
                      arguments: ["\(Locations.peers)/feed.py", "--port", String(port), "--log", log] + arguments)
    }

    /// A port nothing listens on now (a feed's, killed), for a feed started on it later.
    func deadPort(_ log: String) throws -> Int {
        let probe = try startFeed(log)
        probe.process.kill()
        _ = probe.process.wait(timeout: 5)
        return probe.port
    }

    func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }
    func logLines(_ path: String) -> [String] { lines((try? String(contentsOfFile: path, encoding: .utf8)) ?? "") }

    /// JSON objects of the output, in order.
    func objects(_ result: RunResult) -> [[String: Any]] {
        lines(result.stdoutText).compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func testServerRestartedMidStream() throws {
        let log = path("feed.log")
        let first = try startFeed(log, ["--start", "0", "--count", "5"])
        let port = first.port
        let child = try spawnWspipe(fast + ["--receive-only", "--jsonl", "--send", "sub", "-n", "10", url(first)])
        XCTAssertTrue(waitForStdout(child, contains: "\"m4\""))
        first.process.kill()
        _ = first.process.wait(timeout: 5)
        _ = try startFeed(log, port: port, ["--start", "5", "--count", "5"])
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        let all = objects(result)
        let texts = all.filter { $0["type"] as? String == "text" }.compactMap { $0["data"] as? String }
        XCTAssertEqual(texts, (0..<10).map { "m\($0)" })  // before and after, in order, none twice
        XCTAssertEqual(all.filter { $0["type"] as? String == "connected" }.count, 2)
        XCTAssertEqual(all.filter { $0["type"] as? String == "resubscribed" }.count, 2)
        let disconnected = try XCTUnwrap(all.first { $0["type"] as? String == "disconnected" })
        XCTAssertNotNil(disconnected["cause"] as? String)
        // Exactly one subscription per connection, none on the refused attempts between.
        XCTAssertEqual(logLines(log), ["connected", "sub sub", "connected", "sub sub"])
        // The output replays as input: event objects are ignored there.
        let replay = try runWspipe(["--jsonl", "--send-only", url(try startEcho())], stdin: .bytes(result.stdout))
        assertExit(replay, 0)
        XCTAssertEqual(replay.stderr, "")
    }

    /// The man page's delivery statement against what the server got across a restart:
    /// order kept, nothing twice, and what is missing is only what was in flight at the cut.
    func testDeliveryStatementHolds() throws {
        let log = path("feed.log")
        let first = try startFeed(log)
        let port = first.port
        let child = try spawnWspipe(fast + ["--send", "sub", "ws://127.0.0.1:\(port)/"], stdin: .pipe)
        var restarted = false
        for i in 0..<60 {
            child.writeStdin("l\(i)\n")
            Thread.sleep(forTimeInterval: 0.02)
            if i == 20 {
                first.process.kill()
                _ = first.process.wait(timeout: 5)
            }
            if i == 35 && !restarted {
                restarted = true
                _ = try startFeed(log, port: port)
            }
        }
        child.closeStdin()
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        let got = logLines(log).filter { $0.hasPrefix("got l") }.compactMap { Int($0.dropFirst(5)) }
        XCTAssertEqual(got, got.sorted())               // order kept
        XCTAssertEqual(Set(got).count, got.count)       // nothing twice
        XCTAssertEqual(got.last, 59)                    // everything after the outage arrived
        let missing = Set(0..<60).subtracting(got).sorted()
        // Only messages handed to the dying connection may be lost: one run, at the cut.
        if let low = missing.first, let high = missing.last {
            XCTAssertEqual(missing, Array(low...high), "\(missing)")
            XCTAssertGreaterThanOrEqual(low, 15)
            XCTAssertLessThanOrEqual(high, 24)
        }
        XCTAssertEqual(logLines(log).filter { $0 == "sub sub" }.count, 2)
    }

    func testStdinQueuedWhileDisconnectedIsDeliveredOnceInOrder() throws {
        let log = path("feed.log")
        let port = try deadPort(log)
        let child = try spawnWspipe(fast + ["-v", "--send", "sub", "ws://127.0.0.1:\(port)/"], stdin: .pipe)
        child.writeStdin("a\nb\nc\n")
        child.closeStdin()  // EOF while disconnected: the queue still goes out, then the normal end
        Thread.sleep(forTimeInterval: 0.5)
        _ = try startFeed(log, port: port)
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        XCTAssertEqual(logLines(log), ["connected", "sub sub", "got a", "got b", "got c"])
        assertStderr(result, contains: "retry in")
    }

    func testServiceUnavailableWithRetryAfterIsHonoured() throws {
        let log = path("feed.log")
        let feed = try startFeed(log, ["--refusals", "2", "--retry-after", "1", "--count", "1", "--then", "close", "1000"])
        let result = try runWspipe(fast + ["--receive-only", "--jsonl", "--send", "s", url(feed)], timeout: 30)
        assertExit(result, 0)
        let retries = objects(result).filter { $0["type"] as? String == "retry" }
        XCTAssertEqual(retries.count, 2)
        for retry in retries {
            XCTAssertEqual(retry["retry_after"] as? Bool, true)
            XCTAssertGreaterThanOrEqual(retry["in_s"] as? Double ?? 0, 1)  // above --retry-max-delay
        }
        XCTAssertEqual(logLines(log), ["refused", "refused", "connected", "sub s"])
    }

    func testUnauthorizedIsNotRetried() throws {
        let log = path("feed.log")
        let feed = try startFeed(log, ["--refusals", "100", "--refuse", "401"])
        let result = try runWspipe(fast + ["--jsonl", "--receive-only", url(feed)])
        assertExit(result, 5)
        XCTAssertEqual(logLines(log), ["refused"])
        XCTAssertEqual(objects(result).last?["type"] as? String, "giving_up")
    }

    func testBadCertificateIsNotRetried() throws {
        // A server whose certificate the client has no CA for: verification fails, for good.
        let tls = try TLSMaterial.shared()
        let echo = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        let result = try runWspipe(fast + ["--jsonl", "--receive-only", url(echo, scheme: "wss", host: "localhost")])
        assertExit(result, 4)
        XCTAssertEqual(objects(result).filter { $0["type"] as? String == "connecting" }.count, 1)
    }

    /// A TCP proxy in front of a TLS server that is down accepts and hangs up during the
    /// TLS handshake: that is retried, as the server closing during the WebSocket
    /// handshake is (it ended wss:// --reconnect with exit 4 at once).
    func testAHangUpDuringTheTLSHandshakeIsRetried() throws {
        let listener = try HangingUpListener()
        defer { listener.stop() }
        let result = try runWspipe(fast + ["--max-retries", "2", "--jsonl", "--receive-only",
                                           "wss://127.0.0.1:\(listener.port)/"])
        assertExit(result, 4)
        XCTAssertEqual(objects(result).filter { $0["type"] as? String == "connecting" }.count, 3, result.stderr)
    }

    /// --timestamps stamps the events as it stamps messages: each object ends with its
    /// "ts" (they had none).
    func testTimestampsStampTheEvents() throws {
        let port = try deadPort(path("feed.log"))
        let result = try runWspipe(fast + ["--max-retries", "1", "--jsonl", "--timestamps", "--receive-only",
                                           "ws://127.0.0.1:\(port)/"])
        assertExit(result, 3)
        let all = objects(result)
        XCTAssertEqual(all.compactMap { $0["type"] as? String }, ["connecting", "retry", "connecting", "giving_up"], result.stdoutText)
        for line in lines(result.stdoutText) {
            let stamp = line.range(of: #","ts":"#).map { Double(line[$0.upperBound...].dropLast()) ?? 0 } ?? 0
            XCTAssertLessThan(abs(stamp - Date().timeIntervalSince1970), 60, line)
        }
    }

    func testRetriesSpentGiveTheLastFailuresStatus() throws {
        let port = try deadPort(path("feed.log"))
        let result = try runWspipe(fast + ["--max-retries", "2", "--jsonl", "--receive-only", "ws://127.0.0.1:\(port)/"])
        assertExit(result, 3)
        let all = objects(result)
        XCTAssertEqual(all.filter { $0["type"] as? String == "connecting" }.count, 3)
        XCTAssertEqual(all.last?["type"] as? String, "giving_up")
        XCTAssertEqual(all.last?["attempts"] as? Int, 3)
        XCTAssertEqual(all.last?["exit"] as? Int, 3)
    }

    func testFullQueueUnderEachPolicy() throws {
        let port = try deadPort(path("feed.log"))
        let jsonInput = Array((0..<5).map { "{\"type\":\"text\",\"data\":\"l\($0)\"}\n" }.joined().utf8)
        let base = ["--reconnect", "--retry-delay", "0.3", "--max-retries", "1", "--queue-size", "2", "--jsonl", "--stats",
                    "ws://127.0.0.1:\(port)/"]
        for policy in ["drop-oldest", "drop-newest"] {
            let result = try runWspipe(base + ["--queue-policy", policy], stdin: .bytes(jsonInput))
            assertExit(result, 3)
            let dropped = objects(result).filter { $0["type"] as? String == "dropped" }.compactMap { $0["count"] as? Int }
            XCTAssertEqual(dropped.reduce(0, +), 3, policy)
            assertStderr(result, contains: "\"dropped\":3")
        }
        let failing = try runWspipe(base + ["--queue-policy", "fail"], stdin: .bytes(jsonInput))
        assertExit(failing, 10)
        assertStderr(failing, contains: "offline queue is full")
    }

    func testHundredRestartsKeepDescriptorsFlat() throws {
        let feed = try startFeed(path("feed.log"), ["--count", "1", "--then", "close", "1012"])
        let child = try spawnWspipe(["--reconnect", "--retry-delay", "0.001", "--retry-max-delay", "0.002",
                                     "--receive-only", "--send", "s", "-n", "100", url(feed)])
        // Sample wspipe's descriptors while it reconnects: the count must not grow.
        var samples: [Int] = []
        let deadline = monotonicSeconds() + 60
        while monotonicSeconds() < deadline {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd") else { break }
            samples.append(entries.count)
            if child.stdout.wait(timeout: 0.02, until: { $0.count >= 3 * 100 }) { break }
        }
        let result = finish(child, timeout: 60)
        assertExit(result, 0)
        XCTAssertEqual(lines(result.stdoutText), Array(repeating: "m0", count: 100))
        XCTAssertGreaterThan(samples.count, 3)
        // The first samples may come before the first connection's socket.
        let steady = samples.dropFirst(2)
        if let low = steady.min(), let high = steady.max() { XCTAssertLessThanOrEqual(high - low, 1, "\(samples)") }
    }

    /// --bearer-file is read again before each attempt (tokens rotate); a file that no longer
    /// holds a valid token (by the rule of the first read), or is gone, keeps the last good
    /// one, with a warning that says which.
    func testBearerFileIsReadAgainBeforeEachAttempt() throws {
        let recorder = try startRecorder(["--wait-for", "go", "--close-code", "1012"])
        let file = path("token")
        try "first-token\n".write(toFile: file, atomically: true, encoding: .utf8)
        let child = try spawnWspipe(fast + ["--jsonl", "--bearer-file", file, url(recorder)], stdin: .pipe)
        let go = #"{"type":"text","data":"go"}"# + "\n"
        XCTAssertTrue(waitForStdout(child, contains: #""subprotocol":null,"attempt":1}"#))
        try "second-token\n".write(toFile: file, atomically: true, encoding: .utf8)
        child.writeStdin(go)  // the server closes with 1012, which is retried
        XCTAssertTrue(waitForStdout(child, contains: #""subprotocol":null,"attempt":2}"#))
        try "two words\n".write(toFile: file, atomically: true, encoding: .utf8)
        child.writeStdin(go)
        XCTAssertTrue(waitForStdout(child, contains: #""subprotocol":null,"attempt":3}"#))
        try FileManager.default.removeItem(atPath: file)
        child.writeStdin(go)
        XCTAssertTrue(waitForStdout(child, contains: #""subprotocol":null,"attempt":4}"#))
        child.closeStdin()
        let result = finish(child, timeout: 20)
        assertExit(result, 0)
        XCTAssertEqual(try recorder.record(1).values("Authorization"), ["Bearer first-token"])
        XCTAssertEqual(try recorder.record(2).values("Authorization"), ["Bearer second-token"])
        XCTAssertEqual(try recorder.record(3).values("Authorization"), ["Bearer second-token"])
        XCTAssertEqual(try recorder.record(4).values("Authorization"), ["Bearer second-token"])
        XCTAssertTrue(result.stderr.contains("cannot read --bearer-file '\(file)' again: No such file or directory; using the token read before"), result.stderr)
        XCTAssertTrue(result.stderr.contains("--bearer-file '\(file)' read again: the bearer token contains spaces, control or non-ASCII characters; using the token read before"), result.stderr)
    }

    /// A stdin error while disconnected: the lines before the bad one (queued) and a Close
    /// 1011 go on the next connection, as when connected, and the run exits 1. The next
    /// attempt stopped the run instead: nothing delivered, exit 3 ("cannot connect").
    func testStdinErrorWhileDisconnectedDeliversTheQueueThenCloses() throws {
        let log = path("feed.log")
        let port = try deadPort(log)
        let child = try spawnWspipe(fast + ["--jsonl", "--send", "sub", "ws://127.0.0.1:\(port)/"], stdin: .pipe)
        XCTAssertTrue(waitForStdout(child, contains: #""type":"retry""#))
        child.writeStdin(#"{"type":"text","data":"x"}"# + "\n" + #"{"type":"# + "\n")
        Thread.sleep(forTimeInterval: 0.5)  // attempts go on meanwhile
        _ = try startFeed(log, port: port)
        let result = finish(child, timeout: 20)
        assertExit(result, 1)
        XCTAssertEqual(logLines(log), ["connected", "sub sub", "got x"])
        assertStderr(result, contains: "stdin line 2 is not a --jsonl message")
        XCTAssertFalse(result.stderr.contains("wspipe: cannot connect"), result.stderr)  // the first failure is a notice
        XCTAssertTrue(result.stdoutText.contains(#"{"type":"close","code":1011,"reason":"stdin error"}"#), result.stdoutText)
    }

    /// A Close asked on stdin (--jsonl) ends stdin as its end does: that connection's end is
    /// the run's, not retried, also when the server never answers the Close (exit 7, as
    /// without --reconnect). It was retried: asked while connected, the run then sat on the
    /// new connection with stdin stopped until killed; asked while disconnected, each new
    /// connection was closed again, without end.
    func testCloseAskedOnStdinIsNotRetried() throws {
        let close = #"{"type":"close","code":4000,"reason":"done"}"# + "\n"
        let options = fast + ["--jsonl", "--close-timeout", "0.5"]
        let silent = try startRaw("silent")  // reads everything, answers nothing
        let connected = try spawnWspipe(options + [url(silent)], stdin: .pipe)
        XCTAssertTrue(waitForStdout(connected, contains: #""type":"connected""#))
        connected.writeStdin(close)
        let first = finish(connected, timeout: 15)
        assertExit(first, 7)
        XCTAssertEqual(objects(first).filter { $0["type"] as? String == "connected" }.count, 1)

        let port = try deadPort(path("feed.log"))
        let disconnected = try spawnWspipe(options + ["ws://127.0.0.1:\(port)/"], stdin: .pipe)
        XCTAssertTrue(waitForStdout(disconnected, contains: #""type":"retry""#))
        disconnected.writeStdin(close)
        Thread.sleep(forTimeInterval: 0.3)
        _ = try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/raw.py", "--port", String(port),
                                                                   "--scenario", "silent", "--record", path("raw.json")])
        let second = finish(disconnected, timeout: 15)
        assertExit(second, 7)
        XCTAssertEqual(objects(second).filter { $0["type"] as? String == "connected" }.count, 1)
    }

    /// A signal while waiting for the next attempt ends the run as usual (--stats with 128 +
    /// the signal, then death by the signal), after a failed attempt as after a lost connection: after a failed attempt
    /// it exited at once, without --stats.
    func testSignalWhileWaitingAfterAFailedAttemptEndsTheRunAsUsual() throws {
        // Refused with Retry-After: 30, so the wait is 30 s, not a jittered one.
        let feed = try startFeed(path("feed.log"), ["--refusals", "100", "--retry-after", "30"])
        for (signal, status) in [(SIGINT, Int32(130)), (SIGTERM, Int32(143))] {
            let child = try spawnWspipe(fast + ["--jsonl", "--stats", url(feed)], stdin: .pipe)
            XCTAssertTrue(waitForStdout(child, contains: #""type":"retry""#))
            child.signal(signal)
            let result = finish(child, timeout: 10)
            assertDiedOf(result, signal)
            assertStderr(result, contains: "\"attempts\":1,")
            assertStderr(result, contains: "\"exit\":\(status)}")
        }
    }

    /// A user's trial: with nothing listening (a typo'd port) --reconnect said nothing
    /// without -v until killed, where the one-shot client says `cannot connect` at once.
    /// The first failed attempt is said once, in the one-shot client's words, and the
    /// connection when it comes; -q hides both.
    func testTheFirstFailedAttemptAndTheConnectionAreSaidWithoutVerbose() throws {
        for quiet in [false, true] {
            let log = path("feed-\(quiet).log")
            let port = try deadPort(log)
            let child = try spawnWspipe(fast + (quiet ? ["-q"] : []) + ["ws://127.0.0.1:\(port)/"], stdin: .pipe)
            if !quiet {
                let said = child.stderr.wait(timeout: 10) { $0.firstRange(of: Array("retrying".utf8)) != nil }
                XCTAssertTrue(said, "nothing said while retrying: \(child.stderr.text)")
            } else {
                Thread.sleep(forTimeInterval: 0.5)
            }
            _ = try startFeed(log, port: port)
            child.writeStdin("a\n")
            child.closeStdin()
            let result = finish(child, timeout: 30)
            assertExit(result, 0)
            XCTAssertEqual(logLines(log), ["connected", "sub a"])
            let lines = self.lines(result.stderr)
            if quiet {
                XCTAssertEqual(lines, [], "-q")
                continue
            }
            XCTAssertEqual(lines.count, 2, result.stderr)
            XCTAssertEqual(lines.first, "wspipe: not connected yet: cannot connect to 127.0.0.1:\(port): Connection refused; "
                           + "retrying (--reconnect)")
            XCTAssertTrue(lines.last?.hasPrefix("wspipe: connected after ") == true, result.stderr)
            XCTAssertTrue(lines.last?.contains(" s: ws://127.0.0.1:\(port)/ (attempt ") == true, result.stderr)
        }
    }

    /// The same for a server that accepts TCP and never answers the handshake: the first
    /// --connect-timeout said, then the last failure's status once the retries are spent.
    func testAHandshakeThatNeverComesIsSaidOnceWhileRetrying() throws {
        let raw = try startRaw("no-answer")
        let result = try runWspipe(fast + ["--connect-timeout", "0.5", "--max-retries", "2", url(raw)], stdin: .pipe, timeout: 20)
        assertExit(result, 3)
        XCTAssertEqual(lines(result.stderr), [
            "wspipe: not connected yet: timed out after 0.5 s waiting for the server's handshake response (--connect-timeout); "
                + "retrying (--reconnect)",
            "wspipe: timed out after 0.5 s waiting for the server's handshake response (--connect-timeout)",
        ])
    }

    /// A user's trial: while --reconnect retried, the stdout reader leaving went unnoticed
    /// (`... | wspipe --reconnect ws://DEADPORT/ | true` ran until killed); it ends the run as
    /// when connected (exit 0), also when nothing is written.
    func testTheReaderLeavingWhileRetryingEndsTheRun() throws {
        let port = try deadPort(path("feed.log"))
        let shell = try ChildProcess(executable: "/bin/bash",
                                     arguments: ["-c", "set -o pipefail; timeout 8 \"$0\" \"$@\" | sleep 1", Locations.wspipe]
                                         + fast + ["-q", "ws://127.0.0.1:\(port)/"],
                                     environment: Locations.baseEnvironment, stdin: .pipe)
        let result = finish(shell, timeout: 20)  // timeout 8 bounds wspipe; finish kills bash
        assertExit(result, 0)  // timeout's 124 before
        XCTAssertLessThan(result.elapsed, 5, "ended when the reader left, not at the timeout")
        XCTAssertEqual(result.stderr, "")
    }

    /// A user's trial: --stats counted the messages the offline queue dropped as sent.
    /// `sent` is what went to a connection: here the last two lines.
    func testStatsSentLeavesOutWhatTheOfflineQueueDropped() throws {
        let log = path("feed.log")
        let port = try deadPort(log)
        let child = try spawnWspipe(fast + ["-q", "--queue-policy", "drop-oldest", "--queue-size", "2", "--stats",
                                            "ws://127.0.0.1:\(port)/"], stdin: .pipe)
        child.writeStdin((0..<10).map { "l\($0)\n" }.joined())
        child.closeStdin()
        Thread.sleep(forTimeInterval: 0.5)
        _ = try startFeed(log, port: port)
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        XCTAssertEqual(logLines(log), ["connected", "sub l8", "got l9"])  // the feed takes the first as a subscription
        assertStderr(result, contains: "{\"sent\":{\"messages\":2,\"bytes\":4},")
        assertStderr(result, contains: "\"dropped\":8,")
    }
}

/// Faults a TCP relay injects between wspipe and the feed: a cut mid-frame, a blackhole
/// (no FIN, no RST), resets at accept.
final class RelayFaultTests: IntegrationTestCase {
    let fast = ["--reconnect", "--retry-delay", "0.05", "--retry-max-delay", "0.2"]

    func start(_ script: String, _ arguments: [String]) throws -> Peer {
        try startPeer(executable: Locations.python, arguments: ["\(Locations.peers)/\(script)", "--port", "0"] + arguments)
    }

    func events(_ result: RunResult, _ type: String) -> [[String: Any]] {
        result.stdoutText.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["type"] as? String == type }
    }

    func texts(_ result: RunResult) -> [String] {
        events(result, "text").compactMap { $0["data"] as? String }
    }

    func testCutMidFrameDropsOnlyThePartialMessage() throws {
        let feed = try start("feed.py", ["--log", path("feed.log"), "--count", "6"])
        let relay = try start("relay.py", ["--target", String(feed.port), "--log", path("relay.log"), "--cut-frames", "3"])
        let result = try runWspipe(fast + ["--jsonl", "--receive-only", "--send", "s", "-n", "9", url(relay)], timeout: 30)
        assertExit(result, 0)
        // m0..m2 whole, m3 cut inside its frame (never written), then a new connection's m0..m5.
        XCTAssertEqual(texts(result), ["m0", "m1", "m2", "m0", "m1", "m2", "m3", "m4", "m5"])
        XCTAssertEqual(events(result, "disconnected").first?["cause"] as? String, "lost")
    }

    /// Issue 35 item 7: without -v a connection lost and restored under --reconnect is
    /// said in one line each (it was silent); -q hides both.
    func testDropAndReturnAreSaidWithoutVerbose() throws {
        for quiet in [false, true] {
            let feed = try start("feed.py", ["--log", path("feed-\(quiet).log"), "--count", "6"])
            let relay = try start("relay.py", ["--target", String(feed.port), "--log", path("relay-\(quiet).log"),
                                               "--cut-frames", "3"])
            let result = try runWspipe(fast + (quiet ? ["-q"] : []) + ["--receive-only", "--send", "s", "-n", "9", url(relay)],
                                       timeout: 30)
            assertExit(result, 0)
            let lines = result.stderr.split(separator: "\n").map(String.init)
            if quiet {
                XCTAssertEqual(lines, [], "-q")
                continue
            }
            XCTAssertEqual(lines.count, 2, result.stderr)
            XCTAssertTrue(lines.first?.hasPrefix("wspipe: disconnected after ") == true, result.stderr)
            XCTAssertTrue(lines.first?.hasSuffix(" s: the connection was lost without a closing handshake; reconnecting (--reconnect)")
                          == true, result.stderr)
            XCTAssertTrue(lines.last?.hasPrefix("wspipe: reconnected after ") == true, result.stderr)
            XCTAssertTrue(lines.last?.hasSuffix(": \(url(relay)) (attempt 2)") == true, result.stderr)
        }
    }

    func testBlackholeTripsThePingTimeoutAndReconnects() throws {
        let feed = try start("feed.py", ["--log", path("feed.log"), "--count", "2"])
        let relay = try start("relay.py", ["--target", String(feed.port), "--log", path("relay.log"), "--blackhole-after", "0.4"])
        let result = try runWspipe(fast + ["--jsonl", "--receive-only", "--send", "s", "-n", "4",
                                           "--ping-interval", "0.3", "--ping-timeout", "0.5", url(relay)], timeout: 30)
        assertExit(result, 0)
        XCTAssertEqual(texts(result), ["m0", "m1", "m0", "m1"])
        XCTAssertEqual(events(result, "disconnected").first?["cause"] as? String, "ping_timeout")
    }

    func testResetsAtAcceptAreRetriedThenConnects() throws {
        let feed = try start("feed.py", ["--log", path("feed.log"), "--count", "1", "--then", "close", "1000"])
        let relay = try start("relay.py", ["--target", String(feed.port), "--log", path("relay.log"), "--refuse", "3"])
        let result = try runWspipe(fast + ["--jsonl", "--receive-only", "--send", "s", url(relay)], timeout: 30)
        assertExit(result, 0)  // the server's 1000 ends the run: not retried
        XCTAssertEqual(events(result, "connecting").count, 4)
        XCTAssertEqual(events(result, "connected").count, 1)
        XCTAssertEqual(texts(result), ["m0"])
    }

    func testStaleConnection() throws {
        let feed = try start("feed.py", ["--log", path("feed.log"), "--count", "1"])
        let once = try runWspipe(["--receive-only", "--send", "s", "--stale-timeout", "0.5", url(feed)])
        assertExit(once, 7)
        assertStderr(once, contains: "--stale-timeout")
        let again = try runWspipe(fast + ["--jsonl", "--receive-only", "--send", "s", "--stale-timeout", "0.5", "-n", "3",
                                          url(feed)], timeout: 30)
        assertExit(again, 0)
        // Two stale connections, then -n's own close.
        XCTAssertEqual(events(again, "disconnected").compactMap { $0["cause"] as? String }, ["stale", "stale", "closed"])
    }

    func testSendFileIsResentAfterEveryHandshake() throws {
        let log = path("feed.log")
        let feed = try start("feed.py", ["--log", log, "--count", "1", "--then", "close", "1012"])
        let file = path("subscribe.txt")
        try "sub-a\nsub-b\n".write(toFile: file, atomically: true, encoding: .utf8)
        let result = try runWspipe(fast + ["--receive-only", "--send-file", file, "-n", "2", "--stats", url(feed)], timeout: 30)
        assertExit(result, 0)
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n")
        XCTAssertEqual(lines.filter { $0 == "sub sub-a" }.count, 2)
        assertStderr(result, contains: "\"reconnects\":1")
    }
}

/// A real link cut: the feed runs in a network namespace behind a veth pair whose host end
/// is taken down (no FIN, no RST reaches anyone) and brought up again.
final class LinkDownTests: IntegrationTestCase {
    func testLinkTakenDownAndUp() throws {
        let ipPath = try Tool.ip.path()
        func ip(_ arguments: [String]) -> Bool {
            guard let child = try? ChildProcess(executable: ipPath, arguments: arguments, environment: [:], stdin: .null) else {
                return false
            }
            return child.wait(timeout: 10).exitCode == 0
        }
        let tag = String(UInt32.random(in: 0..<0xFFFF), radix: 16)
        let namespace = "wsp\(tag)", hostEnd = "wsph\(tag)", nsEnd = "wspn\(tag)"
        let octet = Int.random(in: 1...250)
        guard ip(["netns", "add", namespace]) else {
            throw XCTSkip("no network namespaces here (ip netns add needs root and CAP_SYS_ADMIN)")
        }
        defer { _ = ip(["netns", "del", namespace]) }  // takes the veth pair with it
        let server = "10.213.\(octet).2"
        XCTAssertTrue(ip(["link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd]))
        XCTAssertTrue(ip(["link", "set", nsEnd, "netns", namespace]))
        XCTAssertTrue(ip(["addr", "add", "10.213.\(octet).1/30", "dev", hostEnd]))
        XCTAssertTrue(ip(["link", "set", hostEnd, "up"]))
        XCTAssertTrue(ip(["-n", namespace, "addr", "add", "\(server)/30", "dev", nsEnd]))
        XCTAssertTrue(ip(["-n", namespace, "link", "set", nsEnd, "up"]))
        XCTAssertTrue(ip(["-n", namespace, "link", "set", "lo", "up"]))
        let feed = try startPeer(executable: ipPath,
                                 arguments: ["netns", "exec", namespace, Locations.python, "\(Locations.peers)/feed.py",
                                             "--host", server, "--port", "0", "--log", path("feed.log"), "--count", "2"])
        let child = try spawnWspipe(["--reconnect", "--retry-delay", "0.1", "--retry-max-delay", "0.3", "--connect-timeout", "1",
                                     "--ping-interval", "0.3", "--ping-timeout", "0.6", "--jsonl", "--receive-only",
                                     "--send", "s", "-n", "4", "ws://\(server):\(feed.port)/"])
        XCTAssertTrue(waitForStdout(child, contains: "\"m1\""))
        XCTAssertTrue(ip(["link", "set", hostEnd, "down"]))
        XCTAssertTrue(waitForStdout(child, contains: "\"ping_timeout\""))
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(ip(["link", "set", hostEnd, "up"]))
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        let texts = result.stdoutText.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["type"] as? String == "text" }.compactMap { $0["data"] as? String }
        XCTAssertEqual(texts, ["m0", "m1", "m0", "m1"])
    }
}

/// A loopback listener that accepts every connection and closes it at once (a TCP proxy
/// whose backend is down).
final class HangingUpListener: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let thread: Thread

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else { close(fd); throw HarnessError("cannot listen: errno \(errno)") }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listening = fd
        thread = Thread {
            while true {
                let client = accept(listening, nil, nil)
                if client < 0 { return }
                close(client)
            }
        }
        thread.start()
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}
