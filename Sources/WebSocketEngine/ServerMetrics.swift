import Glibc
import WebSocketCore

/// What a server's clients exchanged, summed over every client so far (the ended ones and
/// those connected): the numbers of the metrics endpoint. Payload bytes, not wire bytes.
public struct ServerTotals: Sendable, Equatable {
    public var messagesReceived: UInt64 = 0
    public var messagesSent: UInt64 = 0
    /// Payload bytes received (after inflating) and sent (before deflating).
    public var bytesReceived: UInt64 = 0
    public var bytesSent: UInt64 = 0
    /// Wire bytes of permessage-deflate messages (compressed payload), in and out.
    public var deflateIn: UInt64 = 0
    public var deflateOut: UInt64 = 0
    /// The Close each client sent, by code (1005 for an empty Close); a client that left
    /// without one is not counted.
    public var closes: [UInt16: UInt64] = [:]

    public init() {}

    /// Adds one connection's counts, as its driver received and framed them.
    mutating func add(_ driver: ConnectionDriver) {
        messagesReceived &+= driver.messagesReceived
        bytesReceived &+= driver.payloadReceived
        messagesSent &+= driver.messagesSent
        // Framed payload counts a compressed message at its wire size: its payload instead.
        let out = driver.compressionOut
        bytesSent &+= driver.core.dataPayloadFramed &- out.wire &+ out.payload
        deflateIn &+= driver.compressionIn.wire
        deflateOut &+= out.wire
    }
}

/// What the per-address and rate limits did (never by address).
public struct LimitCounts: Sendable, Equatable {
    /// Upgrades refused with 429 for --max-clients-per-ip.
    public var clientsPerAddress: UInt64 = 0
    /// Requests refused with 429 for --max-handshakes-per-ip.
    public var requestsPerAddress: UInt64 = 0
    /// Times a connection's reading stopped for --rate-limit or --byte-rate.
    public var ratePaused: UInt64 = 0
    /// Connections closed with 1008 for going over their rate (--rate-limit-action close).
    public var rateClosed: UInt64 = 0

    public init() {}
}

/// The Prometheus text exposition (format 0.0.4) of a server's metrics: the names are
/// fixed (the man page's METRICS lists them), every family with its HELP and TYPE.
/// Pure: the caller gathers the numbers.
public struct MetricsExposition: Sendable {
    public var totals = ServerTotals()
    public var clientsConnected = 0
    /// Handshakes answered, by HTTP status (101 accepted; the health and metrics answers are 200).
    public var handshakes: [Int: UInt64] = [:]
    /// Plain requests --static and --devconsole answered, by HTTP status.
    public var httpRequests: [Int: UInt64] = [:]
    /// Child processes running (--exec); nil in a mode without children (reported as 0).
    public var childrenRunning: Int?
    /// Times the message bus was lost (--bus); nil without a bus (the family is left out).
    public var busLosses: UInt64?
    /// When the server started, in seconds since the Unix epoch.
    public var startTime: Double = 0
    /// What the limits did; nil without a per-address or rate limit (the family is left out).
    public var limited: LimitCounts?

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public init() {}

    /// 1000-1015 by number; the rest (3000-4999, and any other a client sent) as "other".
    static func label(_ code: UInt16) -> String {
        (1000...1015).contains(code) ? String(code) : "other"
    }

    public var text: String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { out += name + sample.labels + " " + sample.value + "\n" }
        }
        func one(_ value: UInt64) -> [(labels: String, value: String)] { [("", String(value))] }
        family("wspipe_clients_connected", "gauge", "Clients whose handshake is done and whose connection has not ended.",
               [("", String(clientsConnected))])
        family("wspipe_handshakes_total", "counter", "Handshakes answered, by HTTP status (101: accepted; 200: health and metrics).",
               handshakes.sorted { $0.key < $1.key }.map { ("{status=\"\($0.key)\"}", String($0.value)) })
        family("wspipe_http_requests_total", "counter", "Plain HTTP requests answered by --static or --devconsole, by HTTP status.",
               httpRequests.sorted { $0.key < $1.key }.map { ("{status=\"\($0.key)\"}", String($0.value)) })
        family("wspipe_messages_received_total", "counter", "Data messages received from clients.", one(totals.messagesReceived))
        family("wspipe_messages_sent_total", "counter", "Data messages sent to clients.", one(totals.messagesSent))
        family("wspipe_bytes_received_total", "counter", "Payload bytes of messages received (after inflating).",
               one(totals.bytesReceived))
        family("wspipe_bytes_sent_total", "counter", "Payload bytes of messages sent (before deflating).", one(totals.bytesSent))
        var closes: [String: UInt64] = [:]
        for (code, count) in totals.closes { closes[MetricsExposition.label(code), default: 0] += count }
        family("wspipe_closes_total", "counter", "Close frames received from clients, by code (1000-1015; other codes as other).",
               closes.sorted { $0.key < $1.key }.map { ("{code=\"\($0.key)\"}", String($0.value)) })
        family("wspipe_children_running", "gauge", "Programs running (--exec/--sh); 0 in other modes.",
               [("", String(childrenRunning ?? 0))])
        family("wspipe_deflate_bytes_in_total", "counter", "Compressed payload bytes of permessage-deflate messages received.",
               one(totals.deflateIn))
        family("wspipe_deflate_bytes_out_total", "counter", "Compressed payload bytes of permessage-deflate messages sent.",
               one(totals.deflateOut))
        if let busLosses {
            family("wspipe_bus_lost_total", "counter", "Times the message bus (--bus) was lost; what it carried meanwhile was not delivered.",
                   one(busLosses))
        }
        if let limited {
            family("wspipe_limited_total", "counter",
                   "Requests refused with 429 by a per-address limit, and connections paused or closed for their message rate, by reason.",
                   [("{reason=\"clients_per_ip\"}", String(limited.clientsPerAddress)),
                    ("{reason=\"handshakes_per_ip\"}", String(limited.requestsPerAddress)),
                    ("{reason=\"rate_paused\"}", String(limited.ratePaused)),
                    ("{reason=\"rate_closed\"}", String(limited.rateClosed))])
        }
        family("wspipe_start_time_seconds", "gauge", "When the server started, in seconds since the Unix epoch.",
               [("", String(format3(startTime)))])
        return out
    }

    /// Seconds with millisecond precision, without Foundation.
    private func format3(_ seconds: Double) -> String {
        let millis = UInt64(max(0, seconds) * 1000)
        let fraction = String(millis % 1000)
        return "\(millis / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// The wall clock now, in seconds since the Unix epoch.
    public static func wallClock() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
