// RFC 6455 §5.7 examples, byte for byte: encoded with FrameEncoder/FrameHeader, parsed with
// FrameParser, read with MessageReader.
import XCTest
@testable import WebSocketCore

final class RFCExampleFrameTests: XCTestCase {
    static let unmaskedHello: [UInt8] = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
    static let maskedHello: [UInt8] = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
    static let fragmentHel: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6c]
    static let fragmentLo: [UInt8] = [0x80, 0x02, 0x6c, 0x6f]
    static let unmaskedPing: [UInt8] = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
    static let maskedPing: [UInt8] = [0x89, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
    static let maskedPong: [UInt8] = [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
    static let binary256Header: [UInt8] = [0x82, 0x7E, 0x01, 0x00]
    static let binary64KHeader: [UInt8] = [0x82, 0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]

    // MARK: Single-frame unmasked text

    func testUnmaskedHelloEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .text, payload: helloBytes, maskingKey: nil), Self.unmaskedHello)
    }

    func testUnmaskedHelloHeaderEncodes() {
        let header = FrameHeader(opcode: .text, payloadLength: 5)
        XCTAssertEqual(header.encodedSize, 2)
        XCTAssertEqual(header.bytes, [0x81, 0x05])
    }

    func testUnmaskedHelloParses() {
        let run = runParser(Self.unmaskedHello)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.rawEvents, [.header(FrameHeader(fin: true, rsv: 0, opcode: .text, maskingKey: nil, payloadLength: 5)),
                                       .payload(2..<7, frameEnd: true)])
        XCTAssertTrue(run.parser.isAtFrameBoundary)
    }

    func testUnmaskedHelloReadsAsTextMessage() {
        let run = runReader(Self.unmaskedHello)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(helloBytes), .end])
    }

    // MARK: Single-frame masked text

    func testMaskedHelloEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .text, payload: helloBytes, maskingKey: rfcKey), Self.maskedHello)
    }

    func testMaskedHelloHeaderEncodes() {
        let header = FrameHeader(opcode: .text, maskingKey: rfcKey, payloadLength: 5)
        XCTAssertEqual(header.encodedSize, 6)
        XCTAssertEqual(header.bytes, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d])
    }

    func testMaskedHelloParsesWithItsKeyAndUnmasksToHello() {
        let run = runParser(Self.maskedHello)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.rawEvents, [.header(FrameHeader(opcode: .text, maskingKey: rfcKey, payloadLength: 5)),
                                       .payload(6..<11, frameEnd: true)])
        XCTAssertEqual(rfcKey.masking(Array(Self.maskedHello[6...])), helloBytes)
    }

    func testMaskedFrameFromServerIsProtocolError() {
        let run = runReader(Self.maskedHello)
        assertProtocolError(run.error)
        XCTAssertEqual(run.events, [], "nothing of a masked frame may be delivered")
    }

    func testMaskedFrameFromServerIsRefusedAtItsHeader() {
        let run = runReader(Array(Self.maskedHello[0..<6]))
        assertProtocolError(run.error)
    }

    // MARK: Fragmented unmasked text

    func testFragmentedHelloEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .text, payload: utf8("Hel"), fin: false, maskingKey: nil), Self.fragmentHel)
        XCTAssertEqual(FrameEncoder.frame(opcode: .continuation, payload: utf8("lo"), maskingKey: nil), Self.fragmentLo)
    }

    func testFragmentedHelloParsesAsTwoFrames() {
        let run = runParser(Self.fragmentHel + Self.fragmentLo)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.rawEvents, [
            .header(FrameHeader(fin: false, opcode: .text, payloadLength: 3)),
            .payload(2..<5, frameEnd: true),
            .header(FrameHeader(fin: true, opcode: .continuation, payloadLength: 2)),
            .payload(7..<9, frameEnd: true),
        ])
    }

    func testFragmentedHelloReassemblesIntoOneMessage() {
        let run = runReader(Self.fragmentHel + Self.fragmentLo)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.start(.text), .data(helloBytes), .end])
        XCTAssertEqual(run.dataEventCount, 2, "one data event per fragment")
    }

    // MARK: Ping and Pong

    func testUnmaskedPingEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .ping, payload: helloBytes, maskingKey: nil), Self.unmaskedPing)
    }

    func testMaskedPingEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .ping, payload: helloBytes, maskingKey: rfcKey), Self.maskedPing)
    }

    func testMaskedPongResponseEncodes() {
        XCTAssertEqual(FrameEncoder.frame(opcode: .pong, payload: helloBytes, maskingKey: rfcKey), Self.maskedPong)
    }

    func testUnmaskedPingParses() {
        let run = runParser(Self.unmaskedPing)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.rawEvents, [.header(FrameHeader(opcode: .ping, payloadLength: 5)), .payload(2..<7, frameEnd: true)])
    }

    func testMaskedPingParses() {
        let run = runParser(Self.maskedPing)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.rawEvents, [.header(FrameHeader(opcode: .ping, maskingKey: rfcKey, payloadLength: 5)),
                                       .payload(6..<11, frameEnd: true)])
    }

    func testUnmaskedPingIsDeliveredWithItsPayload() {
        let run = runReader(Self.unmaskedPing)
        XCTAssertNil(run.error)
        XCTAssertEqual(run.events, [.ping(helloBytes)])
    }

    func testMaskedPingFromServerIsProtocolError() {
        assertProtocolError(runReader(Self.maskedPing).error)
    }

    // MARK: 256-byte and 64 KiB binary

    func testBinary256Encodes() {
        let payload = patternBytes(256)
        XCTAssertEqual(FrameEncoder.frame(opcode: .binary, payload: payload, maskingKey: nil), Self.binary256Header + payload)
        XCTAssertEqual(FrameHeader(opcode: .binary, payloadLength: 256).bytes, Self.binary256Header)
    }

    func testBinary256ParsesAndReads() {
        let payload = patternBytes(256)
        let frame = Self.binary256Header + payload
        let parsed = runParser(frame)
        XCTAssertNil(parsed.error)
        XCTAssertEqual(parsed.rawEvents, [.header(FrameHeader(opcode: .binary, payloadLength: 256)), .payload(4..<260, frameEnd: true)])
        let read = runReader(frame)
        XCTAssertNil(read.error)
        XCTAssertEqual(read.events, [.start(.binary), .data(payload), .end])
    }

    func testBinary64KiBEncodes() {
        let payload = patternBytes(65536)
        XCTAssertEqual(FrameEncoder.frame(opcode: .binary, payload: payload, maskingKey: nil), Self.binary64KHeader + payload)
        XCTAssertEqual(FrameHeader(opcode: .binary, payloadLength: 65536).bytes, Self.binary64KHeader)
    }

    func testBinary64KiBParsesAndReads() {
        let payload = patternBytes(65536)
        let frame = Self.binary64KHeader + payload
        let parsed = runParser(frame)
        XCTAssertNil(parsed.error)
        XCTAssertEqual(parsed.rawEvents, [.header(FrameHeader(opcode: .binary, payloadLength: 65536)),
                                          .payload(10..<65546, frameEnd: true)])
        let read = runReader(frame)
        XCTAssertNil(read.error)
        XCTAssertEqual(read.events, [.start(.binary), .data(payload), .end])
    }

    func testMaskedBinary64KiBRoundTrips() {
        let payload = patternBytes(65536, seed: 9)
        let frame = FrameEncoder.frame(opcode: .binary, payload: payload, maskingKey: rfcKey)
        XCTAssertEqual(Array(frame[0..<14]), [0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 0x37, 0xfa, 0x21, 0x3d])
        let decoded = decodeClientFrames(frame)
        XCTAssertEqual(decoded.count, 1)
        XCTAssertEqual(decoded.first?.1, payload)
    }
}
