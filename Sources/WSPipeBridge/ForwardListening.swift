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
final class ForwardListening {
    /// Openings at once; more connections wait in the backlog.
    static let openingLimit = 256
    /// The buffer the handshake's answer is read into, then the driver's receive buffer.
    static let receiveBufferSize = 64 * 1024

    private let config: BridgeConfiguration
    private let loop: EventLoop
    private let log: Diagnostics
    private var listener: WebSocketEngine.Listener?
    private let openings: BlockingJobs<Result<OpenedConnection, OpenError>>
    private var connections: [UInt64: Forwarded] = [:]
    private var nextID: UInt64 = 0
    private var stopping = false

    /// One accepted connection: opening its WebSocket, or relayed over it.
    private enum Forwarded {
        case opening(TCPStream, ConnectCancellation?)
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
        openings.onResult = { [unowned self] in
            if !stopping && !openings.isFull { listener?.resume() }
        }
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
        let cancellation = ConnectCancellation()
        let deadline = { () -> Deadline in
            var deadline = Deadline(seconds: config.client.connectTimeout)
            deadline.cancellation = cancellation
            return deadline
        }()
        let opener = Opener(config: config, log: log)
        let openingLog = TaggedOpeningLog(log: log, tag: "\(id)")
        log.event("[\(id)] accepted \(stream.remoteAddress): opening \(Diagnostics.redactedLocation(config.client.url.description))")
        let started = openings.run({
            let buffer = ByteBuffer(capacity: ForwardListening.receiveBufferSize)
            do throws(OpenError) {
                let opened = try opener.open(into: buffer, deadline: deadline, log: openingLog)
                return .success(OpenedConnection(opened: opened, buffer: buffer))
            } catch {
                return .failure(error)
            }
        }, then: { [unowned self] result in self.opened(id, result) })
        guard started else {
            log.event("[\(id)] cannot start a thread to open its WebSocket: closing it")
            stream.reset()
            return
        }
        connections[id] = .opening(stream, cancellation)
        if openings.isFull { listener?.pause() }
    }

    private func opened(_ id: UInt64, _ result: Result<OpenedConnection, OpenError>) {
        guard case .opening(let stream, _) = connections[id] else {
            if case .success(let done) = result { done.opened.stream.close() }
            return
        }
        switch result {
        case .failure(let error):
            failed(id, stream, error)
        case .success(let done):
            let extensions: [any WebSocketExtension]
            do throws(OpenError) {
                extensions = try PerMessageDeflate.agreed(offer: config.client.deflate, done.opened.negotiated).map { [$0] } ?? []
            } catch {
                done.opened.stream.close()
                return failed(id, stream, error)
            }
            log.event("[\(id)] connected: \(Diagnostics.redactedLocation(done.opened.url.description))")
            let pair = ForwardedPair(loop: loop, local: stream, opened: done, extensions: extensions, config: config) { [unowned self] in
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
        finishIfDone()
    }

    /// How a pair ended, for -v: the WebSocket's ending, the local connection's, the bytes.
    static func endText(_ outcome: RelayOutcome) -> String {
        var close = ""
        if let payload = ClientEvent.close(outcome.connection), let code = payload.code {
            close = " with \(code)" + (payload.reason.isEmpty ? "" : ": \(payload.reasonText)")
        }
        if case .lost(let loss) = outcome.connection { close += ": \(loss)" }
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
        for (_, connection) in connections {
            switch connection {
            case .opening(_, let cancellation): cancellation?.cancel()
            case .relayed(let pair): pair.close(within: config.closeTimeout)
            }
        }
        finishIfDone()
    }

    private func finishIfDone() {
        if stopping && connections.isEmpty && openings.running == 0 { loop.stop() }
    }
}
