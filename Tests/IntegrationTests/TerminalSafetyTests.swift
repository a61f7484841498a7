import XCTest
import TestSupport

/// What a server sends never reaches the user's terminal as control sequences: -v shows
/// its headers with control bytes escaped, each diagnostic on one line.
final class TerminalSafetyTests: IntegrationTestCase {
    func testVerboseResponseHeadersShowControlBytesEscaped() throws {
        let head = "HTTP/1.1 101 Switching\u{1B}[31m Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: {accept}\r\nX-Evil: a\u{1B}[2Jb\u{7F}c\u{0B}d\r\n\r\n"
        let server = try startScripted(Array(head.utf8) + Wire.text("hi") + Wire.close(1000))
        let result = try runWspipe(["-v", "--receive-only", url(server)], timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, "hi\n")
        XCTAssertFalse(result.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x7F || $0.value == 0x0B },
                       "raw control bytes on stderr: \(result.stderr.debugDescription)")
        XCTAssertTrue(result.stderr.contains("wspipe: < X-Evil: a\\x1B[2Jb\\x7Fc\\x0Bd\n"), result.stderr)
        XCTAssertTrue(result.stderr.contains("Switching\\x1B[31m Protocols"), result.stderr)
    }
}
