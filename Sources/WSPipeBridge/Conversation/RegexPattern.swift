import CWSPipeShims

/// --expect REGEX: a POSIX extended regular expression (glibc, C locale: bytes), searched in
/// a payload that may hold NUL bytes.
///
/// glibc's regexec searches by trying a match at every start position, which is quadratic in
/// the payload for patterns such as `(a|aa)*c` (a 32 KB payload took 1.6 s, 1 MiB would take
/// half an hour). The pattern that runs is therefore `^(.|[^.])*(REGEX)`: one anchored pass
/// over the payload (`(.|[^.])` is any byte, NUL included, which `.` is not): 1 MiB against
/// `(a|aa)*c` in 3 ms. The user's pattern is compiled alone first, for its own error message.
/// An unmatched `)` (glibc reads it as a literal) is refused, since it would close the group
/// around it; each `^` anchor runs as GNU's `\`` (after the prefix, glibc's `^` also matches
/// after a newline the prefix consumed). Patterns whose automaton has very many states
/// (bounded repeats of alternatives, `(a|b){20}c`) can still cost seconds on a hostile 1 MiB
/// payload: glibc's state cache grows with the payload.
struct RegexPattern: Sendable {
    private let compiled: CompiledRegex

    init(_ source: String) throws(MessagePatternError) {
        func refuse(_ fault: String) -> MessagePatternError {
            MessagePatternError(option: "--expect", pattern: source, fault: fault)
        }
        guard !source.utf8.contains(0) else { throw refuse("a regular expression cannot hold a NUL byte") }
        let searched: [UInt8]
        switch RegexPattern.scan(Array(source.utf8)) {
        case .backReference(let digit):
            throw refuse("back-references (\\\(digit)) are not supported in --expect patterns")
        case .unmatchedClose:
            throw refuse("bad regular expression: unmatched ) (write \\) for a literal parenthesis)")
        case .plain(let rewritten):
            searched = rewritten
        }
        do throws(CompiledRegex.Failure) {
            _ = try CompiledRegex(source)
        } catch {
            throw refuse("bad regular expression: \(error.message)")
        }
        do throws(CompiledRegex.Failure) {
            compiled = try CompiledRegex("^(.|[^.])*(" + String(decoding: searched, as: UTF8.self) + ")")
        } catch {
            throw refuse("bad regular expression: \(error.message)")
        }
    }

    func matches(_ payload: UnsafeRawBufferPointer) -> Bool { compiled.matches(payload) }

    enum Shape: Equatable {
        /// The pattern with each `^` anchor written `\``.
        case plain([UInt8])
        case backReference(UInt8)
        case unmatchedClose
    }

    /// Back-references (`\1`..`\9`) and unmatched `)` outside bracket expressions, read as
    /// glibc reads a pattern it accepts: `\` escapes the next byte outside brackets and is
    /// literal inside; a bracket expression is `[`, an optional `^`, an optional literal `]`,
    /// then items up to `]`, where `[:…:]`, `[.….]` and `[=…=]` end only at their own closer.
    static func scan(_ pattern: [UInt8]) -> Shape {
        var index = 0
        var depth = 0
        var rewritten: [UInt8] = []
        rewritten.reserveCapacity(pattern.count)
        while index < pattern.count {
            let start = index
            switch pattern[index] {
            case UInt8(ascii: "\\"):
                if index + 1 < pattern.count, (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(pattern[index + 1]) {
                    return .backReference(pattern[index + 1] - 0x30)
                }
                index += 2
            case UInt8(ascii: "("):
                depth += 1
                index += 1
            case UInt8(ascii: ")"):
                guard depth > 0 else { return .unmatchedClose }
                depth -= 1
                index += 1
            case UInt8(ascii: "["):
                index = endOfBracket(pattern, from: index + 1)
            case UInt8(ascii: "^"):
                rewritten += [UInt8(ascii: "\\"), UInt8(ascii: "`")]
                index += 1
                continue
            default:
                index += 1
            }
            rewritten += pattern[start..<min(index, pattern.count)]
        }
        return .plain(rewritten)
    }

    /// The index after the `]` closing a bracket expression whose body starts at `start`
    /// (the end of the pattern if none does: regcomp refuses it anyway).
    private static func endOfBracket(_ pattern: [UInt8], from start: Int) -> Int {
        var index = start
        if index < pattern.count && pattern[index] == UInt8(ascii: "^") { index += 1 }
        if index < pattern.count && pattern[index] == UInt8(ascii: "]") { index += 1 }
        while index < pattern.count {
            let byte = pattern[index]
            if byte == UInt8(ascii: "]") { return index + 1 }
            if byte == UInt8(ascii: "["), index + 1 < pattern.count,
               let closer = [UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "=")].first(where: { $0 == pattern[index + 1] }) {
                // Up to and including the matching ":]", ".]" or "=]".
                var inner = index + 2
                while inner + 1 < pattern.count && !(pattern[inner] == closer && pattern[inner + 1] == UInt8(ascii: "]")) { inner += 1 }
                index = inner + 2
                continue
            }
            index += 1
        }
        return pattern.count
    }
}

/// A compiled regex_t (in C, so Swift needs neither its layout nor REG_STARTEND), freed with
/// its last reference. regexec on a compiled pattern is safe from several threads at once.
final class CompiledRegex: @unchecked Sendable {
    struct Failure: Error { let message: String }

    private let regex: OpaquePointer

    init(_ pattern: String) throws(Failure) {
        var error = [CChar](repeating: 0, count: 256)
        guard let regex = pattern.withCString({ wsp_regex_compile($0, &error, error.count) }) else {
            let text = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // glibc's messages are capitalised sentences ("Unmatched ( or \\("); ours continue a line.
            throw Failure(message: text.prefix(1).lowercased() + text.dropFirst())
        }
        self.regex = regex
    }

    deinit { wsp_regex_free(regex) }

    /// A failure of regexec itself (out of memory) is no match.
    func matches(_ text: UnsafeRawBufferPointer) -> Bool {
        wsp_regex_matches(regex, text.baseAddress, text.count) == 1
    }
}
