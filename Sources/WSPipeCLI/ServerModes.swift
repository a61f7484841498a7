import WSPipeBridge

/// One server mode as the command line knows it: the flags that choose it, its bit of
/// `Option.Scope` (an option whose declared scope has it means something in this mode),
/// the reasons of the refusals that have their own, and the factory of its
/// `ServeConfiguration.Mode` (whose `served` makes the engine's mode and its stdio face,
/// ServedModes.swift). What it takes and refuses comes from the options' declarations.
/// The man page's table in SERVER is hand-written; ManPageModeTableTests compares each of
/// its cells with `accepts`.
struct ServerModeDescriptor: Sendable {
    /// The mode as usage errors name it ("--echo", "the stdio mode").
    let name: String
    /// The options that choose it; none for the default.
    let flags: [Option]
    /// Its bit in the options' scopes.
    let scope: Option.Scope
    /// Refusals worded for this mode, checked first; the other options it refuses get the
    /// general "-l/--listen MODE (see SERVER ...)".
    let reasons: [Refusal]
    let make: @Sendable (Settings) throws(UsageError) -> ServeConfiguration.Mode

    /// Options refused together, and how the usage error says why.
    struct Refusal: Sendable {
        let options: [Option]
        /// After "--option has no meaning with "; nil: the general "-l/--listen MODE (see SERVER...)".
        let reason: String?
    }

    /// Options that mean something only in this mode and others like it, not in every
    /// server ("--close-grace needs --exec, --sh, --dir, --forward or --forward-tokens"):
    /// server options (no client scope) whose scope has this mode's bit but not every mode's.
    var only: [Option] {
        Option.applying(to: scope, not: .clientConnection).filter { !$0.scope.isSuperset(of: .server) && !flags.contains($0) }
    }

    /// The client options the stdio mode takes and this one does not: `reasons` first, then
    /// the rest under the general wording.
    var refusals: [Refusal] {
        let worded = reasons.flatMap(\.options)
        let rest = Option.applying(to: .stdioServer, not: scope).filter { !worded.contains($0) }
        return reasons + (rest.isEmpty ? [] : [Refusal(options: rest, reason: nil)])
    }

    /// Whether `option` means something in this mode (client-only options aside).
    func accepts(_ option: Option) -> Bool {
        !refusals.contains { $0.options.contains(option) }
            && (only.contains(option) || ServerModeDescriptor.table.allSatisfy { !$0.only.contains(option) })
    }

    /// The usage error for the first refused option given, if any.
    func refusal(given: [String]) -> UsageError? {
        for refusal in refusals {
            guard let option = refusal.options.first(where: { given.contains($0.longName) }) else { continue }
            let why = refusal.reason ?? "-l/--listen \(name) (see SERVER in the man page)"
            return UsageError("\(option.longName) has no meaning with \(why)")
        }
        return nil
    }
}

extension ServerModeDescriptor {
    /// Every server mode, the default first. The stdio mode uses every client option (the
    /// table in SERVER in the man page); --send, --timeout, --idle-timeout and --oneshot
    /// mean the same per client in every mode.
    static let table: [ServerModeDescriptor] = [stdio, echo, broadcast, exec, forward]

    static let stdio = ServerModeDescriptor(name: "the stdio mode", flags: [], scope: .stdioServer, reasons: []) { _ in .stdio }

    static let echo = ServerModeDescriptor(
        name: "--echo", flags: [Option.echo], scope: .echo,
        reasons: [Refusal(options: [.text, .binary, .null, .chunkSize], reason: "--echo: messages go back with their own type")]) { _ in .echo }

    static let broadcast = ServerModeDescriptor(name: "--broadcast", flags: [Option.broadcast], scope: .broadcast, reasons: []) { _ in
        .broadcast
    }

    /// A child per connection: one program for all (--exec, --sh) or one per path (--dir).
    static let exec = ServerModeDescriptor(name: "--exec/--sh/--dir", flags: [Option.exec, .sh, .dir], scope: .exec,
                                           reasons: []) { settings throws(UsageError) in .exec(try settings.execServing()) }

    static let forward = ServerModeDescriptor(
        name: "--forward", flags: [Option.forward, .forwardTokens], scope: .forward,
        reasons: [Refusal(options: [.text, .binary, .null], reason: "--forward: the client's messages are bytes for the target either way"),
                  Refusal(options: [.chunkSize], reason: "--forward: what one read from the target gives (at most 64 KiB) is one message"),
                  Refusal(options: [.send], reason: "--forward: every byte to the client comes from the target")]) { settings throws(UsageError) in
        .forward(try settings.forwardServing())
    }

    /// The modes whose flags are given, each with what it makes, in table order. Throws
    /// `UsageError` for an option of a mode not given, or a mode's own mistake (--exec
    /// with --sh).
    static func given(in settings: Settings) throws(UsageError) -> [(ServerModeDescriptor, ServeConfiguration.Mode)] {
        let given = settings.given
        let modes = table.filter { mode in mode.flags.contains { given.contains($0.longName) } }
        for mode in table where !modes.contains(where: { $0.name == mode.name }) {
            // An option several modes take needs one of them.
            if let option = mode.only.first(where: { option in given.contains(option.longName) && !modes.contains { $0.only.contains(option) } }) {
                let flags = table.filter { $0.only.contains(option) }.flatMap(\.flags).map(\.longName)
                let named = flags.count > 2 ? flags.dropLast().joined(separator: ", ") + " or " + flags[flags.count - 1]
                                            : flags.joined(separator: " or ")
                throw UsageError("\(option.longName) needs \(named)")
            }
        }
        var made: [(ServerModeDescriptor, ServeConfiguration.Mode)] = []
        for mode in modes { made.append((mode, try mode.make(settings))) }
        return made
    }

    /// The one mode of `given` (the default when none). Throws `UsageError` for two.
    static func single(_ given: [(ServerModeDescriptor, ServeConfiguration.Mode)]) throws(UsageError)
        -> (ServerModeDescriptor, ServeConfiguration.Mode) {
        guard given.count <= 1 else {
            let names = given.map(\.0.name)
            if names.contains(exec.name) && !names.contains(forward.name) {
                // Listed from the table, so a new mode is named too (--forward's pairs take the general wording).
                let others = table.filter { !$0.flags.isEmpty && $0.name != exec.name && $0.name != forward.name }.map(\.name)
                let listed = [exec.name] + others
                throw UsageError("\(listed.dropLast().joined(separator: ", ")) and \(listed[listed.count - 1]) are different modes: choose one")
            }
            throw UsageError("\(names[0]) cannot be combined with \(names[1]): choose one mode")
        }
        return given.first ?? (stdio, .stdio)
    }
}
