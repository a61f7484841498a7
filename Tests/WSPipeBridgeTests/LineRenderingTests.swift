import XCTest
@testable import WSPipeBridge

final class LineRenderingTests: XCTestCase {
    private func render(_ line: String, prompt: String = "> ", cursor: Int? = nil, columns: Int) -> LineRendering {
        let characters = Array(line)
        return LineRendering(prompt: prompt, line: characters, cursor: cursor ?? characters.count, columns: columns)
    }

    private func assertRowsFit(_ rendering: LineRendering, _ columns: Int, file: StaticString = #filePath, line: UInt = #line) {
        for row in rendering.rows {
            XCTAssertLessThanOrEqual(LineRendering.cells(row), columns, "row \(row)", file: file, line: line)
        }
        XCTAssertLessThan(rendering.cursorColumn, columns, file: file, line: line)
        XCTAssertLessThan(rendering.cursorRow, rendering.rows.count, file: file, line: line)
    }

    func testCellWidths() {
        let widths: [(Character, Int)] = [
            ("a", 1), ("é", 1), ("e\u{301}", 1), ("日", 2), ("한", 2), ("\u{1100}\u{1161}\u{11A8}", 2), ("ｱ", 1), ("！", 2),
            ("\u{3000}", 2), ("😀", 2), ("👍🏽", 4), ("🇫🇷", 4), ("👨‍👩‍👧", 6), ("⌚", 2), ("☺", 1), ("☺\u{FE0F}", 1),
            ("\u{20000}", 2), ("\u{1FAE8}", 2), ("Ω", 1), ("\u{A0}", 1), ("a\u{200D}", 1),
        ]
        for (character, width) in widths {
            XCTAssertEqual(CellWidth.of(character), width, "\(character.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        let scalars: [(Unicode.Scalar, Int)] = [("\u{301}", 0), ("\u{200D}", 0), ("\u{200B}", 0), ("\u{FEFF}", 0), ("\u{1160}", 0),
                                                ("\u{20DD}", 0), ("\u{FE0F}", 0), ("\u{E0100}", 0), ("\u{FFFD}", 1), ("\u{10FFFF}", 1)]
        for (scalar, width) in scalars { XCTAssertEqual(CellWidth.of(scalar), width, String(scalar.value, radix: 16)) }
    }

    func testShortLineAndCursor() {
        XCTAssertEqual(render("hello", columns: 80), LineRendering(rows: ["> hello"], cursorRow: 0, cursorColumn: 7))
        XCTAssertEqual(render("hello", cursor: 0, columns: 80), LineRendering(rows: ["> hello"], cursorRow: 0, cursorColumn: 2))
        XCTAssertEqual(render("", columns: 80), LineRendering(rows: ["> "], cursorRow: 0, cursorColumn: 2))
    }

    func testCJKWrapsWithoutSplittingAWideCharacter() {
        let line = "日本語のテキスト"
        XCTAssertEqual(render(line, columns: 10), LineRendering(rows: ["> 日本語の", "テキスト"], cursorRow: 1, cursorColumn: 8))
        // 2 + 2 + 2 cells leave 1 of 7: the third character starts the next row.
        let odd = render("日本語", columns: 7)
        XCTAssertEqual(odd.rows, ["> 日本", "語"])
        XCTAssertEqual(render("日本語", cursor: 2, columns: 7).cursorRow, 1, "the cursor on a moved character is on its new row")
        XCTAssertEqual(render("日本語", cursor: 2, columns: 7).cursorColumn, 0)
        assertRowsFit(odd, 7)
        for columns in 1...12 { assertRowsFit(render(line + "a日", columns: columns), columns) }
        XCTAssertEqual(render("日", columns: 1).rows, [">", " ", "?", ""], "a 1-column screen shows a wide character as ?")
    }

    func testEmojiTakeTwoCells() {
        // Cells summed by code point, as pyte counts them: the flag is 2 + 2, the family 2 + 0 + 2 + 0 + 2.
        let rendering = render("👍🇫🇷👨‍👩‍👧x", columns: 8)
        XCTAssertEqual(rendering.rows, ["> 👍🇫🇷", "👨‍👩‍👧x"])
        XCTAssertEqual(rendering.cursorRow, 1)
        XCTAssertEqual(rendering.cursorColumn, 7)
        XCTAssertEqual(render("👍🏽", columns: 5).rows, ["> ", "👍🏽"], "a cluster is never split across rows")
        XCTAssertEqual(render("👍🇫🇷👨‍👩‍👧x", cursor: 2, columns: 80).cursorColumn, 8)
    }

    func testA300ColumnLineIn80Columns() {
        let line = String(repeating: "0123456789", count: 30)
        let end = render(line, columns: 80)
        XCTAssertEqual(end.rows.map { $0.count }, [80, 80, 80, 62])
        XCTAssertEqual(end.rows[0], "> " + String(line.prefix(78)))
        XCTAssertEqual(end.rows.joined(), "> " + line)
        XCTAssertEqual([end.cursorRow, end.cursorColumn], [3, 62])
        let middle = render(line, cursor: 200, columns: 80)
        XCTAssertEqual([middle.cursorRow, middle.cursorColumn], [2, 42])
        let home = render(line, cursor: 0, columns: 80)
        XCTAssertEqual([home.cursorRow, home.cursorColumn], [0, 2])
    }

    func testAFullLastRowGetsAnEmptyRowForTheCursor() {
        let full = render(String(repeating: "x", count: 78), columns: 80)
        XCTAssertEqual(full.rows.count, 2)
        XCTAssertEqual(full.rows[1], "")
        XCTAssertEqual([full.cursorRow, full.cursorColumn], [1, 0])
        let notAtEnd = render(String(repeating: "x", count: 78), cursor: 5, columns: 80)
        XCTAssertEqual(notAtEnd.rows.count, 1)
    }

    func testControlsAndBidiShowEscapedAndMarksGetACell() {
        let rendering = render("a\u{1B}]0;t\u{7}\u{202E}b", columns: 80)
        XCTAssertEqual(rendering.rows, ["> a\\x1B]0;t\\x07\\u{202E}b"])
        let wrapped = render("\u{1B}", columns: 4)
        XCTAssertEqual(wrapped.rows, ["> \\x", "1B"], "an escape's cells wrap like text")
        XCTAssertEqual(render("\u{1B}x", cursor: 1, columns: 4).cursorRow, 1)
        XCTAssertEqual(render("\u{301}", columns: 80).rows, ["> \u{25CC}\u{301}"], "a mark with no base sits on a dotted circle")
        XCTAssertEqual(render("x", prompt: "\u{1B}[31m> ", columns: 80).rows, ["\\x1B[31m> x"], "the prompt is text too")
    }

    func testTerminalTextAndDiagnostics() {
        XCTAssertEqual(TerminalText.safe("a\u{202E}b\u{2066}c\u{1B}d\te"), "a\\u{202E}b\\u{2066}c\\x1Bd\te")
        XCTAssertEqual(Diagnostics.terminalSafe("evil\u{202E}txt.exe"), "evil\\u{202E}txt.exe", "diagnostics show bidi overrides too")
        XCTAssertEqual(TerminalText.safe("plain \u{200F}rtl"), "plain \u{200F}rtl", "a mark is no override")
    }

    /// A line taller than the screen is shown a screenful at a time, around the cursor; the
    /// window moves only as far as the cursor needs.
    func testATallLineShowsTheWindowWithTheCursor() {
        let long = String(repeating: "a", count: 10 * 10 - 2)
        let end = render(long, columns: 10)  // "> " and 98: 10 full rows, the cursor on an 11th
        XCTAssertEqual(end.rows.count, 11)
        let (shown, start) = end.window(rows: 4, from: 0)
        XCTAssertEqual(start, 7)
        XCTAssertEqual(shown.rows, Array(end.rows[7...]))
        XCTAssertEqual(shown.cursorRow, 3)
        XCTAssertEqual(shown.cursorColumn, 0)
        let home = render(long, cursor: 0, columns: 10)
        XCTAssertEqual(home.window(rows: 4, from: 7).start, 0, "Home: the window goes up to the prompt")
        XCTAssertEqual(home.window(rows: 4, from: 7).rendering.rows.first, "> aaaaaaaa")
        let middle = render(long, cursor: 48, columns: 10)  // row 5
        XCTAssertEqual(middle.window(rows: 4, from: 3).start, 3, "the cursor within the window: it stays")
        XCTAssertEqual(middle.window(rows: 4, from: 7).start, 5)
        XCTAssertEqual(middle.window(rows: 4, from: 0).start, 2)
        let short = render("abc", columns: 10)
        XCTAssertEqual(short.window(rows: 4, from: 5).start, 0, "a line that fits is shown whole")
        XCTAssertEqual(short.window(rows: 4, from: 5).rendering, short)
        XCTAssertEqual(end.window(rows: 0, from: 0).rendering.rows.count, 1, "at least the cursor's row")
    }
}
