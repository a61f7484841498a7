/// Which address families a connection may use (`-4`, `-6`).
public enum AddressFamily: Sendable, Equatable {
    /// IPv6 and IPv4, raced (Happy Eyeballs, RFC 8305).
    case any
    /// IPv4 addresses only.
    case ipv4
    /// IPv6 addresses only.
    case ipv6
}

/// Happy Eyeballs v2 (RFC 8305) connection racing, without I/O.
///
/// The resolver's addresses are tried IPv6 first, alternating families after that
/// (§4); a new attempt starts every `attemptDelay` (250 ms, §5's recommended Connection
/// Attempt Delay) while earlier ones are still pending, or at once when one fails; the
/// first attempt to connect wins and the others are abandoned. Names are looked up with
/// one getaddrinfo(3) call for both families, so §3's separate AAAA/A queries and
/// Resolution Delay do not apply.
public enum HappyEyeballs {
    public static let attemptDelay = 0.25

    /// `items` reordered: the first IPv6 address, then the first IPv4, and so on,
    /// each family keeping the resolver's order; leftovers of the longer family at the end.
    public static func interleave<T>(_ items: [T], isIPv6: (T) -> Bool) -> [T] {
        let six = items.filter(isIPv6)
        let four = items.filter { !isIPv6($0) }
        var result: [T] = []
        result.reserveCapacity(items.count)
        for index in 0..<max(six.count, four.count) {
            if index < six.count { result.append(six[index]) }
            if index < four.count { result.append(four[index]) }
        }
        return result
    }

    /// When each of `count` attempts starts. Feed it the current time and failures; it
    /// says which attempts to start and when to look again.
    public struct Schedule: Sendable {
        public let count: Int
        public let delay: Double
        /// Attempts started so far (attempt indices 0..<started).
        public private(set) var started = 0
        /// Started attempts that have neither failed nor won, in the order they started. An
        /// array, not a Set: a few attempts, and Set<Int>'s metadata, made at run time, checks
        /// Int's Hashable conformance against every conformance record of the binary (125,000
        /// instructions per connect, callgrind).
        public private(set) var running: [Int] = []
        private var nextStart: Instant?

        public init(count: Int, delay: Double = HappyEyeballs.attemptDelay) {
            self.count = count
            self.delay = delay
        }

        /// The attempts to start at `now` (in order; usually none or one).
        public mutating func attemptsToStart(at now: Instant) -> [Int] {
            var due: [Int] = []
            while started < count && (running.isEmpty || nextStart.map { now >= $0 } ?? true) {
                due.append(started)
                running.append(started)
                started += 1
                nextStart = now.adding(seconds: delay)
            }
            return due
        }

        /// Attempt `index` failed at `now`: the next one may start at once.
        public mutating func attemptFailed(_ index: Int, at now: Instant) {
            running.removeAll { $0 == index }
            nextStart = now
        }

        /// When the next attempt is due, if any remain to start.
        public var wakeTime: Instant? { started < count ? nextStart : nil }

        /// Every attempt started and failed.
        public var isExhausted: Bool { started == count && running.isEmpty }
    }
}
