import WebSocketCore

/// Messages sent while the socket queue was full, not framed yet (masking happens when
/// they are framed). Small payloads are copied here; large ones stay in their owner.
struct MessageQueue {
    struct Message {
        let opcode: Opcode
        let fin: Bool
        let owner: ByteBuffer?
        let start: UnsafeMutableRawPointer?
        var count: Int
        let copy: [UInt8]?
        /// Already deflated (`sendCompressed`): the size before.
        var precompressedSize: Int? = nil
        /// Whole frames already encoded (`sendFrames`), referenced in `owner`.
        var encoded = false

        func withPayload(_ body: (UnsafeMutableRawPointer?, Int) -> Void) {
            if var bytes = copy {
                bytes.withUnsafeMutableBytes { body($0.baseAddress, $0.count) }
            } else {
                body(start, count)
            }
        }
    }

    private var messages: [Message] = []
    private var head = 0
    /// Payload bytes waiting.
    private(set) var byteCount = 0
    /// Entries waiting (a broadcast's consecutive batches are one).
    var count: Int { messages.count - head }

    /// About what an entry holds besides its payload: the entry and a small copy's array
    /// header. Counted by `weight`, so empty or 1-byte messages still fill the queue (with
    /// payload bytes alone, a million empty lines weighed nothing and waited without bound).
    static let entryCost = MemoryLayout<Message>.stride + 32
    /// What the queue holds, for limits: its payload bytes and each entry's cost.
    var weight: Int { byteCount + count * MessageQueue.entryCost }

    var isEmpty: Bool { head == messages.count }

    mutating func append(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int,
                         in owner: ByteBuffer?, copyLimit: Int, precompressedSize: Int? = nil) {
        byteCount += count
        if count <= copyLimit || owner == nil {
            let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
            messages.append(Message(opcode: opcode, fin: fin, owner: nil, start: nil, count: count, copy: bytes,
                                    precompressedSize: precompressedSize))
        } else {
            messages.append(Message(opcode: opcode, fin: fin, owner: owner, start: payload, count: count, copy: nil,
                                    precompressedSize: precompressedSize))
        }
    }

    /// Frames that continue the last entry's in the same buffer extend it (a broadcast's
    /// consecutive batches, for a client that is behind).
    mutating func appendEncoded(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, count: Int) {
        byteCount += count
        if let last = messages.indices.last, last >= head, messages[last].encoded, messages[last].owner === owner,
           messages[last].start.map({ $0 + messages[last].count }) == start {
            messages[last].count += count
            return
        }
        messages.append(Message(opcode: .binary, fin: true, owner: owner, start: start, count: count, copy: nil,
                                encoded: true))
    }

    mutating func popFirst() -> Message? {
        guard head < messages.count else { return nil }
        let message = messages[head]
        head += 1
        byteCount -= message.count
        if head == messages.count {
            messages.removeAll(keepingCapacity: true)
            head = 0
        }
        return message
    }

    mutating func removeAll() {
        messages.removeAll()
        head = 0
        byteCount = 0
    }
}
