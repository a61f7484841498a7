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
            throw refuse("back-references (\\\(digit)) are not supported")
        case .unmatchedClose:
            throw refuse("bad regular expression: unmatched ) (write \\) for a literal parenthesis)")
        case .tooLarge:
            throw refuse("bad regular expression: too large with its repeats expanded (over \(RegexPattern.maximumPositions) "
                         + "positions, where x{N} counts N times x)")
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
        case tooLarge
    }

    /// At most this many positions once repeats are expanded (glibc copies the operand of
    /// `+` and `{m,n}`: `d` with 20 `+` took 0.8 s to compile, each more doubles it), and
    /// matching costs memory by the square of it: `a{1000}b` on 1 MiB took 36 ms and 9 MB,
    /// `a{10000}b` 2.4 s and 416 MB.
    static let maximumPositions = 2000

    /// Back-references (`\1`..`\9`) and unmatched `)` outside bracket expressions, read as
    /// glibc reads a pattern it accepts: `\` escapes the next byte outside brackets and is
    /// literal inside; a bracket expression is `[`, an optional `^`, an optional literal `]`,
    /// then items up to `]`, where `[:…:]`, `[.….]` and `[=…=]` end only at their own closer.
    /// Also the pattern's size with repeats expanded, counted per group: an atom is 1, `x+`
    /// twice x, `x{m,n}` max(m, n) times x.
    static func scan(_ pattern: [UInt8]) -> Shape {
        var index = 0
        var rewritten: [UInt8] = []
        rewritten.reserveCapacity(pattern.count)
        // Per open group: its size so far, and the size of its last atom (what a repeat copies).
        var groups: [(total: Int, last: Int)] = [(0, 0)]
        func atom(_ size: Int) {
            groups[groups.count - 1].total = min(groups[groups.count - 1].total + size, Int(Int32.max))
            groups[groups.count - 1].last = size
        }
        func repeated(_ times: Int) {
            let last = groups[groups.count - 1].last
            let grown = min(last * max(times, 1), Int(Int32.max))
            groups[groups.count - 1].total = min(groups[groups.count - 1].total + grown - last, Int(Int32.max))
            groups[groups.count - 1].last = grown
        }
        while index < pattern.count {
            let start = index
            switch pattern[index] {
            case UInt8(ascii: "\\"):
                if index + 1 < pattern.count, (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(pattern[index + 1]) {
                    return .backReference(pattern[index + 1] - 0x30)
                }
                index += 2
                atom(1)
            case UInt8(ascii: "("):
                groups.append((0, 0))
                index += 1
            case UInt8(ascii: ")"):
                guard groups.count > 1 else { return .unmatchedClose }
                let group = groups.removeLast()
                atom(group.total + 1)
                index += 1
            case UInt8(ascii: "|"):
                groups[groups.count - 1].last = 0
                index += 1
            case UInt8(ascii: "*"), UInt8(ascii: "?"):
                repeated(1)
                index += 1
            case UInt8(ascii: "+"):
                repeated(2)
                index += 1
            case UInt8(ascii: "{"):
                index += 1
                var bounds = [0]
                while index < pattern.count && pattern[index] != UInt8(ascii: "}") {
                    let byte = pattern[index]
                    if byte == UInt8(ascii: ",") { bounds.append(0) } else if byte >= 0x30 && byte <= 0x39 {
                        bounds[bounds.count - 1] = min(bounds[bounds.count - 1] * 10 + Int(byte - 0x30), 1 << 20)
                    }
                    index += 1
                }
                index += 1
                // {m} is m copies, {m,} m + 1 (the last one starred), {m,n} n.
                let hasUpper = bounds.count > 1 && pattern[start..<min(index, pattern.count)].dropLast().last != UInt8(ascii: ",")
                repeated(bounds.count == 1 ? bounds[0] : hasUpper ? max(bounds[0], bounds[1]) : bounds[0] + 1)
            case UInt8(ascii: "["):
                index = endOfBracket(pattern, from: index + 1)
                atom(1)
            case UInt8(ascii: "^"):
                rewritten += [UInt8(ascii: "\\"), UInt8(ascii: "`")]
                index += 1
                atom(1)
                continue
            default:
                index += 1
                atom(1)
            }
            rewritten += pattern[start..<min(index, pattern.count)]
            if groups.contains(where: { $0.total > maximumPositions }) { return .tooLarge }
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
