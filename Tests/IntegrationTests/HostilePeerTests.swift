import Foundation
import XCTest
import TestSupport

/// Servers that misbehave on purpose: they never close TCP, flood pings or messages, send
/// endless headers or absurd frame lengths. wspipe must end in bounded time with the right
/// status and keep its memory small. Peak RSS numbers are printed as `MEASURE` lines.
final class HostilePeerTests: HostileTestCase {
    // MARK: 1. Close, then TCP held open forever

    func testServerCloseThenTCPHeldOpenForeverEndsWithinAboutASecond() throws {
        // The server sends a message and Close, reads our echo, and never closes TCP.
        // wspipe waits at most 1 s for the TCP close after the Close exchange.
        for (code, status) in [(UInt16(1000), Int32(0)), (4000, 8)] {
            let server = try startScripted(Wire.switching + Wire.text("last words") + Wire.close(code), then: "hold")
            let child = try spawnWspipe([url(server)], stdin: .pipe) // stdin open and idle
            let result = finish(child, timeout: 10)
            assertExit(result, status)
            assertStdout(result, "last words\n")
            XCTAssertLessThan(result.elapsed, 2.5, "Close \(code): waited \(result.elapsed) s for a TCP close that never comes")
            if status == 0 { XCTAssertEqual(result.stderr, "") } else { assertStderr(result, contains: "\(code)") }
            XCTAssertEqual(try server.record().close?.code, Int(code), "the Close was echoed")
        }
    }

    func testOurCloseEchoedThenTCPHeldOpenForeverEndsWithinAboutASecond() throws {
        // stdin EOF: barrier ping, our Close 1000, the server echoes it and keeps TCP open.
        let server = try startHostile("sink", ["--hold"])
        let result = try runWspipe([url(server)], stdin: .bytes(Array("bye\n".utf8)), timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "")
        XCTAssertLessThan(result.elapsed, 2.5, "waited \(result.elapsed) s")
        let record = try server.hostileRecord()
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertEqual(record.messages, 1)
        XCTAssertEqual(record.errors, [])
    }

    // MARK: 2. Ping flood

    private func runPingFlood(count: Int, file: StaticString = #filePath, line: UInt = #line) throws -> (HostileRecord, RunResult, Int) {
        // 125-byte pings (the largest allowed), sent as fast as the socket takes them,
        // without reading a single pong until the last ping is out.
        let server = try startHostile("ping-flood", ["--count", "\(count)", "--size", "125"], file: file, line: line)
        let child = try spawnWspipe([url(server)], stdin: .pipe) // idle stdin: only the server acts
        let peak = sampleRSS(child)
        let result = finish(child, timeout: 60, file: file, line: line)
        let record = try server.hostileRecord(timeout: 30)
        return (record, result, peak())
    }

    func testPingFloodIsAnsweredWithSmallMemoryAndANormalCloseFollows() throws {
        let count = 100_000
        let (record, result, peak) = try runPingFlood(count: count)
        print("MEASURE ping flood \(count) x 125 B: peak RSS \(mebibytes(peak)), \(record.pongs) pongs, "
              + "flood \(record.flood_seconds ?? -1) s, wspipe ran \(String(format: "%.2f", result.elapsed)) s")
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, [])
        XCTAssertEqual(result.stderr, "")
        var lastPing = withUnsafeBytes(of: UInt64(count - 1).bigEndian) { Array($0) }
        lastPing += [UInt8](repeating: UInt8(ascii: "p"), count: 117)
        XCTAssertEqual(record.last_pong, Data(lastPing).base64EncodedString(), "the last ping was answered")
        XCTAssertGreaterThanOrEqual(record.pongs_before_close ?? 0, 1)
        XCTAssertEqual(record.close?.code, 1000, "our echo of the server's Close")
        XCTAssertEqual(record.errors, [])
        XCTAssertLessThan(peak, 40 * 1024, "peak RSS \(mebibytes(peak))")
    }

    func testPingFloodFromAServerThatNeverReadsKeepsMemoryBounded() throws {
        // Regression test (fixed): wspipe queues one pong per ping, without limit, while the server does not read
        // (Session.loop reads the socket whatever the outbound queue holds; mayRead looks only
        // at stdout; WebSocketConnection.receive appends a 131-byte masked pong per ping).
        // A server that pings faster than it reads grows wspipe's memory ~131 bytes per ping,
        // forever. Expected: peak RSS stays small (RFC 6455 §5.5.3 allows answering only the
        // most recent ping: replace an unsent pong instead of adding one, or stop reading the
        // socket while the outbound queue is over its high-water mark). Actual: 300k pings
        // -> peak RSS ~50 MiB, 1M pings -> ~140 MiB (debug build).
        let (record, result, peak) = try runPingFlood(count: 300_000)
        print("MEASURE ping flood 300000 x 125 B: peak RSS \(mebibytes(peak)), \(record.pongs) pongs")
        assertExit(result, 0)
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertLessThan(peak, 40 * 1024, "peak RSS \(mebibytes(peak))")
    }

    func testPingFloodFromAServerThatNeverReadsLetsStdinEndAndTheCloseTimeoutEndIt() throws {
        // Regression test (fixed): one pong queued per ping filled the outbound queue (and the
        // core kept ~1000 more), so with a server that floods pings and never reads, stdin sent
        // after the flood was never read to its end and only --timeout ended the session.
        // Expected: at most one pong waits unwritten (§5.5.3), stdin ends, and the session
        // ends by --close-timeout (exit 7, the server stopped reading); when the server
        // finally reads, fewer pongs than pings arrive: its receive buffer is 4 KiB (--rcvbuf;
        // autotuned, loopback's takes up to 32 MiB: all 100,000 pongs), and wspipe's send
        // buffer holds at most 4 MiB (tcp_wmem), ~32,000 pongs. The pongs after the first unanswered
        // ping are not bounded: a write that would block once (the send buffer full while
        // the receive window was still open) coalesces, and later writes go through again.
        let count = 100_000
        let server = try startHostile("deaf-ping-flood", ["--count", "\(count)", "--size", "125", "--quiet", "6", "--rcvbuf", "4096"])
        let child = try spawnWspipe([url(server), "--close-timeout", "1"], stdin: .pipe)
        child.writeStdin("L1\n")
        XCTAssertTrue(server.process.stdout.wait(timeout: 30) { String(decoding: $0, as: UTF8.self).contains("FLOODED") },
                      "the flood did not end")
        usleep(500_000)  // wspipe reads the rest of the flood from the socket
        for i in 2...200 { child.writeStdin("L\(i)\n") }
        child.closeStdin()
        let inputEnded = monotonicSeconds()
        let result = finish(child, timeout: 15)
        let ending = monotonicSeconds() - inputEnded
        let record = try server.hostileRecord(timeout: 20)
        print("MEASURE deaf ping flood \(count) x 125 B: \(record.pongs) pongs, \(record.pongs_after_gap ?? -1) after "
              + "the first unanswered ping; wspipe ended \(String(format: "%.2f", ending)) s after its stdin")
        assertExit(result, 7)
        assertStderr(result, contains: "(--close-timeout)")
        // 1 s without progress for the end-of-input ping, then at most 1 s for the Close.
        XCTAssertLessThan(ending, 4, "the session took \(ending) s to end after stdin")
        XCTAssertNotNil(record.pongs_after_gap, "\(record)")
        XCTAssertLessThan(record.pongs, count, "every ping got its pong: none was coalesced")
    }

    // MARK: 3. Message flood while stdout stalls

    /// The slowest test here (~7 s: a 3 s stall, then 2 GiB through wspipe).
    func testMessageFloodWhileStdoutStallsKeepsMemoryBoundedThenEveryByteArrives() throws {
        // 2 GiB in 64 KiB binary messages (index in the first 8 bytes) then Close 1000,
        // while nobody reads wspipe's stdout for 3 s. wspipe stops reading the socket at
        // 4 MiB waiting for stdout, so the server is held back by TCP, not by wspipe's memory.
        let size = 65536, count = 32768
        let server = try startHostile("flood", ["--count", "\(count)", "--size", "\(size)"])
        let stdout = try HeldStdout()
        let child = try spawnWspipe(["-b", url(server)], stdin: .pipe, stdoutFile: stdout.childPath)
        stdout.childStarted()
        let peak = sampleRSS(child)
        usleep(3_000_000)
        let duringStall = max(peak(), peakRSSKiB(of: child.pid) ?? 0)
        let checker = FloodChecker(size: size)
        let drainStart = monotonicSeconds()
        stdout.startDraining { offset, chunk in checker.consume(offset, chunk) }
        XCTAssertTrue(stdout.waitForEnd(timeout: 90), "stdout not drained: \(stdout.byteCount) bytes")
        let drainSeconds = monotonicSeconds() - drainStart
        let result = finish(child, timeout: 10)
        let overall = peak()
        print("MEASURE message flood \(count) x 64 KiB with stdout stalled 3 s: peak RSS during the stall "
              + "\(mebibytes(duringStall)), overall \(mebibytes(overall)); drained in \(String(format: "%.1f", drainSeconds)) s")
        assertExit(result, 0)
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(stdout.byteCount, count * size, "every byte, exactly")
        XCTAssertEqual(checker.checked, count, "every message start seen")
        XCTAssertEqual(checker.mismatches, 0, checker.firstMismatch ?? "")
        XCTAssertLessThan(duringStall, 64 * 1024, "peak RSS during the stall \(mebibytes(duringStall))")
        XCTAssertLessThan(overall, 64 * 1024, "peak RSS \(mebibytes(overall))")
        let record = try server.hostileRecord()
        XCTAssertEqual(record.sent, count)
        XCTAssertEqual(record.close?.code, 1000)
    }

    // MARK: 4. Headers that never end

    func testEndlessResponseHeadersAreRefusedAtTheLimitQuicklyAndSmall() throws {
        // "HTTP/1.1 101" then header lines forever.
        let server = try startHostile("endless-headers")
        let child = try spawnWspipe([url(server)], stdin: .pipe)
        let peak = sampleRSS(child)
        let result = finish(child, timeout: 15)
        let rss = peak()
        print("MEASURE endless headers: peak RSS \(mebibytes(rss)), refused after \(String(format: "%.2f", result.elapsed)) s")
        assertExit(result, 5)
        XCTAssertEqual(result.stdout, [])
        assertStderr(result, contains: "exceed 64 KiB")
        assertStderrLinesPrefixed(result)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "one clear error line: \(result.stderr)")
        XCTAssertLessThan(result.elapsed, 2)
        XCTAssertLessThan(rss, 40 * 1024, "peak RSS \(mebibytes(rss))")
        XCTAssertLessThan(try server.hostileRecord().sent_bytes, 16 << 20, "wspipe stopped reading early")
    }

    func testOneMiBOfHeaderLinesAfter101IsRefusedQuickly() throws {
        var response = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
        var n = 0
        while response.count < 1 << 20 {
            response += Array("X-Filler-\(n): \(String(repeating: "f", count: 60))\r\n".utf8)
            n += 1
        }
        response += Array("Sec-WebSocket-Accept: {accept}\r\n\r\n".utf8)
        let server = try startScripted(response, then: "hold")
        let child = try spawnWspipe([url(server)], stdin: .pipe)
        let peak = sampleRSS(child)
        let result = finish(child, timeout: 15)
        let rss = peak()
        assertExit(result, 5)
        assertStderr(result, contains: "exceed 64 KiB")
        XCTAssertLessThan(result.elapsed, 2)
        XCTAssertLessThan(rss, 40 * 1024, "peak RSS \(mebibytes(rss))")
    }

    // MARK: 5. Absurd and growing lengths

    func testFrameAnnouncing2To62BytesThenEndlessPayloadIsRefusedAtOnce() throws {
        // After the header the server keeps streaming payload as fast as it can: wspipe must
        // refuse at the header (Close 1009 within ~1 s) and never try to hold the payload.
        for mode in [["-b"], []] {
            let server = try startHostile("huge-stream")
            let child = try spawnWspipe(mode + [url(server)], stdin: .pipe)
            let peak = sampleRSS(child)
            let result = finish(child, timeout: 10)
            let rss = peak()
            print("MEASURE 2^62 frame \(mode): peak RSS \(mebibytes(rss))")
            assertExit(result, 6)
            XCTAssertEqual(result.stdout, Array(mode.isEmpty ? "before\n".utf8 : "before".utf8), "the message before it")
            assertStderr(result, contains: "1009")
            XCTAssertLessThan(result.elapsed, 3)
            XCTAssertLessThan(rss, 40 * 1024, "peak RSS \(mebibytes(rss))")
            let record = try server.hostileRecord()
            XCTAssertEqual(record.close?.code, 1009)
            XCTAssertLessThanOrEqual(record.close_at ?? 99, 1.0, "Close 1009 seen by the server within 1 s of the header")
            XCTAssertEqual(record.errors, [])
        }
    }

    func testFragmentsAddingUpPastMaxMessageSizeAreRefusedWith1009() throws {
        // One binary message in 256 KiB fragments that never ends; --max-message-size 1M.
        let server = try startHostile("fragment-overflow", ["--size", "262144"])
        let child = try spawnWspipe(["-b", "--max-message-size", "1M", url(server)], stdin: .pipe)
        let peak = sampleRSS(child)
        let result = finish(child, timeout: 10)
        let rss = peak()
        assertExit(result, 6)
        XCTAssertEqual(result.stdout, [], "nothing of the refused message")
        assertStderr(result, contains: "1009")
        XCTAssertLessThan(rss, 40 * 1024, "peak RSS \(mebibytes(rss))")
        let record = try server.hostileRecord()
        XCTAssertEqual(record.close?.code, 1009)
        XCTAssertLessThan(record.sent_bytes, 64 << 20, "refused soon after 1 MiB, not after the server gave up")
    }
}

/// Checks a binary flood on stdout: message m (of `size` bytes) starts with m as 8 bytes
/// big-endian, and its last byte is the pattern byte hostile.py puts there.
final class FloodChecker: @unchecked Sendable {
    let size: Int
    private var partial: [UInt8] = []
    private var partialMessage = -1
    private(set) var checked = 0
    private(set) var mismatches = 0
    private(set) var firstMismatch: String?

    init(size: Int) { self.size = size }

    private func verify(_ message: Int, _ index: [UInt8]) {
        checked += 1
        let value = index.reduce(0) { $0 << 8 | Int($1) }
        if value != message {
            mismatches += 1
            if firstMismatch == nil { firstMismatch = "message \(message) starts with index \(value)" }
        }
    }

    func consume(_ offset: Int, _ chunk: UnsafeRawBufferPointer) {
        if partialMessage >= 0 {
            let take = min(8 - partial.count, chunk.count)
            partial += chunk[0..<take]
            if partial.count == 8 {
                verify(partialMessage, partial)
                partialMessage = -1
            }
        }
        var message = (offset + size - 1) / size
        while message * size < offset + chunk.count {
            let start = message * size - offset
            let available = min(8, chunk.count - start)
            if available == 8 {
                verify(message, Array(chunk[start..<(start + 8)]))
            } else {
                partial = Array(chunk[start..<(start + available)])
                partialMessage = message
            }
            message += 1
        }
        // The last byte of each message that ends in this chunk.
        var end = (offset / size + 1) * size - 1
        while end < offset + chunk.count {
            let expected = Pattern.binary[(size - 1 - 8) % Pattern.binary.count]
            if chunk[end - offset] != expected {
                mismatches += 1
                if firstMismatch == nil { firstMismatch = "last byte of message \(end / size) differs" }
            }
            end += size
        }
    }
}
