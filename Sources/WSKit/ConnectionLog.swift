import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// `WebSocketOptions.log` as the engine's `OpeningLog`: the lines the CLI shows with `-v`,
/// without its "wspipe: " prefix, with secrets redacted the same way and WSKit's setting
/// names in the route events.
struct ConnectionLog: OpeningLog {
    let emit: @Sendable (String) -> Void

    func line(_ direction: String, _ text: String) { emit("\(direction) \(text)") }

    func header(_ direction: String, _ header: HTTPHeader) {
        emit("\(direction) \(header.name): \(Redaction.value(of: header))")
    }

    func event(_ message: @autoclosure () -> String) { emit(message()) }

    func shownTarget(_ target: String) -> String { Redaction.target(target) }

    func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool) {
        emit("redirect \(status) to \(Redaction.location(url.description))"
             + (sameHost ? "" : " (another host: credentials, a Host header, connectTo and serverName are not used there)"))
    }

    var settingNames: SettingNames { .library }

    /// The connection's last line: the peer's Close, or the failure that ended it.
    static func ending(failure: WebSocketError?, code: Int?, reason: String?) -> String {
        if let failure { return "failed: \(failure.description)" }
        guard let code else { return "closed without a code" }
        return "closed \(code)" + (reason.map { $0.isEmpty ? "" : " \($0)" } ?? "")
    }
}
