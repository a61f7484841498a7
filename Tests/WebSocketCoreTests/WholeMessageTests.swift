// `WebSocketConnection.receiveWholeMessage` (MessageReader.nextWholeMessage): a reader that
// tries it before each `receive`, as the engine's driver does, must report exactly what
// `receive` alone reports (events, payload bytes, errors and their wording, the control
// frames queued), in both roles and at every split point; and it must take the messages it
// can (a whole unfragmented data frame in the input) in one step.
import XCTest
@testable import WebSocketCore

final class WholeMessageTests: XCTestCase {
    /// What a reader reported (`Inbound`: payloads as bytes, adjacent data joined).
    struct Run: Equatable {
        var items: [Inbound] = []
        var error: ReceiveError?
        var outbound: [UInt8] = []
        /// Messages taken by `receiveWholeMessage`.
        var wholeMessages = 0
    }

    static func append(_ item: Inbound, to items: inout [Inbound]) {
        if case .data(let more) = item, case .data(let have)? = items.last {
            items[items.count - 1] = .data(have + more)
        } else {
            items.append(item)
        }
    }

    /// Feeds `stream` cut at `splits` to a fresh connection of `role`; `wholeFirst` tries
    /// `receiveWholeMessage` before each `receive`.
    static func run(_ stream: [UInt8], role: Role, splits: [Int] = [], limit: UInt64 = 1 << 20, wholeFirst: Bool) -> Run {
        var connection = WebSocketConnection(role: role, maximumMessageSize: limit, keys: .fixed(MaskingKey(1, 2, 3, 4)))
        var result = Run()
        var finished = false
        var copy = stream
        copy.withUnsafeMutableBytes { whole in
            let bounds = [0] + splits + [whole.count]
            for p in 0..<(bounds.count - 1) where !finished {
                let buffer = UnsafeMutableRawBufferPointer(rebasing: whole[bounds[p]..<bounds[p + 1]])
                var index = 0
                while !finished {
                    if wholeFirst {
                        let before = index
                        if let message = connection.receiveWholeMessage(buffer, &index) {
                            precondition(message.range.lowerBound >= before && message.range.upperBound == index)
                            result.wholeMessages += 1
                            append(.start(message.kind), to: &result.items)
                            if !message.range.isEmpty { append(.data(Array(buffer[message.range])), to: &result.items) }
                            append(.end, to: &result.items)
                            continue
                        }
                        precondition(index == before, "nil, yet bytes were consumed")
                    }
                    let event: InboundEvent?
                    do throws(ReceiveError) {
                        event = try connection.receive(buffer, &index)
                    } catch {
                        result.error = error
                        finished = true
                        break
                    }
                    guard let event else { break }
                    switch event {
                    case .messageStart(let kind): append(.start(kind), to: &result.items)
                    case .messageData(let range): append(.data(Array(buffer[range])), to: &result.items)
                    case .messageEnd: append(.end, to: &result.items)
                    case .ping(let payload): append(.ping(payload), to: &result.items)
                    case .pong(let payload): append(.pong(payload), to: &result.items)
                    case .close(let payload):
                        append(.close(payload), to: &result.items)
                        finished = true
                    }
                }
                result.outbound += connection.takeOutboundControl()
                if finished, wholeFirst {
                    // After a Close or an error: nothing more, from the rest of this piece.
                    let before = index
                    precondition(connection.receiveWholeMessage(buffer, &index) == nil && index == before,
                                 "a whole message after the reader finished")
                }
            }
        }
        return result
    }

    /// `frames` as the server sends them (unmasked), or as a client does (each frame masked
    /// with its own key) for a server-role reader.
    static func stream(_ frames: [(Opcode, [UInt8], fin: Bool, rsv: UInt8)], masked: Bool) -> [UInt8] {
        var bytes: [UInt8] = []
        for (i, frame) in frames.enumerated() {
            let key = masked ? MaskingKey(UInt8(i), 0xA5, 0x3C, UInt8(truncatingIfNeeded: i &* 7)) : nil
            bytes += FrameEncoder.frame(opcode: frame.0, payload: frame.1, fin: frame.fin, rsv: frame.rsv, maskingKey: key)
        }
        return bytes
    }

    static func f(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0) -> (Opcode, [UInt8], fin: Bool, rsv: UInt8) {
        (opcode, payload, fin, rsv)
    }

    /// Streams of every kind the fast path must take or leave to `receive`.
    static let cases: [(String, [(Opcode, [UInt8], fin: Bool, rsv: UInt8)])] = [
        ("short texts and binaries", [f(.text, utf8("hello")), f(.binary, [0, 1, 2]), f(.text, utf8("héllo ✓")), f(.text, [])]),
        ("empty binary", [f(.binary, []), f(.binary, [])]),
        ("125, 126, 65535 and 65536 bytes", [f(.binary, patternBytes(125)), f(.binary, patternBytes(126)),
                                            f(.binary, patternBytes(65535)), f(.text, Array(repeating: 0x61, count: 65536))]),
        ("fragments and control frames between", [f(.text, utf8("caf"), fin: false), f(.ping, utf8("p")),
                                                   f(.continuation, [0xC3], fin: false), f(.pong, []),
                                                   f(.continuation, [0xA9]), f(.text, utf8("whole")),
                                                   f(.close, [0x03, 0xE8] + utf8("bye"))]),
        ("data after a Close", [f(.text, utf8("a")), f(.close, [0x03, 0xE8]), f(.text, utf8("after"))]),
        ("invalid UTF-8 in a whole text", [f(.text, utf8("ok")), f(.text, [0x61, 0xFF, 0x62]), f(.text, utf8("never"))]),
        ("a text cut inside a code point", [f(.binary, [9]), f(.text, [0x61, 0xE2, 0x9C])]),
        ("a continuation with no message", [f(.binary, [1]), f(.continuation, [2])]),
        ("RSV1 with no extension", [f(.text, utf8("x")), f(.text, utf8("y"), rsv: 4)]),
        ("a message over the limit", [f(.binary, patternBytes(100)), f(.binary, patternBytes(101))]),
        ("a data frame while a message is fragmented", [f(.text, utf8("first")), f(.binary, [1], fin: false), f(.text, utf8("no"))]),
        ("a reserved opcode", [f(.text, utf8("x")), (Opcode.binary, [], fin: true, rsv: 0)]),
    ]

    func testTheFastPathReportsWhatReceiveDoesInBothRolesAtEverySplitPoint() {
        for (name, frames) in Self.cases {
            for role in [Role.client, .server] {
                var input = Self.stream(frames, masked: role == .server)
                if name == "a reserved opcode" { input += [0x83, role == .server ? 0x80 : 0x00] + (role == .server ? [9, 9, 9, 9] : []) }
                let limit: UInt64 = name == "a message over the limit" ? 100 : 1 << 20
                let plain = Self.run(input, role: role, limit: limit, wholeFirst: false)
                let fast = Self.run(input, role: role, limit: limit, wholeFirst: true)
                XCTAssertEqual(fast.items, plain.items, "\(name), \(role)")
                XCTAssertEqual(fast.error, plain.error, "\(name), \(role)")
                XCTAssertEqual(fast.outbound, plain.outbound, "\(name), \(role)")
                XCTAssertGreaterThan(fast.wholeMessages, 0, "\(name), \(role): no message taken whole")
                // Every split point (the large case at every 997th, and around its frame edges).
                let step = input.count > 4096 ? 997 : 1
                var points = Array(stride(from: 0, through: input.count, by: step))
                if step > 1 { points += [2, 4, 127, 128, 129, 131, 255, 256, 258, 65795, 65797, 65800].filter { $0 <= input.count } }
                for cut in points {
                    // Against `receive` alone cut at the same place: a failing message's valid
                    // prefix arrives as data when it came in an earlier piece.
                    let expected = Self.run(input, role: role, splits: [cut], limit: limit, wholeFirst: false)
                    let pieces = Self.run(input, role: role, splits: [cut], limit: limit, wholeFirst: true)
                    XCTAssertEqual(pieces.items, expected.items, "\(name), \(role), cut at \(cut)")
                    XCTAssertEqual(pieces.error, expected.error, "\(name), \(role), cut at \(cut)")
                    XCTAssertEqual(pieces.outbound, expected.outbound, "\(name), \(role), cut at \(cut)")
                }
            }
        }
    }

    func testWholeFramesInOneInputAreTakenInOneStepEach() {
        let frames = [Self.f(.text, utf8("hello")), Self.f(.binary, patternBytes(300)), Self.f(.text, []),
                      Self.f(.binary, patternBytes(70_000))]
        for role in [Role.client, .server] {
            let run = Self.run(Self.stream(frames, masked: role == .server), role: role, wholeFirst: true)
            XCTAssertEqual(run.wholeMessages, 4, "\(role)")
            XCTAssertEqual(run.items, [.start(.text), .data(utf8("hello")), .end, .start(.binary), .data(patternBytes(300)), .end,
                                       .start(.text), .end, .start(.binary), .data(patternBytes(70_000)), .end], "\(role)")
        }
    }

    /// Nil leaves everything as it was: the index, the reader's state and, in the server
    /// role, the bytes (a text that is not UTF-8 is masked back before `receive` reads it).
    func testNilConsumesAndChangesNothing() {
        let key = MaskingKey(0x11, 0x22, 0x33, 0x44)
        let refused: [(String, [UInt8], Role)] = [
            ("not UTF-8, masked", FrameEncoder.frame(opcode: .text, payload: [0x61, 0xFF], maskingKey: key), .server),
            ("cut code point", FrameEncoder.frame(opcode: .text, payload: [0xE2, 0x9C], maskingKey: nil), .client),
            ("a fragment", FrameEncoder.frame(opcode: .text, payload: utf8("a"), fin: false, maskingKey: nil), .client),
            ("a ping", FrameEncoder.frame(opcode: .ping, payload: [], maskingKey: nil), .client),
            ("masked to a client", FrameEncoder.frame(opcode: .binary, payload: [1], maskingKey: key), .client),
            ("unmasked to a server", FrameEncoder.frame(opcode: .binary, payload: [1], maskingKey: nil), .server),
            ("RSV1", FrameEncoder.frame(opcode: .binary, payload: [1], rsv: 4, maskingKey: nil), .client),
            ("one byte short", Array(FrameEncoder.frame(opcode: .binary, payload: [1, 2], maskingKey: nil).dropLast()), .client),
            ("header only", [0x82, 0x7E, 0x01], .client),
            ("over the limit", FrameEncoder.frame(opcode: .binary, payload: patternBytes(11), maskingKey: nil), .client),
        ]
        for (name, frame, role) in refused {
            var connection = WebSocketConnection(role: role, maximumMessageSize: 10)
            var bytes = frame
            bytes.withUnsafeMutableBytes { buffer in
                var index = 0
                XCTAssertNil(connection.receiveWholeMessage(buffer, &index), name)
                XCTAssertEqual(index, 0, name)
            }
            XCTAssertEqual(bytes, frame, "\(name): the bytes changed")
            XCTAssertFalse(connection.isReceivingMessage, name)
            XCTAssertEqual(connection.dataMessagesReceived, 0, name)
            XCTAssertEqual(connection.dataPayloadReceived, 0, name)
            XCTAssertEqual(connection.receivingMessageRSV, [], name)
        }
    }

    /// Limits at their edges: 0 takes only empty messages; the largest limit still leaves a
    /// 127-length frame with the top bit set (or one longer than the input) to `receive`.
    func testLimitsAtTheirEdges() {
        for role in [Role.client, .server] {
            let masked = role == .server
            let zero = Self.stream([Self.f(.binary, []), Self.f(.text, []), Self.f(.binary, [1])], masked: masked)
            let plainZero = Self.run(zero, role: role, limit: 0, wholeFirst: false)
            let fastZero = Self.run(zero, role: role, limit: 0, wholeFirst: true)
            XCTAssertEqual(fastZero, Run(items: plainZero.items, error: plainZero.error, outbound: plainZero.outbound, wholeMessages: 2), "\(role)")
            XCTAssertEqual(plainZero.error?.closeCode, .messageTooBig, "\(role)")
            let key: [UInt8] = masked ? [1, 2, 3, 4] : []
            let topBit: [UInt8] = [0x82, (masked ? 0x80 : 0) | 127, 0x80, 0, 0, 0, 0, 0, 0, 5] + key + [1, 2, 3, 4, 5]
            let long: [UInt8] = [0x82, (masked ? 0x80 : 0) | 127, 0, 0, 0, 0, 0, 0x01, 0, 0] + key + [1, 2, 3]
            for input in [topBit, long] {
                let plain = Self.run(input, role: role, limit: .max, wholeFirst: false)
                let fast = Self.run(input, role: role, limit: .max, wholeFirst: true)
                XCTAssertEqual(fast, plain, "\(role)")
                XCTAssertEqual(fast.wholeMessages, 0, "\(role)")
            }
        }
    }

    /// With an extension's RSV bit agreed, an uncompressed message is taken whole and a
    /// compressed one (RSV1) is left to `next`, which reports its bits; the next whole
    /// message reports none again.
    func testAnExtensionsMessagesAreLeftToNext() throws {
        var reader = MessageReader(role: .client, extensionRSV: .rsv1)
        var bytes = serverFrame(.text, utf8("plain")) + serverFrame(.text, [0xF2, 0x48, 0xCD], rsv: 4) + serverFrame(.binary, [7])
        try bytes.withUnsafeMutableBytes { buffer in
            var index = 0
            XCTAssertEqual(reader.nextWholeMessage(buffer, &index)?.kind, .text)
            XCTAssertEqual(reader.messageRSV, [])
            let before = index
            XCTAssertNil(reader.nextWholeMessage(buffer, &index))
            XCTAssertEqual(index, before)
            XCTAssertEqual(try reader.next(buffer, &index), .messageStart(.text))
            XCTAssertEqual(reader.messageRSV, .rsv1)
            XCTAssertNil(reader.nextWholeMessage(buffer, &index), "inside a message")
            XCTAssertEqual(try reader.next(buffer, &index), .messageData((before + 2)..<(before + 5)))
            XCTAssertNil(reader.nextWholeMessage(buffer, &index), "its end is pending")
            XCTAssertEqual(try reader.next(buffer, &index), .messageEnd)
            XCTAssertEqual(reader.nextWholeMessage(buffer, &index)?.kind, .binary)
            XCTAssertEqual(reader.messageRSV, [])
            XCTAssertEqual(reader.messagesReceived, 3)
            XCTAssertEqual(index, buffer.count)
        }
    }

    /// The counters a server's metrics read move as with `receive`, in both roles.
    func testCountersMoveAsWithReceive() {
        let frames = [Self.f(.text, utf8("hello")), Self.f(.binary, patternBytes(300), fin: false),
                      Self.f(.continuation, [1, 2]), Self.f(.binary, [])]
        for wholeFirst in [false, true] {
            for role in [Role.client, .server] {
                var connection = WebSocketConnection(role: role)
                var bytes = Self.stream(frames, masked: role == .server)
                bytes.withUnsafeMutableBytes { buffer in
                    var index = 0
                    while true {
                        if wholeFirst, connection.receiveWholeMessage(buffer, &index) != nil { continue }
                        guard (try? connection.receive(buffer, &index)) != nil else { break }
                    }
                }
                XCTAssertEqual(connection.dataMessagesReceived, 3, "wholeFirst \(wholeFirst), \(role)")
                XCTAssertEqual(connection.dataPayloadReceived, 307, "wholeFirst \(wholeFirst), \(role)")
            }
        }
    }
}
