/// --expect-json PATH=VALUE: the field at PATH of a JSON message equals VALUE.
///
/// PATH is keys separated by dots, with `[N]` for an array element (`result.items[0].id`,
/// `[2]` at the top); a key holding `.`, `=`, `[`, `]` or `"` is written in double quotes,
/// with `\"` and `\\` inside (`"a.b".c`). PATH=VALUE splits at the first `=` outside quotes.
/// VALUE is a JSON text (`7`, `"7"`, `true`, `null`, `{"a":1}`) or, when it is not one, a
/// string (`event=authenticated`). Equality is JSONValue's (exact numbers, members in any
/// order). A message that is not JSON, or has nothing at PATH, does not match.
struct JSONFieldPattern: Sendable {
    enum Step: Equatable, Sendable {
        case key(String)
        case index(Int)
    }

    let path: [Step]
    let value: JSONValue

    init(_ spec: String) throws(MessagePatternError) {
        let bytes = Array(spec.utf8)
        do throws(PathError) {
            let parsed = try JSONFieldPattern.parsePath(bytes)
            path = parsed.steps
            let valueBytes = bytes[(parsed.end + 1)...]
            value = JSONFieldPattern.value(Array(valueBytes))
        } catch {
            throw MessagePatternError(option: "--expect-json", pattern: spec, fault: error.message(in: bytes))
        }
    }

    func matches(_ payload: UnsafeRawBufferPointer) -> Bool {
        guard let message = try? JSONParser.parse(payload) else { return false }
        var field = message
        for step in path {
            switch step {
            case .key(let name):
                guard let member = field[name] else { return false }
                field = member
            case .index(let index):
                guard let element = field[index] else { return false }
                field = element
            }
        }
        return field == value
    }

    /// VALUE as JSON, else as a string of its text.
    static func value(_ bytes: [UInt8]) -> JSONValue {
        let parsed = bytes.withUnsafeBytes { try? JSONParser.parse($0) }
        return parsed ?? .string(String(decoding: bytes, as: UTF8.self))
    }

    /// A fault in PATH at a byte offset (nil: at the end of the text).
    struct PathError: Error {
        let why: String
        let offset: Int?

        /// "empty key at column 3 of the path": columns count characters (Unicode scalars)
        /// from 1.
        func message(in spec: [UInt8]) -> String {
            guard let offset else { return why }
            let column = spec[..<min(offset, spec.count)].count { $0 & 0xC0 != 0x80 } + 1
            return "\(why) at column \(column) of the path"
        }
    }

    /// The steps of PATH and the offset of the `=` that ends it.
    static func parsePath(_ spec: [UInt8]) throws(PathError) -> (steps: [Step], end: Int) {
        var steps: [Step] = []
        var index = 0
        // Where a key may (or, after a dot, must) start.
        var expectsKey = true
        var afterDot = false
        func at(_ offset: Int) -> UInt8? { offset < spec.count ? spec[offset] : nil }

        while true {
            let byte = at(index)
            if byte == UInt8(ascii: "=") || byte == nil {
                if afterDot { throw PathError(why: "empty key", offset: index) }
                guard byte != nil else { throw PathError(why: "no '=' between PATH and VALUE (write PATH=VALUE)", offset: nil) }
                if steps.isEmpty { throw PathError(why: "empty path", offset: index) }
                // A value N steps down is at nesting depth N, and the parser refuses a
                // message nested 64 levels deep: such a path could never match.
                guard steps.count < JSONParser.maximumDepth else {
                    throw PathError(why: "more than \(JSONParser.maximumDepth - 1) steps (messages nest at most \(JSONParser.maximumDepth) levels)", offset: index)
                }
                return (steps, index)
            }
            switch byte {
            case UInt8(ascii: "["):
                if afterDot { throw PathError(why: "expected a key after '.', found '['", offset: index) }
                let start = index
                index += 1
                var number = 0
                var digits = 0
                while let digit = at(index), digit >= 0x30 && digit <= 0x39 {
                    guard number <= (Int.max - 9) / 10 else { throw PathError(why: "index too large", offset: start + 1) }
                    number = number * 10 + Int(digit - 0x30)
                    digits += 1
                    index += 1
                }
                guard digits > 0 else { throw PathError(why: "expected an index (digits) after '['", offset: index) }
                guard at(index) == UInt8(ascii: "]") else { throw PathError(why: "expected ']' after the index", offset: index) }
                index += 1
                steps.append(.index(number))
                expectsKey = false
                afterDot = false
            case UInt8(ascii: "."):
                if expectsKey { throw PathError(why: "empty key", offset: index) }
                index += 1
                expectsKey = true
                afterDot = true
            case UInt8(ascii: "]"):
                throw PathError(why: "unexpected ']' (quote a key that holds one)", offset: index)
            default:
                guard expectsKey else { throw PathError(why: "expected '.', '[' or '=' after a key or index", offset: index) }
                if byte == UInt8(ascii: "\"") {
                    let (key, end) = try quotedKey(spec, from: index)
                    steps.append(.key(key))
                    index = end
                } else {
                    let start = index
                    while let next = at(index), ![UInt8(ascii: "."), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "="),
                                                 UInt8(ascii: "\"")].contains(next) {
                        index += 1
                    }
                    if at(index) == UInt8(ascii: "\"") { throw PathError(why: "a quote inside a key (quote the whole key)", offset: index) }
                    steps.append(.key(String(decoding: spec[start..<index], as: UTF8.self)))
                }
                expectsKey = false
                afterDot = false
            }
        }
    }

    /// A double-quoted key starting at `start`: its text and the offset after its closing quote.
    private static func quotedKey(_ spec: [UInt8], from start: Int) throws(PathError) -> (String, Int) {
        var key: [UInt8] = []
        var index = start + 1
        while index < spec.count {
            switch spec[index] {
            case UInt8(ascii: "\""):
                return (String(decoding: key, as: UTF8.self), index + 1)
            case UInt8(ascii: "\\"):
                guard index + 1 < spec.count, spec[index + 1] == UInt8(ascii: "\"") || spec[index + 1] == UInt8(ascii: "\\") else {
                    throw PathError(why: "only \\\" and \\\\ are escapes in a quoted key", offset: index)
                }
                key.append(spec[index + 1])
                index += 2
            default:
                key.append(spec[index])
                index += 1
            }
        }
        throw PathError(why: "unterminated quoted key", offset: start)
    }
}
