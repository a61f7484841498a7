import WebSocketCore

/// How a message travels on the bus, so that text and binary stay apart and other
/// publishers can join: one type byte, then the payload. 0x01 text, 0x02 binary. A bus
/// message that starts with neither (`redis-cli publish ticker '{"p":1}'`) is taken whole:
/// text when it is valid UTF-8, binary otherwise. So a publisher whose text starts with
/// byte 0x01 or 0x02 puts 0x01 before it (the man page's BUS).
public enum BusEnvelope {
    public static let textTag: UInt8 = 0x01
    public static let binaryTag: UInt8 = 0x02

    /// The bus message for one WebSocket message.
    public static func encode(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 1)
        out.append(kind == .text ? textTag : binaryTag)
        out.append(contentsOf: payload)
        return out
    }

    /// The WebSocket message a bus message stands for: its type, and where its payload
    /// starts in `message`. A tagged text message that is not UTF-8 is nil (a client would
    /// fail the connection with 1007 on it): the caller drops it.
    public static func decode(_ message: [UInt8]) -> (kind: MessageKind, payloadStart: Int)? {
        switch message.first {
        case textTag?:
            let valid = message.withUnsafeBytes { UTF8Validator.isValid(UnsafeRawBufferPointer(rebasing: $0[1...])) }
            return valid ? (.text, 1) : nil
        case binaryTag?:
            return (.binary, 1)
        default:
            return (UTF8Validator.isValid(message) ? .text : .binary, 0)
        }
    }
}
