import WebSocketCore
import WebSocketTransport

/// Every way a wspipe run can end badly, as facts. `report(_:)` is the one place that turns
/// them into the line the user reads and the exit status; the layers below never name a
/// command-line flag.
public enum Failure: Error {
    // The command line.
    /// A mistake on the command line (exit 2). `pointsAtHelp`: whether `--help` explains it
    /// (not for an unreadable file or an unset variable).
    case usage(String, pointsAtHelp: Bool)

    // Opening the connection.
    /// The connection never opened: dialing, TLS, proxy, handshake, redirects.
    case open(OpenError)
    /// `--timeout` (seconds) expired before the connection was open (exit 124).
    case timedOutBeforeOpen(seconds: Double)

    // Ending a session. (`Session.conclude()` still decides these itself; they are here so
    // that the event-loop engine can hand its ending to `report` instead.)
    /// The server closed with a code other than 1000 (exit 8).
    case closedByPeer(ClosePayload)
    /// The server broke the protocol; we failed the connection with `closeCode` (exit 6).
    case protocolFailure(ReceiveError)
    /// The connection ended without a closing handshake, or no pong within `--ping-timeout`
    /// (exit 7). `why` is the session's sentence.
    case lost(why: String)
    /// `--timeout` expired after the connection was open (exit 124, nothing printed).
    case timedOut
    /// stdin could not be read or turned into messages (exit 1).
    case localInput(InputError)
    /// stdout could not be written (exit 1).
    case localOutput(why: String)
    /// SIGHUP, SIGINT or SIGTERM ended the session (exit 128 + the signal, nothing printed).
    case signal(Int32)
    /// A local resource could not be set up (an eventfd, a thread) (exit 1).
    case local(Error)

    // Serving (the server role, to come).
    /// The address to listen on is taken (EADDRINUSE) (exit 3).
    case addressInUse(address: String)
    /// Binding the address failed otherwise: permission denied (a port below 1024),
    /// address not available... `errno` is the bind(2) error (exit 3).
    case cannotListen(address: String, errno: Int32)
    /// The server's certificate or key file cannot be read or loaded (exit 4).
    case unreadableCertificate(path: String, why: String)
    /// The program to run for each connection does not exist or cannot be executed (exit 1).
    case missingProgram(path: String, errno: Int32)
}

/// The one line to print for `failure` (nil: nothing, as for a signal) and the exit status.
/// Only usage errors that `--help` explains point at it, once.
public func report(_ failure: Failure) -> (message: String?, status: ExitStatus) {
    switch failure {
    case .usage(let message, let pointsAtHelp):
        guard pointsAtHelp else { return (message, .usage) }
        // A message that ends with a parenthesis takes the pointer inside it: never two in a row.
        if message.hasSuffix(")") { return ("\(message.dropLast()); see wspipe --help)", .usage) }
        return ("\(message) (see wspipe --help)", .usage)
    case .open(let error):
        return (error.message, error.status)
    case .timedOutBeforeOpen(let seconds):
        return ("timed out after \(formatSeconds(seconds)) s (--timeout) before the connection was open", .timedOut)
    case .closedByPeer(let payload):
        return ("the server closed the connection with \(describe(payload))", .closedByPeer)
    case .protocolFailure(let error):
        return ("\(error.description); closing the connection with \(error.closeCode)", .protocolViolation)
    case .lost(let why):
        return ("connection lost: \(why)", .connectionLost)
    case .timedOut:
        return (nil, .timedOut)
    case .localInput(let error):
        return (error.description, .localError)
    case .localOutput(let why):
        return (why, .localError)
    case .signal(let number):
        return (nil, .signal(number))
    case .local(let error):
        return ("\(error)", .localError)
    case .addressInUse(let address):
        return ("cannot listen on \(address): the address is already in use", .cannotConnect)
    case .cannotListen(let address, let code):
        return ("cannot listen on \(address): \(errnoText(code))", .cannotConnect)
    case .unreadableCertificate(let path, let why):
        return ("cannot load the server certificate from '\(path)': \(why)", .tlsFailure)
    case .missingProgram(let path, let code):
        return ("cannot run '\(path)': \(errnoText(code))", .localError)
    }
}

/// A Close for messages: "1001 \"bye\"", or "(no status code)".
func describe(_ payload: ClosePayload) -> String {
    guard let code = payload.code else { return "(no status code)" }
    return payload.reason.isEmpty ? "\(code)" : "\(code) \(printable(payload.reason))"
}
