import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
import WebSocketTransport

/// Every way a wspipe run can end badly, as facts. `report(_:)` is the one place that turns
/// them into the line the user reads and the exit status; the layers below never name a
/// command-line flag.
public enum Failure: Error {
    // The command line.
    /// A mistake on the command line (exit 2). `pointsAtHelp`: whether `--help` explains it
    /// (not for an unreadable file or an unset variable); `topic`: the --help category that
    /// does ("see wspipe --help tls").
    case usage(String, pointsAtHelp: Bool, topic: String? = nil)

    /// --bus: the bus refused our credentials or wants some (`reply`: its error line); exit 5.
    case busRefused(bus: String, reply: String)

    // Opening the connection.
    /// The connection never opened: dialing, TLS, proxy, handshake, redirects.
    case open(OpenError)
    /// `--timeout` (seconds) expired before the connection was open (exit 124).
    case timedOutBeforeOpen(seconds: Double)

    // Ending a session (`Outcome.verdict` turns the engine's `ConnectionEnding` and the
    // session's own reasons into one of these).
    /// The server closed with a code other than 1000 (exit 8).
    case closedByPeer(ClosePayload)
    /// No message arrived for the stale timeout (seconds): the connection counts as dead.
    case stale(seconds: Double)
    /// The offline queue was full under the fail policy (its bounds: messages, bytes).
    case queueFull(messages: Int, bytes: Int)
    /// --require-count: the session ended cleanly after `received` of the `required`
    /// messages (exit 11).
    case countNotReached(received: UInt64, required: Int)
    /// --require-count with --until: the session ended cleanly before a message matched
    /// (exit 11).
    case untilNotMatched(pattern: String)
    /// An --expect missed: the line naming the step, its pattern, why, and the last message
    /// seen (`Conversation.Miss.sentence`) (exit 13).
    case expectMissed(line: String)
    /// The server broke the protocol; we failed the connection with `closeCode` (exit 6).
    case protocolFailure(ReceiveError)
    /// The connection ended without a closing handshake, or no pong within `--ping-timeout`
    /// (exit 7).
    case lost(ConnectionLoss)
    /// The closing handshake made no progress for `--close-timeout` (exit 7).
    case closeTimedOut(CloseWait)
    /// `--timeout` (seconds) expired after the connection was open (exit 124; a notice,
    /// hidden by -q).
    case timedOut(seconds: Double)
    /// The end-of-input ping went unanswered: the Close went without the server confirming
    /// it had read the `messages` sent, `seconds` after the ending began (exit 12).
    case deliveryUnconfirmed(messages: UInt64, seconds: Double)
    /// stdin could not be read or turned into messages (exit 1).
    case localInput(InputError)
    /// stdout could not be written (exit 1).
    case localOutput(why: String)
    /// SIGHUP, SIGINT or SIGTERM ended the session (exit 128 + the signal, nothing printed).
    case signal(Int32)
    /// A system call for a local resource failed (an eventfd) (exit 1).
    case local(call: String, errno: Int32)

    // Serving (the server role, to come).
    /// The address to listen on is taken (EADDRINUSE) (exit 3).
    case addressInUse(address: String)
    /// Binding the address failed otherwise: permission denied (a port below 1024),
    /// address not available... `errno` is the bind(2) error (exit 3).
    case cannotListen(address: String, errno: Int32)
    /// The server's TLS configuration cannot be loaded: its certificate or key (unreadable,
    /// not PEM, encrypted without the right passphrase, not a pair), or the client CA file
    /// (exit 4).
    case serverTLS(TLSFailure)
    /// The program to run for each connection does not exist or cannot be executed (exit 1).
    case missingProgram(path: String, errno: Int32)
    /// --dir's directory cannot be opened as one (exit 1).
    case cannotOpenDirectory(path: String, errno: Int32)
}

/// The one line to print for `failure` (nil: nothing, as for a signal) and the exit status.
/// Only usage errors that `--help` explains point at it, once. `role`: our side, so the
/// sentences about the connection's end name the other ("the server", or "the client"
/// when serving).
public func report(_ failure: Failure, as role: Role = .client) -> (message: String?, status: ExitStatus) {
    let peer = "the \(role.peerName)"
    switch failure {
    case .usage(let message, let pointsAtHelp, let topic):
        return (pointsAtHelp ? noting("see wspipe --help" + (topic.map { " \($0)" } ?? ""), after: message) : message, .usage)
    case .open(let error):
        return (message(error), status(error))
    case .timedOutBeforeOpen(let seconds):
        return ("timed out after \(formatSeconds(seconds)) s (--timeout) before the connection was open", .timedOut)
    case .closedByPeer(let payload):
        return ("\(peer) closed the connection with \(describe(payload))", .closedByPeer)
    case .stale(let seconds):
        return ("no message received for \(formatSeconds(seconds)) s (--stale-timeout); the connection counts as dead", .connectionLost)
    case .queueFull(let messages, let bytes):
        return ("the offline queue is full (\(messages) messages or \(ByteCount.text(UInt64(bytes)))) and --queue-policy is fail", .queueFull)
    case .countNotReached(let received, let required):
        return ("the connection ended after \(received) of \(required) message\(required == 1 ? "" : "s") (--require-count)",
                .countNotReached)
    case .untilNotMatched(let pattern):
        return ("the connection ended before a message matched --until '\(pattern)' (--require-count)", .countNotReached)
    case .expectMissed(let line):
        return (line, .expectFailed)
    case .protocolFailure(let error):
        return ("\(error.description); closing the connection with \(error.closeCode)", .protocolViolation)
    case .lost(let loss):
        return ("connection lost: \(message(loss, peer: peer))", .connectionLost)
    case .closeTimedOut(let wait):
        return ("connection lost: \(message(wait, peer: peer)); gave up \(formatWaited(wait.waited)) s after the closing began",
                .connectionLost)
    case .timedOut(let seconds):
        return ("timed out after \(formatSeconds(seconds)) s (--timeout)", .timedOut)
    case .deliveryUnconfirmed(let messages, let seconds):
        let waited = formatWaited(seconds)
        return ("\(peer) did not confirm reading all \(messages) message\(messages == 1 ? "" : "s") within \(waited) s; "
                + "closing anyway: replies may be missing", .deliveryUnconfirmed)
    case .localInput(let error):
        return (error.description, .localError)
    case .localOutput(let why):
        return (why, .localError)
    case .signal(let number):
        return (nil, .signal(number))
    case .local(let call, let code):
        return ("\(call) failed: \(errnoText(code))", .localError)
    case .addressInUse(let address):
        return ("cannot listen on \(address): the address is already in use", .cannotConnect)
    case .cannotListen(let address, let code):
        return ("cannot listen on \(address): \(errnoText(code))", .cannotConnect)
    case .serverTLS(let failure):
        return (serverMessage(failure), .tlsFailure)
    case .missingProgram(let path, let code):
        return (missingProgram(path, code), .localError)
    case .cannotOpenDirectory(let path, let code):
        return ("cannot serve programs from '\(path)': \(errnoText(code))", .localError)
    case .busRefused(let bus, let reply):
        return ("the bus \(bus) refused us: \(Diagnostics.terminalSafe(reply)) (see BUS in the man page)", .handshakeRejected)
    }
}

/// A program that cannot run. A name without a '/' was looked up in PATH only (never in
/// the current directory): said, with `./NAME` when the current directory has that file.
func missingProgram(_ path: String, _ code: Int32) -> String {
    guard code == ENOENT, !path.isEmpty, !path.utf8.contains(UInt8(ascii: "/")) else {
        return "cannot run '\(path)': \(errnoText(code))"
    }
    let searched = getenv("PATH").map { String(cString: $0) } ?? "/usr/local/bin:/usr/bin:/bin"
    var text = "cannot run '\(path)': not found in PATH (\(Diagnostics.terminalSafe(searched)))"
    if access(path, F_OK) == 0 {
        text += "; the current directory is not searched: --exec ./\(path) runs the one here"
    } else if path.contains(" ") {
        // --exec 'cat -n': one word, the program's name. Its arguments follow as words.
        text += "; --exec takes the program and its arguments as separate words (--exec \(path)), --sh a shell line (--sh '\(path)')"
    }
    return text
}

extension Failure {
    /// Said as a notice (hidden by -q) rather than an error: the end the user set up with
    /// --timeout, which a script may expect.
    var isNotice: Bool {
        if case .timedOut = self { return true }
        return false
    }
}

/// `text` with a parenthetical `note`; a text that ends with a parenthesis takes the note
/// inside it ("(1.2 or 1.3; see wspipe --help)"): never two in a row.
func noting(_ note: String, after text: String) -> String {
    text.hasSuffix(")") ? "\(text.dropLast()); \(note))" : "\(text) (\(note))"
}

// MARK: - Opening

private func status(_ error: OpenError) -> ExitStatus {
    switch error {
    case .transport(.tls): return .tlsFailure
    case .transport(.proxy): return .proxyFailure
    case .transport(.proxyVariable), .transport(.unixPathLength): return .usage
    case .transport: return .cannotConnect
    case .handshake, .handshakeLost, .redirect: return .handshakeRejected
    }
}

private func message(_ error: OpenError) -> String {
    switch error {
    case .transport(let error):
        return message(error)
    case .handshake(.unexpectedStatus(let head), let body):
        let reason = head.reason.isEmpty ? "" : " \(head.reason)"
        // When to try again (429, 503) belongs in the one line, not only in -v's headers.
        let retry = head.values("Retry-After").first.map { " (Retry-After: \($0.prefix(64)))" } ?? ""
        var text = "the server answered \(head.statusCode)\(reason)\(retry) instead of 101 Switching Protocols"
        let trimmed = body.prefix(200)
        if WebSocketURL.redirectStatuses.contains(head.statusCode), let location = head.values("Location").first {
            text += "; it redirects to \(printable(Array(Diagnostics.redactedLocation(location).utf8))) (-L/--location follows redirects)"
        } else if !trimmed.isEmpty {
            text += "; body: " + printable(Array(trimmed)) + (body.count > trimmed.count ? "..." : "")
        }
        return text
    case .handshake(let error, _):
        return "handshake rejected: \(error)"
    case .handshakeLost(.closedWhileSending):
        return "the server closed the connection during the handshake"
    case .handshakeLost(.closedWithoutAnswer(let secure)):
        // A TLS server given plain text usually just hangs up: say what to try.
        return "the server closed the connection without answering the WebSocket handshake"
            + (secure ? "" : " (if it expects TLS, use wss://)")
    case .handshakeLost(.closedMidAnswer):
        return "the server closed the connection in the middle of its handshake response"
    case .handshakeLost(.failed(let why, let sending)):
        return "connection lost \(sending ? "while sending the handshake" : "during the handshake"): \(why)"
    case .redirect(.tooMany(let limit)):
        return "too many redirects: more than \(limit) (--max-redirs)"
    case .redirect(.noLocation(let status, let reason)):
        return "the server answered \(status) \(reason) without a Location header"
    case .redirect(.refused(let error)):
        return error.description
    }
}

/// A wait, in tenths of seconds; one shorter than 0.05 s (a --close-timeout of 0.03) in
/// milliseconds, not as "0 s".
func formatWaited(_ seconds: Double) -> String {
    let tenths = (seconds * 10).rounded() / 10
    return formatSeconds(tenths > 0 ? tenths : seconds)
}

/// The CLI's names for the settings that error sentences advise and -v's dialing lines
/// mention (the transport words them; the man page documents the lines).
let commandLineNames = SettingNames(
    proxySource: { name($0) }, ipv4Only: "-4", ipv6Only: "-6", connectTimeout: "--connect-timeout",
    caFile: "--cacert FILE", insecure: "-k/--insecure", keyPassphrase: "--key-pass-env VAR or --key-pass-file FILE",
    keyFile: "--key", clientCertificate: "--cert and --key", certificate: "--cert", minimumVersion: "--tls-min",
    proxy: "--proxy", proxyOff: "--proxy ''", noProxy: "--noproxy", connectTo: "--connect-to", verificationOff: "--insecure")

private func message(_ error: TransportError) -> String { error.sentence(commandLineNames) }

private func message(_ alert: TLSAlert) -> String { alert.sentence(commandLineNames) }

/// Where a proxy was set, as the user wrote it.
private func name(_ source: ProxySource) -> String {
    switch source {
    case .option: return "--proxy"
    case .variable(let name): return name
    }
}

/// A server TLS configuration failure: the client's wording where it is the same.
private func serverMessage(_ failure: TLSFailure) -> String {
    failure.serverSentence(commandLineNames, clientCA: "--client-ca")
}

/// Why a connection ended, in words, when its Close does not say it (nil for a closing
/// handshake: the Close's code and reason say it; for a failure, the line gives the code we
/// closed with and this the peer's breach): -v's lines for a server's client and a
/// --forward-listen pair. `peer`: "the server", or "the client" when serving.
func describe(_ ending: ConnectionEnding, peer: String) -> String? {
    switch ending {
    case .closed: return nil
    case .failed(let error): return error.description
    case .lost(let loss): return message(loss, peer: peer)
    case .timedOut(let wait): return "\(message(wait, peer: peer)); gave up \(formatWaited(wait.waited)) s after the closing began"
    }
}

/// The closing handshake that made no progress: what was missing and for how long.
private func message(_ wait: CloseWait, peer: String) -> String {
    let what = wait.closeWritten ? "no Close from \(peer)" : "\(peer) stopped reading before our Close"
    let why = wait.peerKeptSending
        ? "it kept sending for \(formatSeconds(wait.limit * ConnectionDriver.barrierIncomingLimit)) s after the end-of-input ping "
            + "(at most \(formatSeconds(ConnectionDriver.barrierIncomingLimit)) times --close-timeout)"
        : "nothing came for \(formatSeconds(wait.limit)) s (--close-timeout)"
    return "\(what): \(why)"
}

/// `peer`: "the server", or "the client" when serving.
private func message(_ loss: ConnectionLoss, peer: String) -> String {
    switch loss {
    case .peerClosedTCP(let afterOurClose):
        return afterOurClose ? "\(peer) closed the TCP connection without answering our Close"
                             : "\(peer) closed the TCP connection without a closing handshake"
    case .readFailed(let why): return message(why, peer: peer)
    case .writeFailed(let why): return "cannot send: \(message(why, peer: peer))"
    case .pingTimeout(let seconds): return "no pong within \(formatSeconds(seconds)) s (--ping-timeout): the connection is dead"
    case .abandoned: return "the connection ended without a closing handshake"
    }
}

/// A read or write failure: the transport's words, the peer named by role.
private func message(_ failure: StreamFailure, peer: String) -> String {
    switch failure {
    case .tls(let alert): return message(alert)
    case .tlsSessionClosed: return "\(peer) closed the TLS session"
    default: return "\(failure)"
    }
}

/// A Close for messages: "1001 \"bye\"", or "(no status code)".
func describe(_ payload: ClosePayload) -> String {
    guard let code = payload.code else { return "(no status code)" }
    return payload.reason.isEmpty ? "\(code)" : "\(code) \(printable(payload.reason))"
}

/// A child that could not start, in words.
public func describe(_ error: ChildError) -> String {
    switch error {
    case .missingProgram(let path, let code): return "cannot run '\(path)': \(errnoText(code))"
    case .tooManyChildren(let limit): return "not started: \(limit) programs are running (--max-children)"
    case .cannotSpawn(let path, let code): return "cannot start '\(path)': \(errnoText(code))"
    case .cannotCreate(let what, let code): return "cannot create \(what) for the program: \(errnoText(code))"
    }
}
