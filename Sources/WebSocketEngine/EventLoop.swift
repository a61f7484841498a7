import CWSPipeShims
import Glibc
import WebSocketTransport

/// Readiness a watcher asks for or is told about (epoll(7) bits).
public struct IOEvents: OptionSet, Sendable, Equatable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let readable = IOEvents(rawValue: UInt32(EPOLLIN.rawValue))
    public static let writable = IOEvents(rawValue: UInt32(EPOLLOUT.rawValue))
    /// The peer shut down its sending side (EPOLLRDHUP).
    public static let readHangUp = IOEvents(rawValue: UInt32(EPOLLRDHUP.rawValue))
    /// Reported whatever was asked for.
    public static let error = IOEvents(rawValue: UInt32(EPOLLERR.rawValue))
    public static let hangUp = IOEvents(rawValue: UInt32(EPOLLHUP.rawValue))

    /// `.readable` or `.writable`, as a blocked stream operation asks.
    public init(_ interest: PollInterest) { self = interest == .read ? .readable : .writable }
}

/// Why the loop could not be made or run.
public enum EventLoopError: Error, Equatable, CustomStringConvertible {
    /// epoll_create1 or eventfd failed with this errno.
    case cannotCreate(what: String, errno: Int32)

    public var description: String {
        switch self {
        case .cannotCreate(let what, let code): return "cannot create \(what): \(errnoText(code))"
        }
    }
}

/// One thread's event loop: epoll(7) over any number of descriptors, timers, work queued to
/// run before the next wait, and an eventfd that wakes it (from a signal handler or another
/// thread).
///
/// Level-triggered: a watcher's interest is what it wants *now* (`setInterest`), and the
/// kernel is told only when it changes. A watcher that wants nothing is taken out of the
/// epoll set altogether, so a hang-up or error that epoll reports regardless of interest
/// cannot wake the loop again and again. Descriptors epoll cannot watch (regular files,
/// /dev/null) are reported by `setInterest` returning false: they never block.
///
/// Everything runs on the thread that calls `run`; only `wake()` may be called elsewhere.
public final class EventLoop {
    /// A registered descriptor. Keep it while it is watched; `remove` it before closing the
    /// descriptor.
    public final class Watch {
        public let fd: Int32
        fileprivate var handler: (IOEvents) -> Void
        fileprivate var registered: IOEvents = []
        fileprivate var inEpoll = false
        fileprivate var slot: Int
        /// What epoll carries for this watch: its slot in the low 32 bits and a serial of
        /// its own above. A slot is reused as soon as its watch is removed, even while the
        /// removed watch's event still waits in the current turn's batch: the serial tells
        /// that stale event from one for the slot's new watch.
        fileprivate let key: UInt64
        /// epoll refused the descriptor (EPERM: it is always ready).
        public fileprivate(set) var isAlwaysReady = false

        fileprivate init(fd: Int32, slot: Int, serial: UInt64, handler: @escaping (IOEvents) -> Void) {
            self.fd = fd
            self.slot = slot
            key = serial << 32 | UInt64(slot)
            self.handler = handler
        }

        /// What the watcher currently asks for.
        public var interest: IOEvents { registered }
    }

    /// A timer: fires once at its deadline unless cancelled or moved.
    public final class Timer {
        fileprivate var deadline: Instant?
        fileprivate var generation: UInt64 = 0
        fileprivate let fire: () -> Void
        fileprivate init(fire: @escaping () -> Void) { self.fire = fire }
        /// When it will fire; nil when not armed.
        public var armedFor: Instant? { deadline }
    }

    private let epfd: Int32
    /// The eventfd: `wake()` writes it, the loop drains it and calls `onWake`.
    public let wakeFD: Int32
    private var watches: [Watch?] = []
    private var freeSlots: [Int] = []
    private var watchSerial: UInt64 = 0
    private var heap: [(deadline: Instant, generation: UInt64, timer: Timer)] = []
    private var timerGeneration: UInt64 = 0
    private var soon: [LaterWork] = []
    /// The other array of `soon`: the two change places at each turn, so queued work costs
    /// no allocation (copying the array and emptying it made a new buffer every turn).
    private var spareSoon: [LaterWork] = []
    private var events: UnsafeMutableBufferPointer<epoll_event>
    /// Scratch iovecs for one writev at a time, shared by everything on this loop (one
    /// thread): a connection holds none of its own.
    public let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 1024)
    private var stopped = false
    /// Called on the loop's thread after `wake()`.
    public var onWake: (() -> Void)?
    private static let wakeSlot = UInt64.max

    public init() throws(EventLoopError) {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw .cannotCreate(what: "an epoll instance", errno: errno) }
        wakeFD = wsp_eventfd()
        guard wakeFD >= 0 else {
            let code = errno
            Glibc.close(epfd)
            throw .cannotCreate(what: "an eventfd", errno: code)
        }
        events = .allocate(capacity: 64)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = EventLoop.wakeSlot
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFD, &event)
    }

    deinit {
        events.deallocate()
        vectors.deallocate()
        Glibc.close(wakeFD)
        Glibc.close(epfd)
    }

    // MARK: - Descriptors

    /// Watches `fd`, initially for nothing; `handler` gets the events epoll reports.
    public func watch(_ fd: Int32, handler: @escaping (IOEvents) -> Void) -> Watch {
        let slot = freeSlots.popLast() ?? watches.count
        watchSerial = (watchSerial + 1) & 0x7fff_ffff  // below wakeSlot's key
        let watch = Watch(fd: fd, slot: slot, serial: watchSerial, handler: handler)
        if slot == watches.count { watches.append(watch) } else { watches[slot] = watch }
        return watch
    }

    /// Sets what `watch` waits for. Returns false when epoll cannot watch the descriptor
    /// (a regular file or a device without poll support): it never blocks, so read or write
    /// it without waiting.
    @discardableResult
    public func setInterest(_ watch: Watch, _ interest: IOEvents) -> Bool {
        if watch.isAlwaysReady { return false }
        guard watch.slot >= 0 else { return true }  // removed: watches nothing any more
        guard interest != watch.registered else { return true }
        if interest.isEmpty {
            if watch.inEpoll {
                _ = epoll_ctl(epfd, EPOLL_CTL_DEL, watch.fd, nil)
                watch.inEpoll = false
            }
            watch.registered = []
            return true
        }
        var event = epoll_event()
        event.events = interest.rawValue
        event.data.u64 = watch.key
        let result = epoll_ctl(epfd, watch.inEpoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, watch.fd, &event)
        if result != 0 {
            if errno == EPERM {
                watch.isAlwaysReady = true
                return false
            }
            // EBADF and the like: the descriptor is unusable; say so through the handler
            // on the next turn instead of waiting forever.
            later { [weak watch] in watch?.handler(.error) }
            return true
        }
        watch.inEpoll = true
        watch.registered = interest
        return true
    }

    /// Stops watching (before the descriptor is closed).
    public func remove(_ watch: Watch) {
        if watch.inEpoll { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, watch.fd, nil) }
        watch.inEpoll = false
        watch.registered = []
        guard watch.slot >= 0, watch.slot < watches.count, watches[watch.slot] === watch else { return }
        watches[watch.slot] = nil
        freeSlots.append(watch.slot)
        watch.slot = -1
        watch.handler = { _ in }
    }

    // MARK: - Timers and work

    /// A timer that calls `fire` on the loop when its deadline passes (see `arm`).
    public func timer(_ fire: @escaping () -> Void) -> Timer { Timer(fire: fire) }

    /// Arms `timer` for `deadline` (nil disarms it). Moving a timer is cheap: the old entry
    /// is skipped when it comes up.
    public func arm(_ timer: Timer, at deadline: Instant?) {
        guard deadline != timer.deadline else { return }
        timer.deadline = deadline
        timerGeneration &+= 1
        timer.generation = timerGeneration
        guard let deadline else { return }
        if heap.count >= 1024 && heap.count >= 4 * liveTimers() { compact() }
        heap.append((deadline, timerGeneration, timer))
        siftUp(heap.count - 1)
    }

    /// Runs `work` on this loop before it next waits.
    public func later(_ work: @escaping () -> Void) { soon.append(.closure(work)) }

    /// Runs `task.runLater()` on this loop before it next waits: as `later(_:)` with a
    /// closure, without making one (a connection schedules itself once per turn).
    public func later(_ task: any LoopTask) { soon.append(.task(task)) }

    /// Wakes the loop from any thread (or a signal handler, via `wakeFD`).
    public func wake() { wsp_eventfd_signal(wakeFD) }

    /// Ends `run` after the current turn.
    public func stop() { stopped = true }

    // MARK: - Running

    /// Runs until `stop()`.
    public func run() {
        stopped = false
        while !stopped { turn() }
    }

    /// One turn: queued work, then a wait (none if work is queued), events, due timers.
    public func turn() {
        runQueued()
        if stopped { return }
        let timeout: Int32 = soon.isEmpty ? (heap.first.map { $0.deadline.pollTimeout() } ?? -1) : 0
        let count = epoll_wait(epfd, events.baseAddress, Int32(events.count), timeout)
        if count > 0 {
            for i in 0..<Int(count) {
                let event = events[i]
                let key = event.data.u64
                let slot = Int(truncatingIfNeeded: key & 0xffff_ffff)
                if key == EventLoop.wakeSlot {
                    _ = wsp_eventfd_drain(wakeFD)
                    onWake?()
                } else if slot < watches.count, let watch = watches[slot], watch.key == key {
                    watch.handler(IOEvents(rawValue: event.events))
                }
            }
        }
        fireTimers()
    }

    private func runQueued() {
        // Work queued by this work runs in the next turn, after a look at the descriptors.
        guard !soon.isEmpty else { return }
        var work: [LaterWork] = []
        swap(&work, &spareSoon)  // the spare, held only here, becomes the queue
        swap(&work, &soon)
        for item in work {
            switch item {
            case .closure(let run): run()
            case .task(let task): task.runLater()
            }
        }
        work.removeAll(keepingCapacity: true)
        spareSoon = work
    }

    private func fireTimers() {
        guard !heap.isEmpty else { return }
        let now = Instant.now()
        // Only timers armed before this pass: one that a firing timer re-arms for a moment
        // already past waits for the next turn (after a look at the descriptors), so a
        // timer can never spin inside one pass.
        let armedBefore = timerGeneration
        while let top = heap.first, top.deadline <= now, top.generation <= armedBefore {
            popTop()
            let timer = top.timer
            guard timer.generation == top.generation, timer.deadline != nil else { continue }
            timer.deadline = nil
            timer.fire()
        }
    }

    /// Timers whose newest entry is in the heap.
    private func liveTimers() -> Int {
        heap.reduce(0) { $0 + ($1.timer.generation == $1.generation && $1.timer.deadline != nil ? 1 : 0) }
    }

    /// Drops the entries of moved and disarmed timers (a timer moved often leaves many).
    private func compact() {
        heap.removeAll { $0.timer.generation != $0.generation || $0.timer.deadline == nil }
        heap.sort { $0.deadline < $1.deadline }  // a sorted array is a valid heap
    }

    private func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < heap.count && heap[l].deadline < heap[smallest].deadline { smallest = l }
            if r < heap.count && heap[r].deadline < heap[smallest].deadline { smallest = r }
            if smallest == i { return }
            heap.swapAt(i, smallest)
            i = smallest
        }
    }

    private func siftUp(_ index: Int) {
        var i = index
        while i > 0 {
            let parent = (i - 1) / 2
            if heap[parent].deadline <= heap[i].deadline { return }
            heap.swapAt(i, parent)
            i = parent
        }
    }
}

/// Work an object does when the loop runs it (`EventLoop.later(_:)`).
public protocol LoopTask: AnyObject {
    func runLater()
}

/// What `EventLoop.later` queued.
private enum LaterWork {
    case closure(() -> Void)
    case task(any LoopTask)
}
