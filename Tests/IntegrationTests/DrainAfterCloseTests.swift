import XCTest
import TestSupport

/// After wspipe fails the connection, it reads (and drops) at most 1 MiB more so the server
/// can see its Close, then stops reading; a server that then hangs up ends the session at
/// once, without waiting out the close deadline or spinning on the hang-up.
final class DrainAfterCloseTests: IntegrationTestCase {
    func testServerHangingUpAfterMoreThanTheDrainLimitEndsTheSessionAtOnce() throws {
        // Invalid UTF-8 (wspipe fails with 1007), 1.5 MiB of junk; the server then reads our
        // Close, answers it and closes TCP while 0.5 MiB of junk is still unread on our side.
        let junk = [UInt8](repeating: 0, count: 3 << 19)
        let server = try startScripted(Wire.switching + Wire.text("ok") + Wire.frame(0x1, [0xFF, 0xFE]) + junk, then: "behave")
        let child = try spawnWspipe(["--close-timeout", "5", url(server)], stdin: .pipe)
        let result = finish(child, timeout: 10)
        assertExit(result, 6)
        XCTAssertEqual(result.stdoutText, "ok\n")
        assertStderr(result, contains: "1007")
        // Before: 1 s (the deadline after a failure), with the CPU busy all along.
        XCTAssertLessThan(result.elapsed, 0.7, "waited for the deadline instead of noticing the hang-up")
    }
}
