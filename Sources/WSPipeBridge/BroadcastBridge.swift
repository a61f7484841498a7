import Glibc
import WebSocketCore
import WebSocketEngine

/// The stdio face of --broadcast: stdin messages (lines, or chunks with -b; --jsonl
/// objects) go to every client through `BroadcastMode`; every client message is written to
/// stdout by the client's `StdoutWriter` (raw with the separator, --base64, or with --jsonl
/// as an object naming its "client", --timestamps adding "ts").
/// stdin EOF closes every client with 1000 and ends the server; a --jsonl line that is no
/// message object is reported and skipped (one bad line must not end the service). stdin
/// is read while the fastest client keeps up (`BroadcastMode.hasRoom`); a client far
/// behind it gets 1013.
///
/// stdout is written without blocking (`StdoutWriter`): while more than 1 MiB waits for a
/// slow reader, no client is read (their messages wait in TCP), and the loop goes on
/// serving pings, closes and stdin. A reader that goes away closes every client with 1001
/// (exit 0); a failing stdout with 1011 "stdout error", a failing stdin (or a line that
/// cannot be sent in text or --base64 mode) with 1011 "stdin error" (exit 1).
final class BroadcastBridge: StdinReaderOwner {
    private let loop: EventLoop
    private let server: ServerDriver
    private let mode: BroadcastMode
    private var framer: InputFramer
    /// stdin: the same reader as the client's, 16 reads a turn (a file never waits).
    private var stdin: StdinReader?
    private let log: Diagnostics
    /// --close-code/--close-reason (the Close at stdin EOF), --no-close (none: the server
    /// goes on), --receive-only (stdin never read), --send-only (nothing on stdout).
    private let endOfInputClose: ClosePayload?
    private let readsStdin: Bool
    /// Set when stdin failed (exit 1) or a line was not valid input.
    private(set) var failure: Failure?
    private let stdout: StdoutWriter
    /// --bus: stdin messages go to the bus, the clients get them when the bus delivers
    /// them (BusLink); nil: straight to `mode`.
    private let bus: BusLink?

    init(loop: EventLoop, server: ServerDriver, mode: BroadcastMode, config: BridgeConfiguration, log: Diagnostics,
         bus: BusLink? = nil) {
        self.bus = bus
        self.loop = loop
        self.server = server
        self.mode = mode
        self.log = log
        framer = InputFramer(mode: config.stdio.inputMode)
        framer.skipsBadLine = { [log] error in log.error(error.description) }
        // -n counts per client in the engine (`ConnectionLimits`, through `LimitKeeper`), not here.
        stdout = StdoutWriter(loop: loop, assembler: OutputAssembler(format: config.stdio.outputFormat, discard: config.stdio.sendOnly))
        endOfInputClose = config.stdio.closeOnEndOfInput ? ClosePayload(code: config.stdio.closeCode, reason: Array(config.stdio.closeReason.utf8)) : nil
        readsStdin = !config.stdio.receiveOnly
        stdout.onChange = { [unowned self] in refreshStdout() }
        mode.onMessage = { [unowned self] info, kind, payload in write(info, kind, payload) }
        mode.onRoom = { [weak self] in
            self?.bus?.clientsHaveRoom()
            self?.stdin?.refresh()
        }
        bus?.onRoom = { [weak self] in self?.stdin?.refresh() }
        mode.onSlowClient = { [unowned self] id, waiting in
            self.log.event("client \(id) is more than \(ByteCount.text(UInt64(self.mode.queueLimit))) behind "
                      + "(\(ByteCount.text(UInt64(waiting))) waiting): closing it with 1013")
        }
    }

    /// Listening: stdin starts (--receive-only: never read).
    func start() {
        guard readsStdin else { return }
        let reader = StdinReader(loop: loop, readSize: 64 * 1024, turn: 16)
        reader.owner = self
        stdin = reader
        reader.refresh()
    }

    var wantsStdin: Bool { mode.hasRoom && bus?.hasRoom != false }
    func stdinTurnEnded() {}

    /// One read of stdin: its messages to every client. False: stdin is done or failed.
    func stdinRead(_ read: StdinRead) -> Bool {
        switch read {
        case .data(let chunk):
            do throws(InputError) {
                perform(try handToFanOut(chunk))
                return stdin?.open ?? false  // not after a close object: stdin is done
            } catch {
                end(.localInput(error))
                return false
            }
        case .end:
            do throws(InputError) {
                perform(try handToFanOut(nil))  // the last message, before the Close (or, with --no-close, at once)
                guard stdin?.open ?? false else { return false }  // a close object: that was the Close
            } catch {
                end(.localInput(error))
                return false
            }
            guard let close = endOfInputClose else {
                log.event("end of stdin after \(framer.messages) message\(framer.messages == 1 ? "" : "s") (--no-close: the clients stay)")
                stdin?.stop()
                return false
            }
            log.event("end of stdin after \(framer.messages) message\(framer.messages == 1 ? "" : "s"): closing every client with \(close.code?.rawValue ?? 1000)")
            guard let bus else {
                end(nil, close: close)
                return false
            }
            stdin?.stop()
            bus.whenDelivered { [weak self] in self?.end(nil, close: close) }  // ours come back first
            return false
        case .failed(let why):
            end(.localOutput(why: why))
            return false
        }
    }

    /// Where stdin's messages leave the endpoint: a read's messages (nil: what stdin's end
    /// completes) go to every client through the fan-out, at once, so that they count for
    /// `BroadcastMode.hasRoom` before the next read; with --bus, to the bus, whose
    /// deliveries reach the fan-out (one order for every process).
    private func handToFanOut(_ chunk: ByteBuffer?) throws(InputError) -> [InputAction] {
        let actions: [InputAction]
        let sink: MessageSink = bus ?? mode
        if let chunk { actions = try framer.consume(chunk, into: sink) } else { actions = try framer.finish(into: sink) }
        mode.flush()
        return actions
    }

    private func perform(_ actions: [InputAction]) {
        for action in actions {
            switch action {
            case .ping(let payload): mode.ping(payload)
            case .close(let payload):
                // The rest of stdin is ignored: its end must not speak of another Close.
                log.event("close object on stdin: closing every client \(payload.code.map { "with \($0.rawValue)" } ?? "without a code")")
                stdin?.stop()
                server.shutdown(payload, within: server.configuration.connection.closeTimeout)
                return
            case .limitReached: break
            }
        }
    }

    private func end(_ failure: Failure?,
                     close: ClosePayload = ClosePayload(code: .internalError, reason: Array("stdin error".utf8))) {
        self.failure = failure
        stdin?.stop()
        server.shutdown(close, within: server.configuration.connection.closeTimeout)
    }

    private func write(_ info: ClientInfo, _ kind: MessageKind, _ payload: [UInt8]) {
        bus?.clientMessage(info, kind, payload)
        stdout.assembler.message(kind, payload, client: info.id)
        submit()
    }

    /// A connection event with --jsonl (newline included), in order with the messages;
    /// `timed`: it has its own "ts" (--timestamps adds none).
    func writeLine(_ bytes: [UInt8], timed: Bool = false) {
        stdout.assembler.event(Array(bytes.dropLast()), timed: timed)
        submit()
    }

    private func submit() {
        stdout.flush()
        refreshStdout()
    }

    private func refreshStdout() {
        if let why = stdout.sink.failure { return stdoutFailed(why) }
        mode.readingPaused = stdout.lagging
        stdout.refreshWatch()
    }

    private var stdoutEnded = false

    private func stdoutFailed(_ why: StdoutSink.Failure) {
        guard !stdoutEnded else { return }
        stdoutEnded = true
        mode.readingPaused = false
        stdout.refreshWatch()  // failed: nothing more to wait for
        switch why {
        case .readerGone:
            log.event("stdout reader went away: closing every client with 1001")
            server.shutdown(ClosePayload(code: .goingAway), within: server.configuration.connection.closeTimeout)
        case .failed(let text):
            failure = failure ?? .localOutput(why: text)  // said at the end
            server.shutdown(ClosePayload(code: .internalError, reason: Array("stdout error".utf8)),
                            within: server.configuration.connection.closeTimeout)
        }
        stdin?.stop()
    }

    /// The server's end: what stdout still has to take, waiting for it.
    func finish() { stdout.drain() }
}
