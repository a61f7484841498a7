/// A frame's opcode (RFC 6455 §5.2, §11.8).
///
/// Only the six opcodes RFC 6455 defines have cases; the reserved values 0x3–0x7 and
/// 0xB–0xF make `Opcode(rawValue:)` return nil, and a frame carrying one is a protocol
/// error (§5.2: "If an unknown opcode is received, the receiving endpoint MUST _Fail the
/// WebSocket Connection_").
public enum Opcode: UInt8, Sendable, CustomStringConvertible {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Control frames (close, ping, pong) have the high bit of the opcode set (§5.5).
    @inlinable public var isControl: Bool { rawValue & 0x8 != 0 }

    public var description: String {
        switch self {
        case .continuation: return "continuation"
        case .text: return "text"
        case .binary: return "binary"
        case .close: return "close"
        case .ping: return "ping"
        case .pong: return "pong"
        }
    }
}

/// The type of a data message: what its first frame's opcode said (§5.6).
public enum MessageKind: Sendable, Equatable, CustomStringConvertible {
    case text
    case binary

    public var opcode: Opcode { self == .text ? .text : .binary }
    public var description: String { self == .text ? "text" : "binary" }
}
