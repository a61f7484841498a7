// The pipeline options, byte for byte against peers/frames.py (a raw asyncio server that
// records every frame it receives): --jsonl both ways (+ --timestamps), --base64,
// --whole-input, -1, -n, --send, --timeout, --idle-timeout, --linger, --receive-only,
// --send-only, --stats, and the option combinations that are refused.
import Foundation
import Glibc
import XCTest
import TestSupport

/// What frames.py wrote about one connection.
struct FramesRecord: Decodable {
    struct Frame: Decodable {
        let opcode: Int
        let fin: Bool
        let length: Int
        /// Seconds since the 101 went out.
        let at: Double

        init(from decoder: Decoder) throws {
            var fields = try decoder.unkeyedContainer()
            opcode = try fields.decode(Int.self)
            fin = try fields.decode(Bool.self)
            length = try fields.decode(Int.self)
            at = try fields.decode(Double.self)
        }
    }

    struct Message: Decodable {
        let type: String
        let length: Int
        let sha256: String
        /// Base64, nil above 1 MiB.
        let data: String?
        let frames: Int
        var bytes: [UInt8] { data.flatMap { Data(base64Encoded: $0) }.map { Array($0) } ?? [] }
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    struct Close: Decodable {
        let code: Int?
        let reason: String
        let at: Double
    }

    let frames: [Frame]
    let messages: [Message]
    let pings: [String]
    let pongs: [String]
    let close: Close?
    let sent: Int

    var texts: [String] { messages.map(\.text) }
    var pingPayloads: [[UInt8]] { pings.map { Array(Data(base64Encoded: $0) ?? Data()) } }
    var dataFrames: [Frame] { frames.filter { $0.opcode <= 2 } }
}

final class PipelineTests: IntegrationTestCase {
    // MARK: - Helpers

    /// frames.py with these arguments.
    func startFrames(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("frames-\(UUID().uuidString).json")
        return try startPython("frames.py", ["--record", record] + arguments, recordFile: record, file: file, line: line)
    }

    /// The record of the `n`th connection to a frames.py peer.
    func framesRecord(_ peer: Peer, _ n: Int = 1, timeout: Double = 15) throws -> FramesRecord {
        try peer.record(n, as: FramesRecord.self, timeout: timeout)
    }

    /// stdout split into lines (without their newlines); fails unless it ends with one.
    func lines(_ result: RunResult, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        XCTAssertTrue(result.stdout.isEmpty || result.stdout.last == 0x0A, "stdout does not end with a newline: \(result)",
                      file: file, line: line)
        return result.stdoutText.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    /// One JSON object (a --jsonl line, the --stats line).
    func object(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            XCTFail("not a JSON object: \(String(reflecting: text))", file: file, line: line)
            return [:]
        }
        return value
    }

    /// The --stats line: the last line on stderr.
    func stats(_ result: RunResult, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let last = result.stderr.split(separator: "\n").last, last.hasPrefix("{") else {
            XCTFail("no --stats line at the end of stderr: \(result)", file: file, line: line)
            return [:]
        }
        return object(String(last), file: file, line: line)
    }

    func sha256(_ bytes: [UInt8]) throws -> String {
        let file = path("sha-\(UUID().uuidString)")
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let child = try ChildProcess(executable: "/usr/bin/sha256sum", arguments: [file], environment: Locations.baseEnvironment)
        let result = child.wait(timeout: 30)
        return String(result.stdoutText.prefix(64))
    }

    /// Fast pseudo-random bytes (xorshift; the test data need not be secret).
    func noise(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
        var state = seed
        var bytes = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            for _ in 0..<8 where index < count {
                bytes[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        return bytes
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func wallClock() -> Double { Date().timeIntervalSince1970 }

    // MARK: - --jsonl output

    func testJSONLinesOutputIsExactForNewlinesNULInvalidUTF8AndEmptyMessages() throws {
        let binary: [UInt8] = [0x00, 0xFF, 0x0A, 0xFE, 0x80, 0xC3, 0x28, 0x00, 0x0D]
        let tricky = "quote \" backslash \\ tab \t nul \u{0} del \u{7F} é✓🎉"  // NUL cannot go through argv
        let server = try startFrames([
            "--send-text", "line one\nline two\r\n", "--send-text-hex", hex(Array(tricky.utf8)),
            "--send-binary-hex", hex(binary), "--send-text", "", "--send-binary-hex", "",
            "--send-text", "{\"a\":[1,\n2]}", "--close-code", "1000", "--close-reason", "done \"now\"",
        ])
        // stdin stays open: the server's Close ends the session.
        let result = finish(try spawnWspipe(["--jsonl", url(server)], stdin: .pipe))
        assertExit(result, 0)
        let expected = """
            {"type":"text","data":"line one\\nline two\\r\\n"}
            {"type":"text","data":"quote \\" backslash \\\\ tab \\t nul \\u0000 del \\u007f é✓🎉"}
            {"type":"binary","base64":"AP8K/oDDKAAN"}
            {"type":"text","data":""}
            {"type":"binary","base64":""}
            {"type":"text","data":"{\\"a\\":[1,\\n2]}"}
            {"type":"close","code":1000,"reason":"done \\"now\\""}

            """
        XCTAssertEqual(result.stdout, Array(expected.utf8), "stdout differs byte for byte: \(result)")

        // And a JSON parser reads back exactly what was sent.
        let objects = lines(result).map { object($0) }
        XCTAssertEqual(objects.count, 7)
        guard objects.count == 7 else { return }
        XCTAssertEqual(objects[0]["data"] as? String, "line one\nline two\r\n")
        XCTAssertEqual(objects[1]["data"] as? String, tricky)
        XCTAssertEqual((objects[2]["base64"] as? String).flatMap { Data(base64Encoded: $0) }.map { Array($0) }, binary)
        XCTAssertEqual(objects[3]["data"] as? String, "")
        XCTAssertEqual(objects[4]["base64"] as? String, "")
        XCTAssertEqual(objects[5]["data"] as? String, "{\"a\":[1,\n2]}")
        XCTAssertEqual(objects[6]["type"] as? String, "close")
        XCTAssertEqual(objects[6]["code"] as? Int, 1000)
        XCTAssertEqual(objects[6]["reason"] as? String, "done \"now\"")
        XCTAssertEqual(result.stderr, "")
    }

    func testJSONLinesFragmentedMessagesAreWholeLines() throws {
        // A 99 KB text message with newlines, sent in 1000-byte fragments, is still one line.
        let text = String(repeating: "0123456789\n", count: 9_000) + "end"  // argv: at most 128 KiB per argument
        let server = try startFrames(["--send-text", text, "--fragment", "1000", "--send-text", "after", "--close-code", "1000"])
        let result = finish(try spawnWspipe(["--jsonl", url(server)], stdin: .pipe))
        assertExit(result, 0)
        let output = lines(result)
        XCTAssertEqual(output.count, 3, "\(result)")
        XCTAssertEqual(output.first.map { object($0)["data"] as? String }, text)
        XCTAssertEqual(output.dropFirst().first, #"{"type":"text","data":"after"}"#)
    }

    func testJSONLinesCloseWithoutCodeHasNullCode() throws {
        let server = try startFrames(["--send-text", "x", "--send-empty-close"])
        let result = finish(try spawnWspipe(["--jsonl", url(server)], stdin: .pipe))
        assertExit(result, 0)
        assertStdout(result, "{\"type\":\"text\",\"data\":\"x\"}\n{\"type\":\"close\",\"code\":null,\"reason\":\"\"}\n")
    }

    func testJSONLinesCloseWithErrorCodeIsWrittenAndExitIs8() throws {
        let server = try startFrames(["--close-code", "4000", "--close-reason", "bad request"])
        let result = finish(try spawnWspipe(["--jsonl", url(server)], stdin: .pipe))
        assertExit(result, 8)
        assertStdout(result, "{\"type\":\"close\",\"code\":4000,\"reason\":\"bad request\"}\n")
    }

    func testTimestampsAreWallClockSecondsWithMicroseconds() throws {
        let server = try startFrames(["--send-text", "a", "--send-binary-hex", "00", "--close-code", "1000"])
        let before = Self.wallClock()
        let result = finish(try spawnWspipe(["--jsonl", "--timestamps", url(server)], stdin: .pipe))
        let after = Self.wallClock()
        assertExit(result, 0)
        let output = lines(result)
        XCTAssertEqual(output.count, 3, "\(result)")
        let pattern = try NSRegularExpression(pattern: #"^\{"type":"[a-z]+",.*,"ts":[0-9]{10,}\.[0-9]{6}\}$"#)
        var previous = 0.0
        for line in output {
            XCTAssertNotNil(pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)),
                            "\"ts\" should be the last member, Unix seconds with six decimals: \(line)")
            let ts = object(line)["ts"] as? Double
            XCTAssertNotNil(ts, "ts is a JSON number: \(line)")
            guard let ts else { continue }
            XCTAssertGreaterThanOrEqual(ts, before - 1, line)
            XCTAssertLessThanOrEqual(ts, after + 1, line)
            XCTAssertGreaterThanOrEqual(ts, previous, "timestamps do not go back")
            previous = ts
        }
        XCTAssertEqual(output.map { object($0)["type"] as? String }, ["text", "binary", "close"])
    }

    // MARK: - --jsonl input

    func testJSONLinesInputSendsTextBinaryPingAndClose() throws {
        let server = try startFrames()
        let input = [
            #"{"type":"text","data":"two\nlines é \u00e9 \ud83c\udf89 \u0000 end"}"#,
            #"{"type":"binary","base64":"AP8K/oDDKAAN"}"#,
            #"{"type":"binary","data":"héllo"}"#,
            #"{"type":"text","data":""}"#,
            #"{"type":"binary","base64":""}"#,
            #"{"type":"ping","data":"are you there"}"#,
            #"{"type":"ping","base64":"AAH/"}"#,
            #"{"type":"ping"}"#,
            // Output lines replay as input: "ts" and unknown members are ignored.
            #"{"type":"text","data":"replayed","ts":1764480000.123456,"extra":{"x":[1,2]}}"#,
            "  {\"data\":\"members in any order\", \"type\" : \"text\"}  \r",
            #"{"type":"close","code":4001,"reason":"bye é"}"#,
            #"{"type":"text","data":"after the close: never sent"}"#,
        ]
        let result = try runWspipe(["--jsonl", "-v", url(server)], stdin: .bytes(Array((input.joined(separator: "\n") + "\n").utf8)))
        assertExit(result, 0)
        assertStderrLinesPrefixed(result)
        let record = try framesRecord(server)
        XCTAssertEqual(record.messages.map(\.type), ["text", "binary", "binary", "text", "binary", "text", "text"])
        XCTAssertEqual(record.messages.map(\.bytes), [
            Array("two\nlines é é 🎉 \u{0} end".utf8), [0x00, 0xFF, 0x0A, 0xFE, 0x80, 0xC3, 0x28, 0x00, 0x0D],
            Array("héllo".utf8), [], [], Array("replayed".utf8), Array("members in any order".utf8),
        ])
        XCTAssertTrue(record.messages.allSatisfy { $0.frames == 1 })
        // The three pings from stdin, in order, then the barrier ping before the Close.
        XCTAssertEqual(Array(record.pingPayloads.prefix(3)), [Array("are you there".utf8), [0x00, 0x01, 0xFF], []])
        XCTAssertEqual(record.pingPayloads.count, 4)
        XCTAssertTrue(record.pingPayloads.last?.starts(with: Array("wspipe:eof:".utf8)) == true, "a random marker per session")
        XCTAssertEqual(record.close?.code, 4001)
        XCTAssertEqual(record.close?.reason, "bye é")
        // The server's answer to the Close is the last output line.
        XCTAssertEqual(lines(result).last, #"{"type":"close","code":4001,"reason":""}"#, "\(result)")
    }

    func testJSONLinesInputLinesSpanningReadsAndPipeWrites() throws {
        // Lines longer than one stdin read (256 KiB), and lines that arrive in pieces.
        let server = try startFrames(["--echo"])
        let big = noise(700_000)
        let longText = String(repeating: "é\\n\\u0041 ", count: 40_000)  // 400 KB of escapes in the line
        let child = try spawnWspipe(["--jsonl", url(server)], stdin: .pipe)
        child.writeStdin("{\"type\":\"binary\",\"base64\":\"\(Data(big).base64EncodedString())\"}\n")
        child.writeStdin("{\"type\":\"text\",\"data\":\"\(longText)\"}\n")
        for piece in ["{\"type\":\"te", "xt\",\"data\":\"spl", "it é", "\"}", "\n{\"type\":\"binary\",\"base64\":\"AP", "8=\"}\n"] {
            child.writeStdin(Array(piece.utf8))
            usleep(50_000)
        }
        child.closeStdin()
        let result = finish(child, timeout: 30)
        assertExit(result, 0)
        let record = try framesRecord(server)
        let decodedText = String(repeating: "é\nA ", count: 40_000)
        XCTAssertEqual(record.messages.map(\.type), ["binary", "text", "text", "binary"])
        XCTAssertEqual(record.messages.map(\.bytes), [big, Array(decodedText.utf8), Array("split é".utf8), [0x00, 0xFF]])
        // And the echoes come back as the same JSON lines (escapes normalised).
        let output = lines(result)
        XCTAssertEqual(output.count, 5, "four messages and the Close line")
        guard output.count == 5 else { return }
        XCTAssertEqual(output[0], "{\"type\":\"binary\",\"base64\":\"\(Data(big).base64EncodedString())\"}")
        XCTAssertEqual(object(output[1])["data"] as? String, decodedText)
        XCTAssertEqual(output[2], #"{"type":"text","data":"split é"}"#)
        XCTAssertEqual(output[3], #"{"type":"binary","base64":"AP8="}"#)
    }

    func testJSONLinesCloseWithNullCodeSendsAnEmptyClose() throws {
        let server = try startFrames()
        let result = try runWspipe(["--jsonl", url(server)],
                                   stdin: .bytes(Array("{\"type\":\"text\",\"data\":\"x\"}\n{\"type\":\"close\",\"code\":null}\n".utf8)))
        assertExit(result, 0)
        let record = try framesRecord(server)
        XCTAssertEqual(record.texts, ["x"])
        XCTAssertNotNil(record.close)
        XCTAssertNil(record.close?.code, "a Close without a status code")
        XCTAssertEqual(lines(result).last, #"{"type":"close","code":null,"reason":""}"#)
    }

    func testInvalidJSONLineIsNotSentAndExitsOneWithItsLineNumber() throws {
        let server = try startFrames()
        let bad: [(String, String)] = [
            ("", "an empty line"),
            ("not json", "not JSON"),
            ("[1,2]", "not an object"),
            (#"{"data":"no type"}"#, "no type"),
            (#"{"type":"pong"}"#, "unknown type"),
            (#"{"type":"text"}"#, "text without data"),
            (#"{"type":"text","data":42}"#, "data not a string"),
            (#"{"type":"binary","base64":"!!!"}"#, "bad base64"),
            (#"{"type":"binary"}"#, "binary without payload"),
            (#"{"type":"binary","base64":"AA==","data":"x"}"#, "both payload forms"),
            (#"{"type":"binary","data":5,"base64":"AA=="}"#, "data of the wrong type beside base64"),
            (#"{"type":"close","code":1000,"reason":7}"#, "a reason that is not a string"),
            (#"{"type":"close","code":1005}"#, "a code that may not be sent"),
            (#"{"type":"close","code":1000.5}"#, "a code that is not an integer"),
            (#"{"type":"close","code":null,"reason":"x"}"#, "a reason without a code"),
            ("{\"type\":\"ping\",\"data\":\"\(String(repeating: "p", count: 126))\"}", "a ping over 125 bytes"),
            (#"{"type":"text","data":"\ud800"}"#, "an unpaired surrogate"),
            (#"{"type":"text","data":"a"} x"#, "text after the object"),
            ("{\"type\":\"text\",\"data\":\"\u{1}\"}", "a raw control character"),
        ]
        var connection = 0
        for (line, why) in bad {
            let input = "{\"type\":\"text\",\"data\":\"first\"}\n{\"type\":\"binary\",\"base64\":\"AA==\"}\n\(line)\n"
                + "{\"type\":\"text\",\"data\":\"after\"}\n"
            let result = try runWspipe(["--jsonl", url(server)], stdin: .bytes(Array(input.utf8)))
            connection += 1
            assertExit(result, 1)
            XCTAssertTrue(result.stderr.hasPrefix("wspipe: stdin line 3 is not a --jsonl message: "), "\(why): \(result)")
            let record = try framesRecord(server, connection)
            XCTAssertEqual(record.messages.map(\.bytes), [Array("first".utf8), [0]], "\(why): the lines before it are sent, not it")
            XCTAssertEqual(record.close?.code, 1011, why)
            XCTAssertEqual(record.close?.reason, "stdin error", why)
        }

        // Not UTF-8 at all.
        let result = try runWspipe(["--jsonl", url(server)], stdin: .bytes(Array("{\"type\":\"text\",\"data\":\"ok\"}\n".utf8)
                                                                        + [0x7B, 0xFF, 0x7D, 0x0A]))
        assertExit(result, 1)
        assertStderr(result, contains: "stdin line 2 is not a --jsonl message")
        XCTAssertEqual(try framesRecord(server, connection + 1).texts, ["ok"])
    }

    // MARK: - --base64

    func testBase64WritesBinaryMessagesAsLinesAndTextAsIs() throws {
        let server = try startFrames(["--send-binary-hex", "00ff0a", "--send-text", "t\nx", "--send-binary-hex", "",
                                      "--send-binary-hex", hex(Array(0...255)), "--close-code", "1000"])
        let result = finish(try spawnWspipe(["--base64", url(server)], stdin: .pipe))
        assertExit(result, 0)
        let all = Data(Array(0...255) as [UInt8]).base64EncodedString()
        assertStdout(result, "AP8K\nt\nx\n\n\(all)\n")
        XCTAssertEqual(result.stderr, "", "no binary-in-text-mode warning with --base64")
    }

    func testBinaryBase64LinesBecomeBinaryMessages() throws {
        let server = try startFrames()
        let bytes = noise(3000)
        let input = "AP8K\n\nQQ==\n\(Data(bytes).base64EncodedString())\n"
        let result = try runWspipe(["-b", "--base64", url(server)], stdin: .bytes(Array(input.utf8)))
        assertExit(result, 0)
        let record = try framesRecord(server)
        XCTAssertEqual(record.messages.map(\.type), ["binary", "binary", "binary", "binary"])
        XCTAssertEqual(record.messages.map(\.bytes), [[0x00, 0xFF, 0x0A], [], [0x41], bytes])
    }

    func testBinaryBase64RoundTripsThroughAnEcho() throws {
        let server = try startFrames(["--echo"])
        // The last line (about 930 KB) spans several stdin reads.
        let messages = [noise(100, seed: 1), [], [0, 0, 0], noise(70_000, seed: 2), noise(700_000, seed: 3)]
        let input = messages.map { Data($0).base64EncodedString() + "\n" }.joined()
        let result = try runWspipe(["-b", "--base64", url(server)], stdin: .bytes(Array(input.utf8)))
        assertExit(result, 0)
        assertStdout(result, input)
    }

    func testBinaryBase64NULSeparated() throws {
        let server = try startFrames(["--echo"])
        let result = try runWspipe(["-b", "--base64", "-0", url(server)], stdin: .bytes(Array("AP8K\0QQ==\0".utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, Array("AP8K\0QQ==\0".utf8), "\(result)")
    }

    func testBadBase64LineIsNotSentAndExitsOne() throws {
        let server = try startFrames()
        for line in ["AP8", "AP8K\r", "A P8K", "QQ"] {
            let result = try runWspipe(["-b", "--base64", url(server)], stdin: .bytes(Array("QQ==\n\(line)\nQQ==\n".utf8)))
            assertExit(result, 1)
            assertStderr(result, contains: "stdin line 2 is not base64")
        }
        for n in 1...4 {
            let record = try framesRecord(server, n)
            XCTAssertEqual(record.messages.map(\.bytes), [[0x41]])
            XCTAssertEqual(record.close?.code, 1011)
        }
    }

    // MARK: - --whole-input

    func testWholeInputSendsAThreeMiBJSONDocumentAsOneTextMessage() throws {
        // Pretty-printed JSON, as `jq .` writes it: many lines, ending with a newline.
        var document = "{\n  \"items\": [\n"
        var index = 0
        while document.utf8.count < 3 << 20 {
            document += "    {\"id\": \(index), \"name\": \"item \(index) é✓\", \"note\": \"a\\nb\"},\n"
            index += 1
        }
        document += "    {\"id\": -1}\n  ]\n}\n"
        let bytes = Array(document.utf8)
        let input = path("document.json")
        try Data(bytes).write(to: URL(fileURLWithPath: input))

        let server = try startFrames(["--echo"])
        let result = try runWspipe(["--whole-input", url(server)], stdin: .file(input), timeout: 60)
        assertExit(result, 0)
        let record = try framesRecord(server)
        XCTAssertEqual(record.messages.count, 1, "exactly one message")
        XCTAssertEqual(record.messages.first?.type, "text")
        XCTAssertEqual(record.messages.first?.length, bytes.count)
        XCTAssertEqual(record.messages.first?.sha256, try sha256(bytes))
        // It went out in fragments of at most --chunk-size (64K), the first a text frame.
        XCTAssertGreaterThan(record.messages.first?.frames ?? 0, 1)
        XCTAssertEqual(record.dataFrames.first?.opcode, 1)
        XCTAssertTrue(record.dataFrames.allSatisfy { $0.length <= 65536 })
        // The echo comes back as one message, followed by the text-mode newline.
        XCTAssertEqual(result.stdout.count, bytes.count + 1)
        XCTAssertTrue(result.stdout == bytes + [0x0A], "the echoed document differs")
    }

    func testWholeInputBinaryTenMiBIsOneFragmentedMessage() throws {
        var bytes = noise(10 << 20)
        bytes.replaceSubrange(0..<8, with: [0x00, 0x00, 0xFF, 0xFE, 0xC3, 0x28, 0x0A, 0x00])  // NUL, invalid UTF-8
        let input = path("upload.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let digest = try sha256(bytes)

        for (options, limit) in [([String](), 65536), (["--chunk-size", "1M"], 1 << 20)] {
            let server = try startFrames(["--echo"])
            let result = try runWspipe(["-b", "--whole-input", url(server)] + options, stdin: .file(input), timeout: 60)
            assertExit(result, 0)
            let record = try framesRecord(server)
            XCTAssertEqual(record.messages.count, 1, "one message with \(options)")
            XCTAssertEqual(record.messages.first?.type, "binary")
            XCTAssertEqual(record.messages.first?.length, bytes.count)
            XCTAssertEqual(record.messages.first?.sha256, digest)
            // On the wire: a binary frame without FIN, continuation frames, the last with FIN.
            let data = record.dataFrames
            XCTAssertGreaterThanOrEqual(data.count, bytes.count / limit, "fragmented in frames of at most \(limit)")
            XCTAssertEqual(data.first?.opcode, 2)
            XCTAssertEqual(data.first?.fin, false)
            XCTAssertTrue(data.dropFirst().allSatisfy { $0.opcode == 0 }, "continuation frames")
            XCTAssertTrue(data.dropLast().allSatisfy { !$0.fin })
            XCTAssertEqual(data.last?.fin, true)
            XCTAssertTrue(data.allSatisfy { $0.length <= limit }, "no frame over --chunk-size \(limit)")
            XCTAssertEqual(data.map(\.length).reduce(0, +), bytes.count)
            // The echo (one 10 MiB message) comes back raw, byte for byte.
            XCTAssertEqual(result.stdout.count, bytes.count)
            XCTAssertTrue(result.stdout == bytes, "the echoed file differs")
        }
    }

    func testWholeInputEmptyAndInvalid() throws {
        let server = try startFrames()
        // Empty input: one empty message (text, then binary).
        assertExit(try runWspipe(["--whole-input", url(server)], stdin: .null), 0)
        assertExit(try runWspipe(["--whole-input", "-b", url(server)], stdin: .null), 0)
        // Not UTF-8 in text mode: nothing is sent at all.
        let invalid = try runWspipe(["--whole-input", url(server)], stdin: .bytes(Array("fine\nstill fine\n".utf8) + [0xFF, 0x0A]))
        assertExit(invalid, 1)
        assertStderr(invalid, contains: "not valid UTF-8 (at byte 17)")
        let records = try (1...3).map { try framesRecord(server, $0) }
        XCTAssertEqual(records[0].messages.map(\.type), ["text"])
        XCTAssertEqual(records[0].messages.map(\.length), [0])
        XCTAssertEqual(records[1].messages.map(\.type), ["binary"])
        XCTAssertEqual(records[1].messages.map(\.length), [0])
        XCTAssertEqual(records[2].messages.count, 0, "nothing of invalid input is sent")
        XCTAssertEqual(records[2].close?.code, 1011)
    }

    // MARK: - -1 and -n

    func testOneMessageSendsTheFirstLineAndPrintsOneReply() throws {
        let server = try startFrames(["--echo"])
        let result = try runWspipe(["-1", url(server)], stdin: .bytes(Array("first\nsecond\nthird\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "first\n")
        let record = try framesRecord(server)
        XCTAssertEqual(record.texts, ["first"], "only the first line is sent")
        XCTAssertEqual(record.close?.code, 1000)

        // stdin never ends: -1 does not wait for it.
        let child = try spawnWspipe(["--one-message", url(server)], stdin: .pipe)
        child.writeStdin("only\n")
        let open = finish(child, timeout: 10)
        assertExit(open, 0)
        assertStdout(open, "only\n")
        XCTAssertEqual(try framesRecord(server, 2).texts, ["only"])
    }

    func testOneMessageWithDevNullSendsNothingAndPrintsTheFirstMessage() throws {
        let server = try startFrames(["--send-text", "hello", "--send-text", "second"])
        let result = try runWspipe(["-1", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, "hello\n")
        let record = try framesRecord(server)
        XCTAssertEqual(record.messages.count, 0)
        XCTAssertEqual(record.close?.code, 1000)
    }

    func testOneMessageWithoutAReplyRunsUntilTheTimeout() throws {
        let server = try startFrames()
        let result = try runWspipe(["-1", "--timeout", "1", url(server)], stdin: .null)
        assertExit(result, 124)
        assertStdout(result, "")
    }

    func testOneMessageBinaryWholeInputIsAnUploadWithOneReply() throws {
        let server = try startFrames(["--wait-messages", "1", "--send-text", "{\"stored\":true}"])
        let bytes = noise(200_000)
        let input = path("file.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let result = try runWspipe(["-b", "--whole-input", "-1", url(server)], stdin: .file(input))
        assertExit(result, 0)
        assertStdout(result, "{\"stored\":true}")  // binary mode: raw, nothing added
        let record = try framesRecord(server)
        XCTAssertEqual(record.messages.count, 1)
        XCTAssertEqual(record.messages.first?.bytes, bytes)
    }

    func testMaxMessagesPrintsExactlyNOfTenAndCloses1000() throws {
        let sends = (1...10).flatMap { ["--send-text", "m\($0)"] }
        let server = try startFrames(sends)
        let result = try runWspipe(["-n", "3", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, "m1\nm2\nm3\n")
        let record = try framesRecord(server)
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertEqual(record.messages.count, 0)

        // --max-messages with --stats: all ten may arrive, three are written.
        let second = try runWspipe(["--max-messages", "3", "--stats", url(server)], stdin: .pipe)
        assertExit(second, 0)
        assertStdout(second, "m1\nm2\nm3\n")
        let summary = stats(second)
        XCTAssertGreaterThanOrEqual((summary["received"] as? [String: Any])?["messages"] as? Int ?? 0, 3)
        XCTAssertEqual((summary["close_sent"] as? [String: Any])?["code"] as? Int, 1000)
    }

    func testMaxMessagesWithJSONLinesWritesExactlyNLines() throws {
        // -n N --jsonl prints exactly N lines: no Close line after the count (man/wspipe.1,
        // JSON LINES), so a reader that counts lines gets what it asked for.
        let server = try startFrames(["--send-text", "a", "--send-text", "b", "--send-text", "c", "--send-text", "d"])
        let result = try runWspipe(["-n", "2", "--jsonl", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, """
            {"type":"text","data":"a"}
            {"type":"text","data":"b"}

            """)
    }

    func testCountKeepsTheSessionOpenAfterEndOfInputForALateReply() throws {
        // The cron form: no stdin, one request, a reply that takes a while.
        let server = try startFrames(["--wait-messages", "1", "--delay", "0.5", "--send-text", "{\"snapshot\":1}"])
        let result = try runWspipe(["--send", "{\"op\":\"snapshot\"}", "-n", "1", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, "{\"snapshot\":1}\n")
        XCTAssertGreaterThanOrEqual(result.elapsed, 0.5)
        let record = try framesRecord(server)
        XCTAssertEqual(record.texts, ["{\"op\":\"snapshot\"}"])
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertEqual(record.pings.count, 0, "no end-of-input barrier: stdin EOF does not close with a count")
    }

    // MARK: - --send

    func testSendMessagesGoBeforeStdinInOrder() throws {
        let server = try startFrames()
        let result = try runWspipe(["--send", "a", "--send", "b c", "--send", "", "--send", "{\"x\":1}", url(server)],
                                   stdin: .bytes(Array("d\ne\n".utf8)))
        assertExit(result, 0)
        let record = try framesRecord(server)
        XCTAssertEqual(record.texts, ["a", "b c", "", "{\"x\":1}", "d", "e"])
        XCTAssertTrue(record.messages.allSatisfy { $0.type == "text" })

        // With -b and --jsonl, --send is still one text message, sent as it is.
        let binary = try runWspipe(["-b", "--send", "hello", url(server)], stdin: .bytes([0, 1, 2]))
        assertExit(binary, 0)
        let second = try framesRecord(server, 2)
        XCTAssertEqual(second.messages.map(\.type), ["text", "binary"])
        XCTAssertEqual(second.messages.map(\.bytes), [Array("hello".utf8), [0, 1, 2]])

        let jsonl = try runWspipe(["--jsonl", "--send", "{\"type\":\"binary\",\"base64\":\"AA==\"}", url(server)], stdin: .null)
        assertExit(jsonl, 0)
        let third = try framesRecord(server, 3)
        XCTAssertEqual(third.messages.map(\.type), ["text"])
        XCTAssertEqual(third.texts, ["{\"type\":\"binary\",\"base64\":\"AA==\"}"])
    }

    // MARK: - --timeout and --idle-timeout

    func testTimeoutAgainstASilentServerExits124AfterAboutOneSecond() throws {
        let server = try startFrames()
        let child = try spawnWspipe(["--timeout", "1", url(server)], stdin: .pipe)  // stdin stays open
        let result = finish(child, timeout: 15)
        assertExit(result, 124)
        XCTAssertGreaterThanOrEqual(result.elapsed, 0.95, "\(result)")
        XCTAssertLessThan(result.elapsed, 2.5, "\(result)")
        let record = try framesRecord(server)
        XCTAssertEqual(record.close?.code, 1000, "a closing handshake, seen by the server")
        XCTAssertGreaterThanOrEqual(record.close?.at ?? 0, 0.9)
        // Issue 35 item 7: said in one line (it exited 124 with nothing on stderr); -q hides it.
        XCTAssertEqual(result.stderr, "wspipe: timed out after 1 s (--timeout)\n")
        let quiet = finish(try spawnWspipe(["-q", "--timeout", "0.5", url(server)], stdin: .pipe), timeout: 15)
        assertExit(quiet, 124)
        XCTAssertEqual(quiet.stderr, "", "-q hides the notice")
    }

    func testTimeoutWhileReceivingKeepsWhatArrivedAndExits124() throws {
        let server = try startFrames(["--send-text", "tick", "--repeat", "100", "--interval", "0.1"])
        let result = finish(try spawnWspipe(["--timeout", "0.55", url(server)], stdin: .pipe), timeout: 15)
        assertExit(result, 124)
        let ticks = lines(result)
        XCTAssertTrue((1...8).contains(ticks.count) && ticks.allSatisfy { $0 == "tick" }, "\(result)")
    }

    func testTimeoutBeforeTheHandshakeIsAnsweredExits124() throws {
        let server = try startRaw("no-answer")
        let result = try runWspipe(["--timeout", "1", url(server)], stdin: .null)
        assertExit(result, 124)
        XCTAssertLessThan(result.elapsed, 3, "--timeout, not --connect-timeout (10 s), bounds the connection")
        assertStderr(result, contains: "--timeout")
    }

    // Regression test (fixed): once --timeout had expired, its deadline stayed among the
    // timers, poll(2) got a 0 ms timeout and the loop spun until the server's Close came.
    // After --timeout the wait for the server's Close is also capped at 1 s.
    func testTimeoutDoesNotSpinWhileWaitingForTheServersClose() throws {
        let server = try startFrames(["--no-close-echo"])
        let times = path("time.txt")
        let child = try ChildProcess(executable: "/usr/bin/time",
                                     arguments: ["-o", times, "-f", "%e %U %S", Locations.wspipe,
                                                 "--timeout", "0.5", "--close-timeout", "2", url(server)],
                                     environment: Locations.baseEnvironment, stdin: .pipe)
        let result = finish(child, timeout: 15)
        assertExit(result, 124)
        // GNU time writes "Command exited with non-zero status 124" first, then the format.
        let report = try String(contentsOfFile: times, encoding: .utf8).split(separator: "\n").last ?? ""
        let fields = report.split(separator: " ").compactMap { Double($0) }
        XCTAssertEqual(fields.count, 3)
        guard fields.count == 3 else { return }
        XCTAssertGreaterThanOrEqual(fields[0], 1.4, "0.5 s, then 1 s waiting for the Close")
        XCTAssertLessThan(fields[0], 2.4, "after --timeout, the Close is awaited at most 1 s, not --close-timeout")
        XCTAssertLessThan(fields[1] + fields[2], 0.3,
                          "CPU seconds (user + system) for \(fields[0]) s of mostly waiting: poll(2) must sleep")
    }

    func testIdleTimeoutClosesCleanlyAfterSilence() throws {
        // Five messages 0.3 s apart keep the session alive; then 1.2 s of silence ends it.
        let server = try startFrames(["--send-text", "beat", "--repeat", "5", "--interval", "0.3"])
        let result = finish(try spawnWspipe(["--idle-timeout", "1.2", url(server)], stdin: .pipe), timeout: 15)
        assertExit(result, 0)
        assertStdout(result, String(repeating: "beat\n", count: 5))
        XCTAssertGreaterThanOrEqual(result.elapsed, 1.2 + 1.2 - 0.1, "\(result)")
        XCTAssertLessThan(result.elapsed, 6, "\(result)")
        let record = try framesRecord(server)
        XCTAssertEqual(record.close?.code, 1000)
    }

    func testIdleTimeoutCountsMessagesSentToo() throws {
        let server = try startFrames()
        let child = try spawnWspipe(["--idle-timeout", "1.5", url(server)], stdin: .pipe)
        for index in 0..<4 {
            child.writeStdin("out \(index)\n")
            usleep(300_000)
        }
        let result = finish(child, timeout: 15)
        assertExit(result, 0)
        XCTAssertEqual(try framesRecord(server).texts, ["out 0", "out 1", "out 2", "out 3"])
        XCTAssertGreaterThanOrEqual(result.elapsed, 0.9 + 1.5 - 0.1)
    }

    // Regression test (fixed): --idle-timeout counted from before connecting, so a slow
    // handshake made the first check close at once.
    func testIdleTimeoutCountsFromTheOpenConnection() throws {
        let server = try startFrames(["--handshake-delay", "1.2", "--delay", "0.3", "--send-text", "hello"])
        let result = finish(try spawnWspipe(["--idle-timeout", "1", "-n", "1", url(server)], stdin: .pipe), timeout: 15)
        assertExit(result, 0)
        assertStdout(result, "hello\n")
    }

    // MARK: - End-of-input policies

    func testLingerPrintsAReplyThatArrivesAfterEndOfInput() throws {
        // The server answers 0.5 s late. Without --linger the Close goes out first and the
        // reply is lost; with --linger 1.5 it is printed.
        let server = try startFrames(["--echo", "--echo-delay", "0.5"])
        let plain = try runWspipe([url(server)], stdin: .bytes(Array("late\n".utf8)))
        assertExit(plain, 0)
        assertStdout(plain, "")

        let lingering = try runWspipe(["--linger", "1.5", url(server)], stdin: .bytes(Array("late\n".utf8)))
        assertExit(lingering, 0)
        assertStdout(lingering, "late\n")
        XCTAssertGreaterThanOrEqual(lingering.elapsed, 1.4)
        let record = try framesRecord(server, 2)
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertGreaterThanOrEqual(record.close?.at ?? 0, 1.4, "the Close waited for the linger")
    }

    func testLingerEndsSoonerWhenTheServerCloses() throws {
        let server = try startFrames(["--wait-messages", "1", "--send-text", "bye", "--close-code", "1000"])
        let result = try runWspipe(["--linger", "10", url(server)], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "bye\n")
        XCTAssertLessThan(result.elapsed, 5)
    }

    func testReceiveOnlyNeverReadsStdin() throws {
        let server = try startFrames(["--delay", "0.5", "--send-text", "r1", "--send-text", "r2", "--close-code", "1000"])
        let child = try spawnWspipe(["--receive-only", "--send", "subscribe", url(server)], stdin: .pipe)
        child.writeStdin("must not be sent\n")  // sits in the pipe: nobody reads it
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "r1\nr2\n")
        let record = try framesRecord(server)
        XCTAssertEqual(record.texts, ["subscribe"], "only --send, nothing from stdin")
        XCTAssertEqual(record.pings.count, 0)
    }

    func testReceiveOnlyWithACountFromCron() throws {
        let server = try startFrames(["--send-text", "one", "--send-text", "two", "--send-text", "three"])
        let result = try runWspipe(["--receive-only", "-n", "2", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, "one\ntwo\n")
        XCTAssertEqual(try framesRecord(server).close?.code, 1000)
    }

    func testSendOnlyWritesNothingAndEndsAfterEndOfInput() throws {
        let server = try startFrames(["--echo", "--send-text", "greeting"])
        for options in [[], ["--jsonl"]] {
            let input = options.isEmpty ? "a\nb\n" : "{\"type\":\"text\",\"data\":\"a\"}\n{\"type\":\"text\",\"data\":\"b\"}\n"
            let result = try runWspipe(["--send-only"] + options + [url(server)], stdin: .bytes(Array(input.utf8)), timeout: 10)
            assertExit(result, 0)
            XCTAssertEqual(result.stdout, [], "nothing on stdout, not even the --jsonl Close line: \(result)")
            XCTAssertLessThan(result.elapsed, 3)
        }
        XCTAssertEqual(try framesRecord(server, 1).texts, ["a", "b"])
        XCTAssertEqual(try framesRecord(server, 2).texts, ["a", "b"])
        XCTAssertEqual(try framesRecord(server, 2).close?.code, 1000)
    }

    func testSendOnlyFromAStreamingCommand() throws {
        // Like `tail -F log | wspipe --send-only`: lines arrive over time, then EOF.
        let server = try startFrames()
        let child = try spawnWspipe(["--send-only", url(server)], stdin: .pipe)
        for index in 1...5 {
            child.writeStdin("log line \(index)\n")
            usleep(100_000)
        }
        child.closeStdin()
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, [])
        XCTAssertEqual(try framesRecord(server).texts, (1...5).map { "log line \($0)" })
    }

    // MARK: - --stats and -v

    func testStatsLineFieldsMatchTheSession() throws {
        let server = try startFrames(["--echo"])
        let child = try spawnWspipe(["--stats", "--ping-interval", "0.2", "-q", url(server)], stdin: .pipe)
        child.writeStdin("hello\nworld!\n")
        _ = waitForStdout(child, contains: "world!\n")
        usleep(600_000)  // a few pings and pongs
        child.closeStdin()
        let result = finish(child)
        assertExit(result, 0)
        assertStdout(result, "hello\nworld!\n")
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "only the stats line with -q: \(result)")
        let summary = stats(result)
        let sent = summary["sent"] as? [String: Any]
        let received = summary["received"] as? [String: Any]
        XCTAssertEqual(sent?["messages"] as? Int, 2)
        XCTAssertEqual(sent?["bytes"] as? Int, 11)
        XCTAssertEqual(received?["messages"] as? Int, 2)
        XCTAssertEqual(received?["bytes"] as? Int, 11)
        let duration = summary["duration_s"] as? Double ?? -1
        XCTAssertGreaterThan(duration, 0.5)
        XCTAssertLessThanOrEqual(duration, result.elapsed + 0.01)
        XCTAssertEqual((summary["close_sent"] as? [String: Any])?["code"] as? Int, 1000)
        XCTAssertEqual((summary["close_sent"] as? [String: Any])?["reason"] as? String, "")
        XCTAssertEqual((summary["close_received"] as? [String: Any])?["code"] as? Int, 1000)
        let rtt = summary["ping_rtt_ms"] as? Double
        XCTAssertNotNil(rtt, "pings were answered: \(result.stderr)")
        XCTAssertTrue((0..<1000).contains(rtt ?? -1))
        XCTAssertEqual(summary["delivery_confirmed"] as? Bool, true, "the end-of-input ping was answered")
        XCTAssertEqual(summary["exit"] as? Int, 0)
        XCTAssertEqual(Set(summary.keys), ["sent", "received", "duration_s", "close_sent", "close_received", "ping_rtt_ms",
                                           "delivery_confirmed", "compression", "exit"])
    }

    func testStatsAfterFailuresAndTimeouts() throws {
        // Refused connection: exit 3, no Close either way.
        let closed = try LoopbackSocket(listening: false)
        let refused = try runWspipe(["--stats", "ws://127.0.0.1:\(closed.port)/"], stdin: .null)
        assertExit(refused, 3)
        let first = stats(refused)
        XCTAssertEqual(first["exit"] as? Int, 3)
        XCTAssertTrue(first["close_sent"] is NSNull)
        XCTAssertTrue(first["close_received"] is NSNull)
        XCTAssertTrue(first["ping_rtt_ms"] is NSNull)

        // The server closes with 4000: exit 8, its code and reason in close_received.
        let server = try startFrames(["--send-text", "x", "--close-code", "4000", "--close-reason", "bad \"one\""])
        let closedByPeer = finish(try spawnWspipe(["--stats", url(server)], stdin: .pipe))
        assertExit(closedByPeer, 8)
        let second = stats(closedByPeer)
        XCTAssertEqual(second["exit"] as? Int, 8)
        XCTAssertEqual((second["close_received"] as? [String: Any])?["code"] as? Int, 4000)
        XCTAssertEqual((second["close_received"] as? [String: Any])?["reason"] as? String, "bad \"one\"")
        XCTAssertEqual((second["received"] as? [String: Any])?["messages"] as? Int, 1)

        // Usage errors print no stats.
        let usage = try runWspipe(["--stats", "--timestamps", "ws://127.0.0.1:9/"], stdin: .null)
        assertExit(usage, 2)
        XCTAssertFalse(usage.stderr.contains("{"), "\(usage)")
    }

    func testVerboseLinesArePrefixedOneEventPerLine() throws {
        let server = try startFrames(["--echo"])
        let input = "{\"type\":\"text\",\"data\":\"a\"}\n{\"type\":\"ping\",\"data\":\"p\"}\n{\"type\":\"close\",\"code\":1000}\n"
        let result = try runWspipe(["-v", "--stats", "--jsonl", url(server)], stdin: .bytes(Array(input.utf8)))
        assertExit(result, 0)
        let stderrLines = result.stderr.split(separator: "\n").map(String.init)
        XCTAssertTrue(stderrLines.last?.hasPrefix("{\"sent\":") ?? false, "--stats comes last: \(result)")
        for line in stderrLines.dropLast() {
            XCTAssertTrue(["wspipe: > ", "wspipe: < ", "wspipe: * ", "wspipe: warning: "].contains { line.hasPrefix($0) },
                          "unexpected stderr line: \(String(reflecting: line))")
        }
        for event in ["wspipe: * connected: ws://", "wspipe: * sending ping (1 bytes) from stdin", "wspipe: * close requested on stdin",
                      "wspipe: * sending Close 1000 (normal closure)", "wspipe: * received Close 1000 (normal closure)",
                      "wspipe: > GET / HTTP/1.1", "wspipe: < HTTP/1.1 101 Switching Protocols"] {
            XCTAssertTrue(stderrLines.contains { $0.hasPrefix(event) }, "no line starting \(String(reflecting: event)): \(result)")
        }

        // The events of counts and timers.
        let counted = try startFrames(["--send-text", "1", "--send-text", "2"])
        let n = try runWspipe(["-v", "-n", "1", url(counted)], stdin: .null)
        assertExit(n, 0)
        XCTAssertTrue(n.stderr.contains("wspipe: * received 1 message (-n); closing\n"), "\(n)")
        let timed = finish(try spawnWspipe(["-v", "--timeout", "0.3", url(counted)], stdin: .pipe))
        assertExit(timed, 124)
        assertStderr(timed, contains: "wspipe: * --timeout of 0.3 s reached; closing\n")
        let idle = finish(try spawnWspipe(["-v", "--idle-timeout", "0.3", url(counted)], stdin: .pipe))
        assertExit(idle, 0)
        assertStderr(idle, contains: "wspipe: * no message for 0.3 s (--idle-timeout); closing\n")
    }

    // Regression test (fixed): the -v line for -n counted every message of the last read.
    func testMaxMessagesVerboseLineNamesTheCount() throws {
        let server = try startFrames(["--send-text", "1", "--send-text", "2", "--send-text", "3"])
        let result = try runWspipe(["-v", "-n", "1", url(server)], stdin: .null)
        assertExit(result, 0)
        assertStdout(result, "1\n")
        assertStderr(result, contains: "wspipe: * received 1 message (-n); closing\n")
    }

    // MARK: - Refused combinations

    func testContradictoryOptionsAreRefusedWithStatus2() throws {
        let refused: [[String]] = [
            ["--jsonl", "-b"], ["--jsonl", "-0"], ["--jsonl", "--base64"], ["--jsonl", "--whole-input"],
            ["--timestamps"], ["--whole-input", "--base64"], ["-1", "-n", "2"], ["-n", "2", "--one-message"],
            ["--receive-only", "--send-only"], ["--linger", "1", "--no-close"], ["--linger", "1", "-n", "1"],
            ["--linger", "1", "-1"], ["--linger", "1", "--receive-only"], ["--whole-input", "--receive-only"],
            ["-0", "-b"],
            // Bad values.
            ["-n", "0"], ["-n", "-3"], ["-n", "x"], ["--max-messages", "1.5"], ["--timeout", "0"], ["--timeout", "-1"],
            ["--idle-timeout", "soon"], ["--linger", "0"], ["--send"], ["-n"],
        ]
        for options in refused {
            let result = try runWspipe(options + ["ws://127.0.0.1:9/"], stdin: .null)
            XCTAssertEqual(result.termination, .exited(2), "\(options) should be a usage error: \(result)")
            XCTAssertEqual(result.stdout, [], "\(options)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "\(options): one line: \(result.stderr)")
            XCTAssertTrue(result.stderr.hasPrefix("wspipe: "), "\(options): \(result.stderr)")
        }
        // The message says what cannot go with what.
        let jsonlBinary = try runWspipe(["--jsonl", "--binary", "ws://127.0.0.1:9/"], stdin: .null)
        assertStderr(jsonlBinary, contains: "--jsonl cannot be combined with --binary")
        // Combinations that are fine are not refused (the session itself fails: nothing listens).
        let closed = try LoopbackSocket(listening: false)
        for options in [["-b", "--base64", "-0"], ["-1", "--receive-only"], ["--send-only", "--no-close"],
                        ["--jsonl", "--timestamps", "-n", "1"], ["-b", "--whole-input", "-1"]] {
            let result = try runWspipe(options + ["ws://127.0.0.1:\(closed.port)/"], stdin: .null)
            XCTAssertEqual(result.termination, .exited(3), "\(options) is allowed: \(result)")
        }
    }
}
