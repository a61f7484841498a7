/// A small, strict JSON reader and writer (RFC 8259) for `--jsonl` lines, `--stats` and
/// `--expect-json`. Foundation's JSONSerialization is not used: it would pull Foundation (and
/// ICU) into the binary for a few dozen lines of parsing.
///
/// Equality is JSON's meaning, not the text's: objects compare as sets of members whatever
/// their order (a repeated name counts once, its last value, as `subscript` reads it),
/// strings by their Unicode scalars (no canonical equivalence: "é" precomposed is not "e" and
/// a combining accent), numbers as exact decimal values (`JSONNumber`).
enum JSONValue: Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.number(let x), .number(let y)): return x == y
        case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)):
            let left = members(x), right = members(y)
            guard left.count == right.count else { return false }
            return left.allSatisfy { name, value in right[name] == value }
        default: return false
        }
    }

    /// An object's members by name, the last one of a repeated name winning.
    private static func members(_ list: [(String, JSONValue)]) -> [ExactName: JSONValue] {
        var byName: [ExactName: JSONValue] = [:]
        byName.reserveCapacity(list.count)
        for (name, value) in list { byName[ExactName(name)] = value }
        return byName
    }

    /// The member named `key` of an object (the last one if repeated), else nil.
    subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0.utf8.elementsEqual(key.utf8) }?.1
    }

    /// Element `index` of an array, else nil.
    subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// A number as the nearest Double (what `--jsonl`'s close code needs).
    var numberValue: Double? {
        if case .number(let number) = self { return number.doubleValue }
        return nil
    }
}

/// A member name compared and hashed by its UTF-8 bytes: Swift's String equality is
/// canonical equivalence, JSON's is code point by code point.
private struct ExactName: Hashable {
    let name: String
    init(_ name: String) { self.name = name }
    static func == (a: ExactName, b: ExactName) -> Bool { a.name.utf8.elementsEqual(b.name.utf8) }
    func hash(into hasher: inout Hasher) {
        for byte in name.utf8 { hasher.combine(byte) }
    }
}

/// A JSON number as an exact decimal: sign, significant digits and a power of ten, so that
/// `1.0`, `1`, `1e0` and `10e-1` are equal, `-0` is `0`, and 9007199254740993 is not
/// 9007199254740992 (a Double cannot tell those apart; JSON-RPC ids go that high).
struct JSONNumber: Equatable, CustomStringConvertible {
    /// The text as written (valid JSON number syntax).
    let text: String
    let negative: Bool
    /// ASCII digits without leading or trailing zeros; empty for zero.
    let digits: [UInt8]
    /// The value is digits × 10^exponent.
    let exponent: Int
    /// The exponent was too large to hold: the number only equals the same text.
    let outOfRange: Bool

    /// `text` must be JSON number syntax (the parser checked it).
    init(text: String) {
        self.text = text
        var bytes = Array(text.utf8)[...]
        negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var mantissa: [UInt8] = []
        var fractionDigits = 0
        var inFraction = false
        var exponentText: ArraySlice<UInt8> = []
        for (offset, byte) in zip(bytes.indices, bytes) {
            if byte == UInt8(ascii: ".") { inFraction = true; continue }
            if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { exponentText = bytes[(offset + 1)...]; break }
            mantissa.append(byte)
            if inFraction { fractionDigits += 1 }
        }
        // The written exponent, saturated far beyond any digit count a 1 MiB text can hold.
        let limit = 1 << 40
        var written = 0
        var exponentNegative = false
        var saturated = false
        for byte in exponentText {
            switch byte {
            case UInt8(ascii: "-"): exponentNegative = true
            case UInt8(ascii: "+"): break
            default:
                if written < limit { written = written * 10 + Int(byte - 0x30) } else { saturated = true }
            }
        }
        var power = (exponentNegative ? -written : written) - fractionDigits
        let first = mantissa.firstIndex { $0 != 0x30 }
        if let first {
            let last = mantissa.lastIndex { $0 != 0x30 }!
            power += mantissa.count - 1 - last
            digits = Array(mantissa[first...last])
        } else {
            digits = []
            power = 0
            saturated = false  // zero whatever the exponent
        }
        exponent = power
        outOfRange = saturated
    }

    static func == (a: JSONNumber, b: JSONNumber) -> Bool {
        if a.outOfRange || b.outOfRange { return a.text == b.text }
        if a.digits.isEmpty || b.digits.isEmpty { return a.digits.isEmpty && b.digits.isEmpty }
        return a.negative == b.negative && a.exponent == b.exponent && a.digits == b.digits
    }

    var doubleValue: Double { Double(text) ?? .nan }
    var description: String { text }
}

/// Why a JSON text was refused, with the byte offset.
struct JSONError: Error, Equatable, CustomStringConvertible {
    let message: String
    let offset: Int
    var description: String { "\(message) at byte \(offset + 1)" }
}

/// Parses one JSON text from UTF-8 bytes (already known to be UTF-8). Nesting is limited to
/// 64 levels so hostile input cannot exhaust the stack.
struct JSONParser {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    static let maximumDepth = 64

    static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw JSONError(message: "unexpected text after the JSON value", offset: parser.index) }
        return value
    }

    private init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private mutating func expect(_ literal: String, _ value: JSONValue) throws(JSONError) -> JSONValue {
        for byte in literal.utf8 {
            guard current == byte else { throw JSONError(message: "invalid literal", offset: index) }
            index += 1
        }
        return value
    }

    private mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < JSONParser.maximumDepth else { throw JSONError(message: "nesting deeper than 64 levels", offset: index) }
        guard let byte = current else { throw JSONError(message: "unexpected end of input", offset: index) }
        switch byte {
        case UInt8(ascii: "{"):
            index += 1
            var members: [(String, JSONValue)] = []
            skipSpace()
            if current == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard current == UInt8(ascii: "\"") else { throw JSONError(message: "expected a member name", offset: index) }
                let key = try string()
                skipSpace()
                guard current == UInt8(ascii: ":") else { throw JSONError(message: "expected ':'", offset: index) }
                index += 1
                skipSpace()
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                guard current == UInt8(ascii: "}") else { throw JSONError(message: "expected ',' or '}'", offset: index) }
                index += 1
                return .object(members)
            }
        case UInt8(ascii: "["):
            index += 1
            var elements: [JSONValue] = []
            skipSpace()
            if current == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipSpace()
                elements.append(try value(depth: depth + 1))
                skipSpace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                guard current == UInt8(ascii: "]") else { throw JSONError(message: "expected ',' or ']'", offset: index) }
                index += 1
                return .array(elements)
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        default:
            return .number(try number())
        }
    }

    private mutating func number() throws(JSONError) -> JSONNumber {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, first >= 0x30 && first <= 0x39 else { throw JSONError(message: "invalid value", offset: start) }
        if first == 0x30 {
            index += 1
        } else {
            while let digit = current, digit >= 0x30 && digit <= 0x39 { index += 1 }
        }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let digit = current, digit >= 0x30 && digit <= 0x39 else { throw JSONError(message: "invalid number", offset: index) }
            while let digit = current, digit >= 0x30 && digit <= 0x39 { index += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let digit = current, digit >= 0x30 && digit <= 0x39 else { throw JSONError(message: "invalid number", offset: index) }
            while let digit = current, digit >= 0x30 && digit <= 0x39 { index += 1 }
        }
        return JSONNumber(text: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }

    private mutating func hex4() throws(JSONError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw JSONError(message: "unexpected end in \\u escape", offset: index) }
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw JSONError(message: "invalid \\u escape", offset: index)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func string() throws(JSONError) -> String {
        index += 1  // opening quote
        var out: [UInt8] = []
        while true {
            guard let byte = current else { throw JSONError(message: "unterminated string", offset: index) }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { throw JSONError(message: "unterminated escape", offset: index) }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        // A high surrogate must be followed by an escaped low surrogate.
                        guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                            throw JSONError(message: "unpaired surrogate in \\u escape", offset: index)
                        }
                        index += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw JSONError(message: "unpaired surrogate in \\u escape", offset: index) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        throw JSONError(message: "unpaired surrogate in \\u escape", offset: index)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw JSONError(message: "invalid \\u escape", offset: index) }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw JSONError(message: "invalid escape", offset: index - 1)
                }
            case 0x00..<0x20:
                throw JSONError(message: "control character in string", offset: index)
            default:
                out.append(byte)
                index += 1
            }
        }
    }
}

/// Appends JSON text to a byte array.
enum JSONWriter {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` (valid UTF-8) as a JSON string literal: quotes, backslashes and control
    /// characters escaped, everything else as it is.
    static func appendString(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out += [0x5C, 0x22]
            case UInt8(ascii: "\\"): out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, UInt8(ascii: "n")]
            case 0x0D: out += [0x5C, UInt8(ascii: "r")]
            case 0x09: out += [0x5C, UInt8(ascii: "t")]
            case 0x00..<0x20, 0x7F:
                out += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
