import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// The accepted TCP connections of --forward-listen and their WebSockets, on the loop's
/// thread. Each connection's opening (DNS, TCP, TLS, handshake, redirects: `Opener`) runs
/// on a thread of its own (`BlockingJobs`), so a slow or unreachable server holds up no
/// other connection; at most `openingLimit` open at once, beyond that accepting pauses and
/// connections wait in the kernel's backlog. What the local program sends meanwhile waits
/// in its socket, unread, so nothing is lost.
///
/// Out of descriptors (EMFILE, ENFILE) a connection accepted is not reset: it waits, first
/// come first served, for a descriptor to dial with (tried again when a pair ends and every
/// `starvedRetryDelay`), up to the connect timeout; accepting pauses meanwhile, so the
/// connections after it wait in the backlog rather than taking the descriptor it needs.
final class ForwardListening {
    /// Openings at once; more connections wait in the backlog.
    static let openingLimit = 256
    /// The buffer the handshake's answer is read into, then the driver's receive buffer.
    static let receiveBufferSize = 64 * 1024
    /// Seconds between tries of a connection waiting for a descriptor (as `Listener`'s).
    static let starvedRetryDelay = 0.1

    private let config: BridgeConfiguration
    private let loop: EventLoop
    private let log: Diagnostics
    private var listener: WebSocketEngine.Listener?
    private let openings: BlockingJobs<Result<OpenedConnection, OpenError>>
    private var connections: [UInt64: Forwarded] = [:]
    private var nextID: UInt64 = 0
    private var stopping = false
    /// Connections waiting for a descriptor, in the order they first found none.
    private var starved: [UInt64] = []
    /// The first of `starved` is being opened again (one at a time: each try takes one).
    private var retryingStarved = false
    private var starvedRetry: EventLoop.Timer?

    /// One accepted connection: opening its WebSocket (`starvedSince`: when it first found
    /// no descriptor), waiting for a descriptor, or relayed.
    private enum Forwarded {
        case opening(TCPStream, ConnectCancellation?, starvedSince: Instant?)
        case starved(TCPStream, since: Instant)
        case relayed(ForwardedPair)
    }

    /// What an opening gives back to the loop.
    struct OpenedConnection {
        let opened: Opener.Opened
        let buffer: ByteBuffer
    }

    init(config: BridgeConfiguration, loop: EventLoop, socket: TCPListener, log: Diagnostics) throws(EventLoopError) {
        self.config = config
        self.loop = loop
        self.log = log
        openings = try BlockingJobs(loop: loop, limit: ForwardListening.openingLimit)
        listener = WebSocketEngine.Listener(loop: loop, socket: socket) { [unowned self] stream in accepted(stream) }
        openings.onResult = { [unowned self] in resumeIfRoom() }
        starvedRetry = loop.timer { [unowned self] in retryStarved() }
    }

    /// Accepting goes on unless the openings are full or a connection waits for a descriptor.
    private func resumeIfRoom() {
        if !stopping && !openings.isFull && starved.isEmpty && !retryingStarved { listener?.resume() }
    }

    /// Serves until a signal; `line` (the `listening on` line) is printed once a signal
    /// would close the connections rather than kill the process.
    func run(announcing line: String) -> ExitStatus {
        Signals.install(wakeFD: loop.wakeFD)
        Signals.exitAtOnce.store(false, ordering: .relaxed)
        loop.onWake = { [unowned self] in
            guard let number = Signals.take() else { return }
            stop(signal: number)
        }
        listener?.start()
        log.always(line)
        loop.run()
        return .success
    }

    private func accepted(_ stream: TCPStream) {
        nextID += 1
        let id = nextID
        log.event("[\(id)] accepted \(stream.remoteAddress): opening \(Diagnostics.redactedLocation(config.client.url.description))")
        startOpening(id, stream, starvedSince: nil)
    }

    private func startOpening(_ id: UInt64, _ stream: TCPStream, starvedSince: Instant?) {
        let cancellation = ConnectCancellation()
        let deadline = { () -> Deadline in
            var deadline = Deadline(seconds: config.client.connectTimeout)
            deadline.cancellation = cancellation
            return deadline
        }()
        let opener = Opener(config: config, log: log)
        let openingLog = TaggedOpeningLog(log: log, tag: "\(id)", retry: starvedSince != nil)
        let started = openings.run({
            let buffer = ByteBuffer(capacity: ForwardListening.receiveBufferSize)
            do throws(OpenError) {
                let opened = try opener.open(into: buffer, deadline: deadline, log: openingLog)
                return .success(OpenedConnection(opened: opened, buffer: buffer))
            } catch {
                return .failure(error)
            }
        }, then: { [unowned self] result in
            // A retry's dial is shown unless it found no descriptor again (it waits on).
            let waitsOn = if case .failure(let error) = result { error.isOutOfDescriptors } else { false }
            if !waitsOn { openingLog.release() }
            self.opened(id, result)
        })
        guard started else {
            log.event("[\(id)] cannot start a thread to open its WebSocket: closing it")
            connections[id] = nil
            stream.reset()
            if starvedSince != nil {
                retryingStarved = false
                scheduleStarvedRetry(after: ForwardListening.starvedRetryDelay)
                resumeIfRoom()
            }
            return
        }
        connections[id] = .opening(stream, cancellation, starvedSince: starvedSince)
        if openings.isFull { listener?.pause() }
    }

    private func opened(_ id: UInt64, _ result: Result<OpenedConnection, OpenError>) {
        guard case .opening(let stream, _, let starvedSince) = connections[id] else {
            if case .success(let done) = result { done.opened.stream.close() }
            return
        }
        if starvedSince != nil { retryingStarved = false }
        // Opened or given up: the next connection waiting for a descriptor may try now.
        var nextTry = 0.0
        defer { scheduleStarvedRetry(after: nextTry) }
        let since = starvedSince ?? Instant.now()
        switch result {
        case .failure(let error) where error.isOutOfDescriptors && !stopping
            && Instant.now().seconds(since: since) < config.client.connectTimeout:
            if starvedSince == nil {
                starved.append(id)
                log.event("[\(id)] no descriptor left to open its WebSocket: it waits for one (up to \(formatSeconds(config.client.connectTimeout)) s), accepting paused")
            } else {
                starved.insert(id, at: 0)
            }
            connections[id] = .starved(stream, since: since)
            listener?.pause()
            nextTry = ForwardListening.starvedRetryDelay
        case .failure(let error):
            failed(id, stream, error)
        case .success(let done):
            log.event("[\(id)] connected: \(Diagnostics.redactedLocation(done.opened.url.description))")
            let pair = ForwardedPair(loop: loop, local: stream, opened: done, config: config) { [unowned self] in
                ended(id, $0)
            }
            connections[id] = .relayed(pair)
            pair.start()
            if stopping { pair.close(within: config.closeTimeout) }
        }
    }

    /// The WebSocket did not open: the local connection is reset, -v says why.
    private func failed(_ id: UInt64, _ stream: TCPStream, _ error: OpenError) {
        connections[id] = nil
        stream.reset()
        let why = stopping ? "stopped by the signal" : (report(.open(error)).message ?? "\(error)")
        log.event("[\(id)] WebSocket not opened, connection from \(stream.remoteAddress) reset: \(why)")
        finishIfDone()
    }

    private func ended(_ id: UInt64, _ outcome: RelayOutcome) {
        connections[id] = nil
        log.event("[\(id)] \(ForwardListening.endText(outcome))")
        // Its descriptors are free: the first connection waiting for one may have them.
        scheduleStarvedRetry(after: 0)
        finishIfDone()
    }

    private func scheduleStarvedRetry(after seconds: Double) {
        guard !starved.isEmpty, !retryingStarved, let starvedRetry else { return }
        loop.arm(starvedRetry, at: Instant.now().adding(seconds: seconds))
    }

    /// Resets the connections that waited longer than the connect timeout, then opens the
    /// first of the others again.
    private func retryStarved() {
        guard !stopping, !retryingStarved else { return }
        let now = Instant.now()
        starved.removeAll { id in
            guard case .starved(let stream, let since) = connections[id],
                  now.seconds(since: since) >= config.client.connectTimeout else { return false }
            connections[id] = nil
            stream.reset()
            log.event("[\(id)] WebSocket not opened, connection from \(stream.remoteAddress) reset: "
                + "no descriptor was free within \(formatSeconds(config.client.connectTimeout)) s (the connect timeout)")
            return true
        }
        guard !starved.isEmpty else { return resumeIfRoom() }
        let id = starved.removeFirst()
        guard case .starved(let stream, let since) = connections[id] else { return retryStarved() }
        retryingStarved = true
        startOpening(id, stream, starvedSince: since)
    }

    /// How a pair ended, for -v: the WebSocket's ending, the local connection's, the bytes.
    static func endText(_ outcome: RelayOutcome) -> String {
        var close = ""
        if let payload = ClientEvent.close(outcome.connection), let code = payload.code {
            close = " with \(code)" + (payload.reason.isEmpty ? "" : ": \(payload.reasonText)")
        }
        if let detail = describe(outcome.connection, peer: "the server") { close += ": \(detail)" }
        let local: String
        switch outcome.stream {
        case .endOfStream: local = "the local connection ended"
        case .failed(let why): local = "the local connection failed (\(why))"
        case .closedByRelay: local = "the WebSocket ended first"
        case .graceExpired: local = "the local connection did not end within \(RelayOptions().closeGrace) s of the server's Close"
        }
        return "WebSocket \(ClientEvent.cause(outcome.connection))\(close); \(local); "
            + "\(outcome.bytesFromStream) bytes sent, \(outcome.bytesToStream) received"
    }

    /// A signal: accept no more, cancel the openings, close every WebSocket with 1001.
    private func stop(signal number: Int32) {
        guard !stopping else { return }
        stopping = true
        log.event("signal \(number): closing \(connections.count) connection(s) (WebSockets with 1001)")
        listener?.close()
        listener = nil
        starved = []
        if let starvedRetry { loop.arm(starvedRetry, at: nil) }
        for (id, connection) in connections {
            switch connection {
            case .opening(_, let cancellation, _): cancellation?.cancel()
            case .starved(let stream, _):
                stream.reset()
                connections[id] = nil
            case .relayed(let pair): pair.close(within: config.closeTimeout)
            }
        }
        finishIfDone()
    }

    private func finishIfDone() {
        if stopping && connections.isEmpty && openings.running == 0 { loop.stop() }
    }
}
