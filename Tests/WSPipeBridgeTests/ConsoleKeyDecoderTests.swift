import XCTest
@testable import WSPipeBridge

final class ConsoleKeyDecoderTests: XCTestCase {
    private func decode(_ bytes: [UInt8]) -> [ConsoleKey] {
        var decoder = ConsoleKeyDecoder()
        return decoder.feed(bytes)
    }

    private func decode(_ text: String) -> [ConsoleKey] { decode(Array(text.utf8)) }

    /// `bytes` fed in two reads cut at every point, and one byte at a time, give `expected`.
    private func assertEverySplit(_ bytes: [UInt8], _ expected: [ConsoleKey], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(decode(bytes), expected, "in one read", file: file, line: line)
        for cut in 0...bytes.count {
            var decoder = ConsoleKeyDecoder()
            let keys = decoder.feed(bytes[..<cut]) + decoder.feed(bytes[cut...])
            XCTAssertEqual(ConsoleKey.joiningText(keys), expected, "cut at \(cut)", file: file, line: line)
            XCTAssertFalse(decoder.hasPendingEscape, file: file, line: line)
        }
        var decoder = ConsoleKeyDecoder()
        let keys = bytes.flatMap { decoder.feed([$0]) }
        XCTAssertEqual(ConsoleKey.joiningText(keys), expected, "byte by byte", file: file, line: line)
    }

    func testEscapeSequencesAtEverySplitPoint() {
        let sequences: [(String, ConsoleKey)] = [
            ("\u{1B}[A", .up), ("\u{1B}[B", .down), ("\u{1B}[C", .right), ("\u{1B}[D", .left),
            ("\u{1B}OA", .up), ("\u{1B}OB", .down), ("\u{1B}OC", .right), ("\u{1B}OD", .left),
            ("\u{1B}[H", .home), ("\u{1B}[F", .end), ("\u{1B}OH", .home), ("\u{1B}OF", .end),
            ("\u{1B}[1~", .home), ("\u{1B}[7~", .home), ("\u{1B}[4~", .end), ("\u{1B}[8~", .end),
            ("\u{1B}[3~", .delete), ("\u{1B}[1;5C", .wordRight), ("\u{1B}[1;5D", .wordLeft),
            ("\u{1B}[1;3C", .wordRight), ("\u{1B}[1;3D", .wordLeft), ("\u{1B}[1;2C", .right), ("\u{1B}b", .wordLeft),
            ("\u{1B}f", .wordRight),
            ("\u{1B}[2~", .unknown), ("\u{1B}[15~", .unknown), ("\u{1B}OP", .unknown), ("\u{1B}[?25h", .unknown),
        ]
        for (sequence, key) in sequences {
            assertEverySplit(Array(("a" + sequence + "b").utf8), [.text("a"), key, .text("b")])
        }
    }

    func testFourByteCharacterAtEverySplitPoint() {
        assertEverySplit(Array("x😀y".utf8), [.text("x😀y")])
        assertEverySplit(Array("日本\u{1B}[D".utf8), [.text("日本"), .left])
    }

    func testInvalidUTF8BecomesReplacementCharacters() {
        // A lone continuation byte, a truncated 3-byte character before ASCII, an overlong
        // form, a surrogate: one U+FFFD per maximal subpart, as Swift's decoder does.
        let bytes: [UInt8] = [0x61, 0x80, 0xE2, 0x82, 0x62, 0xC0, 0xAF, 0xED, 0xA0, 0x80, 0x63]
        XCTAssertEqual(decode(bytes), [.text(String(decoding: bytes, as: UTF8.self))])
        XCTAssertEqual(decode(bytes), [.text("a\u{FFFD}\u{FFFD}b\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}c")])
        assertEverySplit(bytes, [.text(String(decoding: bytes, as: UTF8.self))])
    }

    func testControlKeys() {
        XCTAssertEqual(decode([0x0D, 0x0A, 0x0A, 0x09, 0x7F, 0x08, 0x01, 0x03, 0x04, 0x12, 0x1A, 0x00, 0x1F]),
                       [.enter, .enter, .tab, .backspace, .backspace, .control(1), .control(3), .control(4), .control(18),
                        .control(26), .control(0), .control(31)])
        var decoder = ConsoleKeyDecoder()
        XCTAssertEqual(decoder.feed([0x0D]) + decoder.feed([0x0A]), [.enter], "CR LF cut by a read is one Enter")
        XCTAssertEqual(decode("\u{85}a\u{9B}"), [.unknown, .text("a"), .unknown], "C1 controls never come as text")
    }

    func testLoneEscapeWaitsForFlush() {
        var decoder = ConsoleKeyDecoder()
        XCTAssertEqual(decoder.feed([0x1B]), [])
        XCTAssertTrue(decoder.hasPendingEscape)
        XCTAssertEqual(decoder.flushPendingEscape(), [.escape])
        XCTAssertFalse(decoder.hasPendingEscape)
        XCTAssertEqual(decoder.feed(Array("[A".utf8)), [.text("[A")], "after the flush, the rest is typed text")
        XCTAssertEqual(decoder.flushPendingEscape(), [])

        // An unfinished sequence at the idle time: Esc, then what followed it as typed.
        XCTAssertEqual(decoder.feed(Array("\u{1B}[1".utf8)), [])
        XCTAssertEqual(decoder.flushPendingEscape(), [.escape, .text("[1")])
        XCTAssertEqual(decoder.feed(Array("\u{1B}\u{1B}".utf8)), [.escape])
        XCTAssertEqual(decoder.flushPendingEscape(), [.escape])
        XCTAssertEqual(decode("\u{1B}x"), [.escape, .text("x")], "Alt-x")
    }

    func testMalformedAndOverlongSequencesDoNotWait() {
        XCTAssertEqual(decode("\u{1B}[1\u{01}a"), [.unknown, .control(1), .text("a")])
        let long = "\u{1B}[" + String(repeating: "1", count: 100) + "A"
        var decoder = ConsoleKeyDecoder()
        let keys = decoder.feed(Array(long.utf8))
        XCTAssertEqual(keys.first, .unknown)
        XCTAssertFalse(decoder.hasPendingEscape, "an overlong sequence is not kept")
    }

    func testBracketedPaste() {
        let paste = Array("\u{1B}[200~one\r\ntwo\nthree\u{1B}[201~x".utf8)
        assertEverySplit(paste, [.paste(["one", "two", "three"]), .text("x")])
        assertEverySplit(Array("\u{1B}[200~a\u{1B}[Db\n\u{1B}[201~".utf8), [.paste(["a\u{1B}[Db", ""])])
        XCTAssertEqual(decode("\u{1B}[200~\u{1B}[201~"), [.paste([""])])
        XCTAssertEqual(decode("\u{1B}[201~a"), [.text("a")], "a stray paste end is dropped")
        var decoder = ConsoleKeyDecoder()
        XCTAssertEqual(decoder.feed(Array("\u{1B}[200~\u{1B}".utf8)), [])
        XCTAssertTrue(decoder.isPasting)
        XCTAssertFalse(decoder.hasPendingEscape, "an ESC inside a paste is no Esc key")
        XCTAssertEqual(decoder.flushPendingEscape(), [])
        XCTAssertEqual(decoder.feed(Array("x\u{1B}[201~".utf8)), [.paste(["\u{1B}x"])])
    }

    func testPasteIsCutAtItsLimit() {
        var decoder = ConsoleKeyDecoder(pasteLimit: 10)
        var keys = decoder.feed(Array("\u{1B}[200~".utf8))
        for _ in 0..<1000 { keys += decoder.feed([UInt8](repeating: 0x61, count: 1000)) }
        keys += decoder.feed(Array("\u{1B}[201~b".utf8))
        XCTAssertEqual(keys, [.paste(["aaaaaaaaaa"]), .text("b")])
        XCTAssertEqual(ConsoleKeyDecoder.defaultPasteLimit, 1 << 20)
    }
}
