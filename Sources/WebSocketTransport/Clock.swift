import Glibc

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
        return Deadline(instant: limit, seconds: seconds)
    }

    public var hasPassed: Bool { Instant.now() >= instant }

    /// Milliseconds left, for poll(2).
    public func pollTimeout() -> Int32 { instant.pollTimeout() }

    /// Waits for `events` on `fd` until the deadline (EINTR is retried). Returns true when
    /// the descriptor is ready, false when the deadline passed. Throws `.system` when
    /// poll(2) fails.
    public func wait(fd: Int32, events: Int16) throws(TransportError) -> Bool {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let ready = poll(&entry, 1, pollTimeout())
            if ready > 0 { return true }
            if ready == 0 { return false }
            if errno != EINTR { throw .system(call: "poll", errno: errno) }
        }
    }
}
