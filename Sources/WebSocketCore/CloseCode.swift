/// A close status code (RFC 6455 §7.4), kept as its number so no code is lost.
public struct CloseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ value: UInt16) { self.rawValue = value }

    /// 1000: the purpose for which the connection was established has been fulfilled.
    public static let normalClosure = CloseCode(1000)
    /// 1001: an endpoint is going away (server shutdown, page navigated away, reader gone).
    public static let goingAway = CloseCode(1001)
    /// 1002: the endpoint is terminating the connection due to a protocol error.
    public static let protocolError = CloseCode(1002)
    /// 1003: the endpoint received a type of data it cannot accept.
    public static let unsupportedData = CloseCode(1003)
    /// 1005: no status code was present. Reserved: never sent on the wire.
    public static let noStatusReceived = CloseCode(1005)
    /// 1006: the connection closed without a Close frame. Reserved: never sent.
    public static let abnormalClosure = CloseCode(1006)
    /// 1007: a message's data was inconsistent with its type (e.g. non-UTF-8 text).
    public static let invalidPayloadData = CloseCode(1007)
    /// 1008: a message violated the endpoint's policy.
    public static let policyViolation = CloseCode(1008)
    /// 1009: a message was too big to process.
    public static let messageTooBig = CloseCode(1009)
    /// 1010: the client expected the server to negotiate an extension.
    public static let mandatoryExtension = CloseCode(1010)
    /// 1011: an unexpected condition prevented the endpoint from fulfilling the request.
    public static let internalError = CloseCode(1011)

    /// Whether this code may appear in a Close frame (§7.4.1, §7.4.2; IANA registry):
    /// 1000–1003, 1007–1014 and 3000–4999. 1004, 1005, 1006, 1015 and 1016–2999 are reserved
    /// and codes below 1000 or above 4999 are not used, so receiving one is a protocol error.
    public var isSendable: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// The registered name of the code, or the range it belongs to.
    public var name: String {
        switch rawValue {
        case 1000: return "normal closure"
        case 1001: return "going away"
        case 1002: return "protocol error"
        case 1003: return "unsupported data"
        case 1005: return "no status received"
        case 1006: return "abnormal closure"
        case 1007: return "invalid payload data"
        case 1008: return "policy violation"
        case 1009: return "message too big"
        case 1010: return "mandatory extension"
        case 1011: return "internal error"
        case 1012: return "service restart"
        case 1013: return "try again later"
        case 1014: return "bad gateway"
        case 1015: return "TLS handshake failure"
        case 3000...3999: return "registered application code"
        case 4000...4999: return "private application code"
        default: return "unassigned"
        }
    }

    public var description: String { "\(rawValue) (\(name))" }
}

/// The payload of a Close frame (RFC 6455 §5.5.1): nothing, or a 2-byte code and a UTF-8
/// reason of at most 123 bytes.
public struct ClosePayload: Sendable, Equatable {
    /// nil for an empty Close frame (reported as 1005, "no status received").
    public var code: CloseCode?
    /// The reason as raw bytes (valid UTF-8 once parsed or built through this type).
    public var reason: [UInt8]

    /// Largest reason that fits a control frame: 125 bytes minus the 2-byte code.
    public static let maximumReasonLength = 123

    public init(code: CloseCode?, reason: [UInt8] = []) {
        self.code = code
        self.reason = reason
    }

    /// A Close payload with `reason` as its text. Throws `CloseError` when the code may
    /// not be sent or the reason is longer than 123 bytes.
    public init(code: CloseCode, reason: String) throws(CloseError) {
        guard code.isSendable else { throw .codeNotSendable(code) }
        let bytes = Array(reason.utf8)
        guard bytes.count <= ClosePayload.maximumReasonLength else { throw .reasonTooLong(bytes.count) }
        self.init(code: code, reason: bytes)
    }

    /// Parses a received Close payload. Throws `.protocolError` for a 1-byte payload or a code
    /// that must not be sent, `.invalidUTF8` for a reason that is not UTF-8 (§5.5.1, §7.4).
    public init(parsing payload: [UInt8]) throws(ReceiveError) {
        if payload.isEmpty {
            self.init(code: nil)
            return
        }
        guard payload.count >= 2 else {
            throw .protocolError("Close frame with a 1-byte payload (a status code takes 2 bytes)")
        }
        let code = CloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
        guard code.isSendable else {
            throw .protocolError("Close frame with status code \(code.rawValue), which must not be sent (RFC 6455 §7.4)")
        }
        let reason = Array(payload[2...])
        guard UTF8Validator.isValid(reason) else {
            throw .invalidUTF8("the Close frame's reason is not valid UTF-8")
        }
        self.init(code: code, reason: reason)
    }

    /// The wire form: empty, or the code in network byte order followed by the reason.
    public var bytes: [UInt8] {
        guard let code else { return [] }
        return [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)] + reason
    }

    /// The reason as text (lossless: it is valid UTF-8).
    public var reasonText: String { String(decoding: reason, as: UTF8.self) }
}

/// Why a Close payload could not be built.
public enum CloseError: Error, Equatable, CustomStringConvertible {
    case codeNotSendable(CloseCode)
    case reasonTooLong(Int)

    public var description: String {
        switch self {
        case .codeNotSendable(let code):
            return "close code \(code.rawValue) may not be sent (use 1000-1003, 1007-1014 or 3000-4999)"
        case .reasonTooLong(let length):
            return "close reason is \(length) bytes; at most \(ClosePayload.maximumReasonLength) fit in a Close frame"
        }
    }
}
