import WebSocketEngine

/// One read of stdin, as the reader hands it to its owner.
enum StdinRead {
    case data(ByteBuffer)
    case end
    case failed(String)
}

/// What a `StdinReader` asks of its owner (the client's `Session`, `BroadcastBridge`).
protocol StdinReaderOwner: AnyObject {
    /// Whether the owner takes input now (room in its connection or queue).
    var wantsStdin: Bool { get }
    /// One read; false: read no more this turn (the owner stopped, or must act first).
    /// At the end or a failure the reader's `open` is still true during the call (the
    /// owner's rules may look at it) and false after.
    func stdinRead(_ read: StdinRead) -> Bool
    /// After each turn of reads (the offline queue tells its drops once per turn).
    func stdinTurnEnded()
}

/// The stdin half of the stdio endpoint, the same for the client, the stdio server and
/// --broadcast: reads stdin on the loop when it is ready and the owner has room
/// (`wantsStdin`), into a buffer reused while nothing references it, and hands each read
/// to the owner (`stdinRead`), which frames it (`InputFramer`) and sends what it made. It
/// never blocks and never sets O_NONBLOCK (`StdinSource`).
final class StdinReader {
    let source: StdinSource
    private let loop: EventLoop
    private let readSize: Int
    /// Reads per turn of the loop before the others get theirs (nil: as long as there is
    /// room; a file never waits, so --broadcast bounds it to keep serving its clients).
    private let turn: Int?
    private var watch: EventLoop.Watch?
    /// A read may find data without waiting.
    private(set) var ready: Bool
    /// Not ended, failed or stopped by the owner.
    var open = true
    /// A read is due before the loop waits again.
    private(set) var pumpQueued = false
    private var buffer = ByteBuffer(capacity: 0)
    /// The turn of reads `pumpSoon` hands the loop, made once (a closure made for each
    /// turn cost its allocation and release).
    private var queuedTurn: () -> Void = {}

    /// Asked on every read and whenever the socket takes data: unowned(unsafe) (the owner
    /// owns the reader and outlives it) spares the reference counting a stored closure or
    /// an unowned reference costs per call. Reading it still copies it strong (a retain and
    /// a release), so a turn of reads reads it once and hands it down (`pump(owner:)`,
    /// `refresh(owner:)`) instead of once per question (five a turn). Set once by the owner
    /// that made the reader (it cannot pass itself before its init ends).
    unowned(unsafe) var owner: StdinReaderOwner?

    init(loop: EventLoop, readSize: Int, turn: Int? = nil, source: StdinSource = StdinSource()) {
        self.loop = loop
        self.readSize = readSize
        self.turn = turn
        self.source = source
        ready = !source.needsPoll
        // Unretained, as the owner is: the reader lives while its owner's loop runs, so a
        // queued turn never finds it gone ([unowned self] would trap if one did, for a
        // reference count per turn; an unowned(unsafe) self is copied strong at each use).
        let reader = Unmanaged.passUnretained(self)
        queuedTurn = { reader._withUnsafeGuaranteedRef { $0.turnOfReads() } }
    }

    private func turnOfReads() {
        pumpQueued = false
        let owner = self.owner
        pump(owner: owner)
        owner?.stdinTurnEnded()
        refresh(owner: owner)
    }

    /// Watches stdin while it is wanted and not known to be ready; reads it soon when it is.
    func refresh() { refresh(owner: owner) }

    private func refresh(owner: StdinReaderOwner?) {
        // Never read (--receive-only), or over: no watch on a descriptor that may be reused.
        guard open || watch != nil else { return }
        if watch == nil {
            watch = loop.watch(source.fd) { [unowned self] _ in
                ready = true
                pumpSoon()
            }
        }
        let wanted = open && owner?.wantsStdin == true  // asked once: a call through the protocol
        if wanted && !ready {
            guard let watch else { return }
            if !loop.setInterest(watch, .readable) {
                ready = true  // epoll cannot watch it (a device like /dev/null): never blocks
                pumpSoon()
            }
        } else {
            // setInterest(watch, []) does nothing to a watch that asks for nothing.
            if watch?.interest.isEmpty == false, let watch { loop.setInterest(watch, []) }
            if wanted && ready { pumpSoon() }
        }
    }

    /// No more stdin (its end, an error, a close of ours).
    func stop() {
        open = false
        pause()
    }

    /// Not read until `refresh` (the connection cannot take it now).
    func pause() {
        if let watch { loop.setInterest(watch, []) }
    }

    private func pumpSoon() {
        guard !pumpQueued else { return }
        pumpQueued = true
        loop.later(queuedTurn)
    }

    private func pump(owner: StdinReaderOwner?) {
        guard let owner else { return }
        var reads = 0
        while ready && open && owner.wantsStdin {
            if let turn, reads == turn { return pumpSoon() }
            reads += 1
            // The last read's buffer is reused unless frames still reference it.
            ByteBuffer.reuse(&buffer, orMake: readSize)
            switch source.read(into: buffer.base, count: buffer.capacity) {
            case .data(let n):
                buffer.count = n
                if source.waitsAfter(reading: n, of: buffer.capacity) { ready = false }
                if !owner.stdinRead(.data(buffer)) { return }
            case .wouldBlock:
                ready = false
                return
            case .end:
                _ = owner.stdinRead(.end)
                open = false
                return
            case .failed(let why):
                _ = owner.stdinRead(.failed(why))
                open = false
                return
            }
        }
    }
}

extension StdinSource {
    /// Whether, after a read of `n` of `requested` bytes, the next read waits for poll(2):
    /// always where a read that finds nothing would block (a terminal; a pipe without
    /// RWF_NOWAIT), and after a short read of anything but a regular file. A pipe, a socket
    /// (stream: recv takes everything queued, up to the count) and a terminal return less
    /// than asked only when they hold no more, so reading again would only meet EAGAIN (one
    /// syscall less per interactive line); a regular file's short read comes before its end,
    /// which the next read finds at once (epoll cannot watch a file: nothing would wake it).
    func waitsAfter(reading n: Int, of requested: Int) -> Bool {
        !readsUntilWouldBlock || (n < requested && kind.emptiedByShortRead)
    }
}

extension StreamKind {
    /// A short read says it holds nothing more now (all but a regular file).
    var emptiedByShortRead: Bool { self != .regular }
}
