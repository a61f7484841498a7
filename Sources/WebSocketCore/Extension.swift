/// One element of a `Sec-WebSocket-Extensions` header (RFC 6455 §9.1): an extension's name
/// and its parameters, in order. In a request it is an offer; in a response, what the
/// server accepted (the configuration both ends then use).
///
/// ```
/// extension-list  = 1#extension
/// extension       = extension-token *( ";" extension-param )
/// extension-param = token [ "=" (token | quoted-string) ]
/// ```
public struct ExtensionOffer: Sendable, Equatable, CustomStringConvertible {
    public struct Parameter: Sendable, Equatable {
        public var name: String
        /// The value without quotes (nil for a parameter given without `=`).
        public var value: String?

        public init(_ name: String, _ value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    public var name: String
    public var parameters: [Parameter]

    public init(name: String, parameters: [Parameter] = []) {
        self.name = name
        self.parameters = parameters
    }

    /// The value of the first parameter named `name` (ASCII case-insensitive): nil if
    /// absent, `.some(nil)` if given without a value.
    public func parameter(_ name: String) -> String?? {
        let wanted = name.lowercased()
        return parameters.first { $0.name.lowercased() == wanted }.map(\.value)
    }

    /// The element as header text: `name; param; param=value`. Throws `.invalidToken` for a
    /// name or value that is not a token (§9.1 allows only tokens, quoted or not), so no
    /// caller can put a comma, a quote or a CR/LF into the header.
    public func headerValue() throws(ExtensionHeaderError) -> String {
        guard HTTPHeader.isToken(name) else { throw .invalidToken(name) }
        var text = name
        for parameter in parameters {
            guard HTTPHeader.isToken(parameter.name) else { throw .invalidToken(parameter.name) }
            text += "; " + parameter.name
            if let value = parameter.value {
                guard HTTPHeader.isToken(value) else { throw .invalidToken(value) }
                text += "=" + value
            }
        }
        return text
    }

    public var description: String { (try? headerValue()) ?? printable(Array(name.utf8)) }

    /// A header value of several elements joined with ", ".
    public static func headerValue(_ elements: [ExtensionOffer]) throws(ExtensionHeaderError) -> String {
        var parts: [String] = []
        for element in elements { parts.append(try element.headerValue()) }
        return parts.joined(separator: ", ")
    }

    /// Parses the values of every `Sec-WebSocket-Extensions` header (repeated headers are
    /// one list, RFC 9110 §5.3), elements in order. Empty list elements are skipped (§5.6.1).
    /// Throws `ExtensionHeaderError` for text outside §9.1's grammar.
    public static func parse(_ values: [String]) throws(ExtensionHeaderError) -> [ExtensionOffer] {
        var out: [ExtensionOffer] = []
        for value in values { out += try parse(value) }
        return out
    }

    /// Parses one header value (see `parse(_: [String])`).
    public static func parse(_ value: String) throws(ExtensionHeaderError) -> [ExtensionOffer] {
        var scanner = ExtensionScanner(Array(value.utf8))
        return try scanner.list()
    }
}

/// Why a `Sec-WebSocket-Extensions` value is not RFC 6455 §9.1's grammar.
public enum ExtensionHeaderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Something other than a token where one is required, at byte `offset` of `value`.
    case expectedToken(value: String, offset: Int)
    /// A quoted string without its closing quote.
    case unterminatedQuote(value: String)
    /// A quoted value that is not a token once unescaped (§9.1).
    case quotedValueNotToken(parameter: String, value: String)
    /// A name or value given to the builder that is not a token.
    case invalidToken(String)

    public var description: String {
        switch self {
        case .expectedToken(let value, let offset):
            return "Sec-WebSocket-Extensions \(printable(Array(value.utf8))) is malformed at byte \(offset)"
        case .unterminatedQuote(let value):
            return "Sec-WebSocket-Extensions \(printable(Array(value.utf8))) has a quoted string without its closing quote"
        case .quotedValueNotToken(let parameter, let value):
            return "extension parameter '\(parameter)' has the quoted value \(printable(Array(value.utf8))), which is not a token"
        case .invalidToken(let text):
            return "\(printable(Array(text.utf8))) is not an HTTP token, so it cannot be an extension name, parameter or value"
        }
    }
}

/// The §9.1 grammar over bytes, with optional whitespace around separators.
private struct ExtensionScanner {
    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
    }

    mutating func accept(_ byte: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == byte else { return false }
        i += 1
        return true
    }

    mutating func token() throws(ExtensionHeaderError) -> String {
        skipSpace()
        let start = i
        while i < bytes.count, HTTPHeader.isTokenByte(bytes[i]) { i += 1 }
        guard i > start else { throw .expectedToken(value: text, offset: i) }
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    /// A quoted-string (RFC 9110 §5.6.4) after its opening quote, unescaped.
    mutating func quoted() throws(ExtensionHeaderError) -> String {
        var out: [UInt8] = []
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            if byte == 0x22 { return String(decoding: out, as: UTF8.self) }
            if byte == 0x5C {
                guard i < bytes.count else { break }
                out.append(bytes[i])
                i += 1
            } else {
                out.append(byte)
            }
        }
        throw .unterminatedQuote(value: text)
    }

    mutating func list() throws(ExtensionHeaderError) -> [ExtensionOffer] {
        var out: [ExtensionOffer] = []
        while true {
            while accept(UInt8(ascii: ",")) {}
            skipSpace()
            if i == bytes.count { return out }
            var element = ExtensionOffer(name: try token())
            while accept(UInt8(ascii: ";")) {
                let name = try token()
                var value: String?
                if accept(UInt8(ascii: "=")) {
                    skipSpace()
                    if i < bytes.count, bytes[i] == 0x22 {
                        i += 1
                        let unquoted = try quoted()
                        guard HTTPHeader.isToken(unquoted) else { throw .quotedValueNotToken(parameter: name, value: unquoted) }
                        value = unquoted
                    } else {
                        value = try token()
                    }
                }
                element.parameters.append(.init(name, value))
            }
            out.append(element)
            skipSpace()
            if i == bytes.count { return out }
            guard bytes[i] == UInt8(ascii: ",") else { throw .expectedToken(value: text, offset: i) }
        }
    }
}

/// What an extension (RFC 6455 §9) tells the protocol core: its name, the RSV bits its
/// frames use, and its side of the opening-handshake negotiation. permessage-deflate (RFC
/// 7692) is one. The data path sees the extension through the RSV bits: `MessageReader`
/// accepts them on a data message's first frame and reports them (`messageRSV`), and
/// `WebSocketConnection.makeHeader(rsv:)` sets them; the encoding itself (compressing,
/// inflating) is the extension's, configured by the agreed `ExtensionOffer`.
public protocol WebSocketExtension: Sendable {
    /// The extension token in `Sec-WebSocket-Extensions`, e.g. "permessage-deflate".
    var name: String { get }
    /// The RSV bits its frames may carry. Two negotiated extensions never share a bit.
    var rsv: RSVBits { get }
    /// Client: the offer to send (its `name` must be `name`).
    func offer() -> ExtensionOffer
    /// Client: checks the server's answer to our offer. Throws
    /// `ExtensionNegotiationError.unsupportedParameter` / `.invalidParameterValue` naming
    /// the parameter when the answer is one the client must refuse (§9.1: the client then
    /// fails the connection).
    func accept(_ response: ExtensionOffer) throws(ExtensionNegotiationError)
    /// Server: chooses its answer among the client's offers of this extension (in the
    /// client's order of preference), or nil to decline them all.
    func respond(to offers: [ExtensionOffer]) -> ExtensionOffer?
}

/// Why a client refuses the server's `Sec-WebSocket-Extensions` (RFC 6455 §4.1 item 5, §9.1).
public enum ExtensionNegotiationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The header is not §9.1's grammar.
    case malformed(ExtensionHeaderError)
    /// The server selected an extension the client did not offer.
    case notOffered(String)
    /// The server selected the same extension twice.
    case repeated(String)
    /// Two selected extensions use the same RSV bits.
    case rsvConflict(String, String, RSVBits)
    /// A response parameter the extension does not know or does not allow.
    case unsupportedParameter(extension: String, parameter: String)
    /// A response parameter whose value the extension refuses (nil: a required value is missing).
    case invalidParameterValue(extension: String, parameter: String, value: String?)
    /// A response parameter given more than once (RFC 7692 §7.1 forbids it).
    case repeatedParameter(extension: String, parameter: String)
    /// A response parameter that answers nothing the client offered (RFC 7692 §7.1.2.2).
    case parameterNotOffered(extension: String, parameter: String)

    public var description: String {
        switch self {
        case .malformed(let error): return error.description
        case .notOffered(let name): return "the server selected extension '\(name)', which wspipe did not offer"
        case .repeated(let name): return "the server selected extension '\(name)' more than once"
        case .rsvConflict(let first, let second, let bits):
            return "the server selected extensions '\(first)' and '\(second)', which both use \(bits)"
        case .unsupportedParameter(let name, let parameter):
            return "the server answered extension '\(name)' with parameter '\(parameter)', which it does not support"
        case .invalidParameterValue(let name, let parameter, let value):
            guard let value else { return "the server answered extension '\(name)' with parameter '\(parameter)' without its value" }
            return "the server answered extension '\(name)' with \(parameter)=\(printable(Array(value.utf8))), which is not allowed"
        case .repeatedParameter(let name, let parameter):
            return "the server answered extension '\(name)' with parameter '\(parameter)' more than once"
        case .parameterNotOffered(let name, let parameter):
            return "the server answered extension '\(name)' with parameter '\(parameter)', which wspipe did not offer"
        }
    }
}

/// Both sides of the extension negotiation (RFC 6455 §9.1), over any `WebSocketExtension`s.
public enum ExtensionNegotiation {
    /// Client: the `Sec-WebSocket-Extensions` value offering `extensions`, in order of
    /// preference; nil when there are none. Throws for an offer that is not tokens.
    public static func offer(_ extensions: [any WebSocketExtension]) throws(ExtensionHeaderError) -> String? {
        extensions.isEmpty ? nil : try ExtensionOffer.headerValue(extensions.map { $0.offer() })
    }

    /// Client: checks the server's `Sec-WebSocket-Extensions` values against what was
    /// offered and returns the extensions in use, in the order the server listed them
    /// (the order they apply), with the agreed configuration of each.
    public static func accept(_ responseValues: [String], offered: [any WebSocketExtension])
        throws(ExtensionNegotiationError) -> [(any WebSocketExtension, ExtensionOffer)] {
        let selected: [ExtensionOffer]
        do throws(ExtensionHeaderError) {
            selected = try ExtensionOffer.parse(responseValues)
        } catch {
            throw .malformed(error)
        }
        var agreed: [(any WebSocketExtension, ExtensionOffer)] = []
        for response in selected {
            guard let ext = offered.first(where: { $0.name.lowercased() == response.name.lowercased() }) else {
                throw .notOffered(response.name)
            }
            if agreed.contains(where: { $0.0.name.lowercased() == ext.name.lowercased() }) { throw .repeated(ext.name) }
            if let other = agreed.first(where: { !$0.0.rsv.isDisjoint(with: ext.rsv) }) {
                throw .rsvConflict(other.0.name, ext.name, other.0.rsv.intersection(ext.rsv))
            }
            try ext.accept(response)
            agreed.append((ext, response))
        }
        return agreed
    }

    /// Server: for each extension the client offered (in the client's order) that is in
    /// `supported` and uses no RSV bit of one already chosen, the extension's answer to the
    /// client's offers of it. The answers are the response header's elements, in order.
    public static func respond(to offers: [ExtensionOffer], supported: [any WebSocketExtension])
        -> [(any WebSocketExtension, ExtensionOffer)] {
        var chosen: [(any WebSocketExtension, ExtensionOffer)] = []
        var considered: Set<String> = []
        for offer in offers {
            let name = offer.name.lowercased()
            guard considered.insert(name).inserted,
                  let ext = supported.first(where: { $0.name.lowercased() == name }),
                  chosen.allSatisfy({ $0.0.rsv.isDisjoint(with: ext.rsv) }) else { continue }
            if let answer = ext.respond(to: offers.filter { $0.name.lowercased() == name }) {
                chosen.append((ext, answer))
            }
        }
        return chosen
    }
}
