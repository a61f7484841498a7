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
        /// Rows from the top of the edit rows down to the cursor.
        var cursorRow = 0
        var showing = false
    }

    private let state = Mutex(State())
    let colours: Bool
    let timestamps: Bool

    init(colours: Bool, timestamps: Bool) {
        self.colours = colours
        self.timestamps = timestamps
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
            var bytes = state.showing ? Self.clearing(state.cursorRow) : []
            bytes += out
            if state.showing { bytes += state.drawing }
            writeAll(1, bytes)
        }
    }

    /// Draws the edit rows: `rows`, the cursor at (`row`, `column`) within them.
    func draw(rows: [String], row: Int, column: Int) {
        var drawing = Array(rows.joined(separator: "\r\n").utf8)
        let up = rows.count - 1 - row
        if up > 0 { drawing += Array("\u{1B}[\(up)A".utf8) }
        drawing += [0x0D]
        if column > 0 { drawing += Array("\u{1B}[\(column)C".utf8) }
        state.withLock { state in
            var bytes = state.showing ? Self.clearing(state.cursorRow) : []
            bytes += drawing
            state.drawing = drawing
            state.cursorRow = row
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
            writeAll(1, Self.clearing(state.cursorRow))
        }
    }

    /// The edit rows are no longer where they were drawn (the shell had the terminal while
    /// the process was stopped): the next drawing starts where the cursor is.
    func forget() {
        state.withLock { state in state.showing = false }
    }

    /// Back to the top of the edit rows, and everything below erased.
    private static func clearing(_ cursorRow: Int) -> [UInt8] {
        Array(((cursorRow > 0 ? "\u{1B}[\(cursorRow)A" : "") + "\r\u{1B}[J").utf8)
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
