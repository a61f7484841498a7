import Glibc
import Synchronization

/// A point on the monotonic clock (CLOCK_MONOTONIC), in nanoseconds. Wall-clock changes
/// never shorten or stretch a timeout.
public struct Instant: Sendable, Comparable, Hashable {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static func now() -> Instant {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Instant(nanoseconds: UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec))
    }

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// This instant plus `seconds` (saturating; negative or NaN counts as zero).
    public func adding(seconds: Double) -> Instant {
        guard seconds > 0, seconds.isFinite else { return self }
        let delta = seconds >= 1e9 ? UInt64(1e18) : UInt64(seconds * 1e9)
        return Instant(nanoseconds: nanoseconds &+ delta)
    }

    /// Seconds from `earlier` to this instant (0 if `earlier` is later).
    public func seconds(since earlier: Instant) -> Double {
        nanoseconds > earlier.nanoseconds ? Double(nanoseconds - earlier.nanoseconds) / 1e9 : 0
    }

    /// Milliseconds until this instant for poll(2): 0 if past, rounded up otherwise, at most
    /// Int32.max.
    public func pollTimeout(from now: Instant = .now()) -> Int32 {
        if nanoseconds <= now.nanoseconds { return 0 }
        let ms = (nanoseconds - now.nanoseconds + 999_999) / 1_000_000
        return ms > UInt64(Int32.max) ? Int32.max : Int32(ms)
    }
}

/// A time limit: the instant it ends, and the seconds it was set from (for messages: "timed
/// out after 10 s"). An earlier limit (`notAfter`) moves the instant, not the seconds.
public struct Deadline: Sendable, Equatable {
    public let instant: Instant
    /// The limit as the user set it, in seconds.
    public let seconds: Double
    /// Ends the waits early when signalled (a connect the caller gave up on): they report
    /// the deadline as passed.
    public var cancellation: ConnectCancellation?

    public init(instant: Instant, seconds: Double) {
        self.instant = instant
        self.seconds = seconds
    }

    /// `seconds` from `start`.
    public init(seconds: Double, from start: Instant = .now()) {
        self.init(instant: start.adding(seconds: seconds), seconds: seconds)
    }

    /// The same deadline, ending at `limit` if that is earlier.
    public func notAfter(_ limit: Instant?) -> Deadline {
        guard let limit, limit < instant else { return self }
        var earlier = Deadline(instant: limit, seconds: seconds)
        earlier.cancellation = cancellation
        return earlier
    }

    public var hasPassed: Bool { Instant.now() >= instant || (cancellation?.isCancelled ?? false) }

    /// Milliseconds left, for poll(2).
    public func pollTimeout() -> Int32 { instant.pollTimeout() }

    /// Waits for `events` on `fd` until the deadline (EINTR is retried). Returns true when
    /// the descriptor is ready, false when the deadline passed (or the cancellation was
    /// signalled). Throws `.system` when poll(2) fails.
    public func wait(fd: Int32, events: Int16) throws(TransportError) -> Bool {
        var entries = [pollfd(fd: fd, events: events, revents: 0)]
        if let cancellation { entries.append(pollfd(fd: cancellation.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
        while true {
            let ready = poll(&entries, nfds_t(entries.count), pollTimeout())
            if ready > 0 { return entries.count == 1 || entries[1].revents == 0 }
            if ready == 0 { return false }
            if errno != EINTR { throw .system(call: "poll", errno: errno) }
        }
    }

    /// Limits of the same instant and seconds are equal, whatever their cancellation.
    public static func == (a: Deadline, b: Deadline) -> Bool { a.instant == b.instant && a.seconds == b.seconds }
}

/// A signal that a blocking connect should stop waiting: a pipe whose read end becomes
/// readable (so poll(2) wakes), plus a flag. Made by whoever may give up on the connect.
public final class ConnectCancellation: Sendable {
    /// The read end, for poll(2).
    public let fileDescriptor: Int32
    private let writeEnd: Int32
    private let signalled = Atomic<Bool>(false)

    /// Nil when no pipe can be made (out of descriptors): the connect is then not
    /// interruptible, only bounded by its deadline.
    public init?() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        fileDescriptor = ends[0]
        writeEnd = ends[1]
    }

    public var isCancelled: Bool { signalled.load(ordering: .acquiring) }

    public func cancel() {
        guard !signalled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    deinit {
        close(fileDescriptor)
        close(writeEnd)
    }
}
