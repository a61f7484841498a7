import Glibc
import WebSocketCore

/// Why stdin could not be turned into messages.
public enum InputError: Error, Equatable, CustomStringConvertible {
    /// Text mode: a line (1-based) is not UTF-8; `column` is the 1-based byte offset of the
    /// first bad byte. Nothing of the line was sent.
    case invalidUTF8(line: Int, column: Int, byte: UInt8?)
    case readFailed(String)

    public var description: String {
        switch self {
        case .invalidUTF8(let line, let column, let byte):
            let what = byte.map { "byte 0x\(String($0, radix: 16, uppercase: true)) at column \(column)" }
                ?? "it ends inside a multi-byte sequence"
            return "stdin line \(line) is not valid UTF-8 (\(what)); text messages must be UTF-8, so it was not sent (use --binary for raw bytes)"
        case .readFailed(let why):
            return why
        }
    }
}

/// Turns stdin bytes into masked frames on an `OutboundQueue`.
///
/// Text mode (`.lines`): each separator-terminated line, without the separator, is one text
/// message; a final line without separator is sent at end of input. A line is validated as
/// UTF-8 before any of it is queued: an invalid line is never sent, not even in part.
/// Binary mode (`.chunks`): each read becomes binary messages of at most `size` bytes.
struct InputFramer {
    enum Mode: Equatable {
        case lines(separator: UInt8)
        case chunks(size: Int)
    }

    let mode: Mode
    /// Messages and payload bytes queued so far.
    private(set) var messages: UInt64 = 0
    private(set) var bytes: UInt64 = 0
    /// Lines completed so far (text mode), for error messages.
    private(set) var lines = 0
    /// A line started in an earlier read, waiting for its separator.
    private var carry: ByteBuffer?
    private var carryValidator = UTF8Validator()
    /// Payloads up to this size are copied into the queue's arena instead of referenced.
    static let copyLimit = 4096

    init(mode: Mode) { self.mode = mode }

    /// Frames what `chunk` holds. Throws `InputError.invalidUTF8` at the first bad line;
    /// lines before it in the chunk are queued.
    mutating func consume(_ chunk: ByteBuffer, into queue: inout OutboundQueue,
                          connection: inout WebSocketConnection) throws(InputError) {
        switch mode {
        case .chunks(let size):
            var offset = 0
            while offset < chunk.count {
                let length = min(size, chunk.count - offset)
                frame(.binary, chunk, chunk.base + offset, length, &queue, &connection)
                offset += length
            }
        case .lines(let separator):
            let end = chunk.base + chunk.count
            var start = chunk.base
            while start < end {
                guard let found = memchr(start, Int32(separator), end - start) else {
                    try appendCarry(start, end - start)
                    break
                }
                let length = found - start
                if carry != nil {
                    try appendCarry(start, length)
                    try finishCarry(&queue, &connection)
                } else {
                    try validateLine(start, length)
                    frame(.text, chunk, start, length, &queue, &connection)
                    lines += 1
                }
                start = found + 1
            }
        }
    }

    /// End of input: sends a last line that had no separator.
    mutating func finish(into queue: inout OutboundQueue, connection: inout WebSocketConnection) throws(InputError) {
        if carry != nil { try finishCarry(&queue, &connection) }
    }

    private func validateLine(_ start: UnsafeMutableRawPointer, _ length: Int) throws(InputError) {
        var validator = UTF8Validator()
        if let bad = validator.validate(UnsafeRawPointer(start), count: length) {
            throw .invalidUTF8(line: lines + 1, column: bad + 1, byte: start.load(fromByteOffset: bad, as: UInt8.self))
        }
        if !validator.isComplete { throw .invalidUTF8(line: lines + 1, column: length, byte: nil) }
    }

    private mutating func appendCarry(_ start: UnsafeMutableRawPointer, _ length: Int) throws(InputError) {
        guard length > 0 else { return }
        let held = carry?.count ?? 0
        // Fail fast: a long line is checked as it arrives, not only at its end.
        if let bad = carryValidator.validate(UnsafeRawPointer(start), count: length) {
            carry = nil
            throw .invalidUTF8(line: lines + 1, column: held + bad + 1, byte: start.load(fromByteOffset: bad, as: UInt8.self))
        }
        if (carry?.free ?? 0) < length {
            let grown = ByteBuffer(capacity: max(OutboundQueue.arenaSize, (held + length) * 2))
            if let old = carry { grown.base.copyMemory(from: old.base, byteCount: old.count) }
            grown.count = held
            carry = grown
        }
        guard let line = carry else { return }
        line.end.copyMemory(from: start, byteCount: length)
        line.count += length
    }

    private mutating func finishCarry(_ queue: inout OutboundQueue, _ connection: inout WebSocketConnection) throws(InputError) {
        guard let line = carry else { return }
        carry = nil
        defer { carryValidator.reset() }
        guard carryValidator.isComplete else { throw .invalidUTF8(line: lines + 1, column: line.count, byte: nil) }
        frame(.text, line, line.base, line.count, &queue, &connection)
        lines += 1
    }

    private mutating func frame(_ opcode: Opcode, _ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ length: Int,
                                _ queue: inout OutboundQueue, _ connection: inout WebSocketConnection) {
        let header = connection.makeHeader(opcode: opcode, payloadLength: length)
        if length <= InputFramer.copyLimit {
            queue.appendFrame(header, copying: start, count: length)
        } else {
            queue.appendFrame(header, inPlace: owner, start, count: length)
        }
        messages += 1
        bytes += UInt64(length)
    }
}
