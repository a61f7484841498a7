// libFuzzer target `consolekeys`: the console's key decoder (Sources/WSPipeBridge/Console/
// ConsoleKeyDecoder.swift) and line editor (LineEditor.swift, LineRendering.swift, with
// CellWidth.swift and TerminalText.swift) on what a terminal (or a person pasting) sends.
//
// Compiled into one module with WebSocketCore and those five files (see fuzz/run).
//
// Input: byte 0 the screen's columns (1-128), bytes 1 and 2 two cut points (0...n), byte 3
// the paste limit (0-254 bytes, or 1 MiB when it is 255); the rest is the terminal's bytes.
//
// Checks:
//   - the keys are the same whole, in three pieces and byte by byte (text runs joined): the
//     decoder never depends on how reads split; nothing waits after a flush but a partial
//     UTF-8 character
//   - no text key holds a C0 or C1 control; no pasted line holds CR or LF, and a paste's
//     lines take at most the limit's bytes (each byte at most one U+FFFD)
//   - every key applied to an editor (with history and slash commands): the cursor stays in
//     the line, submitted lines hold no CR or LF, and after each key the rendering (normal and
//     Ctrl-R search) has rows of at most `columns` cells with nothing a terminal acts on, and
//     the cursor inside them

func checkKey(_ key: ConsoleKey, pasteLimit: Int) {
    switch key {
    case .text(let text):
        check(!text.isEmpty, "an empty text key")
        check(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "a control in a text key")
    case .paste(let lines):
        check(!lines.isEmpty, "a paste without lines")
        check(!lines.contains { $0.contains("\n") || $0.contains("\r") || $0.contains("\r\n") }, "a line break in a pasted line")
        let scalars = lines.reduce(0) { $0 + $1.unicodeScalars.count } + lines.count - 1
        check(scalars <= pasteLimit, "a paste longer than its limit")
    case .control(let code):
        check(code < 0x20 && ![8, 9, 10, 13, 27].contains(code), "control(\(code)) for a key with a name")
    default: break
    }
}

func checkRendering(_ rendering: LineRendering, columns: Int) {
    check(!rendering.rows.isEmpty, "no rows")
    for row in rendering.rows {
        check(LineRendering.cells(row) <= columns, "a row wider than \(columns): \(row.unicodeScalars.map { $0.value })")
        check(!row.unicodeScalars.contains { TerminalText.isEscaped($0, keepingTab: false) }, "a control in a row")
    }
    check(rendering.cursorRow >= 0 && rendering.cursorRow < rendering.rows.count, "the cursor below the rows")
    check(rendering.cursorColumn >= 0 && rendering.cursorColumn < columns, "the cursor right of the screen")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConsoleKeys(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 4 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let columns = Int(input[0]) % 128 + 1
    let stream = Array(input[4...])
    let n = stream.count
    let cuts = [0] + [Int(input[1]) % (n + 1), Int(input[2]) % (n + 1)].sorted() + [n]
    let pasteLimit = input[3] == 255 ? 1 << 20 : Int(input[3])

    var whole = ConsoleKeyDecoder(pasteLimit: pasteLimit)
    let keys = ConsoleKey.joiningText(whole.feed(stream))
    var pieces = ConsoleKeyDecoder(pasteLimit: pasteLimit)
    var pieceKeys: [ConsoleKey] = []
    for p in 0..<3 { pieceKeys += pieces.feed(stream[cuts[p]..<cuts[p + 1]]) }
    check(ConsoleKey.joiningText(pieceKeys) == keys, "three pieces differ from the whole")
    var bytes = ConsoleKeyDecoder(pasteLimit: pasteLimit)
    var byteKeys: [ConsoleKey] = []
    for byte in stream { byteKeys += bytes.feed([byte]) }
    check(ConsoleKey.joiningText(byteKeys) == keys, "byte by byte differs from the whole")

    let flushed = whole.flushPendingEscape()
    check(!whole.hasPendingEscape, "an escape still waits after the flush")
    let all = keys + flushed
    for key in all { checkKey(key, pasteLimit: pasteLimit) }

    var editor = LineEditor(history: ["/ping x", "hello world", "日本語 テキスト", "👍 done"],
                            completions: ["/ping", "/close", "/quit", "/quiet", "/binary"])
    for key in all {
        let action = editor.apply(key)
        if case .submit(let lines) = action {
            check(!lines.isEmpty, "an empty submit")
            check(!lines.contains { $0.contains("\n") || $0.contains("\r") }, "a submitted line with a line break")
        }
        let line = Array(editor.line)
        check(editor.cursor >= 0 && editor.cursor <= line.count, "the cursor outside the line")
        checkRendering(editor.render(prompt: "> ", columns: columns), columns: columns)
    }
    return 0
}
