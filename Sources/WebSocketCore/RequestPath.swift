/// A request target's path as segments a server may look up beneath a directory (`--dir`,
/// `--static`): percent-decoded exactly once, every segment a plain name. Pure: nothing here
/// touches the file system; `BeneathResolver` (WebSocketTransport) opens the segments.
///
/// Refused, each with its own `Refusal`: a target that is no path (nor an absolute URI), invalid
/// percent-encoding, "." or ".." in any spelling (`%2e%2e` decodes to ".."; `%252e` decodes
/// once, to the literal name "%2e"), a backslash, a NUL (raw or `%00`), another control byte,
/// an encoded "/" (`%2F`), an empty segment ("a//b"), and a name starting with "." (dotfiles
/// and dot-directories: `.git`, `.env`).
public struct RequestPath: Sendable, Equatable {
    /// The decoded segments, none empty, none containing "/", NUL or "\": "/a/b/" is ["a", "b"].
    public let segments: [[UInt8]]
    /// Whether the path ended with "/" ("/" itself: no segments, true). A static server
    /// answers a directory without it with a redirect.
    public let hasTrailingSlash: Bool

    /// Why a path was refused (the server's 404 says only "not found"; `-v` says this).
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// A target neither in origin-form ("/...") nor in absolute-form ("http://host/..."):
        /// asterisk-form, authority-form, a relative name (`RequestTarget.originForm`).
        case notAbsolute
        /// A "%" not followed by two hex digits, at this byte offset of the path.
        case invalidPercentEncoding(offset: Int)
        /// A segment that is "." or ".." once decoded.
        case dotSegment
        /// A backslash, raw or encoded (a path separator elsewhere).
        case backslash
        /// A NUL byte, raw or encoded.
        case nul
        /// A control byte (below 0x20, or 0x7F) other than NUL, raw or encoded.
        case controlByte
        /// `%2F`: a "/" inside a segment.
        case encodedSlash
        /// Two "/" in a row.
        case emptySegment
        /// A segment starting with ".": a dotfile or dot-directory (its decoded name).
        case dotfile(String)

        public var description: String {
            switch self {
            case .notAbsolute: return "the target is neither a path (/...) nor an absolute URI"
            case .invalidPercentEncoding(let offset): return "invalid percent-encoding at byte \(offset) of the path"
            case .dotSegment: return "the path has a . or .. segment"
            case .backslash: return "the path has a backslash"
            case .nul: return "the path has a NUL byte"
            case .controlByte: return "the path has a control character"
            case .encodedSlash: return "the path has an encoded / (%2F) in a segment"
            case .emptySegment: return "the path has an empty segment (//)"
            case .dotfile(let name): return "the path names a dotfile or dot-directory '\(RequestPath.shown(name))'"
            }
        }
    }

    /// The path of `target` (up to its "?"), decoded and checked; of an absolute-form
    /// target ("http://host/a"), its path ("/a"): the authority names no file.
    public init(target: String) throws(Refusal) {
        guard let path = RequestTarget.path(target) else { throw .notAbsolute }
        try self.init(path: Array(path.utf8))
    }

    /// `path` (no query), decoded and checked.
    public init(path: [UInt8]) throws(Refusal) {
        guard path.first == UInt8(ascii: "/") else { throw .notAbsolute }
        var segments: [[UInt8]] = []
        var current: [UInt8] = []
        var index = 1
        // Raw bytes first, as they come: each segment ends at a raw "/".
        func finish() throws(Refusal) {
            if current == [UInt8(ascii: ".")] || current == [UInt8(ascii: "."), UInt8(ascii: ".")] { throw .dotSegment }
            if current.first == UInt8(ascii: ".") { throw .dotfile(String(decoding: current, as: UTF8.self)) }
            segments.append(current)
            current = []
        }
        while index < path.count {
            let byte = path[index]
            if byte == UInt8(ascii: "/") {
                if current.isEmpty { throw .emptySegment }
                try finish()
                index += 1
                continue
            }
            var decoded = byte
            if byte == UInt8(ascii: "%") {
                guard index + 2 < path.count, let high = RequestPath.hex(path[index + 1]), let low = RequestPath.hex(path[index + 2]) else {
                    throw .invalidPercentEncoding(offset: index)
                }
                decoded = high << 4 | low
                if decoded == UInt8(ascii: "/") { throw .encodedSlash }
                index += 3
            } else {
                index += 1
            }
            switch decoded {
            case 0: throw .nul
            case UInt8(ascii: "\\"): throw .backslash
            case 0x01..<0x20, 0x7F: throw .controlByte
            default: current.append(decoded)
            }
        }
        let trailing = current.isEmpty
        if !trailing { try finish() }
        self.segments = segments
        self.hasTrailingSlash = trailing
    }

    /// The first `count` segments as a path: "/a/b" (the root: "/"), as decoded bytes.
    public func prefix(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        for segment in segments.prefix(count) { out.append(UInt8(ascii: "/")); out += segment }
        return out.isEmpty ? [UInt8(ascii: "/")] : out
    }

    /// The segments from `count` on as a path ("/x/y", with the trailing "/" if the path
    /// had one); empty when none are left and there was no trailing slash.
    public func suffix(from count: Int) -> [UInt8] {
        var out: [UInt8] = []
        for segment in segments.dropFirst(count) { out.append(UInt8(ascii: "/")); out += segment }
        if hasTrailingSlash { out.append(UInt8(ascii: "/")) }
        return out
    }

    static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// A name for a `-v` line: at most 40 bytes, printable ASCII.
    static func shown(_ name: String) -> String {
        String(decoding: name.utf8.prefix(40).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}
