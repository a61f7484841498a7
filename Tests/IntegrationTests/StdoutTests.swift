import XCTest
import TestSupport

/// stdout going away (`wspipe ... | head -n1`).
final class StdoutTests: IntegrationTestCase {
    func testReaderGoneAfterFirstLineExits0QuietlyWithClose1001() throws {
        let recorder = try startRecorder(["--send-text", "line", "--send-forever"])
        // stdin stays open (like an idle terminal): only the stdout reader ends the session.
        let child = try spawnWspipe([url(recorder)], stdin: .pipe, closeStdoutAfterFirstLine: true)
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertTrue(result.stdoutText.hasPrefix("line\n"), "\(result)")
        XCTAssertEqual(result.stderr, "", "no error noise on EPIPE")
        XCTAssertLessThan(result.elapsed, 5)
        let record = try recorder.record()
        XCTAssertEqual(record.close?.code, 1001)
        XCTAssertEqual(record.client_started_close, true)
    }

    func testReaderLeavingAfterTheServersCloseKeepsTheCloseStatus() throws {
        // The server's Close 4001 came first: the session ends with its status (8), however
        // soon the reader leaves afterwards. The server keeps TCP open.
        let server = try startScripted(Wire.switching + Wire.text("msg0") + Wire.close(4001), then: "hold")
        let child = try spawnWspipe(["--receive-only", url(server)], stdin: .null, closeStdoutAfterFirstLine: true)
        let result = finish(child, timeout: 10)
        assertExit(result, 8)
        XCTAssertTrue(result.stdoutText.hasPrefix("msg0\n"), "\(result)")
        assertStderr(result, contains: "4001")
    }

    func testReaderGoneWhileTheServerIsQuietStillEndsTheSession() throws {
        // One message, then the server says nothing more and keeps the connection open:
        // no later write can fail with EPIPE, so wspipe must notice the reader leaving.
        let recorder = try startRecorder(["--send-text", "only"])
        let child = try spawnWspipe([url(recorder)], stdin: .pipe, closeStdoutAfterFirstLine: true)
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, "only\n")
        XCTAssertEqual(result.stderr, "")
        XCTAssertLessThan(result.elapsed, 5, "ended when the reader left, not at the timeout")
        let record = try recorder.record()
        XCTAssertEqual(record.close?.code, 1001)
        XCTAssertEqual(record.client_started_close, true)
    }
}
