import CWSPipeShims

/// Runs a client session for `config` under its runner (one connection, or --reconnect's)
/// and returns how it ended (errors already printed).
///
/// The CLI calls this rather than creating a `Session` itself: keeping every type with a
/// stored layout (Session and the structs inside it) on this side of the module boundary
/// means no other module has their sizes inlined (with cross-module optimisation, an
/// incremental release build once left main.swift allocating a Session of a stale,
/// smaller size).
@inline(never)
public func runBridge(_ config: BridgeConfiguration) -> ExitStatus {
    wsp_ignore_sigpipe()
    let log = Diagnostics(verbosity: config.verbosity)
    if let text = config.client.schemeTakenFrom { log.event("'\(text)' has no scheme: taken as \(config.client.url) (no TLS)") }
    Opener(config: config, log: log).warnAboutUnusedTLSOptions()
    do {
        let session = try Session(config: config, log: log)
        if let settings = config.client.reconnect {
            return try ReconnectingRunner(session: session, settings: settings).run()
        }
        return try OneConnectionRunner(session: session).run()
    } catch {
        return log.report(error)
    }
}
