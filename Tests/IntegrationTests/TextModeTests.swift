import Glibc
import XCTest
import TestSupport

/// Text mode (the default): stdin lines <-> text messages.
final class TextModeTests: IntegrationTestCase {
    func testLinesRoundTripThroughEcho() throws {
        let echo = try startEcho()
        let result = try runWspipe([url(echo)], stdin: .bytes(Array("a\nb\n".utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, Array("a\nb\n".utf8), "\(result)")
        XCTAssertEqual(result.stderr, "", "no diagnostics without -v")
    }

    func testUTF8TextRoundTripsUnchanged() throws {
        let echo = try startEcho()
        let text = "héllo wörld ✓ 🎉 \u{7F}\t tab\n日本語\n"
        let result = try runWspipe([url(echo)], stdin: .bytes(Array(text.utf8)))
        assertExit(result, 0)
        assertStdout(result, text)
    }

    func testLastLineWithoutNewlineIsSent() throws {
        let recorder = try startRecorder()
        let result = try runWspipe([url(recorder)], stdin: .bytes(Array("first\nlast".utf8)))
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertEqual(record.messages, [.init(type: "text", data: "Zmlyc3Q="), .init(type: "text", data: "bGFzdA==")])
        XCTAssertEqual(record.texts, ["first", "last"])
    }

    func testEmptyLinesAreEmptyMessagesAndCRIsKept() throws {
        let recorder = try startRecorder()
        let result = try runWspipe([url(recorder)], stdin: .bytes(Array("\nx\n\ncr\r\n".utf8)))
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertEqual(record.texts, ["", "x", "", "cr\r"])
        XCTAssertTrue(record.messages.allSatisfy { $0.type == "text" })
    }

    func testServerMessageWithNewlineIsWrittenRaw() throws {
        let recorder = try startRecorder(["--send-text", "x\ny", "--send-text", "", "--send-text", "z", "--close-code", "1000"])
        // stdin stays open: the session ends because the server closes.
        let child = try spawnWspipe([url(recorder)], stdin: .pipe)
        let result = finish(child)
        assertExit(result, 0)
        assertStdout(result, "x\ny\n\nz\n")
    }

    func testNullSeparatorBothWays() throws {
        // Sent: NUL-terminated lines become messages; a newline is an ordinary byte.
        let recorder = try startRecorder()
        let sent = try runWspipe(["-0", url(recorder)], stdin: .bytes(Array("a\nb\0c\0tail".utf8)))
        assertExit(sent, 0)
        XCTAssertEqual(try recorder.record().texts, ["a\nb", "c", "tail"])

        // Received: each message is followed by NUL, not newline.
        let echo = try startEcho()
        let echoed = try runWspipe([url(echo), "--null"], stdin: .bytes(Array("a\nb\0\0c\0".utf8)))
        assertExit(echoed, 0)
        XCTAssertEqual(echoed.stdout, Array("a\nb\0\0c\0".utf8), "\(echoed)")
    }

    func testBinaryMessageInTextModeIsWrittenRawWithOneWarning() throws {
        let recorder = try startRecorder(["--send-binary-hex", "00ff0a", "--send-binary-hex", "41", "--close-code", "1000"])
        let result = finish(try spawnWspipe([url(recorder)], stdin: .pipe))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, [0x00, 0xFF, 0x0A, 0x0A, 0x41, 0x0A], "\(result)")
        XCTAssertEqual(result.stderr.components(separatedBy: "warning:").count - 1, 1, "one warning: \(result)")
        assertStderrLinesPrefixed(result)

        let quiet = finish(try spawnWspipe(["-q", url(recorder)], stdin: .pipe))
        assertExit(quiet, 0)
        XCTAssertEqual(quiet.stderr, "", "-q hides warnings")
    }
}

extension TextModeTests {
    func testThreeMiBLineAndManyShortLinesRoundTrip() throws {
        let echo = try startEcho()
        let long = String(repeating: "0123456789abcdef", count: 3 << 16) // 3 MiB, spans many reads
        let short = (1...20_000).map { "line \($0)" }.joined(separator: "\n")
        let input = long + "\n" + short + "\n" + long + "\n"
        let result = try runWspipe([url(echo)], stdin: .bytes(Array(input.utf8)), timeout: 30)
        assertExit(result, 0)
        XCTAssertEqual(result.stdout.count, input.utf8.count, "\(result.termination) \(result.stderr)")
        XCTAssertTrue(result.stdout == Array(input.utf8), "every reply arrived, in order and intact")
    }
}

extension TextModeTests {
    func testInvalidUTF8VariantsAreCaughtWithLineNumbers() throws {
        let recorder = try startRecorder()
        let cases: [([UInt8], String, [String])] = [
            (Array("a\nb".utf8) + [0xED, 0xA0, 0x80] + [0x0A], "stdin line 2", ["a"]),            // surrogate
            (Array("x".utf8) + [0xC0, 0xAF, 0x0A], "stdin line 1", []),                            // overlong
            (Array("1\n2\n3\nok".utf8) + [0xF4, 0x90, 0x80, 0x80, 0x0A], "stdin line 4", ["1", "2", "3"]), // > U+10FFFF
            (Array("fine\nend ".utf8) + [0xC3], "stdin line 2", ["fine"]),                         // cut at EOF
        ]
        for (index, (input, message, sent)) in cases.enumerated() {
            let result = try runWspipe([url(recorder)], stdin: .bytes(input))
            assertExit(result, 1)
            assertStderr(result, contains: message)
            let record = try recorder.record(index + 1)
            XCTAssertEqual(record.texts, sent, "case \(index + 1)")
            XCTAssertEqual(record.close?.code, 1011, "case \(index + 1)")
        }
    }

    func testCharacterSplitAcrossStdinReadsIsFine() throws {
        let echo = try startEcho()
        let child = try spawnWspipe([url(echo)], stdin: .pipe)
        // The pauses only make separate reads likely (nothing to await: wspipe reports no
        // reads); on a busy machine the test just covers less, it cannot fail because of them.
        child.writeStdin([0x6F, 0x6B, 0x0A, 0xF0, 0x9F])
        _ = waitForStdout(child, contains: "ok\n")
        usleep(100_000)
        child.writeStdin([0x98, 0x80])
        usleep(100_000)
        child.writeStdin(Array(" x\n".utf8))
        child.closeStdin()
        let result = finish(child)
        assertExit(result, 0)
        assertStdout(result, "ok\n😀 x\n")
    }
}
