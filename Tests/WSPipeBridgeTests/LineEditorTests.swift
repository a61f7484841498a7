import XCTest
@testable import WSPipeBridge

final class LineEditorTests: XCTestCase {
    private let ctrl: (Character) -> ConsoleKey = { .control(UInt8($0.asciiValue! & 0x1F)) }

    /// An editor after typing `text` (cursor at its end).
    private func editor(_ text: String = "", history: [String] = [], completions: [String] = []) -> LineEditor {
        var editor = LineEditor(history: history, completions: completions)
        if !text.isEmpty { _ = editor.apply(.text(text)) }
        return editor
    }

    private func apply(_ keys: [ConsoleKey], to editor: inout LineEditor) -> [LineEditorAction] {
        keys.map { editor.apply($0) }
    }

    func testTypingAndMovingInsertsAtTheCursor() {
        var e = editor("ac")
        XCTAssertEqual(e.apply(.left), .redraw)
        XCTAssertEqual(e.apply(.text("b")), .redraw)
        XCTAssertEqual(e.line, "abc")
        XCTAssertEqual(e.cursor, 2)
        _ = apply([.home, .text("<"), .end, .text(">")], to: &e)
        XCTAssertEqual(e.line, "<abc>")
        _ = apply([ctrl("a"), ctrl("f"), ctrl("f"), .text("|"), ctrl("e"), ctrl("b"), .text("|")], to: &e)
        XCTAssertEqual(e.line, "<a|bc|>")
        XCTAssertEqual(e.apply(.end), .redraw)
        XCTAssertEqual(e.apply(.right), .bell, "nothing right of the end")
        XCTAssertEqual(e.apply(.end), .none)
        _ = e.apply(.home)
        XCTAssertEqual(e.apply(.left), .bell)
    }

    /// Alt-B typed "b" into the line (ESC was the Esc key, then text); it moves a word back.
    func testAltBAndAltFMoveByWord() {
        var e = editor("one  two three")
        XCTAssertEqual(e.apply(.wordLeft), .redraw)
        XCTAssertEqual(e.cursor, 9)
        _ = apply([.wordLeft, .text("X")], to: &e)
        XCTAssertEqual(e.line, "one  Xtwo three")
        _ = apply([.home, .wordRight, .text("|"), .wordRight, .text("|")], to: &e)
        XCTAssertEqual(e.line, "one|  Xtwo| three")
        _ = e.apply(.end)
        XCTAssertEqual(e.apply(.wordRight), .none, "nothing right of the end")
        var decoder = ConsoleKeyDecoder()
        XCTAssertEqual(decoder.feed(Array("\u{1B}b".utf8)), [.wordLeft], "Alt-B is no 'b'")
    }

    func testTheCursorMovesByGraphemeCluster() {
        var e = editor("e\u{301}👍🏽🇫🇷x")
        XCTAssertEqual(e.cursor, 4)
        _ = apply([.left, .left, .backspace], to: &e)
        XCTAssertEqual(e.line, "e\u{301}🇫🇷x", "one Backspace takes the whole emoji with its modifier")
        _ = apply([.home, .delete], to: &e)
        XCTAssertEqual(e.line, "🇫🇷x")
        // A combining mark typed after its base joins it.
        var mark = editor("e")
        _ = mark.apply(.text("\u{301}"))
        XCTAssertEqual(mark.cursor, 1)
        XCTAssertEqual(mark.line, "é")
    }

    func testBackspaceDeleteAndCtrlD() {
        var e = editor("abcd")
        XCTAssertEqual(e.apply(.backspace), .redraw)
        XCTAssertEqual(e.apply(ctrl("h")), .redraw)
        XCTAssertEqual(e.line, "ab")
        XCTAssertEqual(e.apply(.delete), .bell, "nothing under the cursor")
        XCTAssertEqual(e.apply(ctrl("d")), .bell, "Ctrl-D at the end of a non-empty line deletes nothing")
        _ = e.apply(.home)
        XCTAssertEqual(e.apply(ctrl("d")), .redraw)
        XCTAssertEqual(e.line, "b")
        XCTAssertEqual(e.apply(.delete), .redraw)
        XCTAssertEqual(e.line, "")
        XCTAssertEqual(e.apply(.backspace), .bell)
        XCTAssertEqual(e.apply(ctrl("d")), .endOfInput, "Ctrl-D on an empty line")
    }

    func testCtrlCClearsThenInterrupts() {
        var e = editor("half typed")
        XCTAssertEqual(e.apply(ctrl("c")), .redraw)
        XCTAssertEqual(e.line, "")
        XCTAssertEqual(e.apply(ctrl("c")), .interrupt)
        XCTAssertEqual(e.apply(ctrl("z")), .suspend)
        XCTAssertEqual(e.apply(.escape), .none)
        XCTAssertEqual(e.apply(.unknown), .none)
        XCTAssertEqual(e.apply(ctrl("t")), .bell, "a control key with no binding")
    }

    /// Ctrl-L clears the screen (the console's part); the line and the cursor stay.
    func testCtrlLClearsTheScreenAndKeepsTheLine() {
        var e = editor("half typed")
        _ = e.apply(.left)
        XCTAssertEqual(e.apply(ctrl("l")), .clearScreen)
        XCTAssertEqual(e.line, "half typed")
        XCTAssertEqual(e.cursor, 9)
    }

    func testKillAndYank() {
        var e = editor("send some words")
        _ = apply([.left, .left, .left, .left, .left], to: &e)
        XCTAssertEqual(e.apply(ctrl("k")), .redraw)
        XCTAssertEqual(e.line, "send some ")
        XCTAssertEqual(e.apply(ctrl("k")), .none, "nothing to kill keeps the killed text")
        _ = e.apply(.home)
        XCTAssertEqual(e.apply(ctrl("y")), .redraw)
        XCTAssertEqual(e.line, "wordssend some ")
        XCTAssertEqual(e.cursor, 5)
        _ = e.apply(.end)
        XCTAssertEqual(e.apply(ctrl("w")), .redraw, "Ctrl-W: the blanks, then the word before them")
        XCTAssertEqual(e.line, "wordssend ")
        _ = apply([.left, .left], to: &e)
        XCTAssertEqual(e.apply(ctrl("u")), .redraw)
        XCTAssertEqual(e.line, "d ")
        XCTAssertEqual(e.cursor, 0)
        _ = e.apply(.end)
        _ = e.apply(ctrl("y"))
        XCTAssertEqual(e.line, "d wordssen")
        var empty = editor()
        XCTAssertEqual(empty.apply(ctrl("y")), .bell, "nothing killed yet")
    }

    func testEnterSubmitsAndRemembers() {
        var e = editor("hello")
        XCTAssertEqual(e.apply(.enter), .submit(["hello"]))
        XCTAssertEqual(e.line, "")
        XCTAssertEqual(e.apply(.enter), .submit([""]), "an empty line is submitted too (the face decides)")
        _ = e.apply(.text(" secret"))
        XCTAssertEqual(e.apply(.enter), .submit([" secret"]))
        _ = e.apply(.text("hello"))
        _ = e.apply(.enter)
        let long = String(repeating: "x", count: LineEditor.historyLineLimit + 1)
        _ = e.apply(.text(long))
        XCTAssertEqual(e.apply(.enter), .submit([long]))
        XCTAssertEqual(e.historyEntries, ["hello"], "no empty, space-led, repeated or overlong entry")
    }

    func testHistoryKeepsTheTypedLine() {
        var e = editor("draft", history: ["one", "two"])
        XCTAssertEqual(e.apply(.up), .redraw)
        XCTAssertEqual(e.line, "two")
        XCTAssertEqual(e.apply(ctrl("p")), .redraw)
        XCTAssertEqual(e.line, "one")
        XCTAssertEqual(e.apply(.up), .bell, "no older entry")
        XCTAssertEqual(e.line, "one")
        XCTAssertEqual(e.apply(.down), .redraw)
        XCTAssertEqual(e.apply(ctrl("n")), .redraw)
        XCTAssertEqual(e.line, "draft", "the line being typed comes back")
        XCTAssertEqual(e.apply(.down), .bell)
        _ = apply([.up, .text("!")], to: &e)
        XCTAssertEqual(e.apply(.enter), .submit(["two!"]))
        XCTAssertEqual(e.historyEntries, ["one", "two", "two!"])
        XCTAssertEqual(e.apply(.up), .redraw)
        XCTAssertEqual(e.line, "two!", "after a submit, browsing starts from the newest")
    }

    func testReplaceHistory() {
        var e = editor("typed", history: ["old"])
        _ = e.apply(.up)
        e.replaceHistory(["a", "b"])
        XCTAssertEqual(e.line, "typed")
        _ = e.apply(.up)
        XCTAssertEqual(e.line, "b")
        e.replaceHistory((0..<1500).map(String.init))
        XCTAssertEqual(e.historyEntries.count, LineEditor.historyLimit)
        XCTAssertEqual(e.historyEntries.last, "1499")
    }

    func testReverseSearch() {
        let history = ["/ping", "hello world", "/close 4000", "help me", "last"]
        var e = editor("draft", history: history)
        XCTAssertEqual(e.apply(ctrl("r")), .redraw)
        XCTAssertTrue(e.isSearching)
        XCTAssertEqual(e.render(prompt: "> ", columns: 80).rows, ["(reverse-i-search)`': draft"])
        _ = apply([.text("h"), .text("e")], to: &e)
        XCTAssertEqual(e.render(prompt: "> ", columns: 80).rows, ["(reverse-i-search)`he': help me"])
        XCTAssertEqual(e.apply(ctrl("r")), .redraw, "Ctrl-R again: the next older match")
        let rendering = e.render(prompt: "> ", columns: 80)
        XCTAssertEqual(rendering.rows, ["(reverse-i-search)`he': hello world"])
        XCTAssertEqual(rendering.cursorColumn, "(reverse-i-search)`he': ".count, "the cursor on the match")
        XCTAssertEqual(e.apply(ctrl("r")), .redraw)
        XCTAssertEqual(e.render(prompt: "> ", columns: 80).rows, ["(failed reverse-i-search)`he': hello world"])
        XCTAssertEqual(e.apply(ctrl("r")), .bell)
        XCTAssertEqual(e.apply(.enter), .submit(["hello world"]), "Enter accepts and submits")
        XCTAssertFalse(e.isSearching)

        // Cancelling (Ctrl-G, Esc, Ctrl-C) brings back the line as it was.
        for cancel in [ctrl("g"), ConsoleKey.escape, ctrl("c")] {
            var c = editor("draft", history: history)
            _ = apply([.left, ctrl("r"), .text("clo")], to: &c)
            XCTAssertEqual(c.render(prompt: "> ", columns: 80).rows, ["(reverse-i-search)`clo': /close 4000"])
            XCTAssertEqual(c.apply(cancel), .redraw)
            XCTAssertFalse(c.isSearching)
            XCTAssertEqual(c.line, "draft")
            XCTAssertEqual(c.cursor, 4)
        }

        // An editing key accepts the match (cursor where the query was) and edits it.
        var edit = editor("", history: history)
        _ = apply([ctrl("r"), .text("4000")], to: &edit)
        XCTAssertEqual(edit.apply(.backspace), .redraw, "Backspace shortens the query")
        XCTAssertEqual(edit.render(prompt: "> ", columns: 80).rows, ["(reverse-i-search)`400': /close 4000"])
        XCTAssertEqual(edit.apply(.left), .redraw)
        XCTAssertFalse(edit.isSearching)
        XCTAssertEqual(edit.line, "/close 4000")
        XCTAssertEqual(edit.cursor, 6, "Left from the match's start")
        _ = edit.apply(.text("X"))
        XCTAssertEqual(edit.line, "/closeX 4000")
    }

    func testTabCompletesSlashCommands() {
        let names = ["/ping", "/close", "/binary", "/help", "/quiet", "/quit"]
        var e = editor("/pi", completions: names)
        XCTAssertEqual(e.apply(.tab), .redraw)
        XCTAssertEqual(e.line, "/ping ")
        var q = editor("/q", completions: names)
        XCTAssertEqual(q.apply(.tab), .redraw, "several names: their common prefix")
        XCTAssertEqual(q.line, "/qui")
        XCTAssertEqual(q.apply(.tab), .bell, "still ambiguous: nothing listed, a bell")
        XCTAssertEqual(q.line, "/qui")
        var none = editor("/x", completions: names)
        XCTAssertEqual(none.apply(.tab), .bell)
        var text = editor("pi", completions: names)
        XCTAssertEqual(text.apply(.tab), .bell, "only slash commands complete")
        XCTAssertEqual(text.line, "pi")
        var args = editor("/close 4", completions: names)
        XCTAssertEqual(args.apply(.tab), .bell)
        var middle = editor("/pi", completions: names)
        _ = middle.apply(.left)
        XCTAssertEqual(middle.apply(.tab), .bell, "only with the cursor at the end")
    }

    func testPasteSubmitsCompleteLinesAndKeepsTheLastTyped() {
        var e = editor("ab")
        _ = e.apply(.left)
        XCTAssertEqual(e.apply(.paste(["1", "2", "3"])), .submit(["a1", "2"]))
        XCTAssertEqual(e.line, "3b", "the unfinished last line stays typed, before what followed the cursor")
        XCTAssertEqual(e.cursor, 1)
        XCTAssertEqual(e.historyEntries, ["a1", "2"])
        var whole = editor()
        XCTAssertEqual(whole.apply(.paste(["x", "y", ""])), .submit(["x", "y"]))
        XCTAssertEqual(whole.line, "")
        XCTAssertEqual(whole.apply(.paste(["no newline"])), .redraw)
        XCTAssertEqual(whole.line, "no newline")
        XCTAssertEqual(whole.apply(.paste([""])), .none)
        // Control characters pasted stay in the line (sent as a pipe would) but show escaped.
        var controls = editor()
        _ = controls.apply(.paste(["a\u{1B}[2Jb\tc"]))
        XCTAssertEqual(controls.line, "a\u{1B}[2Jb\tc")
        XCTAssertEqual(controls.render(prompt: "> ", columns: 80).rows, ["> a\\x1B[2Jb\\x09c"])
    }
}
