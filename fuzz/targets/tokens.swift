// libFuzzer target `tokens`: the token file parser (TokenTable.parse, websockify's
// "TOKEN: HOST:PORT" lines) and the request's token (TokenTable.token).
//
// Compiled into one module with Sources/WebSocketEngine/TokenTable.swift and the
// transport's StreamTarget.swift and IPAddress.swift (see fuzz/run).
//
// Input: byte 0 chooses: even, the rest is a token file; odd, the rest split at the first
// 0x00 is a query and a Cookie header value.
//
// Checks:
//   - parsing never crashes; a mistake's line is within the file's lines (1-based)
//   - every token of a table is non-empty printable ASCII without ';' or ','; every TCP
//     target has a port from 1 and a host, every Unix target a path
//   - a table's entries written back as "TOKEN: TARGET" lines parse to the same table
//   - a token read from a query or cookie is in the input's text (percent-decoded for the
//     query) and never longer than it

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokens(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        switch TokenTable.parse(bytes) {
        case .failure(let mistake):
            let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).count
            check(mistake.line >= 1 && mistake.line <= lines, "mistake on line \(mistake.line) of \(lines)")
            check(!mistake.problem.isEmpty)
        case .success(let table):
            var text = ""
            for (token, target) in table.targets.sorted(by: { $0.key < $1.key }) {
                check(!token.isEmpty && token.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x3B && $0 != 0x2C }, "token \(token.debugDescription)")
                switch target {
                case .tcp(let hostPort): check(hostPort.port >= 1 && !hostPort.host.isEmpty, "target \(target)")
                case .unix(let path): check(!path.isEmpty, "target \(target)")
                }
                text += "\(token): \(target)\n"
            }
            guard case .success(let again) = TokenTable.parse(Array(text.utf8)) else {
                checkFailed("the table written back does not parse: \(text.debugDescription)")
            }
            check(again == table, "the table written back differs: \(text.debugDescription)")
        }
    } else {
        let parts = bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        let query = String(decoding: parts[0], as: UTF8.self)
        let cookie = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : ""
        if let token = TokenTable.token(query: query, cookies: [cookie]) {
            check(token.utf8.count <= query.utf8.count + cookie.utf8.count, "token longer than its input")
        }
    }
    return 0
}
