import WebSocketTransport

/// One step of the client's preamble, in command-line order.
package enum ConversationStep: Sendable {
    /// --send TEXT: one text message.
    case send(String)
    /// --send-file: the file's messages (`ClientConfiguration.sendFile`), framed as stdin is.
    case sendFile
    /// --expect REGEX or --expect-json PATH=VALUE (`option` names which, for messages):
    /// wait until a received message matches.
    case expect(MessagePattern, option: String)
}

/// What the conversation options set: the preamble, --until, --print-match-only and
/// --expect-timeout. Empty: the client sends nothing before stdin and ends as before.
package struct ConversationScript: Sendable {
    package var steps: [ConversationStep] = []
    /// --until/--until-json: after the preamble, the first matching message ends the run.
    package var until: MessagePattern?
    /// --print-match-only: only --until's message is written.
    package var printMatchOnly = false
    /// --expect-timeout: seconds each --expect waits.
    package var expectTimeout = 10.0

    package init() {}

    /// Whether received messages are looked at (an --expect or --until).
    var matches: Bool { until != nil || steps.contains { if case .expect = $0 { true } else { false } } }
}

/// The client's conversation on one connection, as a value without sockets: the preamble's
/// steps run in order from each handshake (sends at once, each --expect a wait bounded by
/// --expect-timeout), then --until watches the messages. The session tells it what happened
/// (connected, a message, the wait's timer, the connection's end) and carries out the
/// actions its transitions return (`Session+Conversation.swift`), as with `SessionEnding`.
struct Conversation {
    enum Action: Equatable {
        /// Send the preamble's step at this index (a --send or the --send-file).
        case send(step: Int)
        /// Arm the wait's timer (--expect-timeout).
        case startTimer(seconds: Double)
        case stopTimer
        /// The preamble is done on this connection: stdin (and the offline queue) may flow.
        case complete
        /// An --expect missed: the connection ends (Close, exit 13 or a retry).
        case fail(Miss)
        /// --until's message came: the run ends cleanly.
        case untilMatched
    }

    /// An --expect that missed.
    struct Miss: Equatable {
        /// "--expect #2": the option and the wait's number among the waits.
        let step: String
        let pattern: String
        let why: Why
    }

    enum Why: Equatable {
        /// No match within --expect-timeout's seconds.
        case timedOut(Double)
        /// The connection ended during the wait; the server's Close code when it sent one.
        case closed(code: UInt16?)
    }

    private enum Phase: Equatable {
        /// No connection yet (or between two).
        case idle
        /// Waiting at the --expect at this index.
        case waiting(Int)
        /// The preamble is done on this connection.
        case done
        /// --until matched, or an --expect missed: nothing more to do on this connection.
        case over
    }

    let script: ConversationScript
    private var phase = Phase.idle
    /// At most this much of the last message is shown in a miss's line.
    static let shownBytes = 200

    init(_ script: ConversationScript) { self.script = script }

    /// Whether the preamble is done on the current connection (stdin may flow).
    var preambleDone: Bool { phase == .done || phase == .over && !missed }
    /// An --expect missed on the current connection.
    private(set) var missed = false

    /// Whether a message received now is to be looked at.
    var examines: Bool {
        switch phase {
        case .waiting: true
        case .done: script.until != nil
        case .idle, .over: false
        }
    }

    /// Whether a message received now would be --until's (the preamble is done).
    var watchesUntil: Bool { phase == .done && script.until != nil }

    // MARK: - Transitions

    /// A handshake completed: the preamble runs from its first step.
    mutating func connected() -> [Action] {
        missed = false
        return run(from: 0)
    }

    /// A text message came (binary messages never match: `text` nil); `matches` says
    /// whether it matches a pattern.
    mutating func received(_ matches: (MessagePattern) -> Bool) -> [Action] {
        switch phase {
        case .waiting(let index):
            guard case .expect(let pattern, _) = script.steps[index], matches(pattern) else { return [] }
            return [.stopTimer] + run(from: index + 1)
        case .done:
            guard let until = script.until, matches(until) else { return [] }
            phase = .over
            return [.untilMatched]
        case .idle, .over:
            return []
        }
    }

    /// The wait's timer fired.
    mutating func timerFired() -> [Action] {
        guard case .waiting(let index) = phase else { return [] }
        return fail(at: index, .timedOut(script.expectTimeout))
    }

    /// The connection ended (`code`: the server's Close code, if it sent one): a miss if a
    /// wait was under way, unless the session ended it itself (`locally`: a signal,
    /// --timeout...). The next connection starts afresh.
    mutating func connectionEnded(code: UInt16?, locally: Bool) -> [Action] {
        let was = phase
        defer { phase = .idle }
        guard case .waiting(let index) = was else { return [] }
        return [.stopTimer] + (locally ? [] : fail(at: index, .closed(code: code)))
    }

    // MARK: - Steps

    /// Runs the steps from `index`: sends at once, up to the next wait (or the end).
    private mutating func run(from index: Int) -> [Action] {
        var actions: [Action] = []
        var next = index
        while next < script.steps.count {
            if case .expect = script.steps[next] {
                phase = .waiting(next)
                return actions + [.startTimer(seconds: script.expectTimeout)]
            }
            actions.append(.send(step: next))
            next += 1
        }
        phase = .done
        return actions + [.complete]
    }

    private mutating func fail(at index: Int, _ why: Why) -> [Action] {
        phase = .over
        missed = true
        guard case .expect(let pattern, let option) = script.steps[index] else { return [] }
        return [.fail(Miss(step: "\(option) #\(waitNumber(index))", pattern: pattern.description, why: why))]
    }

    /// The wait's number among the waits (1 for the first --expect or --expect-json).
    private func waitNumber(_ index: Int) -> Int {
        script.steps[...index].filter { if case .expect = $0 { true } else { false } }.count
    }
}

extension Conversation.Miss {
    /// The one line a miss is said with: the step, its pattern, and the last message seen
    /// (through `Diagnostics.terminalSafe`) or how the connection ended.
    func sentence(lastMessage: [UInt8]?) -> String {
        let head = "\(step) '\(Diagnostics.terminalSafe(pattern))'"
        switch why {
        case .timedOut(let seconds):
            let last = lastMessage.map { "the last message was '\(Diagnostics.terminalSafe(String(decoding: $0, as: UTF8.self)))'" }
            return "\(head): no match within \(formatSeconds(seconds)) s (--expect-timeout); \(last ?? "no text message came")"
        case .closed(let code):
            let closed = code.map { "the server closed the connection with \($0)" } ?? "the connection ended"
            return "\(head): \(closed) before a match"
        }
    }
}
