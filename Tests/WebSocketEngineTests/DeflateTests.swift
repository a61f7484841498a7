// The engine's zlib stages: RFC 7692 §7.2.3's "Hello" vectors inflated piece by piece,
// the inflated size limit against a bomb, data that does not inflate, UTF-8 on the
// inflated bytes, and the deflater's frames (tail removed, context kept or reset).
import WebSocketCore
import WebSocketEngine
import XCTest

final class DeflateTests: XCTestCase {
    override func setUpWithError() throws {
        try Zlib.load()
    }

    /// Inflates `frames` as one message; the bytes reported.
    private func inflate(_ inflater: Inflater, _ frames: [[UInt8]], text: Bool = false, resets: Bool = false) throws(ReceiveError) -> [UInt8] {
        var out: [UInt8] = []
        let collect: (ByteBuffer, UnsafeMutableRawPointer, Int) -> Void = { _, start, n in
            out += Array(UnsafeRawBufferPointer(start: start, count: n))
        }
        inflater.begin(text: text)
        for frame in frames {
            let copy = UnsafeMutableRawPointer.allocate(byteCount: max(frame.count, 1), alignment: 8)
            defer { copy.deallocate() }
            frame.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: $0.count) } }
            try inflater.feed(copy, count: frame.count, emit: collect)
        }
        try inflater.finish(resetsContext: resets, emit: collect)
        return out
    }

    private let hello = Array("Hello".utf8)

    func testRFC7692HelloVectors() throws {
        let inflater = try XCTUnwrap(Inflater(limit: 1 << 20))
        // §7.2.3.1 one frame, §7.2.3.1 fragmented.
        XCTAssertEqual(try inflate(inflater, [[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]], resets: true), hello)
        XCTAssertEqual(try inflate(inflater, [[0xf2, 0x48], [0xcd, 0xc9, 0xc9], [0x07, 0x00]], resets: true), hello)
        // §7.2.3.2 with context takeover: the second "Hello" refers to the first.
        let kept = try XCTUnwrap(Inflater(limit: 1 << 20))
        XCTAssertEqual(try inflate(kept, [[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]]), hello)
        XCTAssertEqual(try inflate(kept, [[0xf2, 0x00, 0x11, 0x00, 0x00]]), hello)
        // §7.2.3.3 a stored block; §7.2.3.4 BFINAL set; §7.2.3.5 two blocks, an empty one between.
        XCTAssertEqual(try inflate(inflater, [[0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00]], resets: true), hello)
        XCTAssertEqual(try inflate(inflater, [[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00]], resets: true), hello)
        XCTAssertEqual(try inflate(inflater, [[0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00]], resets: true), hello)
        // An empty message: one empty block, 0x00.
        XCTAssertEqual(try inflate(inflater, [[0x00]], resets: true), [])
    }

    func testDeflaterMatchesTheRFCAndKeepsOrResetsContext() throws {
        let kept = try XCTUnwrap(Deflater(windowBits: 15, memoryLevel: 8, resetsContext: false))
        let first = try hello.withUnsafeBytes { try XCTUnwrap(kept.compress($0.baseAddress, count: 5, final: true)).map { $0 } }
        XCTAssertEqual(first, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00])
        let second = try hello.withUnsafeBytes { try XCTUnwrap(kept.compress($0.baseAddress, count: 5, final: true)).map { $0 } }
        XCTAssertEqual(second, [0xf2, 0x00, 0x11, 0x00, 0x00])
        let reset = try XCTUnwrap(Deflater(windowBits: 15, memoryLevel: 8, resetsContext: true))
        for _ in 0..<2 {
            let bytes = try hello.withUnsafeBytes { try XCTUnwrap(reset.compress($0.baseAddress, count: 5, final: true)).map { $0 } }
            XCTAssertEqual(bytes, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00])
        }
        XCTAssertNil(Deflater(windowBits: 8, memoryLevel: 8, resetsContext: false), "zlib makes no raw 8-bit streams")
    }

    func testFragmentedDeflateRoundTrips() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 12, memoryLevel: 5, resetsContext: false))
        let inflater = try XCTUnwrap(Inflater(windowBits: 12, limit: 1 << 24))
        var random = SystemRandomNumberGenerator()
        let message = (0..<300_000).map { i in UInt8(ascii: "a") + UInt8(i % 7) &+ (random.next() % 50 == 0 ? 1 : 0) }
        var frames: [[UInt8]] = []
        for start in stride(from: 0, to: message.count, by: 100_000) {
            let piece = Array(message[start..<min(start + 100_000, message.count)])
            let final = start + 100_000 >= message.count
            frames.append(try piece.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: $0.count, final: final)).map { $0 } })
        }
        XCTAssertLessThan(frames.map(\.count).reduce(0, +), message.count / 4)
        XCTAssertEqual(try inflate(inflater, frames), message)
    }

    /// An echo's pattern: each message as a data fragment and an empty final one, with
    /// context kept. The final frame has no bytes of its own, so the sync-flush tail of the
    /// fragment before must not reach the wire, or the receiver's restored tail reads as a
    /// stored block's length and swallows the next message (seen against Python websockets).
    func testEmptyFinalFragmentStillLosesTheTail() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 12, memoryLevel: 5, resetsContext: false))
        let inflater = try XCTUnwrap(Inflater(windowBits: 12, limit: 1 << 20))
        var random = SystemRandomNumberGenerator()
        let messages: [[UInt8]] = [Array(repeating: UInt8(ascii: "h"), count: 600), (0..<1000).map { _ in random.next() },
                                   Array(repeating: 0, count: 1000), Array("Hello".utf8)]
        for message in messages {
            var frames: [[UInt8]] = []
            frames.append(try message.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: $0.count, final: false)).map { $0 } })
            frames.append(try XCTUnwrap(deflater.compress(nil, count: 0, final: true)).map { $0 })
            XCTAssertNotEqual(frames.joined().suffix(4), [0x00, 0x00, 0xff, 0xff])
            XCTAssertEqual(try inflate(inflater, frames), message)
        }
    }

    /// Only a message's last frame is flushed: 256-byte fragments (Autobahn 12.x.15) mostly
    /// give nothing until then, so an echo sends a few frames instead of one per fragment.
    func testOnlyTheLastFrameIsFlushed() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 12, memoryLevel: 5, resetsContext: false))
        let inflater = try XCTUnwrap(Inflater(windowBits: 12, limit: 1 << 20))
        let message = (0..<131_072).map { UInt8(ascii: "a") + UInt8(($0 * 7919 >> 5) % 26) }
        var frames: [[UInt8]] = []
        for start in stride(from: 0, to: message.count, by: 256) {
            let piece = Array(message[start..<start + 256])
            frames.append(try piece.withUnsafeBytes {
                try XCTUnwrap(deflater.compress($0.baseAddress, count: 256, final: start + 256 == message.count)).map { $0 }
            })
        }
        let nonEmpty = frames.filter { !$0.isEmpty }.count
        XCTAssertLessThan(nonEmpty, 40, "\(nonEmpty) of \(frames.count) frames carry bytes")
        XCTAssertEqual(try inflate(inflater, frames), message)
    }

    /// An empty message after another with context kept: zlib adds nothing for it, yet
    /// the receiver restores a tail, so the frame must carry 0x00 (§7.2.3.6); without it
    /// the tail read as a stored block's header failed with "invalid stored block lengths"
    /// (fuzz/inflate's first finding).
    func testEmptyMessageWithContextKeptIsOneZeroByte() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 15, memoryLevel: 8, resetsContext: false))
        let inflater = try XCTUnwrap(Inflater(limit: 1 << 20))
        let first = try hello.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: 5, final: true)).map { $0 } }
        XCTAssertEqual(try inflate(inflater, [first]), hello)
        for _ in 0..<2 {
            let empty = try XCTUnwrap(deflater.compress(nil, count: 0, final: true)).map { $0 }
            XCTAssertEqual(empty, [0x00])
            XCTAssertEqual(try inflate(inflater, [empty]), [])
        }
        let again = try hello.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: 5, final: true)).map { $0 } }
        XCTAssertEqual(try inflate(inflater, [again]), hello)
    }

    /// 256 MiB of zeros compress to about 256 KiB; with a 1 MiB limit the inflater stops
    /// (1009) having made at most limit + 1 bytes.
    func testDecompressionBombStopsAtTheLimit() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 15, memoryLevel: 8, resetsContext: false))
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var wire: [UInt8] = []
        for i in 0..<256 {
            wire += try zeros.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: $0.count, final: i == 255)).map { $0 } }
        }
        XCTAssertLessThan(wire.count, 300 * 1024)
        let limit: UInt64 = 1 << 20
        let inflater = try XCTUnwrap(Inflater(limit: limit))
        var made = 0
        inflater.begin(text: false)
        let copy = UnsafeMutableRawPointer.allocate(byteCount: wire.count, alignment: 8)
        defer { copy.deallocate() }
        wire.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        XCTAssertThrowsError(try inflater.feed(copy, count: wire.count) { _, _, n in made += n }) { error in
            guard case .messageTooBig(_, let reported)? = error as? ReceiveError else { return XCTFail("\(error)") }
            XCTAssertEqual(reported, limit)
            XCTAssertEqual((error as? ReceiveError)?.closeCode, .messageTooBig)
        }
        XCTAssertLessThanOrEqual(UInt64(made), limit, "never reported more than the limit")
    }

    func testDataThatDoesNotInflateIs1007() throws {
        let inflater = try XCTUnwrap(Inflater(limit: 1 << 20))
        XCTAssertThrowsError(try inflate(inflater, [[0xff, 0xff, 0xff, 0xff, 0x00]])) { error in
            guard case .invalidCompressedData(let text)? = error as? ReceiveError else { return XCTFail("\(error)") }
            XCTAssertTrue(text.contains("does not inflate"), text)
            XCTAssertEqual((error as? ReceiveError)?.closeCode, .invalidPayloadData)
        }
    }

    func testInflatedTextIsUTF8Checked() throws {
        let deflater = try XCTUnwrap(Deflater(windowBits: 15, memoryLevel: 8, resetsContext: true))
        let bad: [UInt8] = Array("price ".utf8) + [0xC3, 0x28]
        let wire = try bad.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: $0.count, final: true)).map { $0 } }
        let inflater = try XCTUnwrap(Inflater(limit: 1 << 20))
        XCTAssertThrowsError(try inflate(inflater, [wire], text: true)) { error in
            guard case .invalidUTF8? = error as? ReceiveError else { return XCTFail("\(error)") }
        }
        let cut: [UInt8] = Array("price ".utf8) + [0xE2, 0x82]
        let wire2 = try cut.withUnsafeBytes { try XCTUnwrap(deflater.compress($0.baseAddress, count: $0.count, final: true)).map { $0 } }
        XCTAssertThrowsError(try inflate(try XCTUnwrap(Inflater(limit: 1 << 20)), [wire2], text: true))
    }

    func testGzipAndZlibFormats() throws {
        // "Hello" gzipped and zlib-wrapped by Python's gzip.compress / zlib.compress.
        let gz: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07,
                           0x00, 0x82, 0x89, 0xd1, 0xf7, 0x05, 0x00, 0x00, 0x00]
        let zl: [UInt8] = [0x78, 0x9c, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x05, 0x8c, 0x01, 0xf5]
        XCTAssertEqual(try inflate(try XCTUnwrap(Inflater(format: .gzip, limit: 100)), [gz]), hello)
        XCTAssertEqual(try inflate(try XCTUnwrap(Inflater(format: .zlib, limit: 100)), [zl]), hello)
        XCTAssertThrowsError(try inflate(try XCTUnwrap(Inflater(format: .gzip, limit: 100)), [Array(gz.prefix(15))]))
    }
}
