import Glibc
import WebSocketCore
import WebSocketEngine

/// How received messages are written to stdout.
public enum OutputFormat: Sendable, Equatable {
    /// Each message's payload as it is, followed by `separator` if there is one (text mode:
    /// newline or NUL; binary mode: nothing).
    case raw(separator: UInt8?)
    /// Binary messages as one padded base64 line each; text messages as they are; each
    /// followed by `separator`.
    case base64(separator: UInt8)
    /// One JSON object per line: `{"type":"text","data":...}`, `{"type":"binary","base64":...}`,
    /// `{"type":"close","code":...,"reason":...}`, with `"ts"` (Unix seconds) if asked.
    case jsonLines(timestamps: Bool)
}

/// Turns received messages into stdout bytes, whole messages only.
///
/// A message's payload pieces are held (as references into the socket's receive buffers)
/// until its last frame arrives, so an incomplete message or one that turns out to be
/// invalid never reaches stdout. Complete messages collect in `batch`, which the session
/// hands to the stdout writer after each socket read. Small messages are copied into one
/// arena so a burst of them becomes a single iovec; encoded formats are built there too.
struct OutputAssembler {
    let format: OutputFormat
    /// Messages after this many are not written (-n); nil: no limit. The one-client
    /// server moves it on for each client.
    var limit: UInt64?
    /// Write nothing at all (--send-only).
    let discard: Bool
    private let separatorBuffer: ByteBuffer?
    /// The current message's payload: most messages arrive in one piece, kept here without
    /// an array; further pieces go to `pending` after it.
    private var first: Segment?
    private var pending = SegmentList()
    /// Complete messages not taken yet (`takeBatch`), but for the run below.
    private var batch = SegmentList()
    private var arena = ByteBuffer(capacity: OutputAssembler.arenaSize)
    /// Bytes of output copied into the arena since the last `batch` append, which end at
    /// the arena's end: the run grows by a count per small message and goes to `batch` as one
    /// segment when something else does (`endRun`), rather than an append (47 instructions)
    /// per message (scripts/profile's messages-down).
    private var run = 0
    static let arenaSize = 64 * 1024
    static let copyLimit = 1024
    /// Messages and payload bytes received (written or not).
    private(set) var messages: UInt64 = 0
    private(set) var bytes: UInt64 = 0
    private(set) var currentKind: MessageKind?
    /// --expect and --until look at each message before it is written: given its kind and
    /// its payload's first `examinedBytes`, it says whether the message is written
    /// (--print-match-only writes only the match). Nil: every message is (one check each).
    var examiner: ((MessageKind, UnsafeRawBufferPointer) -> Bool)?
    /// Only a message's first MiB is examined, so a huge one cannot stall the loop.
    static let examinedBytes = 1 << 20

    init(format: OutputFormat, limit: UInt64? = nil, discard: Bool = false) {
        self.format = format
        self.limit = limit
        self.discard = discard
        let separator: UInt8?
        switch format {
        case .raw(let byte): separator = byte
        case .base64(let byte): separator = byte
        case .jsonLines: separator = 0x0A
        }
        switch separator {
        case nil: separatorBuffer = nil
        case 0x0A: separatorBuffer = ByteBuffer.newline
        case 0x00: separatorBuffer = ByteBuffer.nul
        case let byte?: separatorBuffer = ByteBuffer(constant: [byte])
        }
    }

    /// True once `limit` messages have been received.
    var limitReached: Bool { limit.map { messages >= $0 } ?? false }

    @inline(__always)
    mutating func start(_ kind: MessageKind) {
        currentKind = kind
        clearPending()
    }

    private mutating func clearPending() {
        if first != nil { first = nil }  // start() clears what end() cleared: no release of nil then
        if !pending.isEmpty { pending.removeAll() }
    }

    private var pendingSize: Int { (first?.count ?? 0) + pending.byteCount }

    mutating func data(_ owner: ByteBuffer, _ start: UnsafeMutableRawPointer, _ count: Int) {
        bytes += UInt64(count)
        // Past the limit, or discarding: nothing is kept, so no buffer stays alive for it.
        if discard && examiner == nil || limitReached || count == 0 { return }
        if first == nil {
            first = Segment(owner: owner, start: start, count: count)
        } else if pending.isEmpty, let held = first, held.owner === owner, held.start + held.count == start {
            first = Segment(owner: owner, start: held.start, count: held.count + count)
        } else {
            pending.append(owner, start, count)
        }
    }

    /// `end` with the examiner's verdict first: a message it holds back (or every message,
    /// with `discard`) is only counted. Apart from `end`, which every message of the plain
    /// path passes: the writer calls this one when there is an examiner (`StdoutWriter.examine`).
    mutating func endExamined() {
        if let examiner, !limitReached, !withExaminedPayload({ examiner(currentKind ?? .binary, $0) }) || discard {
            currentKind = nil
            clearPending()
            messages += 1
            return
        }
        end()
    }

    mutating func end() {
        let size = pendingSize
        let kind = currentKind ?? .binary
        currentKind = nil
        guard !discard && !limitReached else {
            clearPending()
            messages += 1
            return
        }
        switch format {
        case .raw:
            appendRaw()
        case .base64:
            if kind == .binary {
                appendCopy(Array(Base64.encode(contiguousPending()).utf8), separator: true)
            } else {
                appendRaw()
            }
        case .jsonLines(let timestamps):
            appendCopy(Self.jsonLine(kind, contiguousPending(), client: nil, timestamps: timestamps, reserve: size), separator: true)
        }
        clearPending()
        messages += 1
    }

    /// A whole message from a client of --broadcast, in the same format as the pieces above;
    /// with --jsonl its object names the client (`"client"`, before `"ts"`).
    mutating func message(_ kind: MessageKind, _ payload: [UInt8], client: Int) {
        bytes += UInt64(payload.count)
        messages += 1
        guard !discard && !limitReached else { return }
        switch format {
        case .raw:
            appendCopy(payload, separator: true)
        case .base64:
            appendCopy(kind == .binary ? Array(Base64.encode(payload).utf8) : payload, separator: true)
        case .jsonLines(let timestamps):
            appendCopy(Self.jsonLine(kind, payload, client: client, timestamps: timestamps, reserve: payload.count), separator: true)
        }
    }

    /// `{"type":"text","data":...}` or `{"type":"binary","base64":...}`, then `"client"` and
    /// `"ts"` when given; without its newline.
    static func jsonLine(_ kind: MessageKind, _ payload: [UInt8], client: Int?, timestamps: Bool, reserve size: Int) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(size + size / 3 + 64)
        line += Array("{\"type\":".utf8)
        if kind == .text {
            line += Array("\"text\",\"data\":".utf8)
            payload.withUnsafeBytes { JSONWriter.appendString($0, to: &line) }
        } else {
            line += Array("\"binary\",\"base64\":\"".utf8)
            line += Array(Base64.encode(payload).utf8)
            line.append(UInt8(ascii: "\""))
        }
        if let client { line += Array(",\"client\":\(client)".utf8) }
        if timestamps { appendTimestamp(to: &line) }
        line.append(UInt8(ascii: "}"))
        return line
    }

    /// --jsonl: the server's Close as an event line (not after -n's count: a `head -n`-style
    /// reader gets exactly the lines it asked for).
    mutating func close(_ payload: ClosePayload) {
        guard case .jsonLines(let timestamps) = format, !discard, !limitReached else { return }
        var line = Array("{\"type\":\"close\",\"code\":".utf8)
        line += Array((payload.code.map { String($0.rawValue) } ?? "null").utf8)
        line += Array(",\"reason\":".utf8)
        payload.reason.withUnsafeBytes { JSONWriter.appendString($0, to: &line) }
        if timestamps { Self.appendTimestamp(to: &line) }
        line.append(UInt8(ascii: "}"))
        appendCopy(line, separator: true)
    }

    /// Copies a small message still in progress out of the receive buffers into the arena, so
    /// the session can reuse its receive buffer instead of taking a new one (a burst of
    /// small messages nearly always ends a read in the middle of one).
    mutating func detachSmallMessage() {
        let size = pendingSize
        guard first != nil, size <= OutputAssembler.copyLimit else { return }
        endRun()  // the run must end at the arena's end
        let start = reserve(size)
        copyPending(to: start)
        if !pending.isEmpty { pending.removeAll() }
        first = Segment(owner: arena, start: start, count: size)
    }

    /// Drops a partly received message (the connection failed or was lost).
    mutating func discardPending() {
        clearPending()
        currentKind = nil
    }

    /// The complete messages collected since the last call.
    mutating func takeBatch() -> SegmentList {
        endRun()
        return batch.take()
    }

    /// The complete messages collected since the last call, to `receiver`, which takes the
    /// segments (`StdoutSink.submit`): the list it leaves, empty, is the next batch.
    mutating func handOverBatch(_ receiver: (inout SegmentList) -> Void) {
        endRun()
        receiver(&batch)
        if !batch.isEmpty { batch.removeAll() }
    }

    /// Bytes of the complete messages not taken yet.
    var batchBytes: Int { batch.byteCount + run }

    /// A line of wspipe's own (a connection event, --jsonl), in order with the messages;
    /// not counted as a message. With --timestamps it ends with "ts" as a message does, the
    /// time it is written; `timed`: the line has its own (the bus's events always do).
    mutating func event(_ line: [UInt8], timed: Bool = false) {
        guard !discard else { return }
        guard case .jsonLines(true) = format, !timed, line.last == UInt8(ascii: "}") else { return appendCopy(line, separator: true) }
        var stamped = line
        stamped.removeLast()
        Self.appendTimestamp(to: &stamped)
        stamped.append(UInt8(ascii: "}"))
        appendCopy(stamped, separator: true)
    }

    // MARK: - Building output

    /// The payload as it stands, small ones copied next to each other, large ones referenced.
    private mutating func appendRaw() {
        let size = pendingSize
        let total = size + (separatorBuffer == nil ? 0 : 1)
        if total <= OutputAssembler.copyLimit {
            let start = reserve(total)
            let offset = copyPending(to: start)
            if let separatorBuffer { (start + offset).copyMemory(from: separatorBuffer.base, byteCount: 1) }
            run += total
        } else {
            endRun()
            if let first { batch.append(first.owner, first.start, first.count) }
            batch.append(contentsOf: pending)
            if let separatorBuffer { batch.append(separatorBuffer, separatorBuffer.base, 1) }
        }
    }

    /// Encoded output (and the separator) copied into the arena, or into a buffer of its own
    /// when it is large.
    private mutating func appendCopy(_ bytes: [UInt8], separator: Bool) {
        let total = bytes.count + (separator && separatorBuffer != nil ? 1 : 0)
        guard total > 0 else { return }  // an empty binary message of --broadcast -b
        let owner: ByteBuffer
        let start: UnsafeMutableRawPointer
        let inArena = total <= OutputAssembler.arenaSize
        if inArena {
            start = reserve(total)
            owner = arena
        } else {
            endRun()
            owner = ByteBuffer(capacity: total)
            start = owner.base
            owner.count = total
        }
        bytes.withUnsafeBytes { if let base = $0.baseAddress { start.copyMemory(from: base, byteCount: bytes.count) } }
        if total > bytes.count, let separatorBuffer { (start + bytes.count).copyMemory(from: separatorBuffer.base, byteCount: 1) }
        if inArena { run += total } else { batch.append(owner, start, total) }
    }

    /// The run of arena bytes goes to `batch`: before anything else does, before the arena
    /// is replaced (the run keeps it alive from there) and when the batch is taken.
    private mutating func endRun() {
        guard run > 0 else { return }
        batch.append(arena, arena.end - run, run)
        run = 0
    }

    /// `count` bytes at the arena's end (a new arena when it is full): the run, if any, ends
    /// right before them unless the arena was replaced.
    private mutating func reserve(_ count: Int) -> UnsafeMutableRawPointer {
        if arena.free < count {
            endRun()
            ByteBuffer.reuse(&arena, orMake: OutputAssembler.arenaSize)
        }
        let start = arena.end
        arena.count += count
        return start
    }

    /// Copies the current message's pieces, in order, to `start`; returns the bytes copied.
    /// Inlined: called, it took the assembler by value, a 129-byte copy of it (a memcpy
    /// call, 29 instructions) for every message `appendRaw` copies.
    @discardableResult @inline(__always)
    private func copyPending(to start: UnsafeMutableRawPointer) -> Int {
        var offset = 0
        if let first {
            start.copyMemory(from: first.start, byteCount: first.count)
            offset = first.count
        }
        for segment in pending.segments {
            (start + offset).copyMemory(from: segment.start, byteCount: segment.count)
            offset += segment.count
        }
        return offset
    }

    /// The current message's first `examinedBytes`, in place when it is in one piece.
    private func withExaminedPayload(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        if pending.isEmpty {
            guard let first else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
            return body(UnsafeRawBufferPointer(start: first.start, count: min(first.count, Self.examinedBytes)))
        }
        var prefix: [UInt8] = []
        prefix.reserveCapacity(min(pendingSize, Self.examinedBytes))
        for segment in (first.map { [$0] } ?? []) + pending.segments where prefix.count < Self.examinedBytes {
            let take = min(segment.count, Self.examinedBytes - prefix.count)
            prefix.append(contentsOf: UnsafeRawBufferPointer(start: segment.start, count: take))
        }
        return prefix.withUnsafeBytes(body)
    }

    private func contiguousPending() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: pendingSize) { buffer, count in
            count = buffer.baseAddress.map { copyPending(to: UnsafeMutableRawPointer($0)) } ?? 0
        }
    }

    /// `,"ts":<seconds since the Unix epoch, microseconds>` (wall clock).
    private static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let micros = String(now.tv_nsec / 1000)
        let padded = String(repeating: "0", count: max(0, 6 - micros.count)) + micros
        line += Array(",\"ts\":\(now.tv_sec).\(padded)".utf8)
    }
}
