import WebSocketCore

/// Turns received messages into stdout bytes, whole messages only.
///
/// A message's payload pieces are held (as references into the socket's receive buffers)
/// until its last frame arrives, so an incomplete message or one that turns out to be
/// invalid never reaches stdout. Complete messages collect in `batch`, which the session
/// hands to the stdout writer after each socket read. Small messages are copied into one
/// arena so a burst of them becomes a single iovec.
struct OutputAssembler {
    /// nil: messages are written raw, back to back (binary mode). Otherwise each message is
    /// followed by this byte (text mode: newline, or NUL with -0).
    let separator: UInt8?
    private let separatorBuffer: ByteBuffer?
    private var pending = SegmentList()
    private(set) var batch = SegmentList()
    private var arena = ByteBuffer(capacity: OutputAssembler.arenaSize)
    static let arenaSize = 64 * 1024
    static let copyLimit = 1024
    private(set) var messages: UInt64 = 0
    private(set) var bytes: UInt64 = 0
    private(set) var currentKind: MessageKind?

    init(separator: UInt8?) {
        self.separator = separator
        switch separator {
        case nil: separatorBuffer = nil
        case 0x0A: separatorBuffer = ByteBuffer.newline
        case 0x00: separatorBuffer = ByteBuffer.nul
        case let byte?: separatorBuffer = ByteBuffer(constant: [byte])
        }
    }

    mutating func start(_ kind: MessageKind) {
        currentKind = kind
        pending.removeAll()
    }

    mutating func data(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ count: Int) {
        pending.append(owner, start, count)
    }

    mutating func end() {
        let size = pending.byteCount
        let total = size + (separator == nil ? 0 : 1)
        if total <= OutputAssembler.copyLimit {
            if arena.free < total { arena = ByteBuffer(capacity: OutputAssembler.arenaSize) }
            let start = arena.end
            var offset = 0
            for segment in pending.segments {
                (start + offset).copyMemory(from: segment.start, byteCount: segment.count)
                offset += segment.count
            }
            if let separator { (start + offset).storeBytes(of: separator, as: UInt8.self) }
            arena.count += total
            batch.append(arena, start, total)
        } else {
            batch.append(contentsOf: pending)
            if let separatorBuffer { batch.append(separatorBuffer, separatorBuffer.base, 1) }
        }
        pending.removeAll()
        currentKind = nil
        messages += 1
        bytes += UInt64(size)
    }

    /// Drops a partly received message (the connection failed or was lost).
    mutating func discardPending() {
        pending.removeAll()
        currentKind = nil
    }

    /// The complete messages collected since the last call.
    mutating func takeBatch() -> SegmentList { batch.take() }
}
