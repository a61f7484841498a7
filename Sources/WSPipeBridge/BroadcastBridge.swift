import Glibc
import WebSocketCore
import WebSocketEngine

/// The stdio face of --broadcast: stdin messages (lines, or chunks with -b; --jsonl
/// objects) go to every client through `BroadcastMode`; every client message is written to
/// stdout (raw with the separator, or with --jsonl as an object naming its "client").
/// stdin EOF closes every client with 1000 and ends the server; a --jsonl line that is no
/// message object is reported and skipped (one bad line must not end the service). stdin
/// is read while the fastest client keeps up (`BroadcastMode.hasRoom`); a client far
/// behind it gets 1013.
///
/// stdout is written without blocking (`StdoutSink`): while more than 1 MiB waits for a
/// slow reader, no client is read (their messages wait in TCP), and the loop goes on
/// serving pings, closes and stdin. A reader that goes away closes every client with 1001
/// (exit 0); a failing stdout with 1011 "stdout error", a failing stdin (or a line that
/// cannot be sent in text or --base64 mode) with 1011 "stdin error" (exit 1).
final class BroadcastBridge {
    private let loop: EventLoop
    private let server: ServerDriver
    private let mode: BroadcastMode
    private let source = StdinSource()
    private var framer: InputFramer
    private var watch: EventLoop.Watch?
    private var buffer = ByteBuffer(capacity: 64 * 1024)
    private let log: Diagnostics
    private let jsonLines: Bool
    private let separator: UInt8?
    /// --close-code/--close-reason (the Close at stdin EOF), --no-close (none: the server
    /// goes on), --receive-only (stdin never read), --send-only (nothing on stdout).
    private let endOfInputClose: ClosePayload?
    private let readsStdin: Bool
    private let discards: Bool
    /// Set when stdin failed (exit 1) or a line was not valid input.
    private(set) var failure: Failure?
    private let stdout = StdoutSink()
    private var stdoutWatch: EventLoop.Watch?
    private var stdoutBlocked = false
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
        jsonLines = config.stdio.jsonLines
        separator = config.stdio.mode == .text ? config.stdio.separator : nil
        endOfInputClose = config.stdio.closeOnEndOfInput ? ClosePayload(code: config.stdio.closeCode, reason: Array(config.stdio.closeReason.utf8)) : nil
        readsStdin = !config.stdio.receiveOnly
        discards = config.stdio.sendOnly
        mode.onMessage = { [unowned self] info, kind, payload in write(info, kind, payload) }
        mode.onRoom = { [weak self] in
            self?.bus?.clientsHaveRoom()
            self?.resumeIfRoom()
        }
        bus?.onRoom = { [weak self] in self?.resumeIfRoom() }
        mode.onSlowClient = { [unowned self] id, waiting in
            self.log.event("client \(id) is more than \(ByteCount.text(UInt64(self.mode.queueLimit))) behind "
                      + "(\(ByteCount.text(UInt64(waiting))) waiting): closing it with 1013")
        }
    }

    private var paused = false
    private var hasRoom: Bool { mode.hasRoom && bus?.hasRoom != false }
    private var sink: MessageSink { bus ?? mode }

    private func resumeIfRoom() {
        guard paused, hasRoom, let watch else { return }
        paused = false
        if !loop.setInterest(watch, .readable) { loop.later { [weak self] in self?.pump() } }
    }

    func start() {
        guard readsStdin else { return }
        let watch = loop.watch(source.fd) { [weak self] _ in self?.pump() }
        self.watch = watch
        if !loop.setInterest(watch, .readable) { loop.later { [weak self] in self?.pump() } }
    }

    private func pump() {
        for _ in 0..<16 {
            if !hasRoom {
                paused = true
                if let watch { loop.setInterest(watch, []) }
                return
            }
            ByteBuffer.reuse(&buffer, orMake: 64 * 1024)
            let chunk = buffer
            switch source.read(into: chunk.base, count: chunk.capacity) {
            case .data(let n):
                chunk.count = n
                do throws(InputError) {
                    let actions = try framer.consume(chunk, into: sink)
                    mode.flush()  // this chunk's messages go out now, and count for `hasRoom`
                    perform(actions)
                    if watch == nil { return }  // a close object: stdin is done
                } catch {
                    return end(.localInput(error))
                }
                // Read again only where that cannot block (a pipe without RWF_NOWAIT, a
                // terminal: plain reads, after poll said readable); a short read of a pipe
                // emptied it.
                if !source.readsUntilWouldBlock || (n < chunk.capacity && source.kind == .pipe) { return }
            case .wouldBlock:
                return
            case .end:
                do throws(InputError) {
                    let actions = try framer.finish(into: sink)
                    mode.flush()  // the last message, before the Close (or, with --no-close, at once)
                    perform(actions)
                    if watch == nil { return }  // a close object: that was the Close
                } catch {
                    return end(.localInput(error))
                }
                guard let close = endOfInputClose else {
                    log.event("end of stdin after \(framer.messages) message\(framer.messages == 1 ? "" : "s") (--no-close: the clients stay)")
                    if let watch { loop.remove(watch) }
                    watch = nil
                    return
                }
                log.event("end of stdin after \(framer.messages) message\(framer.messages == 1 ? "" : "s"): closing every client with \(close.code?.rawValue ?? 1000)")
                guard let bus else { return end(nil, close: close) }
                if let watch { loop.remove(watch) }
                watch = nil
                return bus.whenDelivered { [weak self] in self?.end(nil, close: close) }  // ours come back first
            case .failed(let why):
                return end(.localOutput(why: why))
            }
        }
        if let watch, !watch.isAlwaysReady { return }
        loop.later { [weak self] in self?.pump() }  // a file or device: never waits, but take turns
    }

    private func perform(_ actions: [InputAction]) {
        for action in actions {
            switch action {
            case .ping(let payload): mode.ping(payload)
            case .close(let payload):
                // The rest of stdin is ignored: its end must not speak of another Close.
                log.event("close object on stdin: closing every client \(payload.code.map { "with \($0.rawValue)" } ?? "without a code")")
                if let watch { loop.remove(watch) }
                watch = nil
                server.shutdown(payload, within: server.configuration.connection.closeTimeout)
                return
            case .limitReached: break
            }
        }
    }

    private func end(_ failure: Failure?,
                     close: ClosePayload = ClosePayload(code: .internalError, reason: Array("stdin error".utf8))) {
        self.failure = failure
        if let watch { loop.remove(watch) }
        watch = nil
        server.shutdown(close, within: server.configuration.connection.closeTimeout)
    }

    private func write(_ info: ClientInfo, _ kind: MessageKind, _ payload: [UInt8]) {
        var out: [UInt8] = []
        if jsonLines {
            out += Array("{\"type\":\"\(kind)\",\"\(kind == .text ? "data" : "base64")\":".utf8)
            if kind == .text {
                payload.withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            } else {
                out += Array("\"\(Base64.encode(payload))\"".utf8)
            }
            out += Array(",\"client\":\(info.id)}\n".utf8)
        } else {
            out = payload
            if let separator { out.append(separator) }
        }
        bus?.clientMessage(info, kind, payload, jsonLine: out)
        writeLine(out)
    }

    /// Queues bytes for stdout (a message, or a connection event with --jsonl) and writes
    /// what stdout takes now.
    func writeLine(_ bytes: [UInt8]) {
        guard !bytes.isEmpty, stdout.failure == nil, !discards else { return }
        let buffer = ByteBuffer(capacity: bytes.count)
        bytes.withUnsafeBytes { buffer.base.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        buffer.count = bytes.count
        var list = SegmentList()
        list.append(buffer, buffer.base, bytes.count)
        stdout.submit(list)
        if !stdoutBlocked { stdoutBlocked = stdout.flush() }
        refreshStdout()
    }

    private func refreshStdout() {
        if let why = stdout.failure { return stdoutFailed(why) }
        mode.readingPaused = stdout.pendingBytes >= Session.stdoutHighWater
        if stdoutWatch == nil {
            stdoutWatch = loop.watch(stdout.fd) { [weak self] _ in
                guard let self else { return }
                stdoutBlocked = stdout.flush()
                refreshStdout()
            }
        }
        if let stdoutWatch, !loop.setInterest(stdoutWatch, stdoutBlocked ? .writable : []), stdoutBlocked {
            loop.later { [weak self] in  // a descriptor epoll cannot watch: try again soon
                guard let self else { return }
                stdoutBlocked = stdout.flush()
                refreshStdout()
            }
        }
    }

    private var stdoutEnded = false

    private func stdoutFailed(_ why: StdoutSink.Failure) {
        guard !stdoutEnded else { return }
        stdoutEnded = true
        mode.readingPaused = false
        if let stdoutWatch { loop.setInterest(stdoutWatch, []) }
        switch why {
        case .readerGone:
            log.event("stdout reader went away: closing every client with 1001")
            server.shutdown(ClosePayload(code: .goingAway), within: server.configuration.connection.closeTimeout)
        case .failed(let text):
            failure = failure ?? .localOutput(why: text)  // said at the end
            server.shutdown(ClosePayload(code: .internalError, reason: Array("stdout error".utf8)),
                            within: server.configuration.connection.closeTimeout)
        }
        if let watch { loop.remove(watch) }
        watch = nil
    }

    /// The server's end: what stdout still has to take, waiting for it.
    func finish() { stdout.drain() }
}
