import XCTest
import TestSupport

/// Binary mode (-b): stdin bytes -> binary messages, messages -> stdout raw.
final class BinaryModeTests: IntegrationTestCase {
    func testOneMiBOfRandomBytesRoundTrips() throws {
        let echo = try startEcho()
        let input = randomBytes(1 << 20)
        let result = try runWspipe(["--binary", url(echo)], stdin: .bytes(input))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout.count, input.count, "\(result.termination) \(result.stderr)")
        XCTAssertTrue(result.stdout == input, "the echoed bytes differ from the input")
        XCTAssertEqual(result.stderr, "")
    }

    func testChunkSizeLimitsMessageSize() throws {
        let recorder = try startRecorder()
        let input = randomBytes(256 * 1024 + 123)
        let result = try runWspipe(["-b", "--chunk-size", "1000", url(recorder)], stdin: .bytes(input))
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertTrue(record.messages.allSatisfy { $0.type == "binary" }, "all binary")
        let sizes = record.messages.map(\.bytes.count)
        XCTAssertLessThanOrEqual(sizes.max() ?? 0, 1000)
        XCTAssertFalse(sizes.contains(0), "no empty messages")
        XCTAssertGreaterThanOrEqual(sizes.count, input.count / 1000)
        XCTAssertTrue(record.messages.flatMap(\.bytes) == input, "the messages put together differ from the input")
    }

    func testReceivedMessagesAreWrittenWithNothingAdded() throws {
        let recorder = try startRecorder(["--send-text", "ab", "--send-binary-hex", "000a0d", "--send-text", "cd",
                                          "--close-code", "1000"])
        let result = finish(try spawnWspipe(["-b", url(recorder)], stdin: .pipe))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, Array("ab".utf8) + [0x00, 0x0A, 0x0D] + Array("cd".utf8), "\(result)")
        XCTAssertEqual(result.stderr, "")
    }
}
