import Glibc
import XCTest
import TestSupport

/// How sessions end: closing handshakes from either side.
final class CloseTests: IntegrationTestCase {
    func testEndOfInputClosesWith1000AfterBarrierPing() throws {
        let recorder = try startRecorder()
        let result = try runWspipe([url(recorder)], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertEqual(record.texts, ["hi"])
        XCTAssertEqual(record.close, .init(code: 1000, reason: ""))
        XCTAssertEqual(record.client_started_close, true)
        XCTAssertEqual(record.pingPayloads.count, 1, "the barrier ping (DESIGN.md, Ending a session)")
        XCTAssertTrue(record.pingPayloads.first?.hasPrefix("wspipe:eof:") == true, "\(record.pingPayloads)")
        XCTAssertEqual(record.pingPayloads.first?.count, 27, "a random 16-digit marker per session")
    }

    func testCloseCodeAndReasonOptions() throws {
        let recorder = try startRecorder()
        let result = try runWspipe(["--close-code", "4001", "--close-reason", "done", url(recorder)],
                                   stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "", "the server echoing our own code is a normal end")
        XCTAssertEqual(try recorder.record().close, .init(code: 4001, reason: "done"))
    }

    func testServerClose1000WhileStdinIsStillOpen() throws {
        let recorder = try startRecorder(["--send-text", "one", "--send-text", "two", "--close-code", "1000"])
        let child = try spawnWspipe([url(recorder)], stdin: .pipe) // kept open and idle
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "one\ntwo\n")
        XCTAssertEqual(result.stderr, "")
        let record = try recorder.record()
        XCTAssertEqual(record.client_started_close, false)
        XCTAssertEqual(record.close?.code, 1000, "wspipe echoes the server's Close")
    }

    func testServerCloseWithOtherCodeExitsWith8() throws {
        let recorder = try startRecorder(["--send-text", "one", "--close-code", "4000", "--close-reason", "bye"])
        let result = finish(try spawnWspipe([url(recorder)], stdin: .pipe), timeout: 10)
        assertExit(result, 8)
        assertStdout(result, "one\n")
        assertStderr(result, contains: "4000")
        assertStderr(result, contains: "bye")
        assertStderrLinesPrefixed(result)
        XCTAssertEqual(try recorder.record().close?.code, 4000, "echoed with the same code")
    }

    func testNoCloseKeepsReceivingAfterEndOfInput() throws {
        // The server answers only after "go", and closes itself when done.
        let recorder = try startRecorder(["--wait-for", "go", "--send-text", "r1", "--send-text", "r2", "--close-code", "1000"])
        let result = try runWspipe(["--no-close", url(recorder)], stdin: .bytes(Array("go\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "r1\nr2\n")
        let record = try recorder.record()
        XCTAssertEqual(record.texts, ["go"])
        XCTAssertEqual(record.client_started_close, false, "wspipe did not close at EOF")
        XCTAssertEqual(record.pingPayloads, [], "no barrier ping with --no-close")
    }

    func testServerCloseWithoutClosingTCPEndsWithinASecondOrSo() throws {
        let raw = try startRaw("close-keep-open")
        let result = finish(try spawnWspipe([url(raw)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        XCTAssertLessThan(result.elapsed, 3.5, "waits at most ~1 s for the TCP close")
        XCTAssertEqual(try raw.record().close?.code, 1000, "the Close was echoed")
    }
}

extension CloseTests {
    func testCloseTimeoutWhenTheServerNeverAnswersOurClose() throws {
        // The silent server answers neither the barrier ping (1 s) nor the Close (--close-timeout 1).
        let raw = try startRaw("silent")
        let result = try runWspipe(["--close-timeout", "1", url(raw)], stdin: .bytes(Array("x\n".utf8)))
        assertExit(result, 7)
        assertStderr(result, contains: "--close-timeout")
        XCTAssertLessThan(result.elapsed, 3.5)
    }

    func testPingIntervalAgainstAnsweringServerKeepsTheSessionUp() throws {
        let recorder = try startRecorder()
        let child = try spawnWspipe(["-v", "--ping-interval", "0.2", "--ping-timeout", "5", url(recorder)], stdin: .pipe)
        guard child.stderr.waitForLine(startingWith: "wspipe: * received pong", timeout: 15) != nil else {
            return XCTFail("no pong reported: \(child.stderr.text)")
        }
        child.closeStdin()
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        let pings = try recorder.record().pingPayloads
        XCTAssertGreaterThanOrEqual(pings.filter { !$0.hasPrefix("wspipe:eof") }.count, 1, "\(pings)")
    }

    func testSecondSignalExitsAtOnce() throws {
        // The server says "ready", then never answers the Close that the first SIGINT sends.
        // (Waiting for a message, not for "connected:" on stderr: wspipe installs its signal
        // handlers only after that line, and before any message is written.)
        let server = try startScripted(Wire.switching + Wire.text("ready"), then: "hold")
        let child = try spawnWspipe(["-v", url(server)], stdin: .pipe)
        guard waitForStdout(child, contains: "ready\n") else { return }
        child.signal(SIGINT)
        guard child.stderr.waitForLine(startingWith: "wspipe: * sending Close 1001", timeout: 15) != nil else {
            return XCTFail("no Close after SIGINT: \(child.stderr.text)")
        }
        let secondSignal = monotonicSeconds()
        child.signal(SIGINT)
        let result = finish(child, timeout: 10)
        assertDiedOf(result, SIGINT)
        XCTAssertLessThan(monotonicSeconds() - secondSignal, 2, "did not wait for the close timeout (5 s)")
    }
}

/// The ending: --close-timeout bounds time without progress, and the Close tells the truth
/// about our output.
extension CloseTests {
    func testCloseTimeoutBoundsTheEndingWhenTheServerKeepsSendingButStopsReading() throws {
        // The server streams forever and reads nothing: neither the end-of-input ping nor
        // the Close is ever answered. Its frames count as progress while the ping is out,
        // for 10 close timeouts at most (5 s here), then the short wait for the Close's
        // answer: not one timeout per stage, and not forever while frames keep coming.
        let raw = try startRaw("stream-no-read")
        let result = try runWspipe(["--close-timeout", "0.5", url(raw)], stdin: .bytes(Array("x\n".utf8)), timeout: 20)
        assertExit(result, 7)
        assertStderr(result, contains: "the server did not confirm reading all 1 message within 5 s")
        assertStderr(result, contains: "--close-timeout")
        assertStderr(result, contains: "gave up")
        XCTAssertLessThan(result.elapsed, 7.5, "\(result)")
    }

    func testAJSONLPingCannotPassForTheEndOfInputPing() throws {
        // The end-of-input ping carries a random marker: a ping from stdin with the old fixed
        // payload is just a ping, and the Close still waits for the real barrier's pong.
        let recorder = try startRecorder()
        let input = #"{"type":"ping","data":"wspipe:eof"}"# + "\n" + #"{"type":"text","data":"after"}"# + "\n"
        let result = try runWspipe(["--jsonl", url(recorder)], stdin: .bytes(Array(input.utf8)))
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertEqual(record.texts, ["after"])
        XCTAssertEqual(record.pingPayloads.count, 2, "\(record.pingPayloads)")
        XCTAssertEqual(record.pingPayloads.first, "wspipe:eof")
        XCTAssertTrue(record.pingPayloads.last?.hasPrefix("wspipe:eof:") == true)
        XCTAssertNotEqual(record.pingPayloads.first, record.pingPayloads.last)
    }
}

/// The Close code reflects whether our output succeeded (frames.py records it).
extension PipelineTests {
    func testCountLimitWithAFailingStdoutClosesWith1011() throws {
        // -n 1: the message is written before the Close goes; stdout is /dev/full, so the
        // server must not be told that all went well.
        let server = try startFrames(["--echo"])
        let result = finish(try spawnWspipe(["-n", "1", "--no-close", url(server)], stdin: .bytes(Array("a\n".utf8)),
                                            stdoutFile: "/dev/full"))
        assertExit(result, 1)
        assertStderr(result, contains: "cannot write to stdout")
        XCTAssertEqual(try framesRecord(server).close?.code, 1011)
    }

    /// -n 3 and the server's three messages and its Close 1001 in one write: the count came
    /// and was written, so the status is 0 as -n says (it was 8 when the Close was read
    /// before our 1000 went; 0 when it came in a later read: it depended on timing).
    func testCountReachedThenTheServersCloseInTheSameReadIsZero() throws {
        let server = try startScripted(Wire.switching + Wire.text("a") + Wire.text("b") + Wire.text("c") + Wire.close(1001),
                                       then: "close")
        let result = finish(try spawnWspipe(["-n", "3", url(server)], stdin: .null))
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, "a\nb\nc\n")
    }

    func testEndOfInputWithAFailingStdoutClosesWith1011() throws {
        // No pong: the end-of-input Close waits for the echoes (a pong may overtake them,
        // and a Close sent before they arrive rightly says 1000), which fail on /dev/full.
        let server = try startFrames(["--echo", "--no-pong"])
        let result = finish(try spawnWspipe(["--close-timeout", "1", url(server)], stdin: .bytes(Array("a\nb\n".utf8)),
                                            stdoutFile: "/dev/full"))
        assertExit(result, 1)
        XCTAssertEqual(try framesRecord(server).close?.code, 1011)
    }
}
