// Helpers for the WebSocketCore tests (those every test target shares are in the TestSupport
// target, Tests/TestSupport): feeding byte vectors to the sans-I/O parsers
// in pieces and collecting their events in a form that can be compared across splits.
import XCTest
@testable import WebSocketCore

// MARK: - Byte vectors

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// "Hello", the payload of the RFC 6455 §5.7 examples.
let helloBytes: [UInt8] = [0x48, 0x65, 0x6c, 0x6c, 0x6f]

/// The masking key of the RFC 6455 §5.7 examples.
let rfcKey = MaskingKey(0x37, 0xfa, 0x21, 0x3d)

/// `count` bytes of a simple deterministic pattern (not all equal, not all ASCII).
func patternBytes(_ count: Int, seed: UInt8 = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7 &+ 3) }
}

/// An unmasked frame, as a server sends it.
func serverFrame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
    FrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv: rsv, maskingKey: nil)
}

/// A deterministic pseudo-random generator (SplitMix64) so that "random" tests repeat.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: - Feeding input in pieces

/// Runs `body` over a mutable copy of `bytes` (a server-role reader unmasks in place).
func withMutableBytes<R>(_ bytes: [UInt8], _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
    var copy = bytes
    return try copy.withUnsafeMutableBytes(body)
}

/// Every split point that cuts `count` bytes in two (including the empty first and last pieces).
func twoWaySplits(_ count: Int) -> [[Int]] { (0...count).map { [$0] } }

/// Split points that feed `count` bytes one byte at a time.
func byteByByte(_ count: Int) -> [Int] { count > 1 ? Array(1..<count) : [] }

/// Feeds `input` cut at `splits` (sorted offsets) to `next`, one piece at a time, calling
/// `next` until it returns nil before moving to the next piece, as a caller reading a socket
/// would. Each piece is a separate buffer view, so ranges are relative to the piece;
/// `record` gets each event with the offset of its piece in `input` and the piece (a
/// mutable copy, whose bytes a server-role reader has unmasked).
/// Returns the error thrown, if any, and how many bytes of `input` had been handed over
/// when it was thrown (with one-byte pieces: the offset of the guilty byte plus one).
/// Every piece must be consumed entirely unless `finished()` says the consumer stopped
/// reading (a reader after a Close).
func drive<Event>(_ input: [UInt8], splits: [Int],
                  file: StaticString = #filePath, line: UInt = #line,
                  finished: () -> Bool = { false },
                  next: (UnsafeMutableRawBufferPointer, inout Int) throws -> Event?,
                  record: (Event, Int, UnsafeMutableRawBufferPointer) -> Void) -> (error: ReceiveError?, fedWhenFailed: Int?) {
    let bounds = [0] + splits + [input.count]
    return withMutableBytes(input) { (whole: UnsafeMutableRawBufferPointer) -> (ReceiveError?, Int?) in
        for piece in 0..<(bounds.count - 1) {
            let start = bounds[piece], end = bounds[piece + 1]
            precondition(start <= end, "split points must be sorted")
            let buffer = UnsafeMutableRawBufferPointer(rebasing: whole[start..<end])
            var index = 0
            var events = 0
            while true {
                let event: Event?
                do {
                    event = try next(buffer, &index)
                } catch let error as ReceiveError {
                    return (error, end)
                } catch {
                    XCTFail("unexpected error type: \(error)", file: file, line: line)
                    return (nil, end)
                }
                guard let event else { break }
                XCTAssert(index >= 0 && index <= buffer.count, "index \(index) out of 0...\(buffer.count)",
                          file: file, line: line)
                record(event, start, buffer)
                events += 1
                if events > 4 * buffer.count + 64 {
                    XCTFail("no progress: too many events from a \(buffer.count)-byte piece", file: file, line: line)
                    return (nil, end)
                }
            }
            if !finished() {
                XCTAssertEqual(index, buffer.count, "a piece was not consumed entirely", file: file, line: line)
            }
        }
        return (nil, nil)
    }
}

// MARK: - FrameParser

/// A `FrameParser.Event` with its payload range made absolute (an offset range of the whole
/// input rather than of the piece it came from), so runs with different splits compare.
enum FrameEvent: Equatable, CustomStringConvertible {
    case header(FrameHeader)
    case payload(Range<Int>, frameEnd: Bool)

    var description: String {
        switch self {
        case .header(let h):
            return "header(fin: \(h.fin), rsv: \(h.rsv), \(h.opcode), key: \(h.maskingKey?.description ?? "-"), length: \(h.payloadLength))"
        case .payload(let r, let end): return "payload(\(r.lowerBound)..<\(r.upperBound)\(end ? ", end" : ""))"
        }
    }
}

struct FrameRun {
    /// The events as reported, one per `next` call.
    var rawEvents: [FrameEvent]
    var error: ReceiveError?
    var fedWhenFailed: Int?
    var parser: FrameParser

    /// The events with the consecutive payload pieces of each frame joined into one.
    var events: [FrameEvent] { coalesce(rawEvents) }
}

/// Runs a fresh `FrameParser` over `input` cut at `splits`.
func runParser(_ input: [UInt8], splits: [Int] = [], file: StaticString = #filePath, line: UInt = #line) -> FrameRun {
    var parser = FrameParser()
    var events: [FrameEvent] = []
    let (error, fed) = drive(input, splits: splits, file: file, line: line, next: { buffer, index in
        try parser.next(UnsafeRawBufferPointer(buffer), &index)
    }, record: { event, offset, _ in
        switch event {
        case .header(let header): events.append(.header(header))
        case .payload(let range, let end):
            events.append(.payload((range.lowerBound + offset)..<(range.upperBound + offset), frameEnd: end))
        }
    })
    return FrameRun(rawEvents: events, error: error, fedWhenFailed: fed, parser: parser)
}

/// Joins each payload piece that does not end its frame with the piece after it; the
/// pieces must be adjacent in the input (they are, unless the parser skipped bytes).
func coalesce(_ events: [FrameEvent]) -> [FrameEvent] {
    var out: [FrameEvent] = []
    for event in events {
        if case .payload(let range, let end) = event, case .payload(let previous, false)? = out.last,
           previous.upperBound == range.lowerBound {
            out[out.count - 1] = .payload(previous.lowerBound..<range.upperBound, frameEnd: end)
        } else {
            out.append(event)
        }
    }
    return out
}

/// Frames a client wrote (masked), decoded: header and unmasked payload. Fails the test if
/// the bytes do not end on a frame boundary.
func decodeClientFrames(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> [(FrameHeader, [UInt8])] {
    let run = runParser(bytes, file: file, line: line)
    XCTAssertNil(run.error, "client frames do not parse: \(String(describing: run.error))", file: file, line: line)
    XCTAssertTrue(run.parser.isAtFrameBoundary, "client frames end inside a frame", file: file, line: line)
    var frames: [(FrameHeader, [UInt8])] = []
    for event in run.events {
        switch event {
        case .header(let header): frames.append((header, []))
        case .payload(let range, _):
            guard !frames.isEmpty else { XCTFail("payload before a header", file: file, line: line); continue }
            var payload = Array(bytes[range])
            if let key = frames[frames.count - 1].0.maskingKey { payload = key.masking(payload) }
            frames[frames.count - 1].1 += payload
        }
    }
    return frames
}

// MARK: - MessageReader / WebSocketConnection

/// An `InboundEvent` with message data copied out of the input and adjacent data events
/// joined, so runs with different splits compare.
enum Inbound: Equatable, CustomStringConvertible {
    case start(MessageKind)
    case data([UInt8])
    case end
    case ping([UInt8])
    case pong([UInt8])
    case close(ClosePayload)

    var description: String {
        switch self {
        case .start(let kind): return "start(\(kind))"
        case .data(let bytes): return "data(\(printable(bytes)))"
        case .end: return "end"
        case .ping(let bytes): return "ping(\(printable(bytes)))"
        case .pong(let bytes): return "pong(\(printable(bytes)))"
        case .close(let payload): return "close(\(payload.code?.rawValue.description ?? "-"), \(printable(payload.reason)))"
        }
    }
}

struct ReaderRun {
    /// Events in order, data copied out and adjacent `.data` events joined.
    var events: [Inbound]
    /// How many `.messageData` events there were (before joining).
    var dataEventCount: Int
    var error: ReceiveError?
    var fedWhenFailed: Int?
}

/// Feeds `input` cut at `splits` to `next` (a reader's or connection's) and collects events.
func collectInbound(_ input: [UInt8], splits: [Int], file: StaticString = #filePath, line: UInt = #line,
                    finished: () -> Bool,
                    next: (UnsafeMutableRawBufferPointer, inout Int) throws -> InboundEvent?) -> ReaderRun {
    var events: [Inbound] = []
    var data: [UInt8]?  // adjacent data events, joined
    var dataEvents = 0
    func append(_ event: Inbound) {
        if let pending = data { events.append(.data(pending)); data = nil }
        events.append(event)
    }
    let (error, fed) = drive(input, splits: splits, file: file, line: line, finished: finished, next: next, record: { event, _, buffer in
        switch event {
        case .messageStart(let kind): append(.start(kind))
        case .messageData(let range):
            dataEvents += 1
            XCTAssertFalse(range.isEmpty, "empty messageData event", file: file, line: line)
            if data == nil { data = [] }
            data!.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[range]))
        case .messageEnd: append(.end)
        case .ping(let payload): append(.ping(payload))
        case .pong(let payload): append(.pong(payload))
        case .close(let payload): append(.close(payload))
        }
    })
    if let pending = data { events.append(.data(pending)) }
    return ReaderRun(events: events, dataEventCount: dataEvents, error: error, fedWhenFailed: fed)
}

/// Runs a `MessageReader` over `input` cut at `splits`.
func runReader(_ input: [UInt8], splits: [Int] = [], role: Role = .client, maximumMessageSize: UInt64 = 64 << 20,
               extensionRSV: RSVBits = [], file: StaticString = #filePath, line: UInt = #line) -> ReaderRun {
    var reader = MessageReader(role: role, maximumMessageSize: maximumMessageSize, extensionRSV: extensionRSV)
    return collectInbound(input, splits: splits, file: file, line: line, finished: { reader.isFinished }) { buffer, index in
        try reader.next(buffer, &index)
    }
}

/// Feeds `input` (whole, or cut at `splits`) to `connection`.
func receive(_ connection: inout WebSocketConnection, _ input: [UInt8], splits: [Int] = [],
             file: StaticString = #filePath, line: UInt = #line) -> ReaderRun {
    collectInbound(input, splits: splits, file: file, line: line, finished: { connection.state == .closed }) { buffer, index in
        try connection.receive(buffer, &index)
    }
}

/// Asserts that `error` is `.protocolError`.
func assertProtocolError(_ error: ReceiveError?, file: StaticString = #filePath, line: UInt = #line) {
    guard case .protocolError? = error else {
        return XCTFail("expected .protocolError, got \(String(describing: error))", file: file, line: line)
    }
    XCTAssertEqual(error?.closeCode, CloseCode(1002), file: file, line: line)
}

/// Asserts that `error` is `.invalidUTF8`.
func assertInvalidUTF8(_ error: ReceiveError?, file: StaticString = #filePath, line: UInt = #line) {
    guard case .invalidUTF8? = error else {
        return XCTFail("expected .invalidUTF8, got \(String(describing: error))", file: file, line: line)
    }
    XCTAssertEqual(error?.closeCode, CloseCode(1007), file: file, line: line)
}

/// Asserts that `error` is `.messageTooBig`.
func assertMessageTooBig(_ error: ReceiveError?, file: StaticString = #filePath, line: UInt = #line) {
    guard case .messageTooBig? = error else {
        return XCTFail("expected .messageTooBig, got \(String(describing: error))", file: file, line: line)
    }
    XCTAssertEqual(error?.closeCode, CloseCode(1009), file: file, line: line)
}

// MARK: - HTTP

/// `HTTPResponseHead.parse` on the bytes of `text`.
func parseHead(_ text: String) throws(HandshakeError) -> (HTTPResponseHead, Int)? {
    try parseHead(utf8(text))
}

func parseHead(_ bytes: [UInt8]) throws(HandshakeError) -> (HTTPResponseHead, Int)? {
    let result = bytes.withUnsafeBytes { raw -> Result<(HTTPResponseHead, Int)?, HandshakeError> in
        do throws(HandshakeError) {
            return .success(try HTTPResponseHead.parse(raw))
        } catch {
            return .failure(error)
        }
    }
    return try result.get()
}
