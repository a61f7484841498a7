import WSPipeBridge

/// One command-line option: its names, whether it takes a value, its --help line and what
/// it does. The parser, `--help` (`helpText`) and the man page and completion tests all
/// read `Option.allCases`; adding an option is one declaration in Options.swift.
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
    /// The --help description, one string per line.
    public let help: [String]
    let action: Action

    public var takesValue: Bool { valueName != nil }

    init(_ longName: String, _ shortName: Character?, value valueName: String?, help: [String], action: Action) {
        self.longName = longName
        self.shortName = shortName
        self.valueName = valueName
        self.help = help
        self.action = action
    }

    /// An option that takes a value.
    init(_ longName: String, _ shortName: Character? = nil, value valueName: String, help: String...,
         handler: @escaping Handler) {
        self.init(longName, shortName, value: valueName, help: help, action: .set(handler))
    }

    /// A flag: `set` is applied when it is given.
    init(_ longName: String, _ shortName: Character? = nil, help: String...,
         set: @escaping @Sendable (inout Settings) -> Void) {
        self.init(longName, shortName, value: nil, help: help, action: .set { _, _ in set })
    }

    public static func == (a: Option, b: Option) -> Bool { a.longName == b.longName }

    /// Every option, in --help order.
    public static var allCases: [Option] { helpSections.flatMap(\.options) }

    /// The option named `--name`, if any. A scan of the 88 options, not a Dictionary: making
    /// the Dictionary's metadata at run time checks String's Hashable conformance against
    /// every conformance record of the binary (200,000 instructions at each start with a
    /// long option, callgrind). CommandLineTests check that names are unique.
    static func named(_ longName: String) -> Option? {
        for section in helpSections { for option in section.options where option.longName == longName { return option } }
        return nil
    }

    /// The option with the short name `-letter`, if any.
    static func named(short letter: Character) -> Option? {
        for section in helpSections { for option in section.options where option.shortName == letter { return option } }
        return nil
    }
}

/// A titled group of options in --help, with extra lines (left column, text) after them.
struct HelpSection: Sendable {
    let title: String
    let options: [Option]
    var notes: [(String, String)] = []
}
