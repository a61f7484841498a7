/// SOCKS version 5 (RFC 1928) with username/password authentication (RFC 1929): the
/// messages a client sends and the replies it reads, without I/O.
public enum SOCKS5 {
    /// What to connect to through the proxy.
    public enum Target: Sendable, Equatable, CustomStringConvertible {
        case address(IPAddress)
        /// A host name the proxy resolves (socks5h).
        case domain(String)

        public var description: String {
            switch self {
            case .address(let address): return address.uriForm
            case .domain(let name): return name
            }
        }
    }

    public enum Method: UInt8, Sendable {
        case noAuthentication = 0x00
        case usernamePassword = 0x02
    }

    /// The greeting: the methods we can do. With credentials both (the proxy picks);
    /// without, only "no authentication".
    public static func greeting(offerPassword: Bool) -> [UInt8] {
        offerPassword ? [5, 2, Method.noAuthentication.rawValue, Method.usernamePassword.rawValue]
                      : [5, 1, Method.noAuthentication.rawValue]
    }

    /// The proxy's 2-byte method choice.
    public static func parseMethodSelection(_ reply: [UInt8], offeredPassword: Bool) throws(SOCKS5Error) -> Method {
        guard reply.count == 2 else { throw .malformed("method selection of \(reply.count) bytes") }
        guard reply[0] == 5 else { throw .notSOCKS5(version: reply[0]) }
        switch reply[1] {
        case Method.noAuthentication.rawValue: return .noAuthentication
        case Method.usernamePassword.rawValue where offeredPassword: return .usernamePassword
        case 0xFF: throw .noAcceptableMethod(offeredPassword: offeredPassword)
        default: throw .malformed("the proxy chose method \(reply[1]), which was not offered")
        }
    }

    /// RFC 1929 username/password request. Each must be 1 to 255 bytes.
    public static func authenticationRequest(user: String, password: String) throws(SOCKS5Error) -> [UInt8] {
        let name = Array(user.utf8)
        let secret = Array(password.utf8)
        guard (1...255).contains(name.count), (1...255).contains(secret.count) else {
            throw .credentialsTooLong
        }
        return [1, UInt8(name.count)] + name + [UInt8(secret.count)] + secret
    }

    /// RFC 1929's 2-byte answer: status 0 is success.
    public static func parseAuthenticationReply(_ reply: [UInt8]) throws(SOCKS5Error) {
        guard reply.count == 2 else { throw .malformed("authentication reply of \(reply.count) bytes") }
        guard reply[0] == 1 else { throw .malformed("authentication reply version \(reply[0])") }
        guard reply[1] == 0 else { throw .authenticationFailed(status: reply[1]) }
    }

    /// CONNECT to `target`:`port`. A domain name must be 1 to 255 bytes.
    public static func connectRequest(_ target: Target, port: UInt16) throws(SOCKS5Error) -> [UInt8] {
        var bytes: [UInt8] = [5, 1, 0]
        switch target {
        case .address(let address):
            bytes.append(address.isIPv6 ? 4 : 1)
            bytes += address.bytes
        case .domain(let name):
            let encoded = Array(name.utf8)
            guard (1...255).contains(encoded.count) else { throw .nameTooLong }
            bytes += [3, UInt8(encoded.count)] + encoded
        }
        return bytes + [UInt8(port >> 8), UInt8(port & 0xFF)]
    }

    /// How long the CONNECT reply is, from its first 5 bytes (the address length depends on
    /// its type). Throws for a reply that is not SOCKS5 or has an unknown address type.
    public static func replyLength(prefix: [UInt8]) throws(SOCKS5Error) -> Int {
        guard prefix.count >= 5 else { throw .malformed("short reply") }
        guard prefix[0] == 5 else { throw .notSOCKS5(version: prefix[0]) }
        switch prefix[3] {
        case 1: return 4 + 4 + 2
        case 4: return 4 + 16 + 2
        case 3: return 4 + 1 + Int(prefix[4]) + 2
        default: throw .malformed("unknown address type \(prefix[3]) in the reply")
        }
    }

    /// The whole CONNECT reply: success gives the address the proxy bound (for -v).
    public static func parseReply(_ reply: [UInt8]) throws(SOCKS5Error) -> String {
        let length = try replyLength(prefix: Array(reply.prefix(5)))
        guard reply.count == length else { throw .malformed("reply of \(reply.count) bytes, expected \(length)") }
        guard reply[1] == 0 else { throw .connectFailed(code: reply[1]) }
        let port = UInt16(reply[length - 2]) << 8 | UInt16(reply[length - 1])
        switch reply[3] {
        case 1, 4:
            let address = IPAddress(bytes: Array(reply[4..<(length - 2)]))
            return HostPort(host: address?.description ?? "?", port: port).description
        default:
            return HostPort(host: String(decoding: reply[5..<(length - 2)], as: UTF8.self), port: port).description
        }
    }

    /// RFC 1928 §6's reply codes in words.
    public static func replyText(_ code: UInt8) -> String {
        switch code {
        case 1: return "general SOCKS server failure"
        case 2: return "connection not allowed by ruleset"
        case 3: return "network unreachable"
        case 4: return "host unreachable"
        case 5: return "connection refused"
        case 6: return "TTL expired"
        case 7: return "command not supported"
        case 8: return "address type not supported"
        default: return "unknown error"
        }
    }
}

/// What went wrong talking SOCKS5. `message(proxy:target:)` makes the user's sentence.
public enum SOCKS5Error: Error, Equatable {
    case notSOCKS5(version: UInt8)
    case noAcceptableMethod(offeredPassword: Bool)
    case authenticationFailed(status: UInt8)
    case connectFailed(code: UInt8)
    case credentialsTooLong
    case nameTooLong
    case malformed(String)

    public func message(proxy: ProxyURL, target: String) -> String {
        switch self {
        case .notSOCKS5(let version):
            return "the \(proxy.name) is not a SOCKS5 server (its answer starts with byte \(version))"
        case .noAcceptableMethod(let offeredPassword):
            return offeredPassword
                ? "the \(proxy.name) accepts neither no authentication nor user name and password"
                : "the \(proxy.name) requires authentication; put the user name and password in the proxy URL: "
                  + "\(proxy.kind.rawValue)://USER:PASSWORD@\(proxy.hostPort)"
        case .authenticationFailed(let status):
            return "the \(proxy.name) refused the user name and password (status \(status))"
        case .connectFailed(let code):
            return "the \(proxy.name) could not connect to \(target): \(SOCKS5.replyText(code)) (reply \(code))"
        case .credentialsTooLong:
            return "the \(proxy.name)'s user name and password must each be 1 to 255 bytes"
        case .nameTooLong:
            return "the host name in \(target) is too long for SOCKS5 (at most 255 bytes)"
        case .malformed(let why):
            return "the \(proxy.name) answered something that is not SOCKS5: \(why)"
        }
    }
}
