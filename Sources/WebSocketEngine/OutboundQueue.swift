import Glibc
import WebSocketCore
import WebSocketTransport

/// Frames waiting for the socket, in order, written with writev(2).
///
/// Headers and small frames are copied (masked on the way) into an arena buffer, so many
/// small messages become one contiguous run and one iovec; large payloads stay where stdin
/// put them, masked in place, and are referenced. Control frames are appended whole, so
/// they always land on a frame boundary.
public struct OutboundQueue {
    private var list = SegmentList()
    /// Taken on first use and let go by `releaseArena` (an idle connection holds none):
    /// the empty `ByteBuffer.released` stands in, so the hot path never unwraps an optional.
    private var arena = ByteBuffer.released
    public static let arenaSize = 64 * 1024
    /// Bytes ever queued and ever written: a ping counts as sent once `totalWritten`
    /// passes the position where it was queued.
    public private(set) var totalQueued: UInt64 = 0
    public private(set) var totalWritten: UInt64 = 0
    /// `totalQueued` just after the last pong queued: that pong has not left while
    /// `totalWritten` is below it.
    private var pongEnd: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { list.isEmpty }
    public var byteCount: Int { list.byteCount }

    /// Room for `count` bytes at the end of the queue, in the arena.
    private mutating func reserve(_ count: Int) -> UnsafeMutableRawPointer {
        if arena.free < count {
            ByteBuffer.reuse(&arena, orMake: max(OutboundQueue.arenaSize, count))
        }
        let start = arena.end
        arena.count += count
        list.append(arena, start, count)
        totalQueued += UInt64(count)
        return start
    }

    /// Queues a frame, copying and masking its payload into the arena.
    public mutating func appendFrame(_ header: FrameHeader, copying payload: UnsafeRawPointer?, count: Int) {
        let headerSize = header.encodedSize
        let start = reserve(headerSize + count)
        header.encode(into: start)
        if count > 0, let payload {
            if let key = header.maskingKey {
                key.copyMasked(from: payload, to: start + headerSize, count: count)
            } else {
                (start + headerSize).copyMemory(from: payload, byteCount: count)
            }
        }
    }

    /// Queues a frame whose payload stays in `owner`, masking it there.
    public mutating func appendFrame(_ header: FrameHeader, inPlace owner: ByteBuffer, _ payload: UnsafeMutableRawPointer, count: Int) {
        header.maskingKey?.apply(to: payload, count: count)
        header.encode(into: reserve(header.encodedSize))
        list.append(owner, payload, count)
        totalQueued += UInt64(count)
    }

    /// Queues whole frames already encoded, referenced where they are in `owner`.
    public mutating func appendEncoded(_ owner: ByteBuffer, _ frames: UnsafeMutableRawPointer, count: Int) {
        guard count > 0 else { return }
        list.append(owner, frames, count)
        totalQueued += UInt64(count)
    }

    /// Queues ready-made bytes (control frames from `WebSocketConnection`).
    public mutating func appendBytes(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        let start = reserve(bytes.count)
        bytes.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
    }

    /// Queues control frames from `WebSocketConnection`; `carryingPong`: they include a
    /// pong (then `holdsUnwrittenPong` until the stream has taken them).
    public mutating func appendControl(_ bytes: [UInt8], carryingPong: Bool) {
        appendBytes(bytes)
        if carryingPong { pongEnd = totalQueued }
    }

    /// True while a pong queued here has not been entirely taken by the stream: a pong
    /// for a later ping should then replace the one waiting in the core, not follow it.
    public var holdsUnwrittenPong: Bool { totalWritten < pongEnd }

    /// Writes as much as the stream takes. `.done` when the queue (and the stream's own
    /// pending output) is empty; `.wouldBlock` when the socket is full.
    public mutating func write(to stream: ByteStream, vectors: UnsafeMutableBufferPointer<iovec>) -> IOResult {
        while !list.isEmpty {
            let count = list.fill(vectors)
            switch stream.write(vectors.baseAddress!, count: count) {
            case .done(let n):
                list.consume(n)
                totalWritten += UInt64(n)
            case .endOfStream:
                return .failed(.closed)
            case let other:
                return other
            }
        }
        if stream.hasPendingOutput { return stream.flush() }
        return .done(0)
    }

    /// Forgets everything queued (the connection is gone).
    public mutating func discard() {
        list.removeAll()
        pongEnd = totalWritten
    }

    /// Lets go of the arena (back to the pool once nothing references it).
    public mutating func releaseArena() { arena = ByteBuffer.released }
}
