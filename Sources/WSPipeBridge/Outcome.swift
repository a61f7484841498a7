import WebSocketCore
import WebSocketEngine

/// Why a session was ended from our side.
enum LocalEnd: Equatable {
    case signal(Int32)
    case readerGone
    case inputError
    case outputError
    case decompressError
    case queueFull
}

/// How a session ended, as facts: what the runners know when their loop has stopped. Its
/// `verdict` is the exit status and the line to print; nothing else decides them, so the
/// one-connection client, the reconnecting client, the stdio server and a reconnection's
/// giving up cannot disagree.
struct Outcome {
    /// Which side the session is: the client (one connection or reconnecting), the stdio
    /// server ending with its first client (--oneshot), or the stdio server serving one
    /// client after another. Given to the session when it is made.
    enum Face: Equatable {
        case client
        case oneshot
        case service

        /// Our side, for wording: the peer is the server, or the client when serving.
        var role: Role { self == .client ? .client : .server }
    }

    /// --require-count: the clean end came after `received` of the `required` messages.
    struct Shortfall: Equatable {
        var received: UInt64
        var required: Int
    }

    var face = Face.client
    /// How the last connection ended; nil when none did (never opened, or abandoned).
    var ending: ConnectionEnding?
    /// A connection is still under the session (false: between reconnection attempts, or
    /// none ever opened).
    var connected = true
    var localEnd: LocalEnd?
    /// --timeout's seconds, when it expired.
    var timedOut: Double?
    /// The one-connection client's --timeout ran out before its connection opened (said
    /// so; a run that reconnects says only the status then).
    var timedOutBeforeOpen = false
    /// Why the last attempt failed before a connection (--reconnect).
    var openError: OpenError?
    /// --stale-timeout's seconds, when it declared the connection dead.
    var stale: Double?
    /// --reconnect's offline queue bounds (messages, bytes), for its `fail` policy's line.
    var queueBounds: (messages: Int, bytes: Int)?
    /// stdout could not be written (its error, said when the run ends).
    var stdoutFailure: String?
    var shortfall: Shortfall?
    /// --require-count with --until: the pattern no message matched.
    var untilShortfall: String?
    /// -n N (or -1's one reply) came and was written: the run did what it was asked, so how
    /// the peer ends the connection after that does not change the status (the man page's
    /// -n: exit 0 once N messages were received and written).
    var countReached = false
    /// The end-of-input ping: answered (true), given up on (false), or not sent (nil).
    var deliveryConfirmed: Bool?
    /// An --expect missed (said when it happened).
    var expectMissed = false
    /// --until's message came: the run did what it was asked.
    var untilMatched = false
    /// The console told each connection's end as it happened ("closed by the server: 4001
    /// bye"): the status's line would tell it a second time.
    var endingTold = false

    /// The exit status and the one line for it.
    struct Verdict: Equatable {
        var status: ExitStatus
        /// To print now; nil when there is nothing to say or it was said when it happened
        /// (a protocol failure, a local error, the unconfirmed barrier).
        var line: String?
        /// The line is a notice, hidden by -q (`Failure.isNotice`), not an error.
        var isNotice = false
    }

    /// Our side, for wording: the peer is the server, or the client when serving.
    var role: Role { face.role }

    var verdict: Verdict {
        switch conclusion {
        case .said(let status): return Verdict(status: status, line: nil)
        case .report(let failure):
            let (line, status) = report(failure, as: role)
            if endingTold && ending != nil && failure.tellsConnectionEnding { return Verdict(status: status, line: nil) }
            return Verdict(status: status, line: line, isNotice: failure.isNotice)
        }
    }

    private enum Conclusion {
        /// Nothing (more) to say.
        case said(ExitStatus)
        case report(Failure)
    }

    /// The precedence of the exit statuses, first match wins.
    private var conclusion: Conclusion {
        if face == .service { return serviceConclusion }
        if case .signal(let number) = localEnd { return .report(.signal(number)) }
        if localEnd == .queueFull, let bounds = queueBounds {
            return .report(.queueFull(messages: bounds.messages, bytes: bounds.bytes))
        }
        if let timedOut, !connected {
            return .report(timedOutBeforeOpen ? .timedOutBeforeOpen(seconds: timedOut) : .timedOut(seconds: timedOut))
        }
        // stdout failed while --reconnect was between attempts: as when connected (the
        // reader's leaving is its choice; a write error was said when it happened).
        if !connected && localEnd == .readerGone { return .said(.success) }
        if !connected && localEnd == .outputError { return .said(.localError) }
        if !connected, let openError { return .report(.open(openError)) }
        if expectMissed { return .said(.expectFailed) }
        if let stale { return .report(.stale(seconds: stale)) }
        if case .failed = ending { return .said(.protocolViolation) }
        if localEnd == .inputError || localEnd == .outputError || localEnd == .decompressError { return .said(.localError) }
        if let timedOut { return .report(.timedOut(seconds: timedOut)) }
        if let stdoutFailure { return .report(.localOutput(why: stdoutFailure)) }
        if localEnd == .readerGone { return .said(.success) }
        if countReached || untilMatched { return .said(.success) }
        switch ending {
        case .closed(let handshake):
            guard handshake.isNormal else { return .report(.closedByPeer(handshake.received)) }
            // --require-count's shortfall before the barrier: the user asked for that status.
            if let untilShortfall { return .report(.untilNotMatched(pattern: untilShortfall)) }
            if let shortfall { return .report(.countNotReached(received: shortfall.received, required: shortfall.required)) }
            return .said(deliveryConfirmed == false ? .deliveryUnconfirmed : .success)
        case .lost(let loss):
            return .report(.lost(loss))
        case .timedOut(let wait):
            return .report(.closeTimedOut(wait))
        case .failed, nil:
            return .report(.lost(.abandoned))
        }
    }

    /// A service ends 0; how clients left is for -v and --jsonl. Only a local failure is 1,
    /// and a signal 128 + N, as for the client (what --stats' "exit" says: the process then
    /// dies of the signal, `dieOfSignalIfStopped`, and a shell shows that number).
    private var serviceConclusion: Conclusion {
        if case .signal(let number) = localEnd { return .report(.signal(number)) }
        if localEnd == .inputError || localEnd == .outputError { return .said(.localError) }
        if let stdoutFailure { return .report(.localOutput(why: stdoutFailure)) }
        return .said(.success)
    }
}

extension Failure {
    /// How a connection ended, which the console has told already (`Console.ended`).
    var tellsConnectionEnding: Bool {
        switch self {
        case .closedByPeer, .lost, .closeTimedOut: return true
        default: return false
        }
    }
}

extension Diagnostics {
    /// Prints a verdict's line, if any: an error, or a notice that -q hides.
    func say(_ verdict: Outcome.Verdict) {
        guard let line = verdict.line else { return }
        if verdict.isNotice { notice(line) } else { error(line) }
    }
}

extension Session {
    /// The exit status an ending alone gives (as `conclude` reports it), for giving up on
    /// reconnecting and for the other server modes' --oneshot: that connection's outcome.
    static func status(of ending: ConnectionEnding, stale: Bool) -> ExitStatus {
        var outcome = Outcome()
        outcome.ending = ending
        outcome.stale = stale ? 0 : nil
        return outcome.verdict.status
    }
}
