/// A prompt and a line laid out for a terminal `columns` cells wide: the rows to draw (each
/// at most `columns` cells, nothing in them a terminal would act on) and where the cursor
/// goes. A wide character that does not fit at the end of a row starts the next one; a
/// control character shows as `\xHH` (cells that may wrap like any text); a lone
/// zero-width character (a mark with no base) sits on a dotted circle so it has a cell.
package struct LineRendering: Equatable, Sendable {
    package var rows: [String]
    package var cursorRow: Int
    /// 0 ..< columns: when the line fills its last row exactly and the cursor is at its end,
    /// the rendering has one more, empty row for it.
    package var cursorColumn: Int

    package init(rows: [String], cursorRow: Int, cursorColumn: Int) {
        self.rows = rows
        self.cursorRow = cursorRow
        self.cursorColumn = cursorColumn
    }

    /// `prompt` then `line`, with the cursor before `line[cursor]` (after it at `line.count`).
    package init(prompt: String, line: [Character], cursor: Int, columns: Int) {
        var layout = Layout(columns: max(1, columns))
        for character in prompt { layout.place(character) }
        var at: (row: Int, column: Int)?
        for (index, character) in line.enumerated() {
            let start = layout.place(character)
            if index == cursor { at = start }
        }
        if at == nil {
            if layout.column == layout.columns { layout.rows.append(""); layout.column = 0 }
            at = (layout.rows.count - 1, layout.column)
        }
        rows = layout.rows
        cursorRow = at?.row ?? 0
        cursorColumn = at?.column ?? 0
    }

    /// At most `limit` of the rows, with the cursor's: a line taller than the screen is
    /// shown a screenful at a time (the cursor could not go up to rows scrolled off it, so
    /// each redraw left copies above and a clear erased the screen's other lines). The
    /// window moves only as far as the cursor needs, from where it started (`start`).
    package func window(rows limit: Int, from start: Int) -> (rendering: LineRendering, start: Int) {
        let limit = max(1, limit)
        guard rows.count > limit else { return (self, 0) }
        var first = min(max(0, start), rows.count - limit)
        if cursorRow < first { first = cursorRow }
        if cursorRow >= first + limit { first = cursorRow - limit + 1 }
        let shown = LineRendering(rows: Array(rows[first..<(first + limit)]), cursorRow: cursorRow - first, cursorColumn: cursorColumn)
        return (shown, first)
    }

    /// The cells `text` takes on a terminal as this type counts them (each grapheme cluster's
    /// `CellWidth`): what every row of a rendering stays within.
    package static func cells(_ text: String) -> Int {
        text.reduce(0) { $0 + CellWidth.of($1) }
    }

    private struct Layout {
        let columns: Int
        var rows = [""]
        var column = 0

        init(columns: Int) { self.columns = columns }

        /// Places one grapheme cluster; returns where its first cell went.
        @discardableResult
        mutating func place(_ character: Character) -> (row: Int, column: Int) {
            guard let first = character.unicodeScalars.first else { return (rows.count - 1, column) }
            if TerminalText.isEscaped(first, keepingTab: false) {
                // Controls and bidi formats are clusters of their own (CR LF is the one pair).
                var start: (row: Int, column: Int)?
                for scalar in character.unicodeScalars {
                    for visible in TerminalText.escape(scalar) {
                        let at = put(String(visible), width: 1)
                        if start == nil { start = at }
                    }
                }
                return start ?? (rows.count - 1, column)
            }
            let width = CellWidth.of(character)
            if width == 0 { return put("\u{25CC}" + String(character), width: 1) }
            // Only a 1-column screen is narrower than a wide character: it shows a "?".
            if width > columns { return put("?", width: 1) }
            return put(String(character), width: width)
        }

        private mutating func put(_ text: String, width: Int) -> (row: Int, column: Int) {
            if column + width > columns {
                rows.append("")
                column = 0
            }
            rows[rows.count - 1] += text
            column += width
            return (rows.count - 1, column - width)
        }
    }
}
