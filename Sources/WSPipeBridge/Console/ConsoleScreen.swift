import CWSPipeShims
import Glibc
import Synchronization

/// The console's terminal output: lines printed above the edit rows (the prompt and what is
/// being typed), which are cleared first and drawn again after, so nothing printed ever
/// overwrites what is typed. Used from the loop and, for -v's lines while a connection
/// opens, from the opening's thread: every write of the screen holds one lock.
final class ConsoleScreen: Sendable {
    enum Style {
        /// A received message's marker (`< `).
        case received
        /// wspipe's own lines: connected, closed, command results.
        case status
        /// A command's error.
        case error
        /// stderr's lines (warnings, -v).
        case diagnostic
    }

    private struct State {
        /// The bytes that draw the edit rows and put the cursor in place.
        var drawing: [UInt8] = []
        /// Where the edit rows were drawn: their cells and the cursor, for the width drawn at.
        var drawn = EditRows(cells: [], cursorRow: 0, cursorColumn: 0, columns: 0)
        var showing = false
    }

    private let state = Mutex(State())
    let colours: Bool
    let timestamps: Bool
    /// The terminal wraps rows again when it narrows (`ConsoleSettings.reflowsOnResize`).
    let reflows: Bool

    init(colours: Bool, timestamps: Bool, reflows: Bool) {
        self.colours = colours
        self.timestamps = timestamps
        self.reflows = reflows
    }

    /// Prints `lines` above the edit rows (each already terminal-safe).
    func printAbove(_ lines: [String], style: Style) {
        var out: [UInt8] = []
        let (open, close) = colours ? Self.colour(style) : ("", "")
        let time = timestamps && style != .diagnostic ? Self.clock() + " " : ""
        for line in lines {
            if style == .received && colours && line.hasPrefix("< ") {
                out += Array((time + "\u{1B}[36m< \u{1B}[0m" + line.dropFirst(2)).utf8)
            } else {
                out += Array((time + open + line + close).utf8)
            }
            out += [0x0D, 0x0A]
        }
        state.withLock { state in
            var bytes = state.showing ? Self.clearing(state.drawn.cursorRow) : []
            bytes += out
            if state.showing { bytes += state.drawing }
            writeAll(1, bytes)
        }
    }

    /// Draws the edit rows: `status` (wspipe's own, e.g. while --reconnect waits; at most
    /// `columns` cells each) then `rows`, the cursor at (`row`, `column`) within `rows`.
    /// `clearingScreen`: Ctrl-L, the screen is cleared first as readline does (what was on
    /// it stays in the terminal's scrollback: no ESC [3J) and the rows drawn at its top.
    func draw(status: [String] = [], rows: [String], row: Int, column: Int, columns: Int, clearingScreen: Bool = false) {
        let (open, close) = colours ? Self.colour(.status) : ("", "")
        let styled = status.map { open + $0 + close } + rows
        var drawing = Array(styled.joined(separator: "\r\n").utf8)
        let up = rows.count - 1 - row
        if up > 0 { drawing += Array("\u{1B}[\(up)A".utf8) }
        drawing += [0x0D]
        if column > 0 { drawing += Array("\u{1B}[\(column)C".utf8) }
        let drawn = EditRows(cells: (status + rows).map(LineRendering.cells), cursorRow: status.count + row, cursorColumn: column,
                             columns: columns)
        state.withLock { state in
            var bytes: [UInt8]
            if clearingScreen {
                bytes = Array("\u{1B}[H\u{1B}[2J".utf8)
            } else {
                bytes = state.showing ? Self.clearing(reflows ? state.drawn.rowsAboveCursor(reflowedTo: columns) : state.drawn.cursorRow) : []
            }
            bytes += drawing
            state.drawing = drawing
            state.drawn = drawn
            state.showing = true
            wsp_terminal_editing(1)
            writeAll(1, bytes)
        }
    }

    /// Clears the edit rows (the end, a suspension): the cursor is left at their start.
    func clear() {
        state.withLock { state in
            guard state.showing else { return }
            state.showing = false
            wsp_terminal_editing(0)
            writeAll(1, Self.clearing(state.drawn.cursorRow))
        }
    }

    /// The edit rows are no longer where they were drawn (the shell had the terminal while
    /// the process was stopped): the next drawing starts where the cursor is.
    func forget() {
        state.withLock { state in state.showing = false }
    }

    /// Up `rows` rows to the top of the edit rows, and everything below erased.
    private static func clearing(_ rows: Int) -> [UInt8] {
        Array(((rows > 0 ? "\u{1B}[\(rows)A" : "") + "\r\u{1B}[J").utf8)
    }

    private static func colour(_ style: Style) -> (String, String) {
        switch style {
        case .received: return ("", "")
        case .status: return ("\u{1B}[2m", "\u{1B}[0m")
        case .error: return ("\u{1B}[31m", "\u{1B}[0m")
        case .diagnostic: return ("\u{1B}[33m", "\u{1B}[0m")
        }
    }

    /// The time column of --timestamps: local HH:MM:SS.
    static func clock() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}

/// The edit rows as drawn (pure): each row's cells, the cursor, and the width they were laid
/// out for; how far up their first row is once the window has changed width.
struct EditRows: Equatable {
    /// Each row's cells (each row ended with CR LF, a hard line end, not a wrap).
    var cells: [Int]
    var cursorRow: Int
    var cursorColumn: Int
    var columns: Int

    /// Rows from the cursor up to the first edit row once a terminal that reflows (tmux,
    /// VTE, kitty, iTerm2, Windows Terminal) is `columns` wide. Wider (or the same): the
    /// rows stay where they were (each ends in CR LF: nothing to join). Narrower: each row
    /// longer than the new width is wrapped over several rows and the cursor kept in its
    /// text, so going up `cursorRow` rows only left the first rows' wrapped parts on the
    /// screen. (xterm cuts rows instead: `cursorRow` is right there.)
    func rowsAboveCursor(reflowedTo columns: Int) -> Int {
        guard columns > 0, columns < self.columns else { return cursorRow }
        func reflowed(_ cells: Int) -> Int { max(1, (cells + columns - 1) / columns) }
        return cells.prefix(cursorRow).reduce(0) { $0 + reflowed($1) } + cursorColumn / columns
    }
}
