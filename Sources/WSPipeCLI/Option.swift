import WSPipeBridge

/// One command-line option: its names, whether it takes a value, its --help category and
/// lines, where it applies and what it does. The parser, `--help` (Help.swift), the checks
/// of server mode and --forward-listen (`Option.serverOnly`, `.clientOnly`, ...; the mode
/// descriptors) and the man page and completion tests all read these declarations; adding
/// an option is its declaration in Options.swift (or its file) and its name in
/// `Option.allCases`.
public struct Option: Sendable, Equatable {
    /// What taking an option in leaves to do once the URL is known.
    typealias Setter = (inout Settings) -> Void
    /// Checks a value (flags get "") and returns what it sets. The second argument is the
    /// option's long name, for messages. Throws `UsageError` for a value that cannot work.
    typealias Handler = @Sendable (_ value: String, _ name: String) throws(UsageError) -> Setter

    enum Action: Sendable {
        case set(Handler)
        case help
        case version
    }

    public let longName: String
    public let shortName: Character?
    /// The value's placeholder in --help ("SECS"); nil for a flag.
    public let valueName: String?
    /// The --help section it is listed in (`wspipe --help CATEGORY`).
    public let category: Category
    /// Where it means something; elsewhere it is refused with why.
    public let scope: Scope
    /// The --help description (wrapped to 80 columns when shown).
    public let help: [String]
    let action: Action

    public var takesValue: Bool { valueName != nil }

    init(_ longName: String, _ shortName: Character?, value valueName: String?, in category: Category, applies scope: Scope,
         help: [String], action: Action) {
        self.longName = longName
        self.shortName = shortName
        self.valueName = valueName
        self.category = category
        self.scope = scope
        self.help = help
        self.action = action
    }

    /// An option that takes a value.
    init(_ longName: String, _ shortName: Character? = nil, value valueName: String, in category: Category, applies scope: Scope,
         help: String..., handler: @escaping Handler) {
        self.init(longName, shortName, value: valueName, in: category, applies: scope, help: help, action: .set(handler))
    }

    /// A flag: `set` is applied when it is given.
    init(_ longName: String, _ shortName: Character? = nil, in category: Category, applies scope: Scope, help: String...,
         set: @escaping @Sendable (inout Settings) -> Void) {
        self.init(longName, shortName, value: nil, in: category, applies: scope, help: help, action: .set { _, _ in set })
    }

    public static func == (a: Option, b: Option) -> Bool { a.longName == b.longName }

    /// The option named `--name`, if any. A scan of the 88 options, not a Dictionary: making
    /// the Dictionary's metadata at run time checks String's Hashable conformance against
    /// every conformance record of the binary (200,000 instructions at each start with a
    /// long option, callgrind). CommandLineTests check that names are unique.
    /// `firstIndex` looks at each option in place; a `for` loop copied each one it passed
    /// (four retains and releases per option, 36,000 instructions a run, callgrind).
    static func named(_ longName: String) -> Option? {
        allCases.firstIndex { $0.longName == longName }.map { allCases[$0] }
    }

    /// The option with the short name `-letter`, if any.
    static func named(short letter: Character) -> Option? {
        allCases.firstIndex { $0.shortName == letter }.map { allCases[$0] }
    }

    /// Meant only when serving: a server mode in its scope and no client.
    var isServerOnly: Bool { scope.isDisjoint(with: .clientConnection) && !scope.isDisjoint(with: .server) }

    /// Meant only for a client's connection: no server mode (nor one to come) in its scope.
    var isClientOnly: Bool { scope.isDisjoint(with: [.server, .notYetServing]) && !scope.isDisjoint(with: .clientConnection) }

    /// The declared options whose scope has all of `these` and none of `not`, in --help order.
    static func applying(to these: Scope, not: Scope = []) -> [Option] {
        allCases.filter { $0.scope.isSuperset(of: these) && $0.scope.isDisjoint(with: not) }
    }
}

extension Option {
    /// Where an option means something: a client run (stdin and stdout to URL),
    /// --forward-listen's connections, staying connected (--reconnect and what only it
    /// uses), and each server mode (-l). The checks of a run refuse an option given where
    /// its scope does not reach, each with why.
    public struct Scope: OptionSet, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        /// A client run: stdin and stdout to URL's connection.
        public static let client = Scope(rawValue: 1 << 0)
        /// --forward-listen: each TCP connection's own WebSocket to URL.
        public static let forwardListen = Scope(rawValue: 1 << 1)
        /// Staying connected: --reconnect, and the options that need it (with `.client`).
        public static let reconnect = Scope(rawValue: 1 << 2)
        /// -l without a mode option: stdin and stdout to one client at a time.
        public static let stdioServer = Scope(rawValue: 1 << 3)
        public static let echo = Scope(rawValue: 1 << 4)
        public static let broadcast = Scope(rawValue: 1 << 5)
        /// --exec, --sh, --dir: a program per client.
        public static let exec = Scope(rawValue: 1 << 6)
        /// --forward, --forward-tokens: the gateway.
        public static let forward = Scope(rawValue: 1 << 7)
        /// A client option whose server meaning is not built yet: refused with -l rather
        /// than parsed and ignored.
        public static let notYetServing = Scope(rawValue: 1 << 8)

        /// Every server mode.
        public static let server: Scope = [stdioServer, echo, broadcast, exec, forward]
        /// A client's connection (network, request, the client's TLS): a client run and
        /// --forward-listen, no server.
        public static let clientConnection: Scope = [client, forwardListen]
        /// The connection itself (sizes, pings, compression, output): every kind of run.
        public static let everywhere: Scope = [client, forwardListen, server]
    }

    /// The sections of --help: `wspipe --help NAME` shows one, `--help all` every one.
    public enum Category: String, CaseIterable, Sendable {
        case modes, formats, limits, ending, connection, compression, reconnect, conversation, network, tls, request, output
        case server, access, web, bus, programs, gateway

        /// The section's heading.
        var title: String {
            switch self {
            case .modes: return "Modes:"
            case .formats: return "Formats:"
            case .limits: return "Counts and time limits:"
            case .ending: return "Ending:"
            case .connection: return "Connection:"
            case .compression: return "Compression (permessage-deflate, RFC 7692; offered by default):"
            case .reconnect: return "Staying connected (see RECONNECTION in the man page):"
            case .conversation: return "Conversations (see CONVERSATIONS in the man page):"
            case .network: return "Network (proxies from the environment unless --proxy; see NETWORK):"
            case .tls: return "TLS:"
            case .request: return "Request:"
            case .output: return "Output:"
            case .server: return "Server (-l; see SERVER in the man page):"
            case .access: return "Who may connect (-l):"
            case .web: return "Plain HTTP beside WebSocket (-l):"
            case .bus: return "A bus between servers (-l --broadcast; see BUS in the man page):"
            case .programs: return "A program per client (-l; see SERVER in the man page):"
            case .gateway: return "Gateway: TCP over WebSocket (see GATEWAY in the man page):"
            }
        }

        /// A few words for the list in the short --help.
        var summary: String {
            switch self {
            case .modes: return "text, binary, NUL"
            case .formats: return "JSON Lines, base64"
            case .limits: return "counts, time limits"
            case .ending: return "closing at end of input"
            case .connection: return "timeouts, pings, sizes"
            case .compression: return "permessage-deflate"
            case .reconnect: return "staying connected"
            case .conversation: return "expect, until"
            case .network: return "proxies, sockets, DNS"
            case .tls: return "certificates, versions"
            case .request: return "headers, origin, tokens"
            case .output: return "-v, -q, --stats, --help"
            case .server: return "-l and its modes"
            case .access: return "who may connect"
            case .web: return "health, metrics, files"
            case .bus: return "Redis or NATS"
            case .programs: return "--exec, --sh, --dir"
            case .gateway: return "TCP <-> WebSocket"
            }
        }

        /// Lines after the options (left column, text).
        var notes: [(String, String)] {
            self == .request ? [("URL user:password@", "sends Basic authentication")] : []
        }

        /// Its options, in --help order.
        var options: [Option] { Option.allCases.filter { $0.category == self } }
    }
}
