import WebSocketCore
import WebSocketTransport

/// `--sameorigin`'s rule, pure: a browser's `Origin` (RFC 6454 serialization,
/// "scheme://host[:port]") names the same server as the request's `Host` header, with the
/// scheme our listener serves (https under TLS, else http) and the default port filled in
/// on either side. No Origin at all is a non-browser client: admitted.
public enum SameOrigin {
    /// Whether `origin` (nil: no header) is this server's, as `host` names it.
    public static func admits(origin: String?, host: String, secure: Bool) -> Bool {
        guard let origin else { return true }
        let scheme = secure ? "https" : "http"
        let prefix = scheme + "://"
        guard origin.count > prefix.count, origin.lowercased().hasPrefix(prefix),
              let theirs = authority(String(origin.dropFirst(prefix.count)), secure: secure),
              let ours = authority(host, secure: secure) else { return false }
        return theirs == ours
    }

    /// "Host:port" → (lowercased host, port), the scheme's default port when none is given;
    /// nil for anything else (a path, user information, an empty host, a bad port).
    static func authority(_ text: String, secure: Bool) -> Authority? {
        guard !text.isEmpty, !text.contains(where: { $0 == "/" || $0 == "@" || $0 == "?" || $0 == "#" || $0 == " " }) else { return nil }
        var host = Substring(text), portText: Substring?
        if text.hasPrefix("[") {
            guard let split = BracketedHost(host) else { return nil }
            host = host[...split.host.endIndex]  // brackets kept: "[::1]" compares as written
            portText = split.port
        } else if let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { return nil }
        var port = secure ? 443 : 80
        if let portText {
            guard !portText.isEmpty, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), portText.count <= 5,
                  let number = Int(portText), number <= 65535 else { return nil }
            port = number
        }
        return Authority(host: host.lowercased(), port: port)
    }

    struct Authority: Equatable {
        var host: String
        var port: Int
    }
}
