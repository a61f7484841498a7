import WebSocketCore

/// A bearer token as wspipe accepts one, with the one rule for every place a token comes
/// from: --bearer, WSPIPE_BEARER, --bearer-file (read at the start, and again before each
/// reconnection attempt) and --require-bearer's expected token. A file's contents are UTF-8
/// with surrounding spaces, tabs and line ends trimmed; the token is not empty and is visible
/// ASCII only (it goes into `Authorization: Bearer` as it is).
public struct BearerToken: Sendable, Equatable {
    public let value: String

    /// Why a token is refused; the face words it with where the token came from.
    public enum Problem: Error, Equatable {
        case notUTF8
        case empty
        case invalidCharacters  // a space, a control or a non-ASCII character

        /// What is wrong, after the token's source ("--bearer-file 'F': " + this).
        public var text: String {
            switch self {
            case .notUTF8: "it is not UTF-8 text"
            case .empty: "the bearer token is empty"
            case .invalidCharacters: "the bearer token contains spaces, control or non-ASCII characters"
            }
        }
    }

    /// A token given as it is (an option's value, an environment variable).
    public init(_ text: String) throws(Problem) {
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .invalidCharacters }
        value = text
    }

    /// A token file's contents: UTF-8, trimmed, then as `init(_:)`.
    public init(fileContents bytes: [UInt8]) throws(Problem) {
        guard UTF8Validator.isValid(bytes) else { throw .notUTF8 }
        try self.init(HTTPText.trimmed(String(decoding: bytes, as: UTF8.self), also: [0x0A, 0x0D]))
    }
}
