/// One operation a NATS server sends (the client protocol, core NATS; no headers: we
/// never ask for them, so HMSG is not NATS we speak).
public enum NATSOperation: Equatable, Sendable {
    /// `INFO {...}`: the server's JSON, unparsed (we need none of it).
    case info([UInt8])
    /// `MSG SUBJECT SID [REPLY] BYTES` and its payload.
    case message(subject: [UInt8], sid: [UInt8], payload: [UInt8])
    /// A MSG whose payload is over the parser's `maximumPayload`: skipped as it came.
    case oversized(Int)
    case ping
    case pong
    case ok
    /// `-ERR 'TEXT'`: the text.
    case error([UInt8])
}

/// Why bytes are not the NATS client protocol.
public enum NATSError: Error, Equatable, Sendable {
    case unknownOperation
    /// A MSG line without its subject, sid or a byte count that is a number.
    case badArguments
    case lineTooLong
    /// A payload not followed by CRLF, or a line ending in LF alone.
    case missingTerminator
}

/// An incremental parser of what a NATS server sends: bytes in, in any pieces, operations
/// out as each completes. Sans-I/O, one pass; a payload over `maximumPayload` is skipped.
public struct NATSParser: Sendable {
    /// INFO lines carry the server's JSON (a few KiB; cluster URLs can make it longer).
    public static let maximumLine = 64 * 1024
    public let maximumPayload: Int

    private enum State: Sendable {
        case line
        case payload(remaining: Int, skipping: Bool, length: Int, subject: [UInt8], sid: [UInt8])
        case terminator(needed: Int, operation: NATSOperation)
    }

    private var state = State.line
    private var line: [UInt8] = []
    private var payload: [UInt8] = []

    public init(maximumPayload: Int) { self.maximumPayload = max(0, maximumPayload) }

    public mutating func consume(_ bytes: UnsafeRawBufferPointer, into operations: inout [NATSOperation]) throws(NATSError) {
        var index = 0
        let count = bytes.count
        while index < count {
            switch state {
            case .line:
                switch LineCollector.collect(bytes, from: &index, into: &line, maximum: NATSParser.maximumLine) {
                case .needMore: return
                case .tooLong: throw .lineTooLong
                case .noCR: throw .missingTerminator
                case .complete:
                    try parseLine(&operations)
                    line.removeAll(keepingCapacity: true)
                }
            case .payload(let remaining, let skipping, let length, let subject, let sid):
                let take = min(remaining, count - index)
                if !skipping { payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)])) }
                index += take
                if take == remaining {
                    let operation: NATSOperation = skipping ? .oversized(length) : .message(subject: subject, sid: sid, payload: payload)
                    payload = []
                    state = .terminator(needed: 2, operation: operation)
                } else {
                    state = .payload(remaining: remaining - take, skipping: skipping, length: length, subject: subject, sid: sid)
                }
            case .terminator(let needed, let operation):
                guard bytes[index] == (needed == 2 ? 0x0D : 0x0A) else { throw .missingTerminator }
                index += 1
                if needed == 2 {
                    state = .terminator(needed: 1, operation: operation)
                } else {
                    state = .line
                    operations.append(operation)
                }
            }
        }
    }

    private mutating func parseLine(_ operations: inout [NATSOperation]) throws(NATSError) {
        let words = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
        guard let first = words.first else { throw .unknownOperation }
        let name = String(decoding: first, as: UTF8.self).uppercased()
        switch name {
        case "PING" where words.count == 1: operations.append(.ping)
        case "PONG" where words.count == 1: operations.append(.pong)
        case "+OK" where words.count == 1: operations.append(.ok)
        case "-ERR":
            var text = Array(line.drop { $0 != 0x20 && $0 != 0x09 }.drop { $0 == 0x20 || $0 == 0x09 })
            if text.count >= 2, text.first == 0x27, text.last == 0x27 { text = Array(text.dropFirst().dropLast()) }
            operations.append(.error(text))
        case "INFO":
            operations.append(.info(Array(line.drop { $0 != 0x20 && $0 != 0x09 }.drop { $0 == 0x20 || $0 == 0x09 })))
        case "MSG":
            guard words.count == 4 || words.count == 5, let length = NATSParser.count(words[words.count - 1]) else { throw .badArguments }
            let skipping = length > maximumPayload
            if !skipping { payload.reserveCapacity(length) }
            let subject = Array(words[1]), sid = Array(words[2])
            state = length == 0 ? .terminator(needed: 2, operation: .message(subject: subject, sid: sid, payload: []))
                                : .payload(remaining: length, skipping: skipping, length: length, subject: subject, sid: sid)
        default:
            throw .unknownOperation
        }
    }

    static func count(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 10 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= 0x30 && digit <= 0x39 else { return nil }
            value = value * 10 + Int(digit - 0x30)
        }
        return value <= Int(Int32.max) ? value : nil
    }
}

/// What a client sends.
public enum NATSCommand {
    /// CONNECT with the credentials: user and password, or a token (the URL's password alone).
    public static func connect(user: String?, password: String?, tls: Bool, name: String, version: String) -> [UInt8] {
        var fields = ["\"verbose\":false", "\"pedantic\":false", "\"tls_required\":\(tls)", "\"name\":\(json(name))",
                      "\"lang\":\"swift\"", "\"version\":\(json(version))", "\"protocol\":1", "\"echo\":true"]
        if let user { fields.append("\"user\":\(json(user))") }
        if let password { fields.append(user == nil ? "\"auth_token\":\(json(password))" : "\"pass\":\(json(password))") }
        return Array("CONNECT {\(fields.joined(separator: ","))}\r\n".utf8)
    }

    public static func subscribe(_ subject: [UInt8], sid: Int) -> [UInt8] { Array("SUB ".utf8) + subject + Array(" \(sid)\r\n".utf8) }

    public static func publish(_ subject: [UInt8], _ payload: [UInt8]) -> [UInt8] {
        Array("PUB ".utf8) + subject + Array(" \(payload.count)\r\n".utf8) + payload + [0x0D, 0x0A]
    }

    public static let ping = Array("PING\r\n".utf8)
    public static let pong = Array("PONG\r\n".utf8)

    /// A JSON string: quotes, backslashes and control characters escaped.
    static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{0}"..."\u{1F}", "\u{7F}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
