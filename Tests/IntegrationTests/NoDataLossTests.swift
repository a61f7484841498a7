import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every way a session ends loses nothing: what was read from stdin reaches the server
/// before the Close, what the server sent reaches stdout before the exit, and a signal in
/// the middle of an upload never cuts a frame.
final class NoDataLossTests: HostileTestCase {
    // MARK: 11. stdin EOF with many messages in flight

    func testEndOfInputWithManyMessagesInFlightDeliversThemAllBeforeTheClose() throws {
        // 200k lines written at once; the server starts reading after 1 s and then reads
        // 64 KiB every 10 ms. It checks that message i is "L<i>".
        let count = 200_000
        let server = try startHostile("sink", ["--check", "lines", "--start-delay", "1", "--read-size", "65536",
                                               "--read-delay", "0.01"])
        var input = [UInt8]()
        input.reserveCapacity(count * 8)
        for i in 1...count { input += Array("L\(i)\n".utf8) }
        let result = try runWspipe([url(server)], stdin: .bytes(input), timeout: 60)
        print("MEASURE 200k lines to a slow reader: \(String(format: "%.1f", result.elapsed)) s")
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "")
        let record = try server.hostileRecord(timeout: 30)
        XCTAssertEqual(record.errors, [], "every message, in order, intact")
        XCTAssertEqual(record.messages, count)
        XCTAssertEqual(record.messages_before_close, count, "all of them before the Close")
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertEqual(record.pings, 1, "the end-of-input barrier ping")
    }

    // MARK: 12. The server closes while stdout is slow

    func testServerCloseWhileStdoutIsSlowStillWritesEveryMessage() throws {
        // 4000 text messages (~18 MB, more than the 4 MiB stdout high-water mark) and Close
        // 1000; stdout is not read for 2 s, then read slowly. With --then close the server
        // closes TCP right after its Close, without waiting for the echo.
        let count = 4000
        var expected = [UInt8]()
        for i in 0..<count {
            expected += Pattern.sendCloseMessage(i)
            expected.append(0x0A)
        }
        for then in ["behave", "close"] {
            let server = try startHostile("send-close", ["--count", "\(count)", "--then", then])
            let stdout = try HeldStdout()
            let child = try spawnWspipe([url(server)], stdin: .pipe, stdoutFile: stdout.childPath)
            stdout.childStarted()
            usleep(2_000_000)
            stdout.startDraining(keep: true, pause: 0.002)
            XCTAssertTrue(stdout.waitForEnd(timeout: 60), "\(then): stdout not drained")
            let result = finish(child, timeout: 10)
            assertExit(result, 0)
            XCTAssertEqual(result.stderr, "", then)
            XCTAssertEqual(stdout.byteCount, expected.count, "\(then): byte count")
            XCTAssertTrue(stdout.bytes == expected, "\(then): stdout differs from the messages sent")
            let record = try server.hostileRecord()
            XCTAssertEqual(record.sent, count)
            if then == "behave" { XCTAssertEqual(record.close?.code, 1000, "the Close was echoed") }
        }
    }

    func testASlowStdoutAtTheEndOfInputIsNotTakenForASilentServer() throws {
        // 4 MiB of binary messages with the 101 and nothing sent (stdin /dev/null): the
        // end-of-input Ping goes at once and the server answers it, but its Pong is behind
        // the messages, which wspipe reads only as fast as stdout takes them (nothing for
        // 3 s here). Waiting for our own stdout is no silence of the server's: every byte
        // arrives and the session ends normally, though --close-timeout is 1 s.
        let (script, expected) = fourMiBWithThe101()
        let server = try startScripted(script)
        let stdout = try HeldStdout()
        let child = try spawnWspipe(["--binary", "--close-timeout", "1", url(server)], stdin: .null, stdoutFile: stdout.childPath)
        stdout.childStarted()
        usleep(3_000_000)
        stdout.startDraining(keep: true)
        XCTAssertTrue(stdout.waitForEnd(timeout: 30), "stdout not drained")
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(stdout.byteCount, expected.count, "byte count")
        XCTAssertTrue(stdout.bytes == expected, "stdout differs from the messages sent")
    }

    func testASlowStdoutIsNotTakenForAMissingPong() throws {
        // The same 4 MiB, with keepalive pings and a 1 s --ping-timeout: the server answers
        // every Ping, but the Pongs wait behind the messages that stdout has not taken yet
        // (nothing for 3 s). The connection is alive: every byte arrives, exit status 0.
        let (script, expected) = fourMiBWithThe101()
        let server = try startScripted(script)
        let stdout = try HeldStdout()
        let child = try spawnWspipe(["--binary", "--ping-interval", "0.3", "--ping-timeout", "1", url(server)],
                                    stdin: .pipe, stdoutFile: stdout.childPath)
        stdout.childStarted()
        usleep(3_000_000)
        stdout.startDraining(keep: true)
        usleep(1_000_000)
        child.closeStdin()
        XCTAssertTrue(stdout.waitForEnd(timeout: 30), "stdout not drained")
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(stdout.byteCount, expected.count, "byte count")
        XCTAssertTrue(stdout.bytes == expected, "stdout differs from the messages sent")
    }

    /// A 101 and 64 binary messages of 64 KiB (4 MiB) in one script, and what stdout gets.
    private func fourMiBWithThe101() -> (script: [UInt8], expected: [UInt8]) {
        var script = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
            + Array("Sec-WebSocket-Accept: {accept}\r\n\r\n".utf8)
        var expected: [UInt8] = []
        for i in 0..<64 {
            let payload = [UInt8](repeating: UInt8(65 + i % 26), count: 65535) + [0x0A]
            script += [0x82, 127] + (0..<8).map { UInt8(truncatingIfNeeded: payload.count >> (56 - 8 * $0)) } + payload
            expected += payload
        }
        return (script, expected)
    }

    // MARK: 13. SIGTERM in the middle of a 1 GiB upload

    func testSIGTERMInTheMiddleOfA1GiBUploadClosesWith1001AfterCompleteFrames() throws {
        // 1 GiB generated on the fly into `wspipe -b`; SIGTERM once the server has 128 MiB.
        // The server parses every frame and checks every payload byte: a frame cut short by
        // the Close would turn the Close into payload (a mismatch) and end in EOF mid-frame.
        try checkSIGTERMDuringUpload(serverOptions: [], signalAfter: 128 << 20)
    }

    func testSIGTERMDuringAnUploadToASlowServerClosesAfterCompleteFrames() throws {
        // The same against a server reading 64 KiB every 5 ms: the socket is full when the
        // signal comes, so a frame is likely half written at that moment.
        try checkSIGTERMDuringUpload(serverOptions: ["--read-size", "65536", "--read-delay", "0.005"], signalAfter: 16 << 20)
    }

    private func checkSIGTERMDuringUpload(serverOptions: [String], signalAfter: Int,
                                          file: StaticString = #filePath, line: UInt = #line) throws {
        let total = 1 << 30
        let server = try startHostile("sink", ["--check", "pattern"] + serverOptions, file: file, line: line)
        let input = try GeneratedInput()
        let child = try spawnWspipe(["-b", url(server)], stdin: .file(input.childPath))
        let source = ChunkSource(total: total, block: Pattern.bytes(Pattern.binary, offset: 0, count: 251 * 4177))
        input.start { source.next() }
        guard waitForProgress(server, atLeast: signalAfter, timeout: 60) else {
            return XCTFail("the upload did not reach \(signalAfter >> 20) MiB: \(server.process.stderr.text) \(child.stderr.text)",
                           file: file, line: line)
        }
        child.signal(SIGTERM)
        let result = finish(child, timeout: 20, file: file, line: line)
        let record = try server.hostileRecord()
        print("MEASURE SIGTERM upload \(serverOptions): server had \(record.bytes >> 20) MiB in \(record.messages) messages "
              + "at the Close; stdin fed \(input.bytesWritten >> 20) MiB")
        assertDiedOf(result, SIGTERM, file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
        XCTAssertLessThan(input.bytesWritten, total, "the signal came in the middle of the upload", file: file, line: line)
        XCTAssertEqual(record.close?.code, 1001, file: file, line: line)
        XCTAssertEqual(record.errors, [], "well-formed, complete frames; the payload as generated; nothing after the Close",
                       file: file, line: line)
        XCTAssertEqual(record.messages_before_close, record.messages, file: file, line: line)
        XCTAssertEqual(record.frames, record.messages + 1, "data frames, each a whole message, then the Close", file: file, line: line)
        XCTAssertEqual(Array(record.types.keys), ["binary"], file: file, line: line)
        XCTAssertLessThanOrEqual(record.max_frame, 65536, file: file, line: line)
        XCTAssertGreaterThanOrEqual(record.bytes, signalAfter, file: file, line: line)
    }
}
