import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Runs wspipe as a server (-l) and returns how it ended (errors already printed).
///
/// Listens before anything else (an address in use fails at once, exit 3), prints the one
/// `listening on` line (even with -q: scripts read the port from it), serves the mode until
/// SIGINT/SIGTERM/SIGHUP, then stops accepting, closes every client with 1001 within the
/// close timeout, and exits 0: a service asked to stop has succeeded.
@inline(never)
public func runServer(_ config: BridgeConfiguration, _ serve: ServeConfiguration) -> ExitStatus {
    wsp_ignore_sigpipe()
    let log = Diagnostics(verbosity: config.verbosity)
    let loop: EventLoop
    do {
        loop = try EventLoop()
    } catch {
        return log.report(.local(call: "epoll_create1", errno: errno))
    }
    let socket: any ListeningSocket
    let url: String
    do throws(ListenError) {
        switch serve.listen {
        case .tcp(let address, let port):
            let listener = try TCPListener(address: address, port: port)
            socket = listener
            url = "ws://\(listener.localAddress)/"
        case .unix(let path):
            socket = try UnixListener(path: path)
            url = "ws+unix://\(path)"
        }
    } catch {
        return log.report(listenFailure(error, serve.listen))
    }
    let mode: ServerMode
    let broadcast = serve.mode == .broadcast ? BroadcastMode() : nil
    switch serve.mode {
    case .echo: mode = EchoMode()
    case .broadcast: mode = broadcast ?? BroadcastMode()
    }
    let server = WebSocketServer(loop: loop, configuration: serve.server, mode: mode)
    let face = broadcast.map { BroadcastBridge(loop: loop, server: server, mode: $0, config: config, log: log) }
    let events = config.jsonLines
    server.onEvent = { event in
        let shown: ConnectionEvent
        switch event {
        case .connected(let connection):
            let info = connection.info
            shown = ConnectionEvent(client: info.id, kind: .connected(remote: info.remoteAddress, path: info.request.path,
                                                                      subprotocol: info.subprotocol))
        case .disconnected(let connection, let ending):
            shown = ConnectionEvent(client: connection.info.id, kind: .disconnected(ending))
        case .refused(let status):
            log.event("refused a handshake with \(status)")
            return
        }
        log.event(shown.line)
        if events { writeAll(1, shown.json) }
    }
    server.onDrained = { loop.stop() }
    Signals.install(wakeFD: loop.wakeFD)
    Signals.exitAtOnce.store(false, ordering: .relaxed)
    loop.onWake = {
        guard let number = Signals.take() else { return }
        log.event("signal \(number): closing \(server.clientCount) client(s) with 1001")
        server.shutdown(ClosePayload(code: .goingAway), within: config.closeTimeout)
    }
    server.listen(on: socket)
    log.always("wspipe: listening on \(url)")
    face?.start()
    loop.run()
    if let broadcast, broadcast.droppedSlowClients > 0 {
        log.warning("closed \(broadcast.droppedSlowClients) slow client(s) with 1013")
    }
    if let failure = face?.failure { return log.report(failure) }
    return .success
}

/// A listener that could not be made, as the failure `report` words.
func listenFailure(_ error: ListenError, _ address: ListenAddress) -> Failure {
    switch error {
    case .invalidAddress: return .usage("cannot listen on '\(address)': \(error)", pointsAtHelp: false)
    case .system(_, let shown, let code):
        return code == EADDRINUSE ? .addressInUse(address: shown) : .cannotListen(address: shown, errno: code)
    }
}
