/// Why received data made us fail the connection (RFC 6455 §7.1.7). Each case carries a
/// one-line description for the user and maps to the close code we send.
public enum ReceiveError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A framing or protocol rule was broken: close code 1002.
    case protocolError(String)
    /// A text message or close reason was not UTF-8: close code 1007.
    case invalidUTF8(String)
    /// A message of at least `size` bytes (nil: more than 2^64 - 1) exceeded our limit of
    /// `limit` bytes: close code 1009.
    case messageTooBig(size: UInt64?, limit: UInt64)
    /// A compressed message (RFC 7692) whose data does not inflate: close code 1007, the
    /// payload is not consistent with the message (RFC 6455 §7.4.1; RFC 7692 §8 leaves the
    /// code open; Node's ws sends 1007 too).
    case invalidCompressedData(String)

    /// The close code to send when failing the connection for this error.
    public var closeCode: CloseCode {
        switch self {
        case .protocolError: return .protocolError
        case .invalidUTF8: return .invalidPayloadData
        case .messageTooBig: return .messageTooBig
        case .invalidCompressedData: return .invalidPayloadData
        }
    }

    public var description: String {
        switch self {
        case .protocolError(let text), .invalidUTF8(let text), .invalidCompressedData(let text): return text
        case .messageTooBig(let size?, let limit):
            let (shown, limitShown) = ByteCount.pair(size, limit)
            return "a message of at least \(shown) exceeds the limit of \(limitShown)"
        case .messageTooBig(nil, let limit):
            return "a message of more than 16 EiB exceeds the limit of \(ByteCount.text(limit))"
        }
    }
}
