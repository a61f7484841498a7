/// The four parameters of permessage-deflate (RFC 7692 §7.1), as one offer or response
/// element carries them. Window bits are base-2 logarithms of the LZ77 window (8...15).
public struct DeflateParameters: Sendable, Equatable {
    /// `client_max_window_bits` (§7.1.2.2): absent, given without a value (offers only:
    /// "the client can use a smaller window if asked"), or with one.
    public enum ClientWindowBits: Sendable, Equatable {
        case absent
        case withoutValue
        case bits(Int)
    }

    public var serverNoContextTakeover = false
    public var clientNoContextTakeover = false
    /// `server_max_window_bits` (§7.1.2.1), nil when absent.
    public var serverMaxWindowBits: Int?
    public var clientMaxWindowBits = ClientWindowBits.absent

    public init(serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false,
                serverMaxWindowBits: Int? = nil, clientMaxWindowBits: ClientWindowBits = .absent) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    public static let extensionName = "permessage-deflate"

    /// Reads an element's parameters. Throws, naming the parameter, for one that §7.1 does
    /// not define, one given twice, a no-context-takeover flag with a value, or window bits
    /// that are not 8...15 written without leading zeros (§7.1.2.1's ABNF). `isOffer`: only
    /// an offer may carry `client_max_window_bits` without a value.
    public static func parse(_ element: ExtensionOffer, isOffer: Bool) throws(ExtensionNegotiationError) -> DeflateParameters {
        var result = DeflateParameters()
        var seen: Set<String> = []
        let name = extensionName
        for parameter in element.parameters {
            let key = parameter.name.lowercased()
            guard seen.insert(key).inserted else { throw .repeatedParameter(extension: name, parameter: parameter.name) }
            switch key {
            case "server_no_context_takeover", "client_no_context_takeover":
                if let value = parameter.value {
                    throw .invalidParameterValue(extension: name, parameter: parameter.name, value: value)
                }
                if key == "server_no_context_takeover" { result.serverNoContextTakeover = true }
                else { result.clientNoContextTakeover = true }
            case "server_max_window_bits":
                result.serverMaxWindowBits = try windowBits(parameter)
            case "client_max_window_bits":
                if parameter.value == nil && isOffer {
                    result.clientMaxWindowBits = .withoutValue
                } else {
                    result.clientMaxWindowBits = .bits(try windowBits(parameter))
                }
            default:
                throw .unsupportedParameter(extension: name, parameter: parameter.name)
            }
        }
        return result
    }

    /// 8...15 in decimal without leading zeros.
    private static func windowBits(_ parameter: ExtensionOffer.Parameter) throws(ExtensionNegotiationError) -> Int {
        let bad = ExtensionNegotiationError.invalidParameterValue(extension: extensionName, parameter: parameter.name,
                                                                  value: parameter.value)
        guard let text = parameter.value, let first = text.utf8.first, first != UInt8(ascii: "0"),
              text.utf8.count <= 2, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let bits = Int(text), (8...15).contains(bits) else { throw bad }
        return bits
    }

    /// The element with these parameters, in §7.1's order.
    public var element: ExtensionOffer {
        var element = ExtensionOffer(name: DeflateParameters.extensionName)
        if serverNoContextTakeover { element.parameters.append(.init("server_no_context_takeover")) }
        if clientNoContextTakeover { element.parameters.append(.init("client_no_context_takeover")) }
        if let bits = serverMaxWindowBits { element.parameters.append(.init("server_max_window_bits", String(bits))) }
        switch clientMaxWindowBits {
        case .absent: break
        case .withoutValue: element.parameters.append(.init("client_max_window_bits"))
        case .bits(let bits): element.parameters.append(.init("client_max_window_bits", String(bits)))
        }
        return element
    }
}

/// What one end does once permessage-deflate is agreed: the window and context rules of
/// what it compresses and of what it inflates (RFC 7692 §7.1, seen from `role`).
public struct DeflateConfiguration: Sendable, Equatable {
    /// Window bits of our compressor (at most what the peer allowed us).
    public var outgoingWindowBits: Int
    /// Reset our compressor after each message (the peer asked, or we said we would).
    public var outgoingNoContextTakeover: Bool
    /// Window bits the peer compresses with at most: our inflater's window.
    public var incomingWindowBits: Int
    /// The peer resets its compressor after each message (so may we reset our inflater).
    public var incomingNoContextTakeover: Bool

    public init(outgoingWindowBits: Int = 15, outgoingNoContextTakeover: Bool = false,
                incomingWindowBits: Int = 15, incomingNoContextTakeover: Bool = false) {
        self.outgoingWindowBits = outgoingWindowBits
        self.outgoingNoContextTakeover = outgoingNoContextTakeover
        self.incomingWindowBits = incomingWindowBits
        self.incomingNoContextTakeover = incomingNoContextTakeover
    }

    /// The configuration the agreed `response` means for `role`.
    public init(agreed response: DeflateParameters, role: Role) {
        var client = 15
        if case .bits(let bits) = response.clientMaxWindowBits { client = bits }
        let server = response.serverMaxWindowBits ?? 15
        switch role {
        case .client:
            self.init(outgoingWindowBits: client, outgoingNoContextTakeover: response.clientNoContextTakeover,
                      incomingWindowBits: server, incomingNoContextTakeover: response.serverNoContextTakeover)
        case .server:
            self.init(outgoingWindowBits: server, outgoingNoContextTakeover: response.serverNoContextTakeover,
                      incomingWindowBits: client, incomingNoContextTakeover: response.clientNoContextTakeover)
        }
    }

    /// "server_max_window_bits=12, client_max_window_bits=15, ..." for -v.
    public var summary: String {
        "we compress with a \(1 << outgoingWindowBits)-byte window\(outgoingNoContextTakeover ? ", no context takeover" : ""); "
            + "the peer with at most \(1 << incomingWindowBits)\(incomingNoContextTakeover ? ", no context takeover" : "")"
    }
}

/// permessage-deflate (RFC 7692) as a `WebSocketExtension`: RSV1 marks a compressed
/// message (§6), and both sides of the negotiation (§5, §7.1). The compression itself is
/// the engine's (zlib); this type decides what is offered, answered and accepted, and
/// carries the agreed `configuration` to the connection.
public struct PerMessageDeflate: WebSocketExtension {
    public var name: String { DeflateParameters.extensionName }
    public var rsv: RSVBits { .rsv1 }

    /// Client: the parameters offered.
    public var offered: DeflateParameters

    /// The client's default offer: `permessage-deflate; client_max_window_bits`, the value
    /// left out (§7.1.2.2: "the server may limit our window"). Browsers and Python
    /// websockets (since 10.1) send exactly this; a *value* there is what AWS API Gateway
    /// mishandles (websockets #1065), and servers that omit bits when they mean 15
    /// (aiohttp) are fine: absent means 15. Autobahn 13.3-13.6 need it offered.
    public static let defaultOffer = DeflateParameters(clientMaxWindowBits: .withoutValue)
    /// Server: the largest window we compress with (our memory: 2^(bits+2) bytes plus the
    /// hash table of `memoryLevel`), and the window we ask a client that lets us choose.
    public var serverWindowBits: Int
    public var clientWindowBits: Int
    /// zlib's memLevel for our compressor (1...9): its hash table is 2^(memoryLevel+9) bytes.
    public var memoryLevel: Int
    /// Set once agreed: what this end does (see `DeflateConfiguration`).
    public var configuration: DeflateConfiguration?

    /// Client settings: window bits 15 and memLevel 8 unless the server limits them.
    public static func client(_ offer: DeflateParameters = PerMessageDeflate.defaultOffer) -> PerMessageDeflate {
        PerMessageDeflate(offered: offer, serverWindowBits: 15, clientWindowBits: 15, memoryLevel: 8)
    }

    /// Server: answer `server_no_context_takeover` / `client_no_context_takeover` to every
    /// offer, asked for or not (§7.1.1.1, §7.1.1.2 let a server add them).
    public var serverNoContextTakeover = false
    public var clientNoContextTakeover = false

    /// Server settings, tuned for many connections (the figures in docs/DESIGN.md): a 4 KiB
    /// window for our compressor and, where the client lets us choose, for its; memLevel 5
    /// (a 16 KiB hash table). As Python websockets' server defaults.
    public static func server(windowBits: Int = 12, clientWindowBits: Int = 12, memoryLevel: Int = 5,
                              serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false) -> PerMessageDeflate {
        var deflate = PerMessageDeflate(offered: DeflateParameters(), serverWindowBits: windowBits, clientWindowBits: clientWindowBits,
                                        memoryLevel: memoryLevel)
        deflate.serverNoContextTakeover = serverNoContextTakeover
        deflate.clientNoContextTakeover = clientNoContextTakeover
        return deflate
    }

    /// This extension with `configuration` set, for the connection.
    public func agreed(_ configuration: DeflateConfiguration) -> PerMessageDeflate {
        var copy = self
        copy.configuration = configuration
        return copy
    }

    public func offer() -> ExtensionOffer { offered.element }

    /// Client (§7.1): the response may add either no-context-takeover flag and a
    /// `server_max_window_bits` (at most the offered one); `client_max_window_bits` only if
    /// offered, with a value, at most the offered one. Throws naming the parameter.
    public func accept(_ response: ExtensionOffer) throws(ExtensionNegotiationError) {
        _ = try acceptedParameters(response)
    }

    /// `accept`, returning the parameters.
    public func acceptedParameters(_ response: ExtensionOffer) throws(ExtensionNegotiationError) -> DeflateParameters {
        let answer = try DeflateParameters.parse(response, isOffer: false)
        let name = DeflateParameters.extensionName
        if let bits = answer.serverMaxWindowBits, let limit = offered.serverMaxWindowBits, bits > limit {
            throw .invalidParameterValue(extension: name, parameter: "server_max_window_bits", value: String(bits))
        }
        if case .bits(let bits) = answer.clientMaxWindowBits {
            switch offered.clientMaxWindowBits {
            case .absent: throw .parameterNotOffered(extension: name, parameter: "client_max_window_bits")
            case .bits(let limit) where bits > limit:
                throw .invalidParameterValue(extension: name, parameter: "client_max_window_bits", value: String(bits))
            default: break
            }
        }
        return answer
    }

    /// Server (§7.1): the first permessage-deflate offer we can honour, answered (other
    /// extensions' offers are skipped). See `answer(to:)`.
    public func respond(to offers: [ExtensionOffer]) -> ExtensionOffer? {
        negotiate(offers)?.response
    }

    /// Server: `respond(to:)` with the extension configured for the connection (its
    /// `configuration` set, seen from the server).
    public func negotiate(_ offers: [ExtensionOffer]) -> (response: ExtensionOffer, agreed: PerMessageDeflate)? {
        for offer in offers where offer.name.lowercased() == DeflateParameters.extensionName {
            guard let answer = try? answer(to: offer) else { continue }
            return (answer.element, agreed(DeflateConfiguration(agreed: answer, role: .server)))
        }
        return nil
    }

    /// The response parameters for one offer; throws (naming the parameter) to decline an
    /// offer with unknown, repeated or invalid parameters (§7.1: "decline an offer it cannot
    /// parse"). Each rule of §7.1:
    /// - no_context_takeover either way: answered when offered, and also when we are set to
    ///   (`serverNoContextTakeover`, `clientNoContextTakeover`).
    /// - `server_max_window_bits=N` offered: answered with min(N, ours). N = 8 is accepted;
    ///   zlib makes no raw 8-bit streams, so such a connection sends uncompressed messages
    ///   (always allowed, §6) and still inflates the client's.
    /// - not offered: answered with ours when below 15 (§7.1.2.1 lets a server limit itself).
    /// - `client_max_window_bits` without a value: answered with `clientWindowBits`; with a
    ///   value N: min(N, `clientWindowBits`); not offered: never answered (§7.1.2.2), and
    ///   the client may use 15 bits.
    public func answer(to offer: ExtensionOffer) throws(ExtensionNegotiationError) -> DeflateParameters {
        let asked = try DeflateParameters.parse(offer, isOffer: true)
        var answer = DeflateParameters()
        answer.serverNoContextTakeover = asked.serverNoContextTakeover || serverNoContextTakeover
        answer.clientNoContextTakeover = asked.clientNoContextTakeover || clientNoContextTakeover
        let server = min(asked.serverMaxWindowBits ?? 15, serverWindowBits)
        if server < 15 || asked.serverMaxWindowBits != nil { answer.serverMaxWindowBits = server }
        switch asked.clientMaxWindowBits {
        case .absent: break
        case .withoutValue: answer.clientMaxWindowBits = .bits(clientWindowBits)
        case .bits(let bits): answer.clientMaxWindowBits = .bits(min(bits, clientWindowBits))
        }
        return answer
    }
}

/// Compressed-data formats (the engine's `Inflater` reads all three; `--decompress`).
public enum CompressionFormat: String, Sendable, CaseIterable {
    /// Raw DEFLATE (RFC 1951), as permessage-deflate and `--decompress deflate`.
    case deflate
    /// zlib (RFC 1950).
    case zlib
    /// gzip (RFC 1952).
    case gzip
}

