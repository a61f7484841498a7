import WebSocketCore

/// An HTTP CONNECT tunnel request and the proxy's answer (RFC 9110 §9.3.6), without I/O.
public enum HTTPConnect {
    /// "CONNECT host:port HTTP/1.1" (IPv6 in brackets).
    public static func requestLine(target: HostPort) -> String { "CONNECT \(target) HTTP/1.1" }

    /// Host (the target, as RFC 9110 asks), Proxy-Authorization (Basic, when the proxy URL
    /// has a user), User-Agent.
    public static func requestHeaders(target: HostPort, proxy: ProxyURL, userAgent: String?) -> [HTTPHeader] {
        var headers = [HTTPHeader(name: "Host", value: target.description)]
        if let user = proxy.user {
            let credentials = Base64.encode(Array("\(user):\(proxy.password ?? "")".utf8))
            headers.append(HTTPHeader(name: "Proxy-Authorization", value: "Basic \(credentials)"))
        }
        if let userAgent { headers.append(HTTPHeader(name: "User-Agent", value: userAgent)) }
        return headers
    }

    public static func requestBytes(target: HostPort, proxy: ProxyURL, userAgent: String?) -> [UInt8] {
        var text = requestLine(target: target) + "\r\n"
        for header in requestHeaders(target: target, proxy: proxy, userAgent: userAgent) {
            text += "\(header.name): \(header.value)\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    /// Any 2xx opens the tunnel; everything else is the proxy's refusal, as a message that
    /// names the proxy (never its credentials), the target and the status.
    public static func check(_ head: HTTPResponseHead, proxy: ProxyURL, target: HostPort) throws(TransportError) {
        if (200...299).contains(head.statusCode) { return }
        let status = "\(head.statusCode)\(head.reason.isEmpty ? "" : " \(head.reason)")"
        switch head.statusCode {
        case 407:
            let schemes = head.values("Proxy-Authenticate").compactMap { HTTPText.list($0, separator: UInt8(ascii: " ")).first }
            let offersBasic = schemes.isEmpty || schemes.contains { $0.lowercased() == "basic" }
            if !offersBasic {
                throw .proxy("the \(proxy.name) asks for \(schemes.joined(separator: "/")) authentication, which wspipe "
                             + "does not support (only Basic) [\(status)]")
            }
            if proxy.hasCredentials {
                throw .proxy("the \(proxy.name) refused the user name and password [\(status)]")
            }
            throw .proxy("the \(proxy.name) requires authentication [\(status)]; put the user name and password in "
                         + "the proxy URL: \(proxy.kind.rawValue)://USER:PASSWORD@\(proxy.hostPort)")
        case 403:
            throw .proxy("the \(proxy.name) does not allow connecting to \(target) [\(status)]")
        case 502, 503, 504:
            throw .proxy("the \(proxy.name) could not reach \(target) [\(status)]")
        default:
            throw .proxy("the \(proxy.name) refused CONNECT \(target) [\(status)]")
        }
    }
}
