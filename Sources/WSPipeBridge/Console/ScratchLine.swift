// TEMPORARY: a minimal line buffer driving the console until the editor branch's
// ConsoleKeyDecoder and LineEditor land (then this file goes).

enum ScratchAction: Equatable {
    case redraw
    case submit([String])
    case interrupt
    case endOfInput
    case suspend
}

struct ScratchLine {
    private var line: [Character] = []
    private var cursor = 0
    private var pending: [UInt8] = []
    private var pasting = false
    private var pasted: [UInt8] = []

    mutating func feed(_ bytes: [UInt8]) -> [ScratchAction] {
        pending += bytes
        var actions: [ScratchAction] = []
        var text: [UInt8] = []
        func flushText() {
            guard !text.isEmpty else { return }
            let inserted = Array(String(decoding: text, as: UTF8.self))
            line.insert(contentsOf: inserted, at: cursor)
            cursor += inserted.count
            text = []
            actions.append(.redraw)
        }
        var i = 0
        while i < pending.count {
            let rest = pending[i...]
            if pasting {
                if rest.starts(with: Array("\u{1B}[201~".utf8)) {
                    pasting = false
                    i += 6
                    var lines = String(decoding: pasted, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map {
                        String($0.filter { $0 != "\r" })
                    }
                    pasted = []
                    let last = lines.removeLast()
                    if !lines.isEmpty {
                        lines[0] = String(line) + lines[0]
                        line = []
                        cursor = 0
                        actions.append(.submit(lines))
                    }
                    line += Array(last)
                    cursor = line.count
                    actions.append(.redraw)
                    continue
                }
                if Array("\u{1B}[201~".utf8).starts(with: rest) { break }
                pasted.append(pending[i]); i += 1; continue
            }
            let byte = pending[i]
            if byte == 0x1B {
                flushText()
                guard i + 2 < pending.count || (i + 1 < pending.count && pending[i + 1] != UInt8(ascii: "[")) else { break }
                if pending[i + 1] == UInt8(ascii: "[") {
                    var j = i + 2
                    while j < pending.count && !(0x40...0x7E).contains(pending[j]) { j += 1 }
                    guard j < pending.count else { break }
                    let sequence = String(decoding: pending[(i + 2)...j], as: UTF8.self)
                    i = j + 1
                    switch sequence {
                    case "D": if cursor > 0 { cursor -= 1 }
                    case "C": if cursor < line.count { cursor += 1 }
                    case "H": cursor = 0
                    case "F": cursor = line.count
                    case "3~": if cursor < line.count { line.remove(at: cursor) }
                    case "200~": pasting = true; continue
                    default: continue
                    }
                    actions.append(.redraw)
                } else {
                    i += 2
                }
                continue
            }
            switch byte {
            case 0x0D, 0x0A:
                flushText()
                actions.append(.submit([String(line)]))
                line = []
                cursor = 0
            case 0x7F, 0x08:
                flushText()
                if cursor > 0 { cursor -= 1; line.remove(at: cursor); actions.append(.redraw) }
            case 0x03:
                flushText()
                if line.isEmpty { actions.append(.interrupt) } else { line = []; cursor = 0; actions.append(.redraw) }
            case 0x04:
                flushText()
                if line.isEmpty { actions.append(.endOfInput) }
            case 0x1A:
                flushText()
                actions.append(.suspend)
            case 0..<0x20: break
            default: text.append(byte)
            }
            i += 1
        }
        // An incomplete UTF-8 sequence waits for the rest.
        var keep = 0
        while keep < min(3, text.count) && text[text.count - 1 - keep] & 0xC0 == 0x80 { keep += 1 }
        if keep < text.count, text[text.count - 1 - keep] >= 0xC0 { keep += 1 } else { keep = 0 }
        let tail = Array(text.suffix(keep))
        text.removeLast(keep)
        flushText()
        pending = tail + Array(pending[i...])
        return actions
    }

    func render(prompt: String, columns: Int) -> (rows: [String], cursorRow: Int, cursorColumn: Int) {
        let all = Array(prompt) + line
        let width = max(columns, 1)
        var rows: [String] = []
        var index = 0
        while index < all.count || rows.isEmpty {
            rows.append(String(all[index..<min(all.count, index + width)]))
            index += width
        }
        let position = prompt.count + cursor
        let row = position / width
        if row == rows.count { rows.append("") }
        return (rows, row, position % width)
    }
}
