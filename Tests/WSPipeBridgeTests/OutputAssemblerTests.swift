// OutputAssembler: whole messages only, bytes unchanged, and a small message in progress
// can leave the receive buffer it started in (so the session reuses that buffer).
import XCTest
import WebSocketEngine
@testable import WSPipeBridge

final class OutputAssemblerTests: XCTestCase {
    /// A receive buffer holding `text`, as a socket read would leave it.
    private func received(_ text: String) -> ByteBuffer {
        let bytes = Array(text.utf8)
        let buffer = ByteBuffer(capacity: 4096)
        bytes.withUnsafeBytes { buffer.base.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        buffer.count = bytes.count
        return buffer
    }

    private func output(_ batch: SegmentList) -> String {
        var bytes: [UInt8] = []
        for segment in batch.segments {
            bytes += UnsafeRawBufferPointer(start: segment.start, count: segment.count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func testSmallMessageSplitAcrossReadsIsDetachedFromItsFirstBuffer() {
        var assembler = OutputAssembler(format: .raw(separator: 0x0A))
        var first: ByteBuffer = received("hello ")
        assembler.start(.text)
        assembler.data(first, first.base, first.count)
        XCTAssertFalse(isKnownUniquelyReferenced(&first), "the message in progress references the read buffer")
        assembler.detachSmallMessage()
        XCTAssertTrue(isKnownUniquelyReferenced(&first), "after detaching, the session may reuse the buffer")
        // The session reuses it: the old bytes are overwritten by the next read.
        first.base.storeBytes(of: 0x58, toByteOffset: 0, as: UInt8.self)
        let second = received("world")
        assembler.data(second, second.base, second.count)
        assembler.end()
        XCTAssertEqual(output(assembler.takeBatch()), "hello world\n")
    }

    func testDetachingKeepsSeveralPiecesInOrder() {
        var assembler = OutputAssembler(format: .jsonLines(timestamps: false))
        let a = received("a\n"), b = received("b"), c = received("c")
        assembler.start(.text)
        assembler.data(a, a.base, a.count)
        assembler.data(b, b.base, b.count)
        assembler.detachSmallMessage()
        assembler.data(c, c.base, c.count)
        assembler.end()
        XCTAssertEqual(output(assembler.takeBatch()), "{\"type\":\"text\",\"data\":\"a\\nbc\"}\n")
    }

    /// --jsonl --timestamps: an event line ends with "ts" as a message does (it had none);
    /// a line with its own (the bus's events) and lines without --timestamps stay as given.
    func testEventsTakeTimestampsAsMessagesDo() {
        let event = Array(#"{"type":"connected","client":1}"#.utf8)
        var stamped = OutputAssembler(format: .jsonLines(timestamps: true))
        stamped.event(event)
        stamped.event(Array(#"{"type":"bus_restored","ts":1.5}"#.utf8), timed: true)
        let lines = output(stamped.takeBatch()).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2)
        let start = #"{"type":"connected","client":1,"ts":"#
        XCTAssertTrue(lines.first?.hasPrefix(start) == true && lines.first?.hasSuffix("}") == true, "\(lines)")
        let seconds = lines.first.flatMap { Double($0.dropFirst(start.count).dropLast()) } ?? 0
        XCTAssertLessThan(abs(seconds - Double(time(nil))), 60, "\(lines)")
        XCTAssertEqual(lines.last, #"{"type":"bus_restored","ts":1.5}"#)

        var plain = OutputAssembler(format: .jsonLines(timestamps: false))
        plain.event(event)
        XCTAssertEqual(output(plain.takeBatch()), #"{"type":"connected","client":1}"# + "\n")
    }

    func testLargeMessageStaysInPlace() {
        var assembler = OutputAssembler(format: .raw(separator: nil))
        var big: ByteBuffer = received(String(repeating: "x", count: OutputAssembler.copyLimit + 1))
        assembler.start(.binary)
        assembler.data(big, big.base, big.count)
        assembler.detachSmallMessage()
        XCTAssertFalse(isKnownUniquelyReferenced(&big), "large payloads are written from the read buffer, not copied")
        assembler.end()
        XCTAssertEqual(output(assembler.takeBatch()).count, OutputAssembler.copyLimit + 1)
    }

    /// Small messages copied into the arena go to the batch as one segment per run (one
    /// iovec), in order with a large message referenced in place, a message detached in
    /// the middle, and across a full arena (whose bytes must survive its replacement).
    func testRunsOfSmallMessagesStayInOrderAcrossLargeOnesDetachingAndAFullArena() {
        var assembler = OutputAssembler(format: .raw(separator: 0x0A))
        func message(_ text: String, detachingAfter: String? = nil) {
            assembler.start(.text)
            let piece = received(text)
            assembler.data(piece, piece.base, piece.count)
            if let rest = detachingAfter {
                assembler.detachSmallMessage()
                let more = received(rest)
                assembler.data(more, more.base, more.count)
            }
            assembler.end()
        }
        let large = String(repeating: "x", count: OutputAssembler.copyLimit + 1)
        message("a"); message("b"); message("c")
        XCTAssertEqual(assembler.batchBytes, 6, "the run counts before it is in the batch")
        message(large); message("d"); message("e", detachingAfter: "f"); message("g")
        let batch = assembler.takeBatch()
        XCTAssertEqual(output(batch), "a\nb\nc\n" + large + "\nd\nef\ng\n")
        XCTAssertEqual(batch.segments.count, 5, "a-c, the large one, its newline, d, e-g (detached in place)")
        XCTAssertEqual(assembler.batchBytes, 0)

        let lines = (0..<100).map { String(repeating: Character(UnicodeScalar(UInt8(65 + $0 % 26))), count: 999) + "\($0 % 10)" }
        lines.forEach { message($0) }
        XCTAssertEqual(assembler.batchBytes, 100 * 1001)
        let full = assembler.takeBatch()
        XCTAssertEqual(output(full), lines.map { $0 + "\n" }.joined())
        XCTAssertEqual(full.segments.count, 2, "one run per arena")
    }

    func testNothingInProgressIsANoOp() {
        var assembler = OutputAssembler(format: .raw(separator: 0x0A))
        assembler.detachSmallMessage()
        assembler.start(.text)
        assembler.end()
        XCTAssertEqual(output(assembler.takeBatch()), "\n", "an empty message is a bare newline")
    }

    /// --broadcast's whole messages: the bytes BroadcastBridge wrote by hand before (--jsonl
    /// with "client"; raw with the separator or none), now also --base64 and "ts" after "client".
    func testWholeMessagesOfABroadcastClient() {
        var jsonl = OutputAssembler(format: .jsonLines(timestamps: false))
        jsonl.message(.text, Array("a\"b\n".utf8), client: 7)
        jsonl.message(.binary, [0x00, 0xFF], client: 12)
        jsonl.message(.binary, [], client: 1)
        XCTAssertEqual(output(jsonl.takeBatch()), #"{"type":"text","data":"a\"b\n","client":7}"# + "\n"
            + #"{"type":"binary","base64":"AP8=","client":12}"# + "\n" + #"{"type":"binary","base64":"","client":1}"# + "\n")
        XCTAssertEqual(jsonl.messages, 3)

        var stamped = OutputAssembler(format: .jsonLines(timestamps: true))
        stamped.message(.text, Array("x".utf8), client: 3)
        let line = output(stamped.takeBatch())
        XCTAssertTrue(line.hasPrefix(#"{"type":"text","data":"x","client":3,"ts":"#) && line.hasSuffix("}\n"), line)

        var raw = OutputAssembler(format: .raw(separator: 0x0A))
        raw.message(.text, Array("one".utf8), client: 1)
        raw.message(.binary, [], client: 1)
        XCTAssertEqual(output(raw.takeBatch()), "one\n\n")
        var binary = OutputAssembler(format: .raw(separator: nil))
        binary.message(.binary, [], client: 1)
        binary.message(.binary, Array("ab".utf8), client: 1)
        XCTAssertEqual(output(binary.takeBatch()), "ab")
        var base64 = OutputAssembler(format: .base64(separator: 0x0A))
        base64.message(.binary, Array("hi".utf8), client: 1)
        base64.message(.text, Array("t".utf8), client: 1)
        XCTAssertEqual(output(base64.takeBatch()), "aGk=\nt\n")
        var discarding = OutputAssembler(format: .raw(separator: 0x0A), discard: true)
        discarding.message(.text, Array("gone".utf8), client: 1)
        XCTAssertTrue(discarding.takeBatch().isEmpty)
    }
}
