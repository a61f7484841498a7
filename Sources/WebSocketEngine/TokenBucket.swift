/// A rate as `--rate-limit`, `--byte-rate` and `--max-handshakes-per-ip` take it: so many
/// per second, with a burst (by default one second's worth).
public struct RateLimit: Sendable, Equatable {
    /// Tokens added per second.
    public var perSecond: Double
    /// Most tokens held: what may come at once after a quiet time.
    public var burst: Double

    public init(perSecond: Double, burst: Double? = nil) {
        self.perSecond = perSecond
        self.burst = burst ?? max(1, perSecond)
    }

    /// Why a rate's text is not one.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// `N/s[:BURST]`; `amount` reads N and BURST (a count, or a size with a unit for bytes).
    public static func parse(_ text: String, amount: (Substring) -> Double?) throws(Problem) -> RateLimit {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let rate = parts[0]
        guard rate.hasSuffix("/s"), isPlain(rate.dropLast(2)), let perSecond = amount(rate.dropLast(2)), perSecond > 0, perSecond.isFinite else {
            throw Problem(description: "is not a rate: write N/s or N/s:BURST (e.g. 100/s:200)")
        }
        // Slower would pause a connection for hours on one message.
        guard perSecond >= minimumPerSecond else { throw Problem(description: "is slower than 0.001/s") }
        var burst: Double?
        if parts.count == 2 {
            guard isPlain(parts[1]), let value = amount(parts[1]), value >= 1, value.isFinite else {
                throw Problem(description: "has a burst that is not a positive amount after the colon (a plain number; sizes take K, M or G)")
            }
            burst = value
        }
        return RateLimit(perSecond: perSecond, burst: burst)
    }

    static let minimumPerSecond = 0.001

    /// Digits with at most one fraction, then a unit's letters (sizes): no sign, exponent or
    /// hexadecimal form, which `Double` would read ("1e-300", "0x10").
    private static func isPlain(_ text: Substring) -> Bool {
        let unitStart = text.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? text.endIndex
        let number = text[..<unitStart]
        return number.first?.isNumber == true && number.last?.isNumber == true && number.count(where: { $0 == "." }) <= 1
            && text[unitStart...].allSatisfy { $0.isASCII && $0.isLetter && !"eExXpP".contains($0) }
    }
}

/// A token bucket (pure: the caller gives the time, in seconds on any monotonic clock).
/// Taking may go below zero: a debt that the rate pays back, so that a message larger
/// than the burst still passes, as slowly as the rate says.
public struct TokenBucket: Sendable, Equatable {
    public let rate: RateLimit
    public private(set) var tokens: Double
    private var stamp: Double

    /// Full at `now`.
    public init(_ rate: RateLimit, now: Double) {
        self.rate = rate
        tokens = rate.burst
        stamp = now
    }

    /// Tokens at `now`: what the rate added since the last look, up to the burst.
    public mutating func refill(now: Double) {
        if now > stamp {
            tokens = min(rate.burst, tokens + (now - stamp) * rate.perSecond)
            stamp = now
        }
    }

    /// Takes `amount` whether or not it is there (a debt below zero).
    public mutating func take(_ amount: Double, now: Double) {
        refill(now: now)
        tokens -= amount
    }

    /// Takes `amount` only if it is there; false (nothing taken) otherwise.
    public mutating func takeIfAvailable(_ amount: Double, now: Double) -> Bool {
        refill(now: now)
        guard tokens + TokenBucket.slack >= amount else { return false }
        tokens -= amount
        return true
    }

    /// Seconds from `now` until the bucket holds `amount` (0: it does).
    public func wait(until amount: Double, now: Double) -> Double {
        let held = min(rate.burst, tokens + max(0, now - stamp) * rate.perSecond)
        return held + TokenBucket.slack >= amount ? 0 : (amount - held) / rate.perSecond
    }

    /// What floating point loses of a refill at the exact instant a wait ends.
    static let slack = 1e-9

    /// Whether the bucket is full at `now` (nothing of it would be lost by forgetting it).
    public func isFull(now: Double) -> Bool { wait(until: rate.burst, now: now) == 0 }
}
