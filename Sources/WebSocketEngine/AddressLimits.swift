/// `--max-clients-per-ip`, `--max-handshakes-per-ip` and `--ipv6-prefix`: limits per client
/// address, counted by this process (under --reuseport each process counts its own).
public struct AddressLimitSettings: Sendable, Equatable {
    /// Clients connected from one address beyond which upgrades get 429 (nil: no limit).
    public var maximumClients: Int?
    /// Requests (upgrades and plain GETs) one address may make (nil: no limit); 429 beyond.
    public var requestRate: RateLimit?
    /// IPv6 addresses are counted by their first so many bits (a /64 is one subscriber).
    public var ipv6PrefixBits = 64
    /// Addresses remembered at most; beyond, the oldest entry is forgotten.
    public var maximumEntries = 65_536

    public init(maximumClients: Int? = nil, requestRate: RateLimit? = nil) {
        self.maximumClients = maximumClients
        self.requestRate = requestRate
    }
}

/// An address as the per-address tables count it: an IPv4 address (an IPv4-mapped IPv6
/// address as its IPv4 address), or an IPv6 address cut to its prefix; 128 bits.
struct AddressKey: Hashable {
    let high: UInt64
    let low: UInt64

    /// The key of a client's address; nil for a Unix-socket client no proxy named.
    init?(_ peer: PeerAddress, ipv6PrefixBits: Int) {
        guard let words = peer.ipWords else { return nil }
        guard words.isIPv6 else {
            // As its IPv4-mapped IPv6 form: one space for both families.
            high = 0
            low = 0xFFFF_0000_0000 | words.low
            return
        }
        let bits = min(128, max(0, ipv6PrefixBits))
        func mask(_ kept: Int) -> UInt64 { kept >= 64 ? .max : kept <= 0 ? 0 : ~(UInt64.max >> kept) }
        high = words.high & mask(bits)
        low = words.low & mask(bits - 64)
    }

    /// The key of an address as a socket or a proxy words it ("ip:port", "[v6]:port", a bare IP).
    init?(_ clientAddress: String, ipv6PrefixBits: Int) {
        self.init(PeerAddress(socketAddress: clientAddress), ipv6PrefixBits: ipv6PrefixBits)
    }
}

/// The per-address counts (pure: the caller gives the time in seconds). Bounded: an entry
/// is freed when it holds no client and its bucket is full again, and at `maximumEntries`
/// the oldest entry goes to make room (its address starts afresh).
struct AddressTable {
    struct Entry: Equatable {
        var clients = 0
        var requests: TokenBucket?
        /// When it was made, in the order of `order`.
        var stamp: UInt64
    }

    let settings: AddressLimitSettings
    private(set) var entries: [AddressKey: Entry] = [:]
    /// Keys by age, oldest first from `head`; an item whose stamp is no longer its
    /// entry's is stale (the entry was freed) and skipped.
    private var order: [(key: AddressKey, stamp: UInt64)] = []
    private var head = 0
    private var nextStamp: UInt64 = 0
    /// Entries forgotten to make room.
    private(set) var evictions: UInt64 = 0

    init(_ settings: AddressLimitSettings) { self.settings = settings }

    /// A request from `key` at `now`: nil when its rate admits it (a token is taken), else
    /// the seconds to wait.
    mutating func request(_ key: AddressKey, now: Double) -> Double? {
        guard let rate = settings.requestRate else { return nil }
        sweep(now: now)
        var entry = entries[key] ?? make(key, now: now)
        var bucket = entry.requests ?? TokenBucket(rate, now: now)
        defer {
            entry.requests = bucket
            entries[key] = entry
            free(key, now: now)
        }
        return bucket.takeIfAvailable(1, now: now) ? nil : bucket.wait(until: 1, now: now)
    }

    /// Clients connected from `key`.
    func clients(_ key: AddressKey) -> Int { entries[key]?.clients ?? 0 }

    /// A client from `key` connected.
    mutating func connected(_ key: AddressKey, now: Double) {
        sweep(now: now)
        var entry = entries[key] ?? make(key, now: now)
        entry.clients += 1
        entries[key] = entry
    }

    /// A client from `key` left (an entry forgotten meanwhile is not made again).
    mutating func disconnected(_ key: AddressKey, now: Double) {
        guard var entry = entries[key] else { return }
        entry.clients = max(0, entry.clients - 1)
        entries[key] = entry
        free(key, now: now)
    }

    /// A new entry, after the oldest went if the table is full (not yet stored).
    private mutating func make(_ key: AddressKey, now: Double) -> Entry {
        while entries.count >= settings.maximumEntries, head < order.count {
            let oldest = order[head]
            head += 1
            if entries[oldest.key]?.stamp == oldest.stamp {
                entries[oldest.key] = nil
                evictions += 1
            }
        }
        compact()
        nextStamp += 1
        order.append((key, nextStamp))
        return Entry(stamp: nextStamp)
    }

    /// Forgets `key`'s entry if it holds nothing: no client, a full bucket.
    private mutating func free(_ key: AddressKey, now: Double) {
        guard let entry = entries[key], entry.clients == 0, entry.requests?.isFull(now: now) ?? true else { return }
        entries[key] = nil
    }

    /// A look at the two oldest entries: those that hold nothing any more are freed, so
    /// the table follows the live addresses without a timer.
    private mutating func sweep(now: Double) {
        for _ in 0..<2 where head < order.count {
            let oldest = order[head]
            guard let entry = entries[oldest.key], entry.stamp == oldest.stamp else {
                head += 1
                continue
            }
            guard entry.clients == 0, entry.requests?.isFull(now: now) ?? true else { return }
            entries[oldest.key] = nil
            head += 1
        }
    }

    /// Drops the stale and consumed part of `order` when it outgrows the table.
    private mutating func compact() {
        guard order.count - head > 2 * entries.count + 64 || head > order.count / 2 + 64 else { return }
        order = order[head...].filter { entries[$0.key]?.stamp == $0.stamp }
        head = 0
    }

    /// Items `order` holds (tests: it stays bounded).
    var orderCount: Int { order.count - head }
}
