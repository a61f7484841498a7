import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// --forward/--forward-tokens: the engine's `ForwardMode` with its -v lines and --jsonl
/// objects (one `forwarded` object per client, with the bytes each way and how the target
/// ended; tokens never appear). Served until a signal, as --echo.
final class ForwardServingMode: UntilSignal {
    private let forward: ForwardServing
    private var mode: ForwardMode?
    private let context: ModeContext

    init(_ context: ModeContext, _ forward: ForwardServing) {
        self.forward = forward
        self.context = context
        // The mode needs the token file, read in `checkBeforeListening`; until then a
        // placeholder that serves nobody (nothing is accepted before it is replaced).
        super.init(context, mode: ForwardServingMode.placeholder(context.loop))
    }

    private static func placeholder(_ loop: EventLoop) -> ForwardMode {
        ForwardMode(loop: loop, targets: .fixed(.unix(path: "@wspipe-unused")))
    }

    override var engineMode: ServerMode { mode ?? super.engineMode }

    /// A token file that cannot be used is a usage error now (exit 2), not at the first client.
    override func checkBeforeListening() -> Failure? {
        let targets: ForwardMode.Targets
        if let path = forward.tokenFile {
            do throws(TokenFile.OpenError) {
                let file = try TokenFile(path: path)
                file.onMistake = { [log] path, line, problem in
                    log.warning("\(path)\(line > 0 ? ":\(line)" : ""): \(problem)")
                }
                file.onReload = { [log] entries in log.event("\(path): read again, \(entries) token(s)") }
                targets = .tokens(file)
            } catch {
                return .usage(error.description, pointsAtHelp: false)
            }
        } else if let target = forward.target {
            targets = .fixed(target)
        } else {
            return .usage("--forward needs a target", pointsAtHelp: true)
        }
        let made = ForwardMode(loop: loop, targets: targets)
        made.relay.closeGrace = forward.closeGrace
        let log = self.log, jsonLines = context.config.stdio.jsonLines
        made.onStart = { client, target in log.event("client \(client): forwarding to \(target)") }
        made.onDialFailure = { remote, target, failure in
            log.event("client from \(remote): \(failure.description) (\(target)): answered \(failure.status)")
        }
        made.onEnd = { client, target, outcome in
            let event = ForwardEvent(client: client, target: target, outcome: outcome)
            log.event(event.line)
            if jsonLines { writeAll(1, event.json) }
        }
        mode = made
        return nil
    }

    override func configure(_ configuration: inout ServerConfiguration) {
        // --allow-origin and --sameorigin are checked by the policy first; either admits.
        mode?.refusesOrigins = configuration.policy.allowedOrigins.isEmpty && !configuration.policy.requiresSameOrigin
        // The dial waits inside the handshake's time: leave the 502/504 room to be written.
        mode?.dialTimeout = max(0.1, min(5, configuration.handshakeTimeout - 0.5))
    }
}

/// One client's relay as -v and --jsonl say it.
struct ForwardEvent {
    let client: Int
    let target: StreamTarget
    let outcome: RelayOutcome

    var targetEnd: String {
        switch outcome.stream {
        case .endOfStream: return "eof"
        case .failed: return "reset"
        case .closedByRelay: return "closed"
        case .graceExpired: return "grace_expired"
        }
    }

    var line: String {
        "client \(client): \(target): \(outcome.bytesToStream) bytes to the target, \(outcome.bytesFromStream) from it; "
            + "the target \(targetEnd == "eof" ? "ended its stream" : targetEnd == "reset" ? "reset the connection" : targetEnd == "closed" ? "was closed by us" : "did not end within --close-grace")"
    }

    var json: [UInt8] {
        var out = Array("{\"type\":\"forwarded\",\"client\":\(client),\"target\":".utf8)
        let text = target.description
        Array(text.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
        out += Array(",\"to_target\":\(outcome.bytesToStream),\"from_target\":\(outcome.bytesFromStream),\"target_end\":\"\(targetEnd)\"}\n".utf8)
        return out
    }
}
