import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
import WebSocketTransport

/// One server mode as `runServer` drives it: the engine's `ServerMode`, what the mode
/// changes in the server's configuration, where --jsonl event lines go, and how a run ends.
/// Made by `ServeConfiguration.Mode.served` (the CLI's table, ServerModes.swift in
/// WSPipeCLI, says which options each mode takes).
protocol ServedMode: AnyObject {
    var engineMode: ServerMode { get }
    /// A mistake to report before listening (a program that cannot run), or nil.
    func checkBeforeListening() -> Failure?
    func configure(_ configuration: inout ServerConfiguration)
    /// A --jsonl connected/disconnected object, newline included.
    func writeEvent(_ json: [UInt8])
    func clientLeft(_ ending: ConnectionEnding, server: ServerDriver)
    /// Listens, prints the `listening on` line, serves until the end and returns the status.
    func run(_ server: ServerDriver, on listener: Listener) -> ExitStatus
}

/// The listening sockets made (or, -l fd:N and systemd, given) before the mode runs, their
/// TLS context and the URLs they serve.
struct Listener {
    let sockets: [any ListeningSocket]
    let tls: TLSServerContext?
    let urls: [String]

    /// Starts accepting on every socket and prints the one `listening on` line, each address
    /// named (scripts read the port from it).
    func start(_ server: ServerDriver, log: Diagnostics) {
        for socket in sockets { server.listen(on: socket, tls: tls) }
        log.always("wspipe: listening on \(urls.joined(separator: ", "))")
    }
}

/// What a mode is made from.
struct ModeContext {
    let config: BridgeConfiguration
    let serve: ServeConfiguration
    let loop: EventLoop
    let log: Diagnostics
}

extension ServeConfiguration.Mode {
    /// The mode's factory.
    func served(_ context: ModeContext) -> ServedMode {
        switch self {
        case .stdio: return StdioServing(context)
        case .echo: return UntilSignal(context, mode: EchoMode())
        case .broadcast: return BroadcastServing(context)
        case .exec(let exec): return ExecServingMode(context, exec)
        case .forward(let forward): return ForwardServingMode(context, forward)
        }
    }
}

/// The default mode: the session bridges stdin and stdout to one client at a time and
/// handles its own signals, timers and exit status.
final class StdioServing: ServedMode {
    private let session: Session
    private let runner: StdioServerRunner
    private let log: Diagnostics
    private let loop: EventLoop

    init(_ context: ModeContext) {
        session = Session(config: context.config, log: context.log, loop: context.loop, span: .connection,
                          face: context.serve.oneshot ? .oneshot : .service)
        runner = StdioServerRunner(session: session, oneshot: context.serve.oneshot)
        log = context.log
        loop = context.loop
    }

    var engineMode: ServerMode { runner }
    func checkBeforeListening() -> Failure? { nil }

    func configure(_ configuration: inout ServerConfiguration) {
        configuration.oneClientAtATime = true
        configuration.connection = session.connectionOptions
    }

    func writeEvent(_ json: [UInt8]) { runner.emitLine(Array(json.dropLast())) }
    func clientLeft(_ ending: ConnectionEnding, server: ServerDriver) {}  // the session's own ending

    func run(_ server: ServerDriver, on listener: Listener) -> ExitStatus {
        // Handled from the `listening on` line on, which scripts wait for: a signal right
        // after it ends the run (1001, the -l unix: socket removed, --stats) when the loop
        // runs, rather than killing at once.
        Signals.install(wakeFD: loop.wakeFD)
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        listener.start(server, log: log)
        return runner.run()
    }
}

/// A mode served until SIGINT/SIGTERM/SIGHUP (then every client gets 1001 within the close
/// timeout, the run returns 0 and the process dies of the signal: `wspipeExit`), or with --oneshot until its one client has gone (the status its
/// ending gives). --echo as it is; --broadcast and --exec add to it.
class UntilSignal: ServedMode {
    let loop: EventLoop
    let log: Diagnostics
    private let mode: ServerMode
    private let oneshot: Bool
    private let closeTimeout: Double
    private var oneshotStatus: ExitStatus?
    /// Set when the last client has been closed after a shutdown: the loop stops once `busy` is false.
    private(set) var draining = false

    init(_ context: ModeContext, mode: ServerMode) {
        loop = context.loop
        log = context.log
        self.mode = mode
        oneshot = context.serve.oneshot
        closeTimeout = context.config.closeTimeout
    }

    var engineMode: ServerMode { mode }
    func checkBeforeListening() -> Failure? { nil }
    func configure(_ configuration: inout ServerConfiguration) {}
    func writeEvent(_ json: [UInt8]) { writeAll(1, json) }
    /// Whether the run must wait for something after the last client (exec: its children).
    var busy: Bool { false }
    /// Called once listening (broadcast: stdin starts).
    func start(_ server: ServerDriver) {}
    /// Called after the loop; a failure to report instead of the status.
    func finish() -> Failure? { nil }

    func clientLeft(_ ending: ConnectionEnding, server: ServerDriver) {
        guard oneshot, oneshotStatus == nil else { return }
        oneshotStatus = Session.status(of: ending, stale: false)
        server.shutdown(ClosePayload(code: .goingAway), within: closeTimeout)
    }

    func run(_ server: ServerDriver, on listener: Listener) -> ExitStatus {
        server.onDrained = { [unowned self] in
            draining = true
            if !busy { loop.stop() }
        }
        Signals.install(wakeFD: loop.wakeFD)
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        loop.onWake = { [unowned self, unowned server] in
            guard let number = Signals.take() else { return }
            log.event("signal \(number): closing \(server.clientCount) client(s) with 1001")
            server.shutdown(ClosePayload(code: .goingAway), within: closeTimeout)
        }
        listener.start(server, log: log)
        start(server)
        loop.run()
        if let failure = finish() { return log.report(failure) }
        return oneshotStatus ?? .success
    }
}

/// --broadcast: the engine's `BroadcastMode` with stdin and stdout (`BroadcastBridge`).
final class BroadcastServing: UntilSignal {
    private let broadcast: BroadcastMode
    private let config: BridgeConfiguration
    private var face: BroadcastBridge?
    /// --bus: the bus between processes; `busFailure` when it refused us.
    private var bus: BusLink?
    private var busFailure: Failure?

    init(_ context: ModeContext) {
        broadcast = BroadcastMode(loop: context.loop)
        if let deflate = context.serve.server.deflate { broadcast.memoryLevel = deflate.memoryLevel }
        config = context.config
        if let serving = context.serve.bus {
            bus = BusLink(serving, loop: context.loop, mode: broadcast, maximumMessage: context.config.maxMessageSize,
                          jsonLines: context.config.stdio.jsonLines, log: context.log)
        }
        super.init(context, mode: broadcast)
    }

    override func writeEvent(_ json: [UInt8]) { face?.writeLine(json) }  // in order with the clients' messages

    override func run(_ server: ServerDriver, on listener: Listener) -> ExitStatus {
        face = BroadcastBridge(loop: loop, server: server, mode: broadcast, config: config, log: log, bus: bus)
        bus?.writeEvent = { [unowned self] in face?.writeLine($0, timed: true) }  // a bus event has its "ts"
        bus?.onRefused = { [unowned self, unowned server] failure in
            busFailure = failure
            server.shutdown(ClosePayload(code: .internalError, reason: Array("bus refused".utf8)), within: server.configuration.connection.closeTimeout)
        }
        return super.run(server, on: listener)
    }

    override func start(_ server: ServerDriver) {
        bus?.start()
        face?.start()
    }

    override func finish() -> Failure? {
        bus?.stop()
        face?.finish()
        if let busFailure { return busFailure }
        if broadcast.droppedSlowClients > 0 { log.warning("closed \(broadcast.droppedSlowClients) slow client(s) with 1013") }
        if broadcast.compressedOnce > 0 {
            log.event("permessage-deflate: \(broadcast.compressedOnce) message(s) compressed once for \(broadcast.sharedSends) copies "
                      + "(clients without server context takeover)")
        }
        return face?.failure
    }
}

/// --exec/--sh: a child per client; after a shutdown the run lasts until the last child is
/// reaped. --dir: the same with the program from each request's path.
final class ExecServingMode: UntilSignal {
    private let exec: ExecServing
    private let children: ChildPool
    /// --dir's directory could not be opened (errno), reported before listening.
    private var directoryError: Int32?

    init(_ context: ModeContext, _ exec: ExecServing) {
        self.exec = exec
        let mode = makeExecMode(exec, loop: context.loop, binary: context.config.stdio.mode == .binary,
                                maximumMessageSize: context.config.maxMessageSize, log: context.log)
        mode.bearerChecked = context.serve.server.policy.bearerToken != nil
        children = mode.pool
        if let directory = exec.directory {
            do throws(ResolveFailure) {
                let programs = try ProgramDirectory(directory: directory)
                mode.directory = programs
                context.log.event("--dir \(programs.path): paths resolved with \(programs.mechanism.rawValue), symbolic links refused")
            } catch {
                if case .failed(let code) = error { directoryError = code } else { directoryError = ENOTDIR }
            }
            let log = context.log
            mode.onNoProgram = { target, why in
                log.event("404 for \(Diagnostics.terminalSafe(Diagnostics.redactedTarget(target))): \(why)")
            }
        }
        super.init(context, mode: mode)
        mode.onOutcome = { [unowned self] _, _ in
            if draining && children.running == 0 { loop.stop() }
        }
    }

    override var busy: Bool { children.running > 0 }

    /// A program that cannot run is a mistake to report now, not at the first client.
    override func checkBeforeListening() -> Failure? {
        if let directory = exec.directory {
            return directoryError.map { .cannotOpenDirectory(path: directory, errno: $0) }
        }
        do throws(ChildError) {
            _ = try exec.command.executablePath(searchPath: getenv("PATH").map { String(cString: $0) })
        } catch {
            if case .missingProgram(let path, let code) = error { return .missingProgram(path: path, errno: code) }
        }
        return nil
    }
}

/// The child-per-connection mode of `--exec`/`--sh`: this process adopts its children's
/// orphans (so a killed grandchild is reaped here, not left to an init that may not reap),
/// and each child's stderr lines come out on ours as `wspipe: client N: LINE`.
func makeExecMode(_ exec: ExecServing, loop: EventLoop, binary: Bool, maximumMessageSize: UInt64,
                  log: Diagnostics) -> ExecMode {
    let mode = ExecMode(loop: loop, command: exec.command, pool: ChildPool(limit: exec.maxChildren, adoptsOrphans: true),
                        serverSoftware: "wspipe/\(wspipeVersion)")
    mode.childOptions.closeGrace = exec.closeGrace
    mode.options.binary = binary
    mode.options.maximumMessageSize = Int(min(maximumMessageSize, UInt64(Int.max)))
    mode.passing = exec.passing
    mode.stderr = { client, line in log.always("wspipe: client \(client): \(String(decoding: line, as: UTF8.self))") }
    mode.onSpawnFailure = { client, error in
        log.error("client \(client): \(describe(error))")
    }
    return mode
}
