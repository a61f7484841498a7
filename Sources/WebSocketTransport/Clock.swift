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
