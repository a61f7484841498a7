import CWSPipeShims
import Glibc

/// What a console is given: colours or not (a terminal without NO_COLOR), and where its
/// history is.
public struct ConsoleSettings: Sendable, Equatable {
    public var colours: Bool
    /// XDG_STATE_HOME and HOME, as set, for the history file (`ConsoleHistory`); nil: no
    /// history (--no-history).
    public var historyEnvironment: [String: String]?
    /// The terminal wraps its rows again when the window narrows (tmux, VTE, kitty, and most
    /// others), rather than cutting them (xterm): how far up the edit rows start after a
    /// resize (`EditRows`).
    public var reflowsOnResize: Bool
    public init(colours: Bool, historyEnvironment: [String: String]?, reflowsOnResize: Bool = true) {
        self.colours = colours
        self.historyEnvironment = historyEnvironment
        self.reflowsOnResize = reflowsOnResize
    }
}

/// When wspipe is a console (issue 36): the text-mode client or the stdio server, with stdin
/// and stdout both terminals, TERM set and not `dumb`, and the process in the terminal's
/// foreground process group (a job started with `&` keeps the byte pipe). Checked once at
/// startup; --interactive forces it (with terminals), --no-interactive refuses it.
public enum ConsoleRule {
    /// stdin and stdout are both terminals.
    public static var terminals: Bool { isatty(0) == 1 && isatty(1) == 1 }

    /// Whether a run that may be a console is one, without --interactive or --no-interactive.
    public static func holds(term: String?) -> Bool {
        guard let term, !term.isEmpty, term != "dumb" else { return false }
        return terminals && wsp_terminal_in_foreground(0) == 1
    }

    /// The console's settings: colours unless NO_COLOR is set (to anything but empty); the
    /// history unless `history` is false (--no-history); rows wrapped again on a resize but
    /// in xterm.
    public static func settings(history: Bool, environment: (String) -> String?) -> ConsoleSettings {
        var variables: [String: String] = [:]
        for name in ["XDG_STATE_HOME", "HOME"] { variables[name] = environment(name) }
        // xterm (XTERM_VERSION) cuts rows when narrowed; tmux run in it wraps them again.
        let reflows = environment("XTERM_VERSION") == nil || environment("TMUX") != nil
        return ConsoleSettings(colours: (environment("NO_COLOR") ?? "").isEmpty, historyEnvironment: history ? variables : nil,
                               reflowsOnResize: reflows)
    }
}
