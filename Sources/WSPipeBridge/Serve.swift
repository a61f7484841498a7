import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
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
    // A program that cannot run is a mistake to report now, not at the first client.
    if case .exec(let exec) = serve.mode {
        do throws(ChildError) {
            _ = try exec.command.executablePath(searchPath: getenv("PATH").map { String(cString: $0) })
        } catch {
            if case .missingProgram(let path, let code) = error { return log.report(.missingProgram(path: path, errno: code)) }
        }
    }
    // The certificate and key are loaded before listening: a mistake there is no service.
    var tls: TLSServerContext?
    if let options = serve.tls {
        do throws(TLSFailure) {
            tls = try TLSServerContext(options)
        } catch {
            return log.report(.serverTLS(error))
        }
        log.event("TLS: \(options)")
    }
    let scheme = tls == nil ? "ws" : "wss"
    let socket: any ListeningSocket
    let url: String
    do throws(ListenError) {
        switch serve.listen {
        case .tcp(let address, let port):
            let listener = try TCPListener(address: address, port: port)
            socket = listener
            url = "\(scheme)://\(listener.localAddress)/"
        case .unix(let path):
            socket = try UnixListener(path: path)
            url = "\(scheme)+unix://\(path)"
        }
    } catch {
        return log.report(listenFailure(error, serve.listen))
    }
    let mode: ServerMode
    var children: ChildPool?
    var draining = false
    var broadcast: BroadcastMode?
    var session: Session?
    var serverConfiguration = serve.server
    // --oneshot: one client, whose ending gives the exit status.
    if serve.oneshot { serverConfiguration.oneClientAtATime = true }
    var oneshotStatus: ExitStatus?
    switch serve.mode {
    case .stdio:
        let stdio = Session(config: config, log: log, loop: loop)
        session = stdio
        mode = StdioMode(session: stdio)
        serverConfiguration.oneClientAtATime = true
        serverConfiguration.connection = stdio.connectionOptions
    case .echo: mode = EchoMode()
    case .broadcast:
        let shared = BroadcastMode(loop: loop)
        if let deflate = serve.server.deflate { shared.memoryLevel = deflate.memoryLevel }
        broadcast = shared
        mode = shared
    case .exec(let exec):
        let execMode = makeExecMode(exec, loop: loop, binary: config.mode == .binary,
                                    maximumMessageSize: config.maxMessageSize, log: log)
        children = execMode.pool
        execMode.onOutcome = { _, _ in
            // After a shutdown signal the loop runs until the last child is reaped.
            if draining && execMode.pool.running == 0 { loop.stop() }
        }
        mode = execMode
    }
    let server = WebSocketServer(loop: loop, configuration: serverConfiguration, mode: mode)
    let face = broadcast.map { BroadcastBridge(loop: loop, server: server, mode: $0, config: config, log: log) }
    let events = config.jsonLines
    server.onEvent = { event in
        let shown: ClientEvent
        var tlsNote = ""
        switch event {
        case .connected(let connection):
            let info = connection.info
            shown = ClientEvent(client: info.id, kind: .connected(remote: info.remoteAddress, path: info.request.path,
                                                                      subprotocol: info.subprotocol))
            if let summary = info.tlsSummary {
                tlsNote = " over \(summary)" + (info.clientCertificateSubject.map { ", client certificate \($0)" } ?? "")
            }
        case .disconnected(let connection, let ending):
            shown = ClientEvent(client: connection.info.id, kind: .disconnected(ending))
            if serve.oneshot && session == nil && oneshotStatus == nil {
                oneshotStatus = Session.status(of: ending, stale: false)
                server.shutdown(ClosePayload(code: .goingAway), within: config.closeTimeout)
            }
        case .refused(let status):
            log.event("refused a handshake with \(status)")
            return
        case .notHTTP(let remote, let byte):
            log.event("connection from \(remote) closed: \(notHTTPText(byte))")
            return
        case .tlsFailed(let remote, let why):
            log.event("TLS handshake with \(remote) failed: \(tlsFailureText(why))")
            return
        case .compressionUnavailable(let reason):
            log.warning("permessage-deflate declined: \(reason)")
            return
        }
        log.event(shown.line + tlsNote)
        if case .connected(let connection) = event, let deflate = connection.info.deflate {
            let summary = deflate.configuration.map { " (\($0.summary))" } ?? ""
            log.event("client \(connection.info.id): permessage-deflate agreed: \(deflate.response)\(summary)")
        }
        guard events else { return }
        if let session {
            session.emitLine(Array(shown.json.dropLast()))
        } else if let face {
            face.writeLine(shown.json)  // in order with the clients' messages
        } else {
            writeAll(1, shown.json)
        }
    }
    server.onDrained = {
        draining = true
        if (children?.running ?? 0) == 0 { loop.stop() }
    }
    if let session {
        server.listen(on: socket)
        log.always("wspipe: listening on \(url)")
        return session.serve(server, oneshot: serve.oneshot)
    }
    Signals.install(wakeFD: loop.wakeFD)
    Signals.exitAtOnce.store(false, ordering: .relaxed)
    loop.onWake = {
        guard let number = Signals.take() else { return }
        log.event("signal \(number): closing \(server.clientCount) client(s) with 1001")
        server.shutdown(ClosePayload(code: .goingAway), within: config.closeTimeout)
    }
    server.listen(on: socket, tls: tls)
    log.always("wspipe: listening on \(url)")
    face?.start()
    loop.run()
    face?.finish()
    if let broadcast, broadcast.droppedSlowClients > 0 {
        log.warning("closed \(broadcast.droppedSlowClients) slow client(s) with 1013")
    }
    if let broadcast, broadcast.compressedOnce > 0 {
        log.event("permessage-deflate: \(broadcast.compressedOnce) message(s) compressed once for \(broadcast.sharedSends) copies "
                  + "(clients without server context takeover)")
    }
    if let failure = face?.failure { return log.report(failure) }
    return oneshotStatus ?? .success
}

/// Why one client's TLS handshake failed, from OpenSSL's reason ("peer did not return a
/// certificate", "http request", "unsupported protocol").
func tlsFailureText(_ why: StreamFailure) -> String {
    switch why {
    case .closed, .tlsSessionClosed: return "the client closed the connection"
    case .tls(let alert): return alert.detail
    default: return why.description
    }
}

/// Why a client that does not speak HTTP was closed at its first byte.
func notHTTPText(_ byte: UInt8) -> String {
    let said = HTTPRequestError.notHTTP(firstByte: byte).description
    return byte == HTTPRequestError.tlsHandshakeRecord ? said + " (a TLS handshake: wss:// to this ws:// listener)" : said
}

/// A listener that could not be made, as the failure `report` words.
func listenFailure(_ error: ListenError, _ address: ListenAddress) -> Failure {
    switch error {
    case .invalidAddress: return .usage("cannot listen on '\(address)': \(error)", pointsAtHelp: false)
    case .system(_, let shown, let code):
        return code == EADDRINUSE ? .addressInUse(address: shown) : .cannotListen(address: shown, errno: code)
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
