import WebSocketCore

/// A line typed in the console: a message to send, or a slash command (a literal leading
/// `/` is typed `//`). Pure: `Console` carries it out.
enum ConsoleCommand: Equatable {
    case text(String)
    case ping(String)
    case close(ClosePayload)
    case binaryHex([UInt8])
    case binaryFile(String)
    case sendFile(String)
    case json(Bool)
    case quiet
    case help
    case quit

    /// What a line means; throws the one line to print for a command that cannot work.
    static func parse(_ line: String) throws(ConsoleCommandError) -> ConsoleCommand {
        guard line.hasPrefix("/") else { return .text(line) }
        if line.hasPrefix("//") { return .text(String(line.dropFirst())) }
        let body = line.dropFirst()
        let name = body.prefix { $0 != " " }
        let rest = body.dropFirst(name.count).drop { $0 == " " }
        let argument = String(rest)
        switch name {
        case "ping":
            guard argument.utf8.count <= 125 else { throw ConsoleCommandError("/ping: at most 125 bytes of text") }
            return .ping(argument)
        case "close":
            guard !argument.isEmpty else { return .close(ClosePayload(code: .normalClosure, reason: [])) }
            let codeText = argument.prefix { $0 != " " }
            let reason = String(argument.dropFirst(codeText.count).drop { $0 == " " })
            guard let number = UInt16(codeText), CloseCode(number).isSendable else {
                throw ConsoleCommandError("/close: '\(codeText)' is not a code that may be sent (1000-1003, 1007-1014, 3000-4999)")
            }
            guard reason.utf8.count <= 123 else { throw ConsoleCommandError("/close: the reason is longer than 123 bytes") }
            return .close(ClosePayload(code: CloseCode(number), reason: Array(reason.utf8)))
        case "binary":
            if argument.hasPrefix("@") { return .binaryFile(try path(argument, "/binary")) }
            return .binaryHex(try hex(argument))
        case "send":
            guard argument.hasPrefix("@") else { throw ConsoleCommandError("/send takes @FILE (the file is sent as one text message)") }
            return .sendFile(try path(argument, "/send"))
        case "json":
            switch argument {
            case "on": return .json(true)
            case "off": return .json(false)
            default: throw ConsoleCommandError("/json takes on or off")
            }
        case "quiet": return .quiet
        case "help": return .help
        case "quit", "exit": return .quit
        default:
            throw ConsoleCommandError("unknown command /\(name) (/help lists them; type // to send a line starting with /)")
        }
    }

    private static func path(_ argument: String, _ command: String) throws(ConsoleCommandError) -> String {
        let path = String(argument.dropFirst())
        guard !path.isEmpty else { throw ConsoleCommandError("\(command) @FILE: no file named") }
        return path
    }

    /// Hex digits, spaces allowed between bytes.
    private static func hex(_ text: String) throws(ConsoleCommandError) -> [UInt8] {
        let digits = text.filter { $0 != " " && $0 != ":" }
        guard !digits.isEmpty else { throw ConsoleCommandError("/binary takes hex digits (/binary 01ff) or @FILE") }
        guard digits.count % 2 == 0 else { throw ConsoleCommandError("/binary: an odd number of hex digits") }
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in digits {
            guard let value = character.hexDigitValue else {
                throw ConsoleCommandError("/binary: '\(character)' is not a hex digit")
            }
            if let first = high {
                bytes.append(first << 4 | UInt8(value))
                high = nil
            } else {
                high = UInt8(value)
            }
        }
        return bytes
    }

    /// The command names Tab completes.
    static let names = ["/ping", "/close", "/binary", "/send", "/json", "/quiet", "/help", "/quit"]

    /// The commands, for /help.
    static let summaries: [(String, String)] = [
        ("/ping [TEXT]", "send a ping; prints the round trip"),
        ("/close [CODE [REASON]]", "close the connection (default 1000)"),
        ("/binary HEX | @FILE", "send a binary message"),
        ("/send @FILE", "send a file as one text message"),
        ("/json on|off", "pretty-print received JSON"),
        ("/quiet", "stop (or start again) printing received messages"),
        ("/help", "this list"),
        ("/quit", "close (1000) and exit; also Ctrl-D on an empty line"),
        ("//TEXT", "send a line that starts with /"),
    ]
}

/// Why a typed command cannot be carried out: one line for the console.
struct ConsoleCommandError: Error, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
}
