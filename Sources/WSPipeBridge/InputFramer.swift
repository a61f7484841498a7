import Glibc
import WebSocketCore
import WebSocketEngine

/// Why stdin could not be turned into messages.
public enum InputError: Error, Equatable, CustomStringConvertible {
    /// Text mode: a line (1-based) is not UTF-8; `column` is the 1-based byte offset of the
    /// first bad byte. Nothing of the line was sent.
    case invalidUTF8(line: Int, column: Int, byte: UInt8?)
    /// --base64: a line is not base64.
    case invalidBase64(line: Int)
    /// --jsonl: a line is not a message object; `why` says what is wrong with it.
    case invalidJSONLine(line: Int, why: String)
    /// --whole-input in text mode: the input is not UTF-8 at byte `number` (1-based, as
    /// columns are), or (nil) it ends inside a multi-byte sequence.
    case invalidUTF8Input(number: Int?)
    case readFailed(String)

    /// Where a line stops being UTF-8: "byte 0xFF at column 3".
    static func `where`(_ byte: UInt8?, column: Int) -> String {
        byte.map { "byte 0x\(String($0, radix: 16, uppercase: true)) at column \(column)" } ?? "it ends inside a multi-byte sequence"
    }

    public var description: String {
        switch self {
        case .invalidUTF8(let line, let column, let byte):
            return "stdin line \(line) is not valid UTF-8 (\(Self.where(byte, column: column))); text messages must be UTF-8, so it was not sent (use --binary for raw bytes)"
        case .invalidBase64(let line):
            return "stdin line \(line) is not base64 (--base64 expects one padded base64 line per binary message); it was not sent"
        case .invalidJSONLine(let line, let why):
            return "stdin line \(line) is not a --jsonl message: \(why); it was not sent"
        case .invalidUTF8Input(let number):
            let what = number.map { "at byte \($0)" } ?? "it ends inside a multi-byte sequence"
            return "stdin is not valid UTF-8 (\(what)); --whole-input sends it as one text message, so nothing was sent (add --binary)"
        case .readFailed(let why):
            return why
        }
    }
}

/// What stdin asked for besides data messages.
enum InputAction: Equatable {
    /// --jsonl `{"type":"ping"}`: send a Ping with this payload.
    case ping([UInt8])
    /// --jsonl `{"type":"close"}`: start the closing handshake; the rest of stdin is ignored.
    case close(ClosePayload)
    /// The message limit (-1) is reached; the rest of stdin is ignored.
    case limitReached
}

/// Turns stdin bytes into data messages for a `MessageSink` (the connection driver, which
/// frames them; the broadcast; the offline queue while reconnecting; --send-file's check)
/// and into the `InputAction`s a line asks for. It frames nothing itself and sets no size
/// limit on what it sends.
///
/// - `.lines`: each separator-terminated line, without the separator, is one text message;
///   a final line without separator is sent at end of input. A line is validated as UTF-8
///   before any of it is queued: an invalid line is never sent, not even in part.
/// - `.chunks`: each read becomes binary messages of at most `size` bytes.
/// - `.base64Lines`: each line is base64, decoded into one binary message.
/// - `.jsonLines`: each line is a JSON object: `{"type":"text","data":...}`,
///   `{"type":"binary","base64":...}`, `{"type":"ping"}`, `{"type":"close","code":...,"reason":...}`.
/// - `.whole`: all of stdin up to EOF is one message, in frames of at most `fragmentSize`
///   bytes. Binary is sent as it arrives; text is held until EOF (it must be UTF-8 as a
///   whole before any of it is sent).
struct InputFramer {
    enum Mode: Equatable {
        case lines(separator: UInt8)
        case chunks(size: Int)
        case base64Lines(separator: UInt8)
        case jsonLines
        case whole(MessageKind, fragmentSize: Int)
    }

    let mode: Mode
    /// Stop after this many data messages (-1); nil: no limit.
    private(set) var messageLimit: Int?
    /// Messages and payload bytes queued so far.
    private(set) var messages: UInt64 = 0
    private(set) var bytes: UInt64 = 0
    /// Lines completed so far (line modes), for error messages.
    private(set) var lines = 0
    /// True once a limit or a close request means the rest of stdin is to be ignored.
    private(set) var isDone = false
    /// Whether input read from stdin waits here to be framed: what followed a limit or a
    /// close request in its read, or a line not ended yet.
    var holdsInput: Bool { held != nil || carry != nil }
    /// A line started in an earlier read (or, in `.whole` text mode, all input so far).
    private var carry: ByteBuffer?
    private var carryValidator = UTF8Validator()
    /// The read that held a limit or close request and what followed it in that read, kept
    /// for `resume` (the one-client server's next client gets it).
    private var held: (chunk: ByteBuffer, offset: Int)?
    /// `.whole` binary: whether the message's first frame went out.
    private var wholeStarted = false
    /// Set: a `.jsonLines` line that is not a message object is handed to it and skipped
    /// (its number still counts), instead of thrown (a broadcast server keeps serving).
    var skipsBadLine: ((InputError) -> Void)?

    init(mode: Mode, messageLimit: Int? = nil) {
        self.mode = mode
        self.messageLimit = messageLimit
    }

    private var separator: UInt8? {
        switch mode {
        case .lines(let separator), .base64Lines(let separator): return separator
        case .jsonLines: return 0x0A
        case .chunks, .whole: return nil
        }
    }

    /// Frames what `chunk` holds. Throws at the first bad line; lines before it in the chunk
    /// are queued. Returns requests that are not data messages.
    mutating func consume(_ chunk: ByteBuffer, into sink: some MessageSink) throws(InputError) -> [InputAction] {
        try consume(chunk, from: 0, into: sink)
    }

    /// After a limit or a close request: frames again, up to `limit` more data messages
    /// (nil: no limit), starting with what followed the request in its read.
    mutating func resume(limit: Int?, into sink: some MessageSink) throws(InputError) -> [InputAction] {
        isDone = false
        messageLimit = limit.map { Int(clamping: messages) + $0 }
        guard let (chunk, offset) = held else { return [] }
        held = nil
        return try consume(chunk, from: offset, into: sink)
    }

    private mutating func consume(_ chunk: ByteBuffer, from: Int, into sink: some MessageSink) throws(InputError) -> [InputAction] {
        guard !isDone else { return [] }
        var actions: [InputAction] = []
        switch mode {
        case .chunks(let size):
            var offset = from
            while offset < chunk.count && !isDone {
                let length = min(size, chunk.count - offset)
                frame(.binary, chunk, chunk.base + offset, length, sink)
                offset += length
                checkLimit(&actions)
            }
            if isDone && offset < chunk.count { held = (chunk, offset) }
        case .whole(.binary, let size):
            var offset = 0
            while offset < chunk.count {
                let length = min(size, chunk.count - offset)
                sink.send(wholeStarted ? .continuation : .binary, fin: false, chunk.base + offset, count: length, in: chunk)
                wholeStarted = true
                bytes += UInt64(length)
                offset += length
            }
        case .whole(.text, _):
            try appendCarry(chunk.base, chunk.count, validate: true)
        default:
            guard let separator else { return [] }
            let end = chunk.base + chunk.count
            var start = chunk.base + from
            defer { if isDone && start < end { held = (chunk, start - chunk.base) } }
            while start < end && !isDone {
                guard let found = memchr(start, Int32(separator), end - start) else {
                    try appendCarry(start, end - start, validate: isTextLines)
                    break
                }
                let length = found - start
                if carry != nil {
                    try appendCarry(start, length, validate: isTextLines)
                    try finishCarryLine(sink, &actions)
                } else {
                    try handleLine(chunk, start, length, sink, &actions)
                }
                start = found + 1
            }
        }
        return actions
    }

    /// End of input: sends a last line that had no separator, or the whole-input message.
    mutating func finish(into sink: some MessageSink) throws(InputError) -> [InputAction] {
        guard !isDone else { return [] }
        var actions: [InputAction] = []
        switch mode {
        case .whole(.binary, _):
            // The message ends with an empty final fragment (or is one empty frame).
            sink.send(wholeStarted ? .continuation : .binary, fin: true, nil, count: 0, in: nil)
            messages += 1
        case .whole(.text, let size):
            let held = carry
            carry = nil
            let length = held?.count ?? 0
            guard carryValidator.isComplete else { throw .invalidUTF8Input(number: nil) }
            var offset = 0
            repeat {
                let piece = min(size, length - offset)
                sink.send(offset == 0 ? .text : .continuation, fin: offset + piece == length,
                          held.map { $0.base + offset }, count: piece, in: held)
                offset += piece
            } while offset < length
            messages += 1
            bytes += UInt64(length)
        default:
            if carry != nil { try finishCarryLine(sink, &actions) }
        }
        return actions
    }

    private var isTextLines: Bool {
        if case .lines = mode { return true }
        return false
    }

    private mutating func checkLimit(_ actions: inout [InputAction]) {
        if let limit = messageLimit, messages >= UInt64(limit), !isDone {
            isDone = true
            actions.append(.limitReached)
        }
    }

    /// One complete line (without its separator) in `owner` at `start`.
    private mutating func handleLine(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ length: Int,
                                     _ sink: some MessageSink,
                                     _ actions: inout [InputAction]) throws(InputError) {
        let number = lines + 1
        switch mode {
        case .lines:
            try InputFramer.validateLine(start, length, number: number)
            frame(.text, owner, start, length, sink)
        case .base64Lines:
            guard let decoded = Base64.decode(bytes: UnsafeRawBufferPointer(start: start, count: length)) else {
                throw .invalidBase64(line: number)
            }
            frame(.binary, decoded, sink)
        case .jsonLines:
            do throws(InputError) {
                try handleJSONLine(UnsafeRawBufferPointer(start: start, count: length), number, sink, &actions)
            } catch {
                guard let skipsBadLine else { throw error }
                skipsBadLine(error)
            }
        default:
            break
        }
        lines += 1
        checkLimit(&actions)
    }

    private mutating func handleJSONLine(_ line: UnsafeRawBufferPointer, _ number: Int, _ sink: some MessageSink, _ actions: inout [InputAction]) throws(InputError) {
        guard !line.isEmpty else { throw .invalidJSONLine(line: number, why: "it is empty") }
        guard UTF8Validator.firstInvalidIndex(line) == nil else { throw .invalidJSONLine(line: number, why: "it is not UTF-8") }
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            throw .invalidJSONLine(line: number, why: error.description)
        }
        guard case .object = value, let type = value["type"]?.stringValue else {
            throw .invalidJSONLine(line: number, why: "expected an object with a \"type\"")
        }
        // A connection event of wspipe's own output: replayed output is valid input.
        if ConnectionEvent.types.contains(type) || BusLink.eventTypes.contains(type) { return }
        // A member of the wrong type, or both payload forms at once, is a mistake to report,
        // not something to guess around.
        for member in ["data", "base64", "reason"] {
            if let given = value[member], given.stringValue == nil {
                throw .invalidJSONLine(line: number, why: "\"\(member)\" must be a string")
            }
        }
        if value["data"] != nil && value["base64"] != nil {
            throw .invalidJSONLine(line: number, why: "give \"data\" or \"base64\", not both")
        }
        func payload(_ kind: String) throws(InputError) -> [UInt8] {
            if let text = value["data"]?.stringValue { return Array(text.utf8) }
            if let encoded = value["base64"]?.stringValue {
                guard let bytes = Base64.decode(encoded) else { throw .invalidJSONLine(line: number, why: "\"base64\" is not base64") }
                return bytes
            }
            if kind == "ping" { return [] }
            throw .invalidJSONLine(line: number, why: "a \(kind) message needs \"data\" or \"base64\"")
        }
        switch type {
        case "text":
            guard let text = value["data"]?.stringValue else {
                throw .invalidJSONLine(line: number, why: "a text message needs a \"data\" string")
            }
            frame(.text, Array(text.utf8), sink)
        case "binary":
            frame(.binary, try payload("binary"), sink)
        case "ping":
            let bytes = try payload("ping")
            guard bytes.count <= 125 else { throw .invalidJSONLine(line: number, why: "a ping carries at most 125 bytes") }
            actions.append(.ping(bytes))
        case "close":
            var close = ClosePayload(code: .normalClosure)
            if let code = value["code"] {
                if code == .null {
                    close = ClosePayload(code: nil)
                } else {
                    guard let number = code.numberValue, number == number.rounded(), number >= 0, number <= 65535 else {
                        throw .invalidJSONLine(line: number, why: "\"code\" must be a close code number")
                    }
                    close.code = CloseCode(UInt16(number))
                }
            }
            let reason = value["reason"]?.stringValue ?? ""
            if let code = close.code {
                do {
                    close = try ClosePayload(code: code, reason: reason)
                } catch {
                    throw .invalidJSONLine(line: number, why: error.description)
                }
            } else if !reason.isEmpty {
                throw .invalidJSONLine(line: number, why: "a close with a reason needs a code")
            }
            isDone = true
            actions.append(.close(close))
        default:
            throw .invalidJSONLine(line: number, why: "unknown type \"\(type)\" (text, binary, ping or close)")
        }
    }

    /// Static: a method would copy the whole framer for each line (it is called from a
    /// mutating one).
    @inline(__always)
    private static func validateLine(_ start: UnsafeMutableRawPointer, _ length: Int, number: Int) throws(InputError) {
        var validator = UTF8Validator()
        if let bad = validator.validate(UnsafeRawPointer(start), count: length) {
            throw .invalidUTF8(line: number, column: bad + 1, byte: start.load(fromByteOffset: bad, as: UInt8.self))
        }
        if !validator.isComplete { throw .invalidUTF8(line: number, column: length, byte: nil) }
    }

    private mutating func appendCarry(_ start: UnsafeMutableRawPointer, _ length: Int, validate: Bool) throws(InputError) {
        guard length > 0 else { return }
        let held = carry?.count ?? 0
        // Fail fast: a long line (or whole text input) is checked as it arrives.
        if validate, let bad = carryValidator.validate(UnsafeRawPointer(start), count: length) {
            carry = nil
            if case .whole = mode { throw .invalidUTF8Input(number: held + bad + 1) }
            throw .invalidUTF8(line: lines + 1, column: held + bad + 1, byte: start.load(fromByteOffset: bad, as: UInt8.self))
        }
        if (carry?.free ?? 0) < length {
            // Powers of two: amortised growth, and few distinct sizes.
            var capacity = OutboundQueue.arenaSize
            while capacity < held + length { capacity *= 2 }
            let grown = ByteBuffer(capacity: capacity)
            if let old = carry { grown.base.copyMemory(from: old.base, byteCount: old.count) }
            grown.count = held
            carry = grown
        }
        guard let line = carry else { return }
        line.end.copyMemory(from: start, byteCount: length)
        line.count += length
    }

    private mutating func finishCarryLine(_ sink: some MessageSink,
                                          _ actions: inout [InputAction]) throws(InputError) {
        guard let line = carry else { return }
        carry = nil
        defer { carryValidator.reset() }
        if isTextLines && !carryValidator.isComplete {
            throw .invalidUTF8(line: lines + 1, column: line.count, byte: nil)
        }
        try handleLine(line, line.base, line.count, sink, &actions)
    }

    /// Queues one data message whose payload lies in `owner`.
    private mutating func frame(_ opcode: Opcode, _ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ length: Int,
                                _ sink: some MessageSink) {
        sink.send(opcode, fin: true, start, count: length, in: owner)
        messages += 1
        bytes += UInt64(length)
    }

    /// Queues one data message from bytes decoded out of the input.
    private mutating func frame(_ opcode: Opcode, _ payload: [UInt8], _ sink: some MessageSink) {
        sink.send(opcode, fin: true, bytes: payload)
        messages += 1
        bytes += UInt64(payload.count)
    }

}
