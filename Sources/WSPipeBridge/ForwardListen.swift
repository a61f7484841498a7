import CWSPipeShims
import Glibc
import Synchronization
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// --forward-listen: listens for TCP and gives each accepted connection its own client
/// WebSocket to the URL, with the client options, relaying its bytes as binary messages
/// both ways. Prints `listening on tcp://ADDR:PORT` (even with -q), runs until
/// SIGINT/SIGTERM/SIGHUP, then closes every WebSocket with 1001 within the close timeout
/// and returns 0; the process then dies of the signal, as in the server modes.
@inline(never)
public func runForwardListen(_ config: BridgeConfiguration, on address: ListenAddress) -> ExitStatus {
    let log = Diagnostics(verbosity: config.verbosity)
    guard let loop = startListeningRun(log) else { return log.report(.local(call: "epoll_create1", errno: errno)) }
    guard case .tcp(let host, let port) = address else { return log.report(.usage("--forward-listen takes a TCP [ADDR:]PORT", pointsAtHelp: true)) }
    let socket: TCPListener
    do throws(ListenError) {
        socket = try TCPListener(address: host, port: port)
    } catch {
        return log.report(listenFailure(error, address))
    }
    if !address.isLoopback {
        log.warning("--forward-listen on \(address), which is not a loopback address: whoever reaches it gets a WebSocket "
                    + "to \(Diagnostics.redactedLocation(config.client.url.description)) with this command's credentials")
    }
    Opener(config: config, log: log).warnAboutUnusedTLSOptions()
    let forwarding: ForwardListening
    do throws(EventLoopError) {
        forwarding = try ForwardListening(config: config, loop: loop, socket: socket, log: log)
    } catch {
        return log.report(.local(call: "eventfd", errno: errno))
    }
    return forwarding.run(announcing: "wspipe: listening on tcp://\(socket.localAddress), forwarding to "
                          + Diagnostics.redactedLocation(config.client.url.description))
}

extension TCPStream {
    /// Closes with a reset (SO_LINGER 0): the local program sees ECONNRESET, a failure, not
    /// the end of an empty stream.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }
}

/// A connection's opening log for -v: each line names the connection, since openings run
/// at the same time on their own threads (each line is still one write).
struct TaggedOpeningLog: OpeningLog {
    let log: Diagnostics
    let tag: String
    /// Set on a try after the first (a connection waiting for a descriptor tries every
    /// 100 ms): the dial's events are held back, and shown once the try gets further (at the
    /// handshake's first line, or `release()` when it fails otherwise than out of
    /// descriptors); a try that finds no descriptor again shows nothing.
    private let held: Held?

    init(log: Diagnostics, tag: String, retry: Bool = false) {
        self.log = log
        self.tag = tag
        held = retry ? Held() : nil
    }

    private final class Held: Sendable {
        /// nil once released: events go straight out.
        let events = Mutex<[String]?>([])
    }

    /// Shows what a retry held back, and lets later events through.
    func release() {
        guard let held else { return }
        let events = held.events.withLock { events in
            defer { events = nil }
            return events ?? []
        }
        for event in events { log.event(event) }
    }

    var settingNames: SettingNames { log.settingNames }
    func line(_ direction: String, _ text: String) {
        release()
        log.line(direction, "[\(tag)] \(text)")
    }
    func header(_ direction: String, _ header: HTTPHeader) {
        guard log.isVerbose else { return }
        log.line(direction, "[\(tag)] \(header.name): \(Diagnostics.redacted(header))")
    }
    func event(_ message: @autoclosure () -> String) {
        guard log.isVerbose else { return }
        let text = "[\(tag)] \(message())"
        if let held, held.events.withLock({ events in events?.append(text); return events != nil }) { return }
        log.event(text)
    }
    func shownTarget(_ target: String) -> String { log.shownTarget(target) }
    func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool) {
        event(Diagnostics.redirectText(status: status, to: url, sameHost: sameHost))
    }
}
