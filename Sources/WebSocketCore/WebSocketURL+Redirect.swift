/// Following an HTTP redirect from the opening handshake (`--location`).
///
/// RFC 6455 §4.1 lets a client follow a 3xx but does not require it; wspipe does only when
/// asked. The rules here are the safety ones: a redirect never leaves TLS (wss → ws), never
/// points at a local socket, and `sameAuthority` tells the caller whether credentials may go
/// along (only to the same host and port).
extension WebSocketURL {
    /// The redirect statuses wspipe follows.
    public static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The URL that a `Location` header value names, resolved against this URL
    /// (RFC 3986 §5.2). `http://` and `https://` targets become `ws://` and `wss://`.
    /// Throws `.badLocation` for anything unparsable, `.downgrade` for wss → ws.
    public func redirected(to location: String) throws(RedirectError) -> WebSocketURL {
        var text = location.trimmingSpaces
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }  // fragments stay client-side
        guard !text.isEmpty else { throw .badLocation("an empty Location header") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw .badLocation("a Location with spaces or control characters")
        }
        var target: WebSocketURL
        if let scheme = WebSocketURL.scheme(of: text) {
            let rest = text.dropFirst(scheme.count)  // "://..."
            let mapped: String
            switch scheme.lowercased() {
            case "ws", "http": mapped = "ws"
            case "wss", "https": mapped = "wss"
            default: throw .unsupportedScheme(scheme)
            }
            do {
                target = try WebSocketURL(parsing: mapped + rest)
            } catch {
                throw .badLocation("\(error)")
            }
            if target.hasSameAuthority(as: self) {
                target.unixSocketPath = unixSocketPath
                if target.user == nil {
                    target.user = user
                    target.password = password
                }
            }
        } else if text.hasPrefix("//") {
            do {
                target = try WebSocketURL(parsing: (isSecure ? "wss:" : "ws:") + text)
            } catch {
                throw .badLocation("\(error)")
            }
            if target.hasSameAuthority(as: self) { target.unixSocketPath = unixSocketPath }
        } else {
            target = self
            target.requestTarget = WebSocketURL.resolveReference(text, against: requestTarget)
        }
        if isSecure && !target.isSecure { throw .downgrade(to: target.description) }
        return target
    }

    /// Whether `other` names the same server: same host (ASCII case ignored) and port.
    /// Credentials, `--connect-to`, `--sni` and a Unix socket carry over only then.
    public func hasSameAuthority(as other: WebSocketURL) -> Bool {
        host.lowercased() == other.host.lowercased() && port == other.port
    }

    /// "ws" in "ws://x", nil for a relative reference (RFC 3986 §3.1 scheme syntax).
    static func scheme(of text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let candidate = text[..<colon]
        guard let first = candidate.first, first.isASCII, first.isLetter,
              candidate.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }),
              text[colon...].hasPrefix("://") else { return nil }
        return String(candidate)
    }

    /// A path-absolute, path-relative or query-only reference against a request target
    /// (RFC 3986 §5.2.2, with dot segments removed).
    static func resolveReference(_ reference: String, against base: String) -> String {
        let basePath = String(base.prefix { $0 != "?" })
        let (referencePath, referenceQuery) = splitQuery(reference)
        let path: String
        if referencePath.isEmpty {
            path = basePath  // "?query" only
        } else if referencePath.hasPrefix("/") {
            path = removeDotSegments(referencePath)
        } else {
            let directory = basePath.lastIndex(of: "/").map { String(basePath[...$0]) } ?? "/"
            path = removeDotSegments(directory + referencePath)
        }
        let query = referenceQuery.map { "?" + $0 } ?? ""
        return encodeTarget(ArraySlice(((path.isEmpty ? "/" : path) + query).utf8))
    }

    private static func splitQuery(_ text: String) -> (String, String?) {
        guard let mark = text.firstIndex(of: "?") else { return (text, nil) }
        return (String(text[..<mark]), String(text[text.index(after: mark)...]))
    }

    /// RFC 3986 §5.2.4.
    static func removeDotSegments(_ path: String) -> String {
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            if segment == "." {
                if last { output.append("") }
            } else if segment == ".." {
                if output.count > 1 { output.removeLast() }
                if last { output.append("") }
            } else {
                output.append(segment)
            }
        }
        let joined = output.joined(separator: "/")
        return joined.hasPrefix("/") ? joined : "/" + joined
    }
}

/// Why a redirect was not followed.
public enum RedirectError: Error, Equatable, CustomStringConvertible {
    case badLocation(String)
    case unsupportedScheme(String)
    /// wss → ws: the redirect would drop TLS.
    case downgrade(to: String)

    public var description: String {
        switch self {
        case .badLocation(let why): return "cannot follow the redirect: \(why)"
        case .unsupportedScheme(let scheme):
            return "cannot follow the redirect to a '\(scheme):' URL (only ws, wss, http and https)"
        case .downgrade(let target):
            return "refusing to follow the redirect from wss:// to \(target): it would drop TLS"
        }
    }
}
