/// What diagnostics show of requests: tokens in URLs and headers must not reach logs (the
/// CLI's `-v` and WSKit's `WebSocketOptions.log` both show these).
public enum Redaction {
    /// A request target with the values of secret-looking query parameters hidden
    /// (`?access_token=[redacted]&room=5`): tokens in URLs must not reach logs either.
    public static func target(_ target: String) -> String {
        guard let question = target.firstIndex(of: "?") else { return target }
        let query = target[target.index(after: question)...]
        let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { part -> String in
            guard let equals = part.firstIndex(of: "=") else { return String(part) }
            let name = HTTPHeader(name: String(part[..<equals]), value: "")
            return name.isSensitive ? "\(part[..<equals])=[redacted]" : String(part)
        }
        return String(target[...question]) + parts.joined(separator: "&")
    }

    /// A Location value (a redirect target) without user information or secret query values.
    public static func location(_ location: String) -> String {
        target(url(location))
    }

    /// A URL for messages, with any user:password removed; also from a URL without a
    /// scheme (wscat's `user:password@host:port`, which the parser takes as ws://).
    public static func url(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var start = bytes.startIndex
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: Array("://".utf8)) {
            start = colon + 3
        }
        let authorityEnd = bytes[start...].firstIndex {
            $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        } ?? bytes.endIndex
        guard let at = bytes[start..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return text }
        return String(decoding: bytes[..<start], as: UTF8.self) + "[redacted]@" + String(decoding: bytes[(at + 1)...], as: UTF8.self)
    }

    /// The value to show for a header: secrets keep only their scheme ("Bearer [redacted]").
    public static func value(of header: HTTPHeader) -> String {
        // A redirect target: its user information and secret query values, as for URLs.
        if header.hasName("Location") { return location(header.value) }
        guard header.isSensitive else { return header.value }
        let lower = header.name.lowercased()
        if lower == "authorization" || lower == "proxy-authorization", let space = header.value.firstIndex(of: " ") {
            return "\(header.value[..<space]) [redacted]"
        }
        return "[redacted]"
    }
}
