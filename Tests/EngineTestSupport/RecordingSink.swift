import WebSocketCore
import WebSocketEngine

/// What a producer (a framer, a queue draining) hands its `MessageSink`, frame by frame,
/// copied at once: the pieces point into the producer's buffers.
public final class RecordingSink: MessageSink {
    public struct Frame: Equatable {
        public var opcode: Opcode
        public var fin: Bool
        public var payload: [UInt8]

        public init(opcode: Opcode, fin: Bool, payload: [UInt8]) {
            self.opcode = opcode
            self.fin = fin
            self.payload = payload
        }
    }
    public var frames: [Frame] = []
    /// The buffer each frame said it lies in (nil for bytes given as an array).
    public var owners: [ByteBuffer?] = []

    public init() {}

    public func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        frames.append(Frame(opcode: opcode, fin: fin, payload: payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []))
        owners.append(owner)
    }

    public func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {
        frames.append(Frame(opcode: opcode, fin: fin, payload: bytes))
        owners.append(nil)
    }

    /// Each frame's payload as text.
    public var texts: [String] { frames.map { String(decoding: $0.payload, as: UTF8.self) } }
}
