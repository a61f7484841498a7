import WebSocketCore
import WebSocketEngine

/// Records what a driver reports; optionally echoes every message back (the server side).
public final class Recorder: ConnectionDelegate {
    public struct Message: Equatable {
        public var kind: MessageKind
        public var bytes: [UInt8]
        public var text: String { String(decoding: bytes, as: UTF8.self) }

        public init(kind: MessageKind, bytes: [UInt8]) {
            self.kind = kind
            self.bytes = bytes
        }
    }
    public var messages: [Message] = []
    /// The message being received.
    public var current: Message?
    public var pings: [[UInt8]] = []
    public var pongs: [(payload: [UInt8], rtt: Double?)] = []
    public var closes: [ClosePayload] = []
    public var failures: [ReceiveError] = []
    public var notes: [ConnectionNote] = []
    public var ending: ConnectionEnding?
    public var echoes = false
    public var shutDownsWhilePaused = 0

    public init() {}

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) { current = Message(kind: kind, bytes: []) }
    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        current?.bytes += Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
    public func connectionDidEndMessage(_ connection: ConnectionDriver) {
        guard let message = current else { return }
        messages.append(message)
        current = nil
        if echoes { connection.send(message.kind == .text ? .text : .binary, bytes: message.bytes) }
    }
    public func connection(_ connection: ConnectionDriver, didReceivePing payload: [UInt8]) { pings.append(payload) }
    public func connection(_ connection: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) { pongs.append((payload, roundTrip)) }
    public func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) { closes.append(payload) }
    public func connection(_ connection: ConnectionDriver, didFail error: ReceiveError) { failures.append(error) }
    public func connection(_ connection: ConnectionDriver, note: ConnectionNote) { notes.append(note) }
    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) { self.ending = ending }
    public func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver) { shutDownsWhilePaused += 1 }
}
