/// One value of Redis's serialization protocol, RESP2 (what a connection speaks until it
/// sends HELLO 3, which we never do): the replies to commands and the pub/sub pushes.
public enum RESPValue: Equatable, Sendable {
    /// `+OK`, `+PONG`.
    case simple([UInt8])
    /// `-ERR ...`, `-WRONGPASS ...`, `-NOAUTH ...`: the whole line.
    case error([UInt8])
    case integer(Int64)
    case bulk([UInt8])
    /// `$-1` or `*-1`.
    case null
    case array([RESPValue])
    /// A bulk string longer than the parser's `maximumBulk`: its bytes were skipped as they
    /// came, only its length is kept (a bus message over --max-message-size).
    case oversized(Int)

    /// The text of a simple string, an error or a bulk string.
    public var text: String? {
        switch self {
        case .simple(let bytes), .error(let bytes), .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
    }
}

/// Why a byte stream is not RESP: the connection cannot be read further.
public enum RESPError: Error, Equatable, Sendable {
    /// The first byte of a value is none of `+ - : $ *`.
    case unknownType(UInt8)
    /// A length or integer line that is not a decimal number in range.
    case badNumber
    /// A line longer than `RESPParser.maximumLine` without its CRLF.
    case lineTooLong
    /// A bulk string not followed by CRLF.
    case missingTerminator
    /// Arrays nested deeper than `RESPParser.maximumDepth`.
    case tooDeep
}

/// An incremental RESP2 parser: bytes in, in whatever pieces the socket gives them, values
/// out as each completes. Sans-I/O, one pass over every byte (nothing is re-read when a
/// value spans reads); a bulk string over `maximumBulk` is skipped, not buffered.
public struct RESPParser: Sendable {
    /// The longest header or simple line (type byte to CRLF) accepted.
    public static let maximumLine = 64 * 1024
    /// Arrays within arrays: a pub/sub push is one level; this leaves room for replies.
    public static let maximumDepth = 8
    /// The largest bulk string kept; a longer one becomes `.oversized`.
    public let maximumBulk: Int

    private enum State: Sendable {
        /// Collecting a line up to CRLF (`line` holds it, CR excluded once seen).
        case line
        /// Collecting (or, `skipping`, counting) a bulk string's bytes.
        case bulk(remaining: Int, skipping: Bool, length: Int)
        /// After a bulk string: `needed` bytes of CRLF still to come.
        case terminator(needed: Int, value: RESPValue)
    }

    private var state = State.line
    private var line: [UInt8] = []
    private var bulk: [UInt8] = []
    /// Arrays being filled: the elements so far and how many are still to come.
    private var open: [(elements: [RESPValue], remaining: Int)] = []

    public init(maximumBulk: Int) { self.maximumBulk = max(0, maximumBulk) }

    /// Parses `bytes`, appending every value completed to `values`. After a throw the
    /// parser must not be used again.
    public mutating func consume(_ bytes: UnsafeRawBufferPointer, into values: inout [RESPValue]) throws(RESPError) {
        var index = 0
        let count = bytes.count
        while index < count {
            switch state {
            case .line:
                switch LineCollector.collect(bytes, from: &index, into: &line, maximum: RESPParser.maximumLine) {
                case .needMore: return
                case .tooLong: throw .lineTooLong
                case .noCR: throw .missingTerminator
                case .complete:
                    try header(&values)
                    line.removeAll(keepingCapacity: true)
                }
            case .bulk(let remaining, let skipping, let length):
                let take = min(remaining, count - index)
                if !skipping { bulk.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)])) }
                index += take
                if take == remaining {
                    let value: RESPValue = skipping ? .oversized(length) : .bulk(bulk)
                    bulk = []
                    state = .terminator(needed: 2, value: value)
                } else {
                    state = .bulk(remaining: remaining - take, skipping: skipping, length: length)
                }
            case .terminator(let needed, let value):
                let expected: UInt8 = needed == 2 ? 0x0D : 0x0A
                guard bytes[index] == expected else { throw .missingTerminator }
                index += 1
                if needed == 2 {
                    state = .terminator(needed: 1, value: value)
                } else {
                    state = .line
                    try complete(value, &values)
                }
            }
        }
    }

    /// A complete line: a simple value, or the header of a bulk string or an array.
    private mutating func header(_ values: inout [RESPValue]) throws(RESPError) {
        guard let type = line.first else { throw .unknownType(0x0D) }
        let rest = Array(line.dropFirst())
        switch type {
        case UInt8(ascii: "+"): try complete(.simple(rest), &values)
        case UInt8(ascii: "-"): try complete(.error(rest), &values)
        case UInt8(ascii: ":"): try complete(.integer(try RESPParser.number(rest)), &values)
        case UInt8(ascii: "$"):
            let length = try RESPParser.number(rest)
            if length == -1 { return try complete(.null, &values) }
            guard length >= 0, length <= Int64(Int32.max) else { throw .badNumber }
            let skipping = length > maximumBulk
            if !skipping { bulk.reserveCapacity(Int(length)) }
            state = length == 0 ? .terminator(needed: 2, value: .bulk([])) : .bulk(remaining: Int(length), skipping: skipping, length: Int(length))
        case UInt8(ascii: "*"):
            let length = try RESPParser.number(rest)
            if length == -1 { return try complete(.null, &values) }
            guard length >= 0, length <= Int64(Int32.max) else { throw .badNumber }
            if length == 0 { return try complete(.array([]), &values) }
            guard open.count < RESPParser.maximumDepth else { throw .tooDeep }
            open.append(([], Int(length)))
        default:
            throw .unknownType(type)
        }
    }

    /// A value is whole: it goes into the innermost open array, or out.
    private mutating func complete(_ value: RESPValue, _ values: inout [RESPValue]) throws(RESPError) {
        var value = value
        while let last = open.indices.last {
            open[last].elements.append(value)
            open[last].remaining -= 1
            guard open[last].remaining == 0 else { return }
            value = .array(open.removeLast().elements)
        }
        values.append(value)
    }

    /// A signed decimal number (RESP's lengths and integers).
    static func number(_ digits: [UInt8]) throws(RESPError) -> Int64 {
        var rest = digits[...]
        let negative = rest.first == UInt8(ascii: "-")
        if negative { rest = rest.dropFirst() }
        guard !rest.isEmpty, rest.count <= 19 else { throw .badNumber }
        var value: Int64 = 0
        for digit in rest {
            guard digit >= 0x30 && digit <= 0x39 else { throw .badNumber }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(digit - 0x30))
            guard !overflow && !overflow2 else { throw .badNumber }
            value = sum
        }
        return negative ? -value : value
    }
}

/// A command as a client sends it: an array of bulk strings.
public enum RESPCommand {
    public static func encode(_ arguments: [[UInt8]]) -> [UInt8] {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            out += Array("$\(argument.count)\r\n".utf8)
            out += argument
            out += [0x0D, 0x0A]
        }
        return out
    }

    public static func encode(_ arguments: String...) -> [UInt8] { encode(arguments.map { Array($0.utf8) }) }
}

/// Collects one CRLF-terminated line across reads: the header lines of RESP and of NATS.
enum LineCollector {
    enum Outcome { case needMore, complete, tooLong, noCR }

    /// Appends `bytes` from `index` up to the next LF to `line` and moves `index` past it;
    /// `.complete` with the line without its CRLF, `.needMore` when no LF came yet.
    static func collect(_ bytes: UnsafeRawBufferPointer, from index: inout Int, into line: inout [UInt8], maximum: Int) -> Outcome {
        var end = index
        while end < bytes.count && bytes[end] != 0x0A { end += 1 }
        line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<end]))
        if line.count > maximum { return .tooLong }
        guard end < bytes.count else {
            index = end
            return .needMore
        }
        index = end + 1
        guard line.last == 0x0D else { return .noCR }
        line.removeLast()
        return .complete
    }
}
