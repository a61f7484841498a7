import WebSocketCore
import WebSocketEngine

/// The stdout half of the stdio endpoint, the same for the client, the stdio server and
/// --broadcast: messages become stdout bytes in the output format (`OutputAssembler`: raw,
/// --base64, --jsonl with --timestamps), --decompress inflates binary payloads on the way,
/// and `StdoutSink` writes them without blocking. The owner decides what a lagging or
/// failing stdout does to its connections (`lagging`, `sink.failure`) and is told through
/// `onChange` when stdout moved on its own (written on POLLOUT, its reader gone).
final class StdoutWriter {
    // Mutated for every message: run-time exclusivity checks cost more than the rest of a
    // small message's path (callgrind), so they are off for it.
    @exclusivity(unchecked) var assembler: OutputAssembler
    let sink = StdoutSink()
    private let loop: EventLoop
    private var watch: EventLoop.Watch?
    /// stdout took no more: wait for POLLOUT.
    private(set) var blocked = false
    /// Stop reading the peers while this many bytes wait for stdout.
    static let highWater = 1 << 20

    /// stdout was written or failed outside a call of the owner's: its backpressure follows.
    var onChange: () -> Void = {}
    /// Whether an idle pipe is watched for its reader going away (the owner's half of the
    /// rule: while its connection is open); `watchesReaderNow` adds stdout's half.
    var watchesReader: () -> Bool = { false }

    /// --decompress: nil without it. A constant and one flag are read per message, so a run
    /// without --decompress, a console or an examiner pays nothing more (both without
    /// run-time exclusivity checks, which would cost more than the rest of a small message's
    /// path).
    private let decompression: Decompression?
    /// Messages take `startScreened` (--decompress, the console, --expect/--until's examiner):
    /// decided once, at init or `examine`, so the plain path reads one flag per message.
    @exclusivity(unchecked) private var screens: Bool
    /// Where the current message goes; `.plain` unless `screens`.
    @exclusivity(unchecked) private var route = Route.plain
    private enum Route {
        /// Straight to the assembler, which writes it.
        case plain
        /// To the assembler, which lets the examiner look at it before it writes it.
        case examined
        /// Inflated on its way to the assembler (or dropped, after a failure).
        case inflated
        /// To the console; the assembler only counts it (and keeps it for an examiner).
        case console
    }
    /// Set by the owner once it has ended locally: a binary message is then dropped, not inflated.
    var stopped = false
    /// A payload did not inflate: the owner reports it and closes (nothing more is written).
    var onDecompressFailure: (ReceiveError) -> Void = { _ in }
    /// The console (`console` at init): every message is diverted to it, the assembler
    /// only counting it (its `discard`). The same one flag as --decompress guards it, so a
    /// pipeline's message path is unchanged.
    var console: Console?
    /// Called once the writer is done with a message the examiner looked at (`examine`).
    private var afterExamined: () -> Void = {}

    init(loop: EventLoop, assembler: OutputAssembler, decompress: CompressionFormat? = nil, maximumMessageSize: UInt64 = 0,
         console: Bool = false) {
        self.loop = loop
        self.assembler = assembler
        decompression = decompress.map { Decompression(format: $0, limit: maximumMessageSize) }
        screens = decompress != nil || console
    }

    /// --expect and --until: `examiner` looks at each message before it is written (see
    /// `OutputAssembler.examiner`); `then` runs once the writer is done with the message,
    /// where the owner may act on what the examiner saw (change the assembler's limit, close).
    func examine(by examiner: @escaping (MessageKind, UnsafeRawBufferPointer) -> Bool, then: @escaping () -> Void) {
        assembler.examiner = examiner
        afterExamined = then
        screens = true
    }

    // MARK: - Messages in pieces (the client and the stdio server)

    @inline(__always)
    func start(_ kind: MessageKind) {
        if screens { startScreened(kind) }
        assembler.start(kind)
    }

    @inline(__always)
    func data(_ buffer: ByteBuffer, _ bytes: UnsafeMutableRawPointer, _ count: Int) {
        if route != .plain { return screenedData(buffer, bytes, count: count) }
        assembler.data(buffer, bytes, count)
    }

    @inline(__always)
    func end() {
        if route != .plain { return endScreened() }
        assembler.end()
    }

    // MARK: - Writing

    /// Bytes waiting for stdout, written or about to be: at `highWater` the owner stops reading.
    var lagging: Bool { sink.pendingBytes + assembler.batchBytes >= StdoutWriter.highWater }

    /// Hands what the assembler completed to stdout and writes what stdout takes now; what
    /// it does not take waits for POLLOUT (`refreshWatch`).
    func flush() {
        guard assembler.batchBytes > 0 else { return }
        assembler.handOverBatch { sink.submit(&$0) }
        if !blocked { blocked = sink.flush() }
    }

    /// Watches stdout while it is blocked, or (an idle anonymous pipe) for its reader leaving:
    /// that ends `wspipe ... | head -n1` when head exits, even if no message comes to meet EPIPE.
    func refreshWatch() {
        if watch == nil { watch = loop.watch(sink.fd) { [unowned self] events in event(events) } }
        guard let watch else { return }
        if blocked {
            if !loop.setInterest(watch, .writable) {
                loop.later { [weak self] in self?.event(.writable) }  // epoll cannot watch it: try again soon
            }
        } else if watchesReaderNow {
            loop.setInterest(watch, .error)
        } else {
            loop.setInterest(watch, [])
        }
    }

    private var watchesReaderNow: Bool {
        sink.readerLossIsVisible && sink.failure == nil && !assembler.discard && watchesReader()
    }

    private func event(_ events: IOEvents) {
        if blocked {
            blocked = sink.flush()
        } else if events.contains(.error) {
            sink.readerWentAway()
        } else {
            sink.stopWatchingReader()
        }
        onChange()
    }

    /// The end: what stdout still has to take, waiting for it.
    func drain() { sink.drain() }

    // MARK: - --decompress, the console, the examiner

    /// A message starts with `screens` set. The console takes every message. With
    /// --decompress a binary one is inflated; after a failure (or once the owner stopped) it
    /// is dropped, and after a failure every message is. With an examiner the rest go to the
    /// assembler to be examined.
    @inline(never)
    private func startScreened(_ kind: MessageKind) {
        if let console {
            route = .console
            return console.messageStarted(kind)
        }
        if let decompression, decompression.failed || kind == .binary {
            route = .inflated
            guard kind == .binary && !stopped else { return }
            do throws(ReceiveError) {
                try decompression.begin()
            } catch {
                decompressFailed(error)
            }
            return
        }
        route = assembler.examiner == nil ? .plain : .examined
    }

    /// The screened message ended: it is counted (and written, unless the console showed
    /// it or the examiner held it back), except when it did not inflate.
    @inline(never)
    private func endScreened() {
        let ended = route
        route = .plain
        switch ended {
        case .console:
            console?.messageEnded()
        case .inflated:
            guard let decompression else { return }
            do throws(ReceiveError) {
                guard try decompression.finish({ buffer, start, n in self.assembler.data(buffer, start, n) }) else { return }
            } catch {
                decompressFailed(error)
                return
            }
        case .examined, .plain:
            break
        }
        guard assembler.examiner != nil else { return assembler.end() }
        assembler.endExamined()
        afterExamined()
    }

    @inline(never)
    private func screenedData(_ buffer: ByteBuffer, _ bytes: UnsafeMutableRawPointer, count: Int) {
        switch route {
        case .console:
            // --expect and --until examine the message in the assembler, which keeps it for
            // that alone (it discards what the console shows).
            if assembler.examiner != nil { assembler.data(buffer, bytes, count) }
            console?.messageData(bytes, count: count)
        case .inflated:
            guard let decompression else { return }
            do throws(ReceiveError) {
                try decompression.feed(bytes, count: count) { buffer, start, n in self.assembler.data(buffer, start, n) }
            } catch {
                decompressFailed(error)
            }
        case .examined, .plain:
            assembler.data(buffer, bytes, count)
        }
    }

    /// The message is dropped and nothing more is written; the owner says why and closes.
    @inline(never)
    private func decompressFailed(_ error: ReceiveError) {
        decompression?.stop()
        guard !stopped else { return }
        decompression?.failed = true
        assembler.discardPending()
        onDecompressFailure(error)
    }
}

/// --decompress's inflater (zlib loaded at the first binary message), whether the current
/// message goes through it, and whether one failed.
private final class Decompression {
    let format: CompressionFormat
    let limit: UInt64
    private var inflater: Inflater?
    private var active = false
    var failed = false

    init(format: CompressionFormat, limit: UInt64) {
        self.format = format
        self.limit = limit
    }

    /// A binary message starts; throws when zlib cannot be loaded.
    func begin() throws(ReceiveError) {
        if inflater == nil {
            do throws(ZlibLoadError) {
                try Zlib.load()
            } catch {
                active = false
                throw .invalidCompressedData(error.reason)
            }
            inflater = Inflater(format: format, limit: limit)
        }
        inflater?.begin(text: false)
        active = inflater != nil
    }

    func stop() { active = false }

    func feed(_ bytes: UnsafeMutableRawPointer, count: Int,
              _ out: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) {
        guard active, let inflater else { return }
        try inflater.feed(bytes, count: count, emit: out)
    }

    /// True when a message was inflated (false: it was dropped).
    func finish(_ out: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void) throws(ReceiveError) -> Bool {
        guard active, let inflater else { return false }
        active = false
        try inflater.finish(resetsContext: true, emit: out)
        return true
    }
}
