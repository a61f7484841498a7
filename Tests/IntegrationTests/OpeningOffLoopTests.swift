// Opening never blocks the loop (issue 34): the client's dial and handshake run on a thread
// of their own, for the first connection and every --reconnect attempt, so stdin goes on
// into the offline queue, --timeout fires and signals are heard while a dial waits. The
// peer is raw.py on loopback: `no-answer` reads the request and never answers (a dial that
// stalls until the connect timeout), `script --delay` answers the handshake late.
import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

final class OpeningOffLoopTests: IntegrationTestCase {
    private let reconnect = ["--reconnect", "--retry-delay", "0.05", "--retry-max-delay", "0.2"]

    private func stalling() throws -> Peer { try startRaw("no-answer") }

    /// The --stats object's integer member `name`.
    private func stat(_ result: RunResult, _ name: String) -> Int? {
        guard let line = result.stderr.split(separator: "\n").last(where: { $0.contains("\"exit\":") }),
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
        return object[name] as? Int
    }

    /// stdin's lines that arrive while an attempt dials go into the offline queue (they
    /// waited in the pipe, unread, while the dial held the loop), and --timeout ends the run
    /// at its second, not at the 30 s connect timeout.
    func testStdinIsQueuedAndTheTimeoutFiresWhileARetryDials() throws {
        let peer = try stalling()
        let started = Date()
        let child = try spawnWspipe(reconnect + ["--connect-timeout", "30", "--timeout", "1.5", "--stats", url(peer)],
                                    stdin: .pipe)
        Thread.sleep(forTimeInterval: 0.3)
        child.writeStdin("one\ntwo\n")
        let result = finish(child, timeout: 20)
        let elapsed = Date().timeIntervalSince(started)
        assertExit(result, 124)
        XCTAssertLessThan(elapsed, 5, "--timeout 1.5 ended the run after \(elapsed) s")
        XCTAssertEqual(stat(result, "queued"), 2, "the lines written during the dial were not queued: \(result)")
        XCTAssertEqual(stat(result, "attempts"), 1)
    }

    /// Lines queued during a slow handshake go out once it is done, in order.
    func testLinesWrittenDuringASlowHandshakeGoOutOnceItIsDone() throws {
        let record = path("raw.json")
        let script = path("script.bin")
        try Data("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".utf8)
            .write(to: URL(fileURLWithPath: script))
        let peer = try startPython("raw.py", ["--scenario", "script", "--record", record, "--script", script,
                                              "--then", "behave", "--delay", "1.5"], recordFile: record)
        let child = try spawnWspipe(reconnect + ["--stats", "--no-deflate", url(peer)], stdin: .pipe)
        Thread.sleep(forTimeInterval: 0.3)
        child.writeStdin("one\ntwo\n")
        Thread.sleep(forTimeInterval: 0.5)
        child.closeStdin()
        let result = finish(child, timeout: 20)
        assertExit(result, 0)
        XCTAssertEqual(try peer.record().messages.map(\.text), ["one", "two"])
        XCTAssertEqual(stat(result, "queued"), 2, "the lines written during the handshake were not queued: \(result)")
    }

    /// Starts wspipe with `arguments` against a stalling peer, sends `signal` once its
    /// request is out, and returns how it ended (within 3 s of the signal).
    private func signalDuringAStalledDial(_ arguments: [String], _ signal: Int32) throws -> RunResult? {
        let peer = try stalling()
        let child = try spawnWspipe(arguments + ["-v", "--connect-timeout", "30", "--stats", url(peer)], stdin: .pipe)
        guard child.stderr.waitForLine(startingWith: "wspipe: > GET ", timeout: 15) != nil else {
            XCTFail("no request sent: \(child.stderr.text)")
            return nil
        }
        Thread.sleep(forTimeInterval: 0.2)
        let signalled = Date()
        child.signal(signal)
        let result = finish(child, timeout: 10)
        XCTAssertLessThan(Date().timeIntervalSince(signalled), 3)
        return result
    }

    /// SIGINT while an attempt's handshake stalls: the dial is cancelled and the run ends at
    /// once as after any signal while disconnected (--stats written with "exit":130, then
    /// death by the signal); the dial held the loop, and the signal killed the process there
    /// without --stats.
    func testSIGINTDuringAStalledRetryDialEndsPromptlyAsUsual() throws {
        guard let result = try signalDuringAStalledDial(reconnect, SIGINT) else { return }
        assertDiedOf(result, SIGINT)
        XCTAssertEqual(stat(result, "attempts"), 1, "no --stats after the signal: \(result)")
        XCTAssertEqual(stat(result, "exit"), 130)
    }

    /// The one-connection client as well: SIGTERM during a stalled handshake ends at once
    /// (--stats with "exit":143, then death by SIGTERM); --timeout ends it with its own line.
    func testTheFirstConnectionsOpeningHearsSignalsAndTheTimeout() throws {
        guard let result = try signalDuringAStalledDial([], SIGTERM) else { return }
        assertDiedOf(result, SIGTERM)
        XCTAssertEqual(stat(result, "exit"), 143, "no --stats after the signal: \(result)")

        let peer = try stalling()

        let started = Date()
        let timed = try runWspipe(["--connect-timeout", "30", "--timeout", "1", url(peer)], stdin: .pipe)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        assertExit(timed, 124)
        assertStderr(timed, contains: "timed out after 1 s (--timeout) before the connection was open")
    }
}
