/// A parsed head's header fields, in the order received, with case-insensitive lookup.
public protocol HTTPHeaderFields {
    var headers: [HTTPHeader] { get }
    /// All values of the headers named `name` (ASCII case-insensitive), trimmed, in order;
    /// a requirement so that a type with a cheaper lookup is asked through the list helpers
    /// and generic rules too.
    func values(_ name: String) -> [String]
}

extension HTTPHeaderFields {
    /// All values of the headers named `name` (ASCII case-insensitive), trimmed, in order.
    public func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }

    /// The elements of a list-valued header (RFC 9110 §5.6.1), repeated headers joined in
    /// order (§5.3): `Connection: keep-alive` + `Connection: Upgrade` → [keep-alive, Upgrade].
    public func listValues(_ name: String) -> [String] {
        values(name).flatMap { HTTPText.list($0) }
    }

    /// Whether the list-valued header `name` has the token `token` (ASCII case-insensitive).
    public func listContains(_ name: String, _ token: String) -> Bool {
        let wanted = token.lowercased()
        return listValues(name).contains { $0.lowercased() == wanted }
    }
}

struct HTTPHeadSyntaxError: Error {
    let message: String
}

/// The line and field syntax that request and response heads share (RFC 9112 §2.2, §5).
enum HTTPHeadSyntax {
    /// The x of "HTTP/1.x" (one digit), else nil.
    static func http1MinorVersion<C: Collection<UInt8>>(_ version: C) -> Int? {
        guard version.count == 8, version.starts(with: Array("HTTP/1.".utf8)), let digit = version.reversed().first,
              digit >= 0x30 && digit <= 0x39 else { return nil }
        return Int(digit - 0x30)
    }

    /// Splits a complete head (up to and including its blank line) into its start line and
    /// header fields. Lines may end in CRLF or bare LF; obsolete line folding is joined with
    /// one space. nil for a head with no start line.
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTPHeadSyntaxError) -> (ArraySlice<UInt8>, [HTTPHeader])? {
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for j in 0..<bytes.count where bytes[j] == 0x0A {
            var line = Array(bytes[start..<j])[...]
            if line.last == 0x0D { line = line.dropLast() }
            lines.append(line)
            start = j + 1
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let startLine = lines.first else { return nil }
        var headers: [HTTPHeader] = []
        for line in lines.dropFirst() {
            if let first = line.first, first == 0x20 || first == 0x09 {
                // obs-fold: continuation of the previous value.
                guard !headers.isEmpty else { throw HTTPHeadSyntaxError(message: "header continuation line without a header") }
                // The fold is one SP between the parts (RFC 9112 §5.2); an empty part adds none.
                let previous = headers[headers.count - 1].value
                let more = String(decoding: line, as: UTF8.self).trimmingSpaces
                headers[headers.count - 1].value = previous.isEmpty ? more : more.isEmpty ? previous : previous + " " + more
                continue
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[..<colon].allSatisfy(HTTPHeader.isTokenByte) else {
                throw HTTPHeadSyntaxError(message: "bad header line \(printable(Array(line.prefix(80))))")
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingSpaces
            headers.append(HTTPHeader(name: name, value: value))
        }
        return (startLine, headers)
    }
}
