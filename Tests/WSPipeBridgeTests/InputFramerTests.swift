// InputFramer without sockets: stdin bytes in reads of any size become the same messages,
// a bad line is never sent in part, and what follows a -1 message or a --jsonl close stays
// for `resume` (the one-client server's next client).
import EngineTestSupport
import XCTest
import WebSocketCore
import WebSocketEngine
@testable import WSPipeBridge

/// A read of stdin holding `bytes`.
private func chunk(_ bytes: some Collection<UInt8>) -> ByteBuffer {
    let buffer = ByteBuffer(capacity: max(bytes.count, 1))
    let array = Array(bytes)
    array.withUnsafeBytes { if let base = $0.baseAddress { buffer.base.copyMemory(from: base, byteCount: array.count) } }
    buffer.count = array.count
    return buffer
}

private func chunk(_ text: String) -> ByteBuffer { chunk(Array(text.utf8)) }

final class InputFramerTests: XCTestCase {
    /// Runs `input` through a fresh framer in the reads `cuts` make (offsets, ascending),
    /// then ends the input. Returns the sink, the framer and the first error.
    private func frame(_ input: [UInt8], mode: InputFramer.Mode, cuts: [Int], limit: Int? = nil)
        -> (sink: RecordingSink, framer: InputFramer, actions: [InputAction], error: InputError?) {
        let sink = RecordingSink()
        var framer = InputFramer(mode: mode, messageLimit: limit)
        var actions: [InputAction] = []
        var start = 0
        do throws(InputError) {
            for end in cuts + [input.count] {
                actions += try framer.consume(chunk(input[start..<end]), into: sink)
                start = end
            }
            actions += try framer.finish(into: sink)
        } catch {
            return (sink, framer, actions, error)
        }
        return (sink, framer, actions, nil)
    }

    /// Every way of cutting `input` into three reads (two cut points, empty reads included).
    private func everySplit(of input: [UInt8], _ check: (_ cuts: [Int]) throws -> Void) rethrows {
        for first in 0...input.count {
            for second in first...input.count { try check([first, second]) }
        }
    }

    /// Every way of cutting `input` into two reads.
    private func everyCut(of input: [UInt8], _ check: (_ cuts: [Int]) -> Void) {
        for cut in 0...input.count { check([cut]) }
    }

    // MARK: text lines

    func testLinesAreTheSameMessagesAtEverySplitPoint() {
        // A multi-byte character, an empty line, and a last line without a newline.
        let input = Array("hello\nwörld €\n\nlast".utf8)
        everySplit(of: input) { cuts in
            let result = frame(input, mode: .lines(separator: 0x0A), cuts: cuts)
            XCTAssertNil(result.error, "cuts \(cuts)")
            XCTAssertEqual(result.sink.texts, ["hello", "wörld €", "", "last"], "cuts \(cuts)")
            XCTAssertEqual(result.sink.frames.map(\.opcode), [.text, .text, .text, .text], "cuts \(cuts)")
            XCTAssertTrue(result.sink.frames.allSatisfy(\.fin), "cuts \(cuts)")
            XCTAssertEqual(result.framer.messages, 4)
            XCTAssertEqual(result.framer.bytes, UInt64(input.count - 3), "payload bytes, without the separators")
            XCTAssertEqual(result.framer.lines, 4)
            XCTAssertEqual(result.actions, [])
        }
    }

    func testAFinalNewlineAddsNoEmptyMessage() {
        let result = frame(Array("a\nb\n".utf8), mode: .lines(separator: 0x0A), cuts: [])
        XCTAssertEqual(result.sink.texts, ["a", "b"])
    }

    func testACarriageReturnBeforeTheNewlineIsPartOfTheMessage() {
        let input = Array("one\r\ntwo\r\n\r\n".utf8)
        everySplit(of: input) { cuts in
            XCTAssertEqual(frame(input, mode: .lines(separator: 0x0A), cuts: cuts).sink.texts, ["one\r", "two\r", "\r"], "cuts \(cuts)")
        }
    }

    func testNULSeparatedLinesKeepTheirNewlines() {
        let input = Array("a\nb\0c\0".utf8)
        everySplit(of: input) { cuts in
            XCTAssertEqual(frame(input, mode: .lines(separator: 0), cuts: cuts).sink.texts, ["a\nb", "c"], "cuts \(cuts)")
        }
    }

    func testALineInOneReadIsSentFromThatReadAndASplitLineFromItsOwnCopy() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .lines(separator: 0x0A))
        let first = chunk("whole\nhal")
        let second = chunk("f\n")
        XCTAssertNoThrow(try framer.consume(first, into: sink))
        XCTAssertNoThrow(try framer.consume(second, into: sink))
        XCTAssertEqual(sink.texts, ["whole", "half"])
        XCTAssertTrue(sink.owners[0] === first, "zero-copy: the message points into the read")
        XCTAssertNotNil(sink.owners[1])
        XCTAssertFalse(sink.owners[1] === first || sink.owners[1] === second, "a line across reads is carried in a buffer of its own")
    }

    func testALineLongerThanTheQueueArenaArrivesWhole() {
        // No size limit on what is sent: a 300 KiB line in 7 KiB reads is one message.
        var input = (0..<300 * 1024).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        input.append(0x0A)
        let cuts = Array(stride(from: 7 * 1024, to: input.count, by: 7 * 1024))
        let result = frame(input, mode: .lines(separator: 0x0A), cuts: cuts)
        XCTAssertNil(result.error)
        XCTAssertEqual(result.sink.frames.count, 1)
        XCTAssertEqual(result.sink.frames.first?.payload, Array(input.dropLast()))
    }

    func testAnInvalidLineIsNotSentAndIsNamedByLineAndColumnAtEverySplitPoint() {
        let input: [UInt8] = Array("ok\nb".utf8) + [0xFF] + Array("ad\nnext\n".utf8)
        everySplit(of: input) { cuts in
            let result = frame(input, mode: .lines(separator: 0x0A), cuts: cuts)
            XCTAssertEqual(result.error, .invalidUTF8(line: 2, column: 2, byte: 0xFF), "cuts \(cuts)")
            XCTAssertEqual(result.sink.texts, ["ok"], "only the lines before the bad one, cuts \(cuts)")
        }
    }

    func testALineEndingInsideACharacterIsNotSent() {
        let input: [UInt8] = Array("ok\nab".utf8) + [0xC3] + Array("\n".utf8)
        everySplit(of: input) { cuts in
            let result = frame(input, mode: .lines(separator: 0x0A), cuts: cuts)
            XCTAssertEqual(result.error, .invalidUTF8(line: 2, column: 3, byte: nil), "cuts \(cuts)")
            XCTAssertEqual(result.sink.texts, ["ok"], "cuts \(cuts)")
        }
        // The same at the end of input, without a newline.
        let last = frame(Array("ab".utf8) + [0xE2, 0x82], mode: .lines(separator: 0x0A), cuts: [1])
        XCTAssertEqual(last.error, .invalidUTF8(line: 1, column: 4, byte: nil))
        XCTAssertEqual(last.sink.frames, [])
    }

    // MARK: --binary

    func testBinaryChunksAreAtMostTheChunkSizeAndNeverSpanReads() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .chunks(size: 4))
        XCTAssertNoThrow(try framer.consume(chunk(Array(0..<10 as Range<UInt8>)), into: sink))
        XCTAssertNoThrow(try framer.consume(chunk([10, 11, 12]), into: sink))
        XCTAssertEqual(try framer.finish(into: sink), [])
        XCTAssertEqual(sink.frames, [
            .init(opcode: .binary, fin: true, payload: [0, 1, 2, 3]),
            .init(opcode: .binary, fin: true, payload: [4, 5, 6, 7]),
            .init(opcode: .binary, fin: true, payload: [8, 9]),
            .init(opcode: .binary, fin: true, payload: [10, 11, 12]),
        ])
        XCTAssertEqual(framer.messages, 4)
        XCTAssertEqual(framer.bytes, 13)
    }

    func testBase64LinesAreDecodedAtEverySplitPointAndABadOneIsNamed() {
        let input = Array("AP/+gA==\n\naGk=\n".utf8)
        everySplit(of: input) { cuts in
            let result = frame(input, mode: .base64Lines(separator: 0x0A), cuts: cuts)
            XCTAssertNil(result.error, "cuts \(cuts)")
            XCTAssertEqual(result.sink.frames, [.init(opcode: .binary, fin: true, payload: [0x00, 0xFF, 0xFE, 0x80]),
                                                .init(opcode: .binary, fin: true, payload: []),
                                                .init(opcode: .binary, fin: true, payload: Array("hi".utf8))], "cuts \(cuts)")
        }
        let bad = frame(Array("aGk=\nnot base64!\naGk=\n".utf8), mode: .base64Lines(separator: 0x0A), cuts: [7])
        XCTAssertEqual(bad.error, .invalidBase64(line: 2))
        XCTAssertEqual(bad.sink.frames.count, 1)
    }

    // MARK: --whole-input

    func testWholeBinaryInputIsOneMessageInFragments() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .whole(.binary, fragmentSize: 3))
        XCTAssertNoThrow(try framer.consume(chunk([1, 2, 3, 4]), into: sink))
        XCTAssertNoThrow(try framer.consume(chunk([5]), into: sink))
        XCTAssertNoThrow(try framer.finish(into: sink))
        XCTAssertEqual(sink.frames, [
            .init(opcode: .binary, fin: false, payload: [1, 2, 3]),
            .init(opcode: .continuation, fin: false, payload: [4]),
            .init(opcode: .continuation, fin: false, payload: [5]),
            .init(opcode: .continuation, fin: true, payload: []),
        ])
        XCTAssertEqual(framer.messages, 1)
        XCTAssertEqual(framer.bytes, 5)

        let empty = RecordingSink()
        var nothing = InputFramer(mode: .whole(.binary, fragmentSize: 3))
        XCTAssertNoThrow(try nothing.finish(into: empty))
        XCTAssertEqual(empty.frames, [.init(opcode: .binary, fin: true, payload: [])], "empty input: one empty message")
    }

    func testWholeTextInputIsHeldUntilTheEndAndSentInFragments() throws {
        let input = Array("héllo wörld".utf8)
        try everySplit(of: input) { cuts in
            let sink = RecordingSink()
            var framer = InputFramer(mode: .whole(.text, fragmentSize: 5))
            var start = 0
            for end in cuts + [input.count] {
                XCTAssertEqual(try framer.consume(chunk(input[start..<end]), into: sink), [])
                start = end
            }
            XCTAssertEqual(sink.frames, [], "nothing before the end: the whole must be UTF-8 first, cuts \(cuts)")
            XCTAssertEqual(try framer.finish(into: sink), [])
            XCTAssertEqual(sink.frames.map(\.opcode), [.text, .continuation, .continuation], "cuts \(cuts)")
            XCTAssertEqual(sink.frames.map(\.fin), [false, false, true], "cuts \(cuts)")
            XCTAssertEqual(sink.frames.flatMap(\.payload), input, "cuts \(cuts)")
            XCTAssertEqual(framer.messages, 1)
            XCTAssertEqual(framer.bytes, UInt64(input.count))
        }
        let empty = RecordingSink()
        var nothing = InputFramer(mode: .whole(.text, fragmentSize: 5))
        XCTAssertNoThrow(try nothing.finish(into: empty))
        XCTAssertEqual(empty.frames, [.init(opcode: .text, fin: true, payload: [])])
    }

    func testWholeTextInputThatIsNotUTF8IsNotSent() {
        let input: [UInt8] = Array("abc".utf8) + [0xFF] + Array("def".utf8)
        everySplit(of: input) { cuts in
            let result = frame(input, mode: .whole(.text, fragmentSize: 5), cuts: cuts)
            XCTAssertEqual(result.error, .invalidUTF8Input(number: 4), "byte 4 counted across reads, cuts \(cuts)")
            XCTAssertEqual(result.sink.frames, [], "cuts \(cuts)")
        }
        let cut = frame(Array("abc".utf8) + [0xC3], mode: .whole(.text, fragmentSize: 5), cuts: [2])
        XCTAssertEqual(cut.error, .invalidUTF8Input(number: nil), "ends inside a character")
        XCTAssertEqual(cut.sink.frames, [])
    }

    // MARK: --jsonl

    func testJSONLinesBecomeMessagesPingsAndACloseAtEveryCut() {
        let input = Array(("{\"type\":\"text\",\"data\":\"line one\\nline two\"}\r\n"
                           + " {\"type\":\"binary\",\"base64\":\"AP/+gA==\",\"ts\":1.5} \n"
                           + "{\"type\":\"connected\",\"url\":\"ws://h/\"}\n"
                           + "{\"type\":\"bus_lost\",\"ts\":1764633600.125,\"reason\":\"x\",\"unconfirmed\":0}\n"
                           + "{\"type\":\"ping\",\"data\":\"p\"}\n"
                           + "{\"type\":\"binary\",\"data\":\"as text\"}\n"
                           + "{\"type\":\"close\",\"code\":4000,\"reason\":\"done\"}\n").utf8)
        everyCut(of: input) { cuts in
            let result = frame(input, mode: .jsonLines, cuts: cuts)
            XCTAssertNil(result.error, "cuts \(cuts)")
            XCTAssertEqual(result.sink.frames, [.init(opcode: .text, fin: true, payload: Array("line one\nline two".utf8)),
                                                .init(opcode: .binary, fin: true, payload: [0x00, 0xFF, 0xFE, 0x80]),
                                                .init(opcode: .binary, fin: true, payload: Array("as text".utf8))], "cuts \(cuts)")
            XCTAssertEqual(result.actions, [.ping(Array("p".utf8)), .close(ClosePayload(code: CloseCode(4000), reason: Array("done".utf8)))],
                           "cuts \(cuts)")
            XCTAssertEqual(result.framer.messages, 3, "pings, closes and connection events are not data messages")
            XCTAssertTrue(result.framer.isDone, "a close ends the input")
        }
    }

    func testJSONCloseCodes() {
        func close(_ line: String) -> [InputAction] { frame(Array(line.utf8), mode: .jsonLines, cuts: []).actions }
        XCTAssertEqual(close("{\"type\":\"close\"}\n"), [.close(ClosePayload(code: .normalClosure))])
        XCTAssertEqual(close("{\"type\":\"close\",\"code\":null}\n"), [.close(ClosePayload(code: nil))])
        XCTAssertEqual(close("{\"type\":\"ping\"}\n"), [.ping([])])
    }

    /// (line, why it is refused)
    private let refusedJSONLines: [(String, String)] = [
        ("", "it is empty"),
        ("[1]", "expected an object with a \"type\""),
        ("{\"data\":\"x\"}", "expected an object with a \"type\""),
        ("{\"type\":\"pong\"}", "unknown type \"pong\" (text, binary, ping or close)"),
        ("{\"type\":\"text\"}", "a text message needs a \"data\" string"),
        ("{\"type\":\"text\",\"base64\":\"aGk=\"}", "a text message needs a \"data\" string"),
        ("{\"type\":\"binary\"}", "a binary message needs \"data\" or \"base64\""),
        ("{\"type\":\"binary\",\"data\":\"a\",\"base64\":\"aGk=\"}", "give \"data\" or \"base64\", not both"),
        ("{\"type\":\"binary\",\"base64\":\"!!\"}", "\"base64\" is not base64"),
        ("{\"type\":\"text\",\"data\":1}", "\"data\" must be a string"),
        ("{\"type\":\"ping\",\"data\":\"\(String(repeating: "p", count: 126))\"}", "a ping carries at most 125 bytes"),
        ("{\"type\":\"close\",\"code\":1000.5}", "\"code\" must be a close code number"),
        ("{\"type\":\"close\",\"code\":70000}", "\"code\" must be a close code number"),
        ("{\"type\":\"close\",\"code\":null,\"reason\":\"why\"}", "a close with a reason needs a code"),
    ]

    func testARefusedJSONLineIsNamedAndNothingOfItIsSent() {
        for (line, why) in refusedJSONLines {
            let input = Array(("{\"type\":\"text\",\"data\":\"first\"}\n" + line + "\n{\"type\":\"text\",\"data\":\"after\"}\n").utf8)
            let result = frame(input, mode: .jsonLines, cuts: [input.count / 2])
            XCTAssertEqual(result.error, .invalidJSONLine(line: 2, why: why), line)
            XCTAssertEqual(result.sink.texts, ["first"], line)
            XCTAssertEqual(result.actions, [], line)
        }
        let notUTF8 = frame([0x7B, 0xFF, 0x7D, 0x0A], mode: .jsonLines, cuts: [])
        XCTAssertEqual(notUTF8.error, .invalidJSONLine(line: 1, why: "it is not UTF-8"))
    }

    // MARK: the limit (-1) and resume

    func testWhatFollowsTheLimitInItsReadIsKeptForTheNextClient() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .lines(separator: 0x0A), messageLimit: 1)
        XCTAssertEqual(try framer.consume(chunk("a\nb\nc"), into: sink), [.limitReached])
        XCTAssertEqual(sink.texts, ["a"])
        XCTAssertTrue(framer.isDone)
        XCTAssertEqual(try framer.finish(into: sink), [], "once done, the end of input sends nothing")
        XCTAssertEqual(sink.texts, ["a"])

        XCTAssertEqual(try framer.resume(limit: 1, into: sink), [.limitReached], "the next client's one message")
        XCTAssertEqual(sink.texts, ["a", "b"])
        XCTAssertEqual(try framer.resume(limit: 1, into: sink), [], "'c' has no newline yet: it waits for the next read")
        XCTAssertFalse(framer.isDone)
        XCTAssertEqual(try framer.consume(chunk("d\ne\n"), into: sink), [.limitReached])
        XCTAssertEqual(sink.texts, ["a", "b", "cd"])
        XCTAssertEqual(try framer.resume(limit: nil, into: sink), [], "no limit: the rest of the read goes")
        XCTAssertEqual(sink.texts, ["a", "b", "cd", "e"])
        XCTAssertEqual(framer.messages, 4)
        XCTAssertEqual(framer.lines, 4)
    }

    func testTheLimitCountsBinaryChunksAndResumeSendsTheRestOfTheRead() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .chunks(size: 4), messageLimit: 1)
        XCTAssertEqual(try framer.consume(chunk(Array(0..<10 as Range<UInt8>)), into: sink), [.limitReached])
        XCTAssertEqual(sink.frames.map(\.payload), [[0, 1, 2, 3]])
        XCTAssertEqual(try framer.resume(limit: nil, into: sink), [])
        XCTAssertEqual(sink.frames.map(\.payload), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]])
    }

    func testALimitReachedAtTheEndOfAReadKeepsNothing() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .lines(separator: 0x0A), messageLimit: 2)
        XCTAssertEqual(try framer.consume(chunk("a\nb\n"), into: sink), [.limitReached])
        XCTAssertEqual(try framer.resume(limit: 2, into: sink), [], "nothing held")
        XCTAssertEqual(try framer.consume(chunk("c\nd\ne\n"), into: sink), [.limitReached], "the new limit counts from here")
        XCTAssertEqual(sink.texts, ["a", "b", "c", "d"])
    }

    func testWhatFollowsAJSONCloseIsKeptForTheNextClient() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .jsonLines)
        let input = chunk("{\"type\":\"text\",\"data\":\"one\"}\n{\"type\":\"close\",\"code\":1001}\n{\"type\":\"text\",\"data\":\"two\"}\n{\"type\":\"close\"}\n{\"type\":\"text\",\"data\":\"thr")
        XCTAssertEqual(try framer.consume(input, into: sink), [.close(ClosePayload(code: .goingAway))])
        XCTAssertEqual(sink.texts, ["one"])
        XCTAssertTrue(framer.isDone)
        XCTAssertEqual(try framer.resume(limit: nil, into: sink), [.close(ClosePayload(code: .normalClosure))])
        XCTAssertEqual(sink.texts, ["one", "two"])
        XCTAssertEqual(try framer.resume(limit: nil, into: sink), [])
        XCTAssertEqual(try framer.consume(chunk("ee\"}\n"), into: sink), [])
        XCTAssertEqual(sink.texts, ["one", "two", "three"], "a line cut by the close's read is completed by the next read")
    }

    func testErrorsCountLinesAcrossResume() {
        let sink = RecordingSink()
        var framer = InputFramer(mode: .lines(separator: 0x0A), messageLimit: 1)
        XCTAssertEqual(try framer.consume(chunk("a\nb\n"), into: sink), [.limitReached])
        XCTAssertEqual(try framer.resume(limit: 1, into: sink), [.limitReached])
        XCTAssertEqual(try framer.resume(limit: nil, into: sink), [])
        XCTAssertThrowsError(try framer.consume(chunk([0xFF, 0x0A]), into: sink)) { error in
            XCTAssertEqual(error as? InputError, .invalidUTF8(line: 3, column: 1, byte: 0xFF), "line numbers go on across clients")
        }
        XCTAssertEqual(sink.texts, ["a", "b"])
    }
}
