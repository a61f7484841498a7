import WebSocketCore

/// An HTTP CONNECT tunnel request and the proxy's answer (RFC 9110 §9.3.6), without I/O.
public enum HTTPConnect {
    /// Host (the target, as RFC 9110 asks), Proxy-Authorization (Basic, when the proxy URL
    /// has a user), User-Agent.
    public static func requestHeaders(target: HostPort, proxy: ProxyURL, userAgent: String?) -> [HTTPHeader] {
        var headers = [HTTPHeader(name: "Host", value: target.description)]
        if let user = proxy.user {
            headers.append(.basicCredentials("Proxy-Authorization", user: user, password: proxy.password ?? ""))
        }
        if let userAgent { headers.append(HTTPHeader(name: "User-Agent", value: userAgent)) }
        return headers
    }

    /// "CONNECT host:port HTTP/1.1" (IPv6 in brackets) and the headers.
    public static func requestBytes(target: HostPort, proxy: ProxyURL, userAgent: String?) -> [UInt8] {
        HTTPRequestHead.bytes(method: "CONNECT", target: target.description,
                              headers: requestHeaders(target: target, proxy: proxy, userAgent: userAgent))
    }

    /// Any 2xx opens the tunnel; everything else is the proxy's refusal: `.proxy(.refused)`
    /// with the status and the authentication schemes it offers.
    public static func check(_ head: HTTPResponseHead, proxy: ProxyURL, target: HostPort) throws(TransportError) {
        if (200...299).contains(head.statusCode) { return }
        let schemes = head.values("Proxy-Authenticate").compactMap { HTTPText.list($0, separator: UInt8(ascii: " ")).first }
        throw .proxy(.refused(proxy: proxy, target: target, status: head.statusCode, reason: head.reason, schemes: schemes))
    }
}
