/// What the console does after a key.
package enum LineEditorAction: Equatable, Sendable {
    /// Nothing changed.
    case none
    /// The line (or the search prompt) changed: draw it again.
    case redraw
    /// Lines to send: Enter gives the typed line (possibly ""), a paste each complete line
    /// it held (its unfinished last line stays typed). The editor is then redrawn too.
    case submit([String])
    /// Ctrl-C on an empty line.
    case interrupt
    /// Ctrl-D on an empty line.
    case endOfInput
    /// Ctrl-Z.
    case suspend
    /// Ctrl-L: clear the screen, then draw the line again at its top.
    case clearScreen
    /// The key could do nothing here (no older history, an ambiguous completion): ring.
    case bell
}

/// The line being typed at the console prompt, with readline's keys: moving by character
/// (a grapheme cluster), killing and yanking, history and its reverse search, completing
/// slash commands. Knows nothing of the terminal: the face feeds it `ConsoleKey`s and draws
/// `render`'s rows.
package struct LineEditor: Sendable {
    /// In-memory history entries kept (the oldest go first).
    package static let historyLimit = 1000
    /// Longest line the in-memory history keeps (a pasted megabyte is sent, not recalled:
    /// 1,000 of them would hold a gigabyte). The file keeps less (`ConsoleHistory`).
    package static let historyLineLimit = 64 * 1024

    /// The line, one element per grapheme cluster; always `Array(String(characters))`, so a
    /// combining mark typed after its base joins it.
    private var characters: [Character] = []
    /// Index into `characters` (0...count).
    package private(set) var cursor = 0
    private var history: [String]
    /// The entry shown while browsing history (nil: the line being typed).
    private var historyIndex: Int?
    /// The line being typed, kept while browsing history.
    private var typedLine: [Character] = []
    /// What the last kill took (Ctrl-Y inserts it).
    private var killed: [Character] = []
    private var search: ReverseSearch?
    /// Slash command names ("/ping") Tab completes.
    package var completions: [String]

    /// A Ctrl-R search in progress.
    private struct ReverseSearch: Sendable {
        var query: [Character] = []
        /// The history index of the match shown (nil: none yet).
        var match: Int?
        /// Where in the matched entry the query is (a Character offset).
        var matchOffset = 0
        var failed = false
        let original: [Character]
        let originalCursor: Int
    }

    package init(history: [String] = [], completions: [String] = []) {
        self.history = Array(history.suffix(Self.historyLimit))
        self.completions = completions
    }

    /// What is typed now.
    package var line: String { String(characters) }

    /// Whether a Ctrl-R search is shown.
    package var isSearching: Bool { search != nil }

    /// The history Up/Down and Ctrl-R walk (oldest first).
    package var historyEntries: [String] { history }

    /// New history (another console saved lines, or a reload): browsing starts again from
    /// the line being typed; a search in progress is cancelled.
    package mutating func replaceHistory(_ entries: [String]) {
        if historyIndex != nil { characters = typedLine; cursor = characters.count }
        if let search { characters = search.original; cursor = search.originalCursor }
        history = Array(entries.suffix(Self.historyLimit))
        historyIndex = nil
        search = nil
    }

    package mutating func apply(_ key: ConsoleKey) -> LineEditorAction {
        if search != nil { return applyInSearch(key) }
        switch key {
        case .text(let text): insert(Array(text)); return .redraw
        case .enter: return submit()
        case .backspace: return deleteBackward()
        case .delete: return deleteForward()
        case .left: return moveCursor(to: cursor - 1)
        case .right: return moveCursor(to: cursor + 1)
        case .wordLeft: return moveCursor(to: previousWordStart())
        case .wordRight: return moveCursor(to: nextWordEnd())
        case .home: return moveCursor(to: 0)
        case .end: return moveCursor(to: characters.count)
        case .up: return olderHistory()
        case .down: return newerHistory()
        case .tab: return complete()
        case .paste(let lines): return paste(lines)
        case .escape, .unknown: return .none
        case .control(let code): return control(code)
        }
    }

    private mutating func control(_ code: UInt8) -> LineEditorAction {
        switch code {
        case 1: return moveCursor(to: 0)  // Ctrl-A
        case 2: return moveCursor(to: cursor - 1)  // Ctrl-B
        case 3:  // Ctrl-C
            guard !characters.isEmpty else { return .interrupt }
            replaceLine(with: [])
            historyIndex = nil
            return .redraw
        case 4: return characters.isEmpty ? .endOfInput : deleteForward()  // Ctrl-D
        case 5: return moveCursor(to: characters.count)  // Ctrl-E
        case 6: return moveCursor(to: cursor + 1)  // Ctrl-F
        case 8: return deleteBackward()  // Ctrl-H
        case 11: return kill(cursor..<characters.count)  // Ctrl-K
        case 12: return .clearScreen  // Ctrl-L
        case 14: return newerHistory()  // Ctrl-N
        case 16: return olderHistory()  // Ctrl-P
        case 18:  // Ctrl-R
            search = ReverseSearch(original: characters, originalCursor: cursor)
            return .redraw
        case 21: return kill(0..<cursor)  // Ctrl-U
        case 23: return kill(previousWordStart()..<cursor)  // Ctrl-W
        case 25:  // Ctrl-Y
            guard !killed.isEmpty else { return .bell }
            insert(killed)
            return .redraw
        case 26: return .suspend  // Ctrl-Z
        default: return .bell
        }
    }

    // MARK: Editing

    private mutating func insert(_ new: [Character]) {
        let before = String(characters[..<cursor]) + String(new)
        let after = characters[cursor...]
        replaceLine(with: Array(before + String(after)))
        // A mark at the start of `after` may have joined the last inserted character.
        cursor = max(0, characters.count - Array(String(after)).count)
    }

    private mutating func replaceLine(with new: [Character]) {
        characters = Array(String(new))
        cursor = characters.count
    }

    private mutating func remove(_ range: Range<Int>) {
        let after = characters[range.upperBound...]
        replaceLine(with: Array(characters[..<range.lowerBound]) + after)
        cursor = max(0, characters.count - Array(String(after)).count)
    }

    private mutating func deleteBackward() -> LineEditorAction {
        guard cursor > 0 else { return .bell }
        remove((cursor - 1)..<cursor)
        return .redraw
    }

    private mutating func deleteForward() -> LineEditorAction {
        guard cursor < characters.count else { return .bell }
        remove(cursor..<(cursor + 1))
        return .redraw
    }

    private mutating func moveCursor(to position: Int) -> LineEditorAction {
        guard (0...characters.count).contains(position) else { return .bell }
        guard position != cursor else { return .none }
        cursor = position
        return .redraw
    }

    private mutating func kill(_ range: Range<Int>) -> LineEditorAction {
        guard !range.isEmpty else { return .none }
        killed = Array(characters[range])
        remove(range)
        return .redraw
    }

    /// Where Ctrl-W's kill starts: back over blanks, then over the word before them.
    private func previousWordStart() -> Int {
        var start = cursor
        while start > 0 && characters[start - 1].isWhitespace { start -= 1 }
        while start > 0 && !characters[start - 1].isWhitespace { start -= 1 }
        return start
    }

    /// Where Alt-F stops: over blanks, then to the end of the word after them.
    private func nextWordEnd() -> Int {
        var end = cursor
        while end < characters.count && characters[end].isWhitespace { end += 1 }
        while end < characters.count && !characters[end].isWhitespace { end += 1 }
        return end
    }

    // MARK: Submitting

    private mutating func submit() -> LineEditorAction {
        let text = line
        remember(text)
        replaceLine(with: [])
        historyIndex = nil
        typedLine = []
        return .submit([text])
    }

    /// A paste: each complete line goes out; the text before the cursor joins the first,
    /// the one after the cursor stays after the unfinished last line.
    private mutating func paste(_ lines: [String]) -> LineEditorAction {
        guard let last = lines.last else { return .none }
        guard lines.count > 1 else {
            guard !last.isEmpty else { return .none }
            insert(Array(last))
            return .redraw
        }
        let after = String(characters[cursor...])
        var complete = Array(lines.dropLast())
        complete[0] = String(characters[..<cursor]) + complete[0]
        for text in complete { remember(text) }
        replaceLine(with: Array(last + after))
        cursor = max(0, characters.count - Array(after).count)
        historyIndex = nil
        typedLine = []
        return .submit(complete)
    }

    /// Adds a sent line to the history as shells do: not an empty one, not one beginning
    /// with a space, not the same as the newest entry (nor one over `historyLineLimit`).
    private mutating func remember(_ text: String) {
        guard !text.isEmpty, text.first != " ", text.utf8.count <= Self.historyLineLimit, text != history.last else { return }
        history.append(text)
        if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
    }

    // MARK: History

    private mutating func olderHistory() -> LineEditorAction {
        let index = (historyIndex ?? history.count) - 1
        guard index >= 0 else { return .bell }
        if historyIndex == nil { typedLine = characters }
        historyIndex = index
        replaceLine(with: Array(history[index]))
        return .redraw
    }

    private mutating func newerHistory() -> LineEditorAction {
        guard let current = historyIndex else { return .bell }
        if current + 1 < history.count {
            historyIndex = current + 1
            replaceLine(with: Array(history[current + 1]))
        } else {
            historyIndex = nil
            replaceLine(with: typedLine)
            typedLine = []
        }
        return .redraw
    }

    // MARK: Completion

    /// Tab: a line that is a slash command's name so far (cursor at its end) becomes the
    /// name and a space when one name fits, or the names' common prefix when several do
    /// (with a bell); anything else rings.
    private mutating func complete() -> LineEditorAction {
        guard characters.first == "/", cursor == characters.count,
              !characters.contains(where: \.isWhitespace) else { return .bell }
        let typed = line
        let fitting = completions.filter { $0.hasPrefix(typed) }
        guard let first = fitting.first else { return .bell }
        if fitting.count == 1 {
            replaceLine(with: Array(first + " "))
            return .redraw
        }
        var common = Array(first)
        for name in fitting.dropFirst() {
            common = Array(zip(common, Array(name)).prefix { $0.0 == $0.1 }.map(\.0))
        }
        guard common.count > characters.count else { return .bell }
        replaceLine(with: common)
        return .redraw
    }

    // MARK: Reverse search

    private mutating func applyInSearch(_ key: ConsoleKey) -> LineEditorAction {
        guard var current = search else { return .none }
        switch key {
        case .text(let text):
            current.query += Array(text)
            search = find(current, from: current.match ?? history.count - 1)
            return .redraw
        case .control(18):  // Ctrl-R: the next older match
            guard !current.query.isEmpty, let match = current.match else { return .bell }
            let next = find(current, from: match - 1, skipping: history[match])
            if next.failed && current.failed { return .bell }
            search = next
            return .redraw
        case .backspace, .control(8):
            guard !current.query.isEmpty else { return .bell }
            current.query.removeLast()
            if current.query.isEmpty {
                current.match = nil
                current.failed = false
                search = current
            } else {
                search = find(current, from: history.count - 1)
            }
            return .redraw
        case .control(7), .control(3), .escape:  // Ctrl-G, Ctrl-C, Esc: back to the line as it was
            characters = current.original
            cursor = current.originalCursor
            search = nil
            return .redraw
        case .unknown:
            return .none
        default:  // Enter submits the match; an editing key edits it
            acceptSearch()
            let action = apply(key)
            return action == .none || action == .bell ? .redraw : action
        }
    }

    private mutating func acceptSearch() {
        guard let current = search else { return }
        search = nil
        if let match = current.match {
            replaceLine(with: Array(history[match]))
            cursor = current.matchOffset
        } else {
            characters = current.original
            cursor = current.originalCursor
        }
    }

    /// `state` searched from history index `start` towards older entries (skipping entries
    /// equal to `skipping`): the newest that contains the query, at its last occurrence.
    private func find(_ state: ReverseSearch, from start: Int, skipping: String? = nil) -> ReverseSearch {
        var result = state
        var index = min(start, history.count - 1)
        while index >= 0 {
            let entry = history[index]
            if entry != skipping, let offset = Self.lastOccurrence(of: state.query, in: Array(entry)) {
                result.match = index
                result.matchOffset = offset
                result.failed = false
                return result
            }
            index -= 1
        }
        result.failed = true
        return result
    }

    private static func lastOccurrence(of query: [Character], in entry: [Character]) -> Int? {
        guard query.count <= entry.count else { return nil }
        var offset = entry.count - query.count
        while offset >= 0 {
            if entry[offset..<(offset + query.count)].elementsEqual(query) { return offset }
            offset -= 1
        }
        return nil
    }

    // MARK: Rendering

    /// The prompt and the line (or, during Ctrl-R, "(reverse-i-search)`query': match") in
    /// rows of at most `columns` cells, and where the cursor goes.
    package func render(prompt: String, columns: Int) -> LineRendering {
        guard let search else { return LineRendering(prompt: prompt, line: characters, cursor: cursor, columns: columns) }
        let shown = search.match.map { Array(history[$0]) } ?? search.original
        let offset = search.match == nil ? search.originalCursor : search.matchOffset
        let label = search.failed ? "(failed reverse-i-search)`" : "(reverse-i-search)`"
        return LineRendering(prompt: label + String(search.query) + "': ", line: shown, cursor: offset, columns: columns)
    }
}
