import Glibc
import WebSocketCore

/// Lines on stderr, each written with one write(2) so lines from different moments never
/// interleave mid-line. Every line starts with "wspipe: ". Verbose lines have a second
/// marker: "> " request header, "< " response header, "* " an event.
public final class Diagnostics: @unchecked Sendable {
    /// -1: errors only (-q); 0: errors and warnings; 1: also verbose events (-v).
    public let verbosity: Int

    public init(verbosity: Int) { self.verbosity = verbosity }

    public var isVerbose: Bool { verbosity > 0 }

    /// An error: always printed.
    public func error(_ message: String) { emit("wspipe: \(message)") }

    /// Prints `failure`'s message (if it has one) as an error; returns its exit status.
    /// `role`: our side (the peer it names is the other).
    public func report(_ failure: Failure, as role: Role = .client) -> ExitStatus {
        let (message, status) = WSPipeBridge.report(failure, as: role)
        if let message { failure.isNotice ? notice(message) : error(message) }
        return status
    }

    /// A line printed whatever the verbosity (--stats asked for it), without the prefix.
    public func always(_ line: String) { emit(line) }

    /// A warning: hidden by -q.
    public func warning(_ message: String) {
        if verbosity >= 0 { emit("wspipe: warning: \(message)") }
    }

    /// A notice: how the run went, said without -v because a person would otherwise be
    /// left guessing (--timeout's expiry, a reconnection); hidden by -q, like a warning,
    /// but no mistake to warn about.
    public func notice(_ message: String) {
        if verbosity >= 0 { emit("wspipe: \(message)") }
    }

    /// A verbose event line ("wspipe: * ...").
    public func event(_ message: @autoclosure () -> String) {
        if verbosity > 0 { emit("wspipe: * \(message())") }
    }

    /// A handshake header line, redacted where secret.
    public func header(_ direction: String, _ header: HTTPHeader) {
        guard verbosity > 0 else { return }
        emit("wspipe: \(direction) \(header.name): \(Diagnostics.redacted(header))")
    }

    public func line(_ direction: String, _ text: String) {
        if verbosity > 0 { emit("wspipe: \(direction) \(text)") }
    }

    /// A request target with secret query values hidden (`Redaction.target`).
    public static func redactedTarget(_ target: String) -> String { Redaction.target(target) }

    /// A Location value without user information or secret query values.
    static func redactedLocation(_ location: String) -> String { Redaction.location(location) }

    /// A URL with any user:password removed (`Redaction.url`).
    public static func redactedURL(_ text: String) -> String { Redaction.url(text) }

    /// The value to show for a header (`Redaction.value(of:)`).
    public static func redacted(_ header: HTTPHeader) -> String { Redaction.value(of: header) }

    /// `text` with control characters (C0 but TAB, DEL, C1) shown as `\xHH` and bidi
    /// overrides as `\u{HHHH}` (`TerminalText.safe`): header values, status lines and names
    /// from a server reach the user's terminal only as visible text, never as escape
    /// sequences, and every diagnostic stays on one line.
    static func terminalSafe(_ text: String) -> String { TerminalText.safe(text) }

    /// The console's screen, when wspipe is one: each line is printed above the line being
    /// typed (from any thread) instead of over it. Set before any other thread starts.
    var screen: ConsoleScreen?

    private func emit(_ line: String) {
        if let screen { return screen.printAbove([Diagnostics.terminalSafe(line)], style: .diagnostic) }
        writeAll(2, Array(Diagnostics.terminalSafe(line).utf8) + [0x0A])
    }
}

/// Writes all of `bytes` to descriptor `fd` with write(2), retrying after EINTR; gives up on
/// any other error (a closed or broken stderr is nothing to report).
public func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        guard let base = raw.baseAddress else { return }
        var offset = 0
        while offset < raw.count {
            let n = write(fd, base + offset, raw.count - offset)
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
        }
    }
}
