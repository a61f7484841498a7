import WSPipeBridge

// The conversation options (CONVERSATIONS in the man page): the preamble's --expect steps,
// in command-line order with --send and --send-file, and --until.

extension Option {
    static let expect = Option("--expect", value: "REGEX", in: .conversation, applies: .client,
                               help: "wait until a received text message matches this POSIX extended regular",
                               "expression, then go on (repeatable; in order with --send, --send-file)") { text, name throws(UsageError) in
        let pattern = try messagePattern(name, text) { () throws(MessagePatternError) in try MessagePattern.regex(text) }
        return { $0.config.client.conversation.steps.append(.expect(pattern, option: name)) }
    }
    static let expectJSON = Option("--expect-json", value: "PATH=VALUE", in: .conversation, applies: .client,
                                   help: "as --expect, for a JSON message whose field PATH (a.b[0]) equals VALUE",
                                   "(a JSON literal, else a string; numbers compare exactly)") { text, name throws(UsageError) in
        let pattern = try messagePattern(name, text) { () throws(MessagePatternError) in try MessagePattern.jsonField(text) }
        return { $0.config.client.conversation.steps.append(.expect(pattern, option: name)) }
    }
    static let expectTimeout = Option("--expect-timeout", value: "SECS", in: .conversation, applies: .client,
                                      help: "how long each --expect waits (default 10): then a Close and exit 13") { text, name throws(UsageError) in
        let seconds = try parseSeconds(text, option: name)
        return { $0.config.client.conversation.expectTimeout = seconds }
    }
    static let until = Option("--until", value: "REGEX", in: .conversation, applies: .client,
                              help: "after the preamble, close cleanly (exit 0) right after the first text",
                              "message that matches") { text, name throws(UsageError) in
        let pattern = try messagePattern(name, text) { () throws(MessagePatternError) in try MessagePattern.regex(text) }
        return {
            $0.config.client.conversation.until = pattern
            $0.untils += 1
        }
    }
    static let untilJSON = Option("--until-json", value: "PATH=VALUE", in: .conversation, applies: .client,
                                  help: "as --until, for a JSON field (as --expect-json)") { text, name throws(UsageError) in
        let pattern = try messagePattern(name, text) { () throws(MessagePatternError) in try MessagePattern.jsonField(text) }
        return {
            $0.config.client.conversation.until = pattern
            $0.untils += 1
        }
    }
    static let printMatchOnly = Option("--print-match-only", in: .conversation, applies: .client,
                                       help: "write only the message --until matched (none before it)") {
        $0.config.client.conversation.printMatchOnly = true
    }

    /// A pattern, or the usage error that names the option, the text and the fault.
    private static func messagePattern(_ name: String, _ text: String,
                                       _ make: () throws(MessagePatternError) -> MessagePattern) throws(UsageError) -> MessagePattern {
        do {
            return try make()
        } catch {
            throw UsageError("\(name) '\(text)': \(error.description)")
        }
    }
}

extension Settings {
    /// The conversation options' combinations: one --until, one --send-file,
    /// --print-match-only with --until.
    func checkConversation() throws(UsageError) {
        let script = config.client.conversation
        if untils > 1 {
            throw UsageError("give one --until or --until-json: the run ends at the first message that matches it")
        }
        if script.printMatchOnly && script.until == nil {
            throw UsageError("--print-match-only needs --until or --until-json: the message to print")
        }
        if script.steps.filter({ if case .sendFile = $0 { true } else { false } }).count > 1 {
            throw UsageError("--send-file is given twice: give one file (its lines are sent in order)")
        }
    }
}
