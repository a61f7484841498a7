// Also compiled into the fuzz target `tokens` (fuzz/run), one module without the transport.
#if canImport(WebSocketTransport)
import WebSocketTransport
#endif

/// websockify's token file as a table: one `TOKEN: TARGET` per line, where TARGET is
/// `HOST:PORT` (IPv6 in brackets), `tcp:HOST:PORT` or `unix:PATH`; `#` starts a comment
/// line, blank lines are skipped, spaces around the token and the target are dropped.
/// Pure: `parse` reads text, nothing here opens a file.
public struct TokenTable: Sendable, Equatable {
    public private(set) var targets: [String: StreamTarget] = [:]

    public init(targets: [String: StreamTarget] = [:]) { self.targets = targets }

    /// A line that is not an entry, or a token given twice.
    public struct Mistake: Error, Equatable, Sendable {
        /// 1-based.
        public let line: Int
        public let problem: String
    }

    /// The table of `text`, or the first mistake (with its line).
    public static func parse(_ text: [UInt8]) -> Result<TokenTable, Mistake> {
        var table = TokenTable()
        var number = 0
        for raw in text.split(separator: 0x0A, omittingEmptySubsequences: false) {
            number += 1
            var line = raw[...]
            if line.last == 0x0D { line = line.dropLast() }
            let trimmed = trim(line)
            if trimmed.isEmpty || trimmed.first == UInt8(ascii: "#") { continue }
            // websockify splits at ": "; a colon followed by the target at once works too.
            let spaced = trimmed.indices.first { trimmed[$0] == UInt8(ascii: ":") && $0 + 1 < trimmed.endIndex
                && (trimmed[$0 + 1] == 0x20 || trimmed[$0 + 1] == 0x09) }
            guard let colon = spaced ?? trimmed.firstIndex(of: UInt8(ascii: ":")) else {
                return .failure(Mistake(line: number, problem: "expected 'TOKEN: HOST:PORT'"))
            }
            let token = trim(trimmed[..<colon])
            let target = trim(trimmed[(colon + 1)...])
            guard !token.isEmpty else { return .failure(Mistake(line: number, problem: "the token is empty")) }
            guard token.allSatisfy(isTokenByte) else {
                return .failure(Mistake(line: number, problem: "expected 'TOKEN: HOST:PORT' (a token is printable ASCII without spaces, ';' or ',')"))
            }
            let name = String(decoding: token, as: UTF8.self)
            guard let parsed = parseTarget(target) else {
                return .failure(Mistake(line: number, problem: "'\(shown(target))' is not HOST:PORT, tcp:HOST:PORT or unix:PATH"))
            }
            guard table.targets[name] == nil else {
                return .failure(Mistake(line: number, problem: "the token is given twice"))
            }
            table.targets[name] = parsed
        }
        return .success(table)
    }

    /// The token a request presents: its query's `token=` first, else a `token` cookie
    /// (websockify's two ways; a browser's page can set either).
    public static func token(query: String?, cookies: [String]) -> String? {
        if let query {
            for pair in query.split(separator: "&") where pair.hasPrefix("token=") {
                return percentDecoded(pair.dropFirst(6))
            }
        }
        for header in cookies {
            for cookie in header.split(separator: ";") {
                let trimmed = cookie.drop { $0 == " " }
                if trimmed.hasPrefix("token=") { return String(trimmed.dropFirst(6)) }
            }
        }
        return nil
    }

    private static func parseTarget(_ bytes: ArraySlice<UInt8>) -> StreamTarget? {
        // No control bytes: a stray CR (a file edited on Windows twice) must not end up in a path.
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }), UTF8Check.isValid(bytes) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        if text.hasPrefix("unix:") || text.hasPrefix("tcp:") { return StreamTarget(parsing: text) }
        return StreamTarget(parsing: "tcp:" + text)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: ";") && byte != UInt8(ascii: ",")
    }

    private static func trim(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }

    private static func shown(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(60).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    /// `%XX` decoded (a token in a URL may be escaped); nil for a broken escape.
    static func percentDecoded(_ text: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard bytes.count >= 2, let high = hex(bytes.popFirst()!), let low = hex(bytes.popFirst()!) else { return nil }
            out.append(high << 4 | low)
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

private enum UTF8Check {
    static func isValid(_ bytes: ArraySlice<UInt8>) -> Bool { String(validating: Array(bytes), as: UTF8.self) != nil }
}
